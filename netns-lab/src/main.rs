//! `lab`: network-namespace experiments for DCTCP.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};

use netns_lab::experiments::queue::{self, QueueConfig};
use netns_lab::results::ResultsDir;
use netns_lab::units::parse_rate;

/// Network-namespace labs for DCTCP: a switch that marks ECN at a threshold
/// K, senders and a receiver in their own namespaces, and the experiments of
/// the DCTCP papers, with results, plots and a summary against theory.
#[derive(Debug, Parser)]
#[command(name = "lab", version, max_term_width = 100, after_help = AFTER_HELP)]
struct Cli {
    /// More log output (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

const AFTER_HELP: &str = "\
Lab hosts use 198.18.0.0/15 and send traffic only inside the lab's namespaces.
Every namespace, veth, pin and program a run creates is removed on success,
error and Ctrl-C; `lab cleanup` removes what a killed run left. Needs root.";

#[derive(Debug, Subcommand)]
enum Command {
    /// Queue occupancy, DCTCP against TCP (paper Fig. 1).
    ///
    /// Two long flows into one receiver through the switch; DCTCP (bpf_dctcp,
    /// attached for the run) on a K-marking backend against cubic and reno on
    /// droptail, at each rate. Writes results/queue/<timestamp>/.
    Queue {
        /// Short runs (4 s) for tests and a first look.
        #[arg(long)]
        quick: bool,
        /// Bottleneck rates, comma-separated (100M, 1G, 250mbit, ...).
        #[arg(long, value_delimiter = ',', value_parser = parse_rate, default_value = "100M,1G")]
        rates: Vec<u64>,
        /// Marking threshold K, packets.
        #[arg(long, default_value_t = 20)]
        k: u32,
        /// Bottleneck buffer, packets (deep enough for TCP's sawtooth).
        #[arg(long, default_value_t = 425)]
        buffer: u32,
        /// Long-lived flows, one sender each.
        #[arg(long, default_value_t = 2)]
        flows: usize,
        /// Seconds per run (default 20, or 4 with --quick).
        #[arg(long)]
        duration: Option<f64>,
        /// Comparisons as algorithm:backend, comma-separated. Algorithms:
        /// bpf_dctcp (attached for the run) or any kernel one (dctcp, cubic,
        /// reno). Backends: droptail, bpf-step, bpf-red (this kernel), red,
        /// fq_codel (kernels with those qdiscs, e.g. `just vm-test`).
        #[arg(long, value_delimiter = ',', default_value = queue::DEFAULT_VARIANTS)]
        variants: Vec<String>,
        /// Extra delay on the receiver's ACK path, ms (needs sch_netem).
        #[arg(long)]
        delay_ms: Option<f64>,
        /// Results directory (default results/queue/<timestamp>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Do not record bpf_dctcp's live trace (cc_trace.csv.gz,
        /// sawtooth.png): no tracing cost on the measured run.
        #[arg(long)]
        no_trace: bool,
    },
    /// What this kernel offers the lab, and what to use where it falls short.
    Doctor {
        /// One JSON array for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Remove namespaces, links, pins and locks that lab runs left behind.
    ///
    /// Lab objects are named dl<5 hex digits>...; by default only those whose
    /// process is gone are removed, so running labs are left alone.
    Cleanup {
        /// Also remove objects of labs that are still running.
        #[arg(long)]
        all: bool,
    },
}

fn require_root() -> Result<()> {
    loader::preflight::require_root("lab")
}

fn run(cli: Cli, stop: Arc<AtomicBool>) -> Result<()> {
    match cli.command {
        Command::Queue {
            quick,
            rates,
            k,
            buffer,
            flows,
            duration,
            variants,
            delay_ms,
            no_trace,
            out,
        } => {
            let duration =
                Duration::from_secs_f64(duration.unwrap_or(if quick { 4.0 } else { 20.0 }));
            let warmup = if duration >= Duration::from_secs(10) {
                Duration::from_secs(3)
            } else {
                duration / 4
            };
            let cfg = QueueConfig {
                rates_bps: rates,
                k,
                buffer_pkts: buffer,
                flows,
                duration,
                warmup,
                variants,
                delay: delay_ms.map(|ms| Duration::from_secs_f64(ms / 1e3)),
                trace: !no_trace,
            };
            queue::validate(&cfg)
                .map_err(|e| anyhow::Error::new(loader::error::UsageError(format!("{e:#}"))))?;
            require_root()?;
            let dir = ResultsDir::create(&queue::default_root(), "queue", out.as_deref())?;
            queue::run(&cfg, &dir, &stop)?;
            println!("results: {}", dir.path.display());
            println!("summary: {}", dir.file("summary.md").display());
        }
        Command::Doctor { json } => {
            require_root()?;
            let checks = netns_lab::doctor::run()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&checks)?);
            } else {
                for c in checks {
                    println!(
                        "{:<40} {:<4} {}",
                        c.feature,
                        if c.available { "yes" } else { "NO" },
                        c.note
                    );
                }
            }
        }
        Command::Cleanup { all } => {
            require_root()?;
            let removed = netns_lab::cleanup::cleanup(all)?;
            if removed.is_empty() {
                println!("nothing to clean up");
            }
            for r in removed {
                println!("removed {r}");
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    loader::error::init_logging(cli.verbose);
    // Ctrl-C (and SIGTERM) ask the run to stop; teardown happens as it unwinds.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            eprintln!("lab: stopping, tearing down (again to force)...");
        } else {
            eprintln!("\nlab: interrupted, tearing down...");
        }
    });
    loader::error::exit_code("lab", run(cli, stop))
}
