//! `lab rpc` (seed 004's intra-rack test): a few senders answer a mix of
//! 10 KB and 1 MB RPCs for one receiver at a load you set, DCTCP against
//! cubic. Per RPC size: p50, p99, p99.9 latency, goodput share, and Jain's
//! index between the sizes' per-RPC goodput; retransmissions and drops; CPU
//! time per GB of the senders' and the receiver's processes.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use tc_qdisc::Bottleneck;

use crate::net::delay::{datacenter_rtt, RttArgs, RttMeasured};
use crate::report::plot::{self, Chart, Series};
use crate::report::results::ResultsDir;
use crate::report::model::{Cell, Columns, Figure, Report, Table};
use crate::report::tables::{repairs_line, repairs_note, Repairs};
use crate::stats::jain;
use crate::traffic::cc::{switch_for, Algorithms};
use crate::traffic::rpcgen::Mix;
use crate::traffic::rpcstar::{rpcgen, RpcStar, TcpCounters};
use crate::units::fmt_rate;

#[derive(Clone, Debug, Serialize)]
pub struct RpcConfig {
    pub rate_bps: u64,
    /// `--rtt`; the data-center RTT at the rate by default.
    pub rtt: RttArgs,
    pub k: u32,
    pub buffer_pkts: u32,
    pub senders: usize,
    /// RPC sizes and their share of the RPCs.
    pub mix: Mix,
    /// Offered load as a fraction of the bottleneck.
    pub load: f64,
    pub duration: Duration,
    pub connections: usize,
    pub algorithms: Vec<String>,
    pub seed: u64,
}

impl RpcConfig {
    pub fn validate(&self) -> Result<()> {
        crate::traffic::cc::check_names(&self.algorithms)?;
        anyhow::ensure!(
            (1..=16).contains(&self.senders),
            "--senders {}: 1 to 16",
            self.senders
        );
        if let Some(r) = &self.rtt.rtt {
            r.validate(self.senders)?;
        }
        anyhow::ensure!(
            self.load > 0.0 && self.load <= 1.5,
            "--load {}: (0, 1.5] of the bottleneck",
            self.load
        );
        anyhow::ensure!(
            self.duration >= Duration::from_secs(1),
            "--duration must be at least 1 s"
        );
        anyhow::ensure!(
            (1..=64).contains(&self.connections),
            "--connections {}: 1 to 64",
            self.connections
        );
        anyhow::ensure!(!self.mix.0.is_empty(), "give RPC sizes (--mix)");
        Bottleneck::step(self.rate_bps, self.buffer_pkts, self.k).validate()?;
        rpcgen()?;
        Ok(())
    }

    /// RPCs per second for the offered load.
    fn per_second(&self) -> f64 {
        let total: f64 = self.mix.0.iter().map(|m| m.1).sum();
        let mean_bytes: f64 = self.mix.0.iter().map(|&(s, w)| s as f64 * w / total).sum();
        self.load * self.rate_bps as f64 / (8.0 * mean_bytes)
    }
}

/// One RPC size under one algorithm.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SizeResult {
    pub bytes: u64,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub mean_us: f64,
    /// Of all bytes delivered.
    pub goodput_share: f64,
    /// Mean per-RPC goodput: size over latency.
    pub rpc_mbps: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RpcRun {
    pub algorithm: String,
    pub sizes: Vec<SizeResult>,
    /// Jain's index of the sizes' per-RPC goodput (1: every size as fast).
    pub jain: f64,
    pub sent: u64,
    pub completed: u64,
    pub goodput_mbps: f64,
    pub tcp: TcpCounters,
    pub drops: u64,
    pub marks: u64,
    /// CPU seconds per GB delivered: the senders' (workers') processes and
    /// the receiver's (aggregator's).
    pub sender_cpu_s_per_gb: f64,
    pub receiver_cpu_s_per_gb: f64,
    /// The guard's (ssthresh, cwnd, in-flight) repairs during the run
    /// (README "Known issue"; bpf_dctcp only).
    pub guard_repairs: Repairs,
    /// rpcgen's own report (raw data, written beside runs.json).
    #[serde(skip)]
    pub report: serde_json::Value,
    pub rtt: RttMeasured,
}

