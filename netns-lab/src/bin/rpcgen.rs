//! `rpcgen`: the lab's request/response generator, worker or client.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};

use netns_lab::traffic::rpcgen::{self, ClientSpec, Mix, Pattern};

/// Request/response traffic for the lab's namespaces.
///
/// A worker answers requests on persistent TCP connections; a client sends
/// them to one or more workers, in synchronized rounds (incast: one request
/// to every worker at once, then wait for all) or open-loop at Poisson
/// arrivals, and prints a JSON report: requests sent, completed and failed,
/// bytes, and per response size the latency (HDR histogram: mean, p50, p99,
/// p99.9, max, in microseconds) and, for rounds, each round's completion
/// time. Run each in its namespace (e.g. `nsenter --net=/run/netns/NS rpcgen
/// ...`); the congestion control is set on every socket with --cc.
#[derive(Debug, Parser)]
#[command(name = "rpcgen", version, max_term_width = 100)]
struct Cli {
    /// More log output (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    role: Role,
}

#[derive(Debug, Subcommand)]
enum Role {
    /// Answer requests until SIGTERM or Ctrl-C; then print what was served
    /// (connections, requests, bytes) as JSON.
    Worker {
        /// Address to listen on.
        #[arg(long)]
        listen: SocketAddr,
        /// Congestion control of the listener and its connections.
        #[arg(long)]
        cc: Option<String>,
        /// Service time added before each response, milliseconds.
        #[arg(long, default_value_t = 0.0)]
        delay_ms: f64,
    },
    /// Send requests and report their latency as JSON.
    Client {
        /// Workers, comma-separated addr:port.
        #[arg(long, value_delimiter = ',', required = true)]
        connect: Vec<SocketAddr>,
        /// Congestion control of every connection.
        #[arg(long)]
        cc: Option<String>,
        /// Response size in bytes, or a weighted mix: 10000:0.9,1000000:0.1.
        #[arg(long)]
        resp: Mix,
        /// Request payload bytes.
        #[arg(long, default_value_t = 0)]
        req: u32,
        /// Incast: this many rounds, one request to every worker at once.
        #[arg(long, conflicts_with_all = ["rate", "duration"])]
        rounds: Option<u64>,
        /// Pause between rounds, milliseconds.
        #[arg(long, default_value_t = 0.0)]
        gap_ms: f64,
        /// Open loop: mean requests per second (Poisson), to the workers in turn.
        #[arg(long, requires = "duration")]
        rate: Option<f64>,
        /// Open loop: seconds of arrivals.
        #[arg(long)]
        duration: Option<f64>,
        /// Open loop: persistent connections per worker.
        #[arg(long, default_value_t = 4)]
        connections: usize,
        /// Seed of arrivals and sizes.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn ms(v: f64, what: &str) -> Result<Duration> {
    anyhow::ensure!(
        v.is_finite() && (0.0..=3_600_000.0).contains(&v),
        "--{what} {v}: 0 to 3600000 ms"
    );
    Ok(Duration::from_secs_f64(v / 1e3))
}

fn usage(e: anyhow::Error) -> anyhow::Error {
    anyhow::Error::new(dctcp_utils::error::UsageError(format!("{e:#}")))
}

fn run(cli: Cli) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match cli.role {
        Role::Worker {
            listen,
            cc,
            delay_ms,
        } => {
            let delay = ms(delay_ms, "delay-ms").map_err(usage)?;
            let counts = rt.block_on(async {
                let stop = async {
                    let mut term =
                        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                            .expect("SIGTERM handler");
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = tokio::signal::ctrl_c() => {}
                    }
                };
                rpcgen::worker(listen, cc, delay, stop).await
            })?;
            println!("{}", serde_json::to_string(&counts)?);
        }
        Role::Client {
            connect,
            cc,
            resp,
            req,
            rounds,
            gap_ms,
            rate,
            duration,
            connections,
            seed,
        } => {
            let pattern = match (rounds, rate, duration) {
                (Some(rounds), None, None) => Pattern::Incast {
                    rounds,
                    gap: ms(gap_ms, "gap-ms").map_err(usage)?,
                },
                (None, Some(per_second), Some(d)) => Pattern::OpenLoop {
                    per_second,
                    duration: Duration::from_secs_f64(if d.is_finite() && d > 0.0 {
                        d
                    } else {
                        0.0
                    }),
                    connections,
                },
                _ => {
                    return Err(usage(anyhow::anyhow!(
                        "give --rounds N (incast) or --rate R --duration S (open loop)"
                    )))
                }
            };
            let spec = ClientSpec {
                workers: connect,
                cc,
                request_bytes: req,
                mix: resp,
                pattern,
                seed,
            };
            spec.validate().map_err(usage)?;
            let report = rt.block_on(rpcgen::client(spec))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            anyhow::ensure!(report.failed == 0, "{} requests failed", report.failed);
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    if let Some(status) = loader::generate::intercept(<Cli as clap::CommandFactory>::command) {
        return status;
    }
    let cli = Cli::parse();
    dctcp_utils::error::init_logging(cli.verbose);
    dctcp_utils::error::exit_code("rpcgen", run(cli))
}