fn one_run(cfg: &RpcConfig, algorithm: &str, cc: &str, stop: &Arc<AtomicBool>) -> Result<RpcRun> {
    let bottleneck = switch_for(algorithm, cfg.rate_bps, cfg.buffer_pkts, cfg.k);
    let mut star = RpcStar::start(
        cfg.senders,
        cc,
        &bottleneck,
        cfg.rtt.or(Some(datacenter_rtt(cfg.rate_bps))),
        None,
    )?;
    let mix: Vec<String> = cfg.mix.0.iter().map(|(s, w)| format!("{s}:{w}")).collect();
    let args: Vec<String> = [
        "--connect".to_string(),
        star.worker_addrs(),
        "--cc".into(),
        cc.into(),
        "--resp".into(),
        mix.join(","),
        "--rate".into(),
        format!("{}", cfg.per_second()),
        "--duration".into(),
        format!("{}", cfg.duration.as_secs_f64()),
        "--connections".into(),
        cfg.connections.to_string(),
        "--seed".into(),
        cfg.seed.to_string(),
    ]
    .to_vec();
    let run = star.client(&args, stop)?;
    let rtt = star.rtt()?;
    drop(star);
    let r = &run.report;
    let total_bytes = r["response_bytes"].as_u64().unwrap_or(0);
    let sizes: Vec<SizeResult> = cfg
        .mix
        .0
        .iter()
        .map(|&(bytes, _)| {
            let l = &r["latency_us"][bytes.to_string()];
            let count = l["count"].as_u64().unwrap_or(0);
            let mean_us = l["mean"].as_f64().unwrap_or(0.0);
            SizeResult {
                bytes,
                count,
                p50_us: l["p50"].as_u64().unwrap_or(0),
                p99_us: l["p99"].as_u64().unwrap_or(0),
                p999_us: l["p999"].as_u64().unwrap_or(0),
                mean_us,
                goodput_share: (count * bytes) as f64 / total_bytes.max(1) as f64,
                rpc_mbps: if mean_us > 0.0 {
                    bytes as f64 * 8.0 / mean_us
                } else {
                    0.0
                },
            }
        })
        .collect();
    let gb = total_bytes as f64 / 1e9;
    let elapsed = r["elapsed_s"].as_f64().unwrap_or(1.0);
    Ok(RpcRun {
        algorithm: algorithm.to_string(),
        jain: jain(&sizes.iter().map(|s| s.rpc_mbps).collect::<Vec<_>>()),
        sizes,
        sent: r["sent"].as_u64().unwrap_or(0),
        completed: r["completed"].as_u64().unwrap_or(0),
        goodput_mbps: total_bytes as f64 * 8.0 / elapsed / 1e6,
        tcp: run.tcp,
        drops: run.qdisc.drops,
        marks: run.marks,
        sender_cpu_s_per_gb: run.worker_cpu_s / gb.max(1e-9),
        receiver_cpu_s_per_gb: run.client_cpu_s / gb.max(1e-9),
        guard_repairs: Repairs::default(),
        report: run.report,
        rtt,
    })
}

fn run(cfg: &RpcConfig, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<Report> {
    let algorithms = Algorithms::attach(&cfg.algorithms)?;
    let mut runs = Vec::new();
    for a in &cfg.algorithms {
        let cc = algorithms.cc(a);
        let (mut r, repairs) = algorithms.counting_repairs(a, || one_run(cfg, a, &cc, stop))?;
        r.guard_repairs = repairs;
        let sizes: Vec<String> = r
            .sizes
            .iter()
            .map(|s| {
                format!(
                    "{} B: {} RPCs p50 {:.2} p99 {:.2} p99.9 {:.2} ms",
                    s.bytes,
                    s.count,
                    s.p50_us as f64 / 1e3,
                    s.p99_us as f64 / 1e3,
                    s.p999_us as f64 / 1e3
                )
            })
            .collect();
        eprintln!(
            "{a:<9}: {}; Jain {:.3}; {} retransmits, {} drops{}",
            sizes.join("; "),
            r.jain,
            r.tcp.retransmits,
            r.drops,
            repairs_note(r.guard_repairs)
        );
        out.write_json(&format!("rpcgen-{a}.json"), &r.report)?;
        runs.push(r);
    }
    plot_tails(out, cfg, &runs)?;
    out.write_json("runs.json", &runs)?;
    Ok(report(cfg, &runs))
}

/// Latency at p50, p99 and p99.9 per size and algorithm, one chart per
/// size: the shape of seed 004's Figures 5 and 6.
fn plot_tails(out: &ResultsDir, cfg: &RpcConfig, runs: &[RpcRun]) -> Result<()> {
    let titles: Vec<String> = cfg
        .mix
        .0
        .iter()
        .map(|(bytes, _)| {
            format!(
                "{bytes}-byte RPCs: latency at p50, p99, p99.9 ({} load)",
                cfg.load
            )
        })
        .collect();
    let charts: Vec<Chart> = cfg
        .mix
        .0
        .iter()
        .zip(&titles)
        .map(|(&(bytes, _), title)| {
            let series = runs
                .iter()
                .filter_map(|r| {
                    let x = r.sizes.iter().find(|x| x.bytes == bytes)?;
                    Some(Series {
                        name: r.algorithm.clone(),
                        // x in nines, -log10(1 - q): p50, p99, p99.9 evenly apart.
                        points: vec![
                            (0.301, x.p50_us as f64 / 1e3),
                            (2.0, x.p99_us as f64 / 1e3),
                            (3.0, x.p999_us as f64 / 1e3),
                        ],
                    })
                })
                .collect();
            Chart::new(
                title,
                "nines: 0.3 = p50, 2 = p99, 3 = p99.9",
                "latency (ms)",
                series,
            )
        })
        .collect();
    plot::draw_stack(&out.file("tails.png"), &charts)
}

/// Each size's latency and share of the goodput under each algorithm.
fn sizes_table(cfg: &RpcConfig, runs: &[RpcRun]) -> Table {
    let rows: Vec<(&RpcRun, &SizeResult)> = cfg
        .mix
        .0
        .iter()
        .flat_map(|size| {
            runs.iter()
                .filter_map(move |r| r.sizes.iter().find(|x| x.bytes == size.0).map(|x| (r, x)))
        })
        .collect();
    Columns::<(&RpcRun, &SizeResult)>::new()
        .col("RPC size", "bytes", |(_, x)| Cell::int(x.bytes))
        .col("algorithm", "", |(r, _)| Cell::text(&r.algorithm))
        .col("RPCs", "", |(_, x)| Cell::int(x.count))
        .col("p50", "ms", |(_, x)| Cell::num(x.p50_us as f64 / 1e3, 2))
        .col("p99", "ms", |(_, x)| Cell::num(x.p99_us as f64 / 1e3, 2))
        .col("p99.9", "ms", |(_, x)| Cell::num(x.p999_us as f64 / 1e3, 2))
        .col("goodput share", "", |(_, x)| Cell::pct(x.goodput_share, 1))
        .col("per-RPC", "Mbit/s", |(_, x)| Cell::num(x.rpc_mbps, 1))
        .table(&rows)
}

/// One row per algorithm: what it delivered, lost and cost.
fn runs_table(runs: &[RpcRun]) -> Table {
    Columns::<RpcRun>::new()
        .col("algorithm", "", |r| Cell::text(&r.algorithm))
        .col("RPCs done", "", |r| Cell::text(format!("{}/{}", r.completed, r.sent)))
        .col("goodput", "Mbit/s", |r| Cell::num(r.goodput_mbps, 1))
        .col("Jain between sizes", "", |r| Cell::num(r.jain, 3))
        .col("retransmits", "", |r| Cell::int(r.tcp.retransmits))
        .col("timeouts", "", |r| Cell::int(r.tcp.timeouts))
        .col("drops", "", |r| Cell::int(r.drops))
        .col("marks", "", |r| Cell::int(r.marks))
        .col("sender CPU", "s/GB", |r| Cell::num(r.sender_cpu_s_per_gb, 3))
        .col("receiver CPU", "s/GB", |r| Cell::num(r.receiver_cpu_s_per_gb, 3))
        .table(runs)
}

fn report(cfg: &RpcConfig, runs: &[RpcRun]) -> Report {
    let mut r = Report::new("RPC latency and fairness: DCTCP against cubic (seed 004)");
    r.text(format!(
        "{} senders answer RPCs for one receiver through a {} bottleneck ({} packets; bpf_dctcp on bpf-step at \
         K = {}, kernel algorithms on droptail), {:.0} % offered load as Poisson arrivals ({:.1} RPCs/s) for {:.0} s, \
         sizes {} (by count), {} persistent connections per sender. Latency: request sent to the last response byte.",
        cfg.senders,
        fmt_rate(cfg.rate_bps),
        cfg.buffer_pkts,
        cfg.k,
        cfg.load * 100.0,
        cfg.per_second(),
        cfg.duration.as_secs_f64(),
        cfg.mix
            .0
            .iter()
            .map(|(b, w)| format!("{b} B x {w}"))
            .collect::<Vec<_>>()
            .join(", "),
        cfg.connections
    ))
    .markdown(crate::net::delay::summary_lines(
        runs.iter().map(|r| (r.algorithm.clone(), &r.rtt)),
    ))
    .heading(2, "Tail latency per RPC size (seed 004, Figures 5 and 6)")
    .table(sizes_table(cfg, runs))
    .heading(2, "Losses, fairness and CPU")
    .runs_table(runs_table(runs))
    .text(
        "Seed 004 (production racks at 10 Gbit/s): DCTCP cut the 10 KB RPCs' p99 and p99.9 latency by 5 to 10 \
         times against cubic, while the 1 MB RPCs' tails rose somewhat because the 10 KB RPCs got more of the \
         bandwidth; discards fell 300-1000x and retransmissions up to 500x; CPU rose 1-14 %. Jain's index here is \
         over the sizes' per-RPC goodput (size over latency): 1 when a 10 KB RPC moves as fast as a 1 MB one. CPU \
         is the rpcgen processes' user + system time; the kernel's softirq work is not in it.",
    )
    .text(repairs_line(runs.iter().map(|r| (r.algorithm.clone(), r.guard_repairs))))
    .heading(2, "Plots")
    .figures(vec![Figure::new(
        "tails.png",
        "Latency at p50, p99 and p99.9 of each RPC size, each algorithm",
    )])
    .text("Raw: `runs.csv` (the table of runs), `runs.json`, `rpcgen-<algorithm>.json` (rpcgen's report: counts, HDR percentiles per size).");
    r
}

/// RPC tail latency and fairness, DCTCP against cubic (seed 004).
///
/// --senders rpcgen workers answer a Poisson stream of RPCs of the --mix
/// sizes for the receiver at --load of the bottleneck, once per
/// algorithm. Writes results/rpc/<timestamp>/: per size p50, p99, p99.9
/// latency and goodput share, Jain's index between sizes,
/// retransmissions, drops, and CPU per GB of senders and receiver, in a
/// table shaped like seed 004's Figures 5 and 6. Round trip (--rtt) by
/// default 100us at 1 Gbit/s and above, 500us below.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("buffer", |a| {
    a.help("Switch buffer, packets (deep: cubic builds standing queues in it)")
        .default_value("425")
        .required(false)
}))]
pub struct RpcArgs {
    /// 4 s runs.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub switch: crate::experiments::RpcSwitchArgs,
    /// Sending hosts (seed 004: 2 or 3).
    #[arg(long, default_value_t = 3)]
    pub senders: usize,
    /// RPC sizes and their share of the RPCs, size:weight,...
    #[arg(long, default_value = "10000:0.5,1000000:0.5")]
    pub mix: crate::traffic::rpcgen::Mix,
    /// Offered load as a fraction of the bottleneck.
    #[arg(long, default_value_t = 0.6)]
    pub load: f64,
    /// Seconds per algorithm (default 20, 4 with --quick).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Persistent connections per sender.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Algorithms: bpf_dctcp or bpf_prague (attached for the run) and kernel ones.
    #[arg(long, value_delimiter = ',', default_value = "bpf_dctcp,cubic")]
    pub algorithms: Vec<String>,
    #[command(flatten)]
    pub rtt: crate::net::delay::RttArgs,
    /// Seed of arrivals and sizes (the same for every algorithm).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Results directory (default results/rpc/<timestamp>).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

impl RpcArgs {
    pub fn config(&self) -> RpcConfig {
        let quick = self.quick;
        RpcConfig {
            rate_bps: self.switch.rate,
            rtt: self.rtt.clone(),
            k: self.switch.k,
            buffer_pkts: self.switch.buffer,
            senders: self.senders,
            mix: self.mix.clone(),
            load: self.load,
            duration: Duration::from_secs_f64(
                self.duration
                    .unwrap_or(if quick { 4.0 } else { 20.0 })
                    .max(0.0),
            ),
            connections: self.connections,
            algorithms: self.algorithms.clone(),
            seed: self.seed,
        }
    }
}

crate::experiments::register!("rpc", RpcArgs => RpcConfig);

#[cfg(test)]
mod tests {
    use super::*;

    /// The report prints the figures of the run recorded with the
    /// hand-written summary (`experiments::recorded`).
    #[test]
    fn the_report_prints_the_recorded_runs_figures() {
        use crate::experiments::recorded;
        let cfg = recorded::args::<RpcArgs>("rpc").config();
        let runs: Vec<RpcRun> = recorded::data("rpc", "runs.json");
        recorded::assert_same_figures("rpc", &report(&cfg, &runs), &[]);
    }

    #[test]
    fn offered_load_sets_the_rate() {
        let cfg = RpcConfig {
            rate_bps: 1_000_000_000,
            rtt: RttArgs::default(),
            k: 20,
            buffer_pkts: 425,
            senders: 3,
            mix: "10000:0.5,1000000:0.5".parse().unwrap(),
            load: 0.5,
            duration: Duration::from_secs(1),
            connections: 8,
            algorithms: vec![],
            seed: 1,
        };
        // Mean RPC 505,000 bytes: 0.5 Gbit/s is 123.8 RPCs per second.
        assert!(
            (cfg.per_second() - 123.76).abs() < 0.01,
            "{}",
            cfg.per_second()
        );
        // Weights need not sum to 1: 1 to 3 is a mean of 752,500 bytes,
        // and 0.8 of the link 132.9 RPCs per second.
        let weighted = RpcConfig {
            mix: "10000:1,1000000:3".parse().unwrap(),
            load: 0.8,
            ..cfg.clone()
        };
        let want = 0.8e9 / (8.0 * 752_500.0);
        assert!(
            (weighted.per_second() - want).abs() < 1e-9,
            "{}",
            weighted.per_second()
        );

        crate::experiments::assert_each_refused(
            vec![
                (
                    RpcConfig {
                        senders: 0,
                        ..cfg.clone()
                    },
                    "--senders 0",
                ),
                (
                    RpcConfig {
                        senders: 17,
                        ..cfg.clone()
                    },
                    "--senders 17",
                ),
                (
                    RpcConfig {
                        load: 0.0,
                        ..cfg.clone()
                    },
                    "--load 0",
                ),
                (
                    RpcConfig {
                        load: 1.6,
                        ..cfg.clone()
                    },
                    "--load 1.6",
                ),
                (
                    RpcConfig {
                        duration: Duration::from_millis(999),
                        ..cfg.clone()
                    },
                    "at least 1 s",
                ),
                (
                    RpcConfig {
                        connections: 0,
                        ..cfg.clone()
                    },
                    "--connections 0",
                ),
                (
                    RpcConfig {
                        connections: 65,
                        ..cfg.clone()
                    },
                    "--connections 65",
                ),
                (
                    RpcConfig {
                        buffer_pkts: 1,
                        ..cfg.clone()
                    },
                    "buffer of 1 packets",
                ),
            ],
            RpcConfig::validate,
        );
    }
}
