//! `lab incast` (the DCTCP paper's incast experiment; seed 000 could not
//! start N = 40 hosts): an aggregator asks N workers at once for a share of
//! a response, over and over; their answers collide in the switch's shallow
//! buffer. Per N and algorithm: query completion time (median, p99, max),
//! retransmission timeouts and the rounds they stretched, retransmissions,
//! drops and the queue. Each worker is an `rpcgen worker` in a namespace of
//! its own (a star sender); the aggregator, `rpcgen client --rounds`, is the
//! receiver.

use std::io::Write as _;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tc_qdisc::Bottleneck;

use crate::net::delay::{datacenter_rtt, RttArgs, RttMeasured};
use crate::net::topology::MAX_SENDERS;
use crate::report::model::{Cell, Columns, Figure, Report, Table};
use crate::report::plot::{self, Chart, Series};
use crate::report::results::ResultsDir;
use crate::report::tables::{repairs_line, repairs_note, Repairs};
use crate::stats::{summarize, Summary};
use crate::traffic::cc::{switch_for, Algorithms};
use crate::traffic::rpcstar::{rpcgen, RpcStar};
use crate::units::fmt_rate;

/// The paper (Alizadeh et al. 2010, static 100-packet buffer, RTO_min
/// 10 ms): TCP times out beyond about 10 senders, DCTCP from about 35.
const PAPER_TCP_ONSET: usize = 10;
const PAPER_DCTCP_ONSET: usize = 35;

#[derive(Clone, Debug, Serialize)]
pub struct IncastConfig {
    pub rate_bps: u64,
    /// `--rtt`; the data-center RTT at the rate by default.
    pub rtt: RttArgs,
    pub k: u32,
    pub buffer_pkts: u32,
    pub workers: Vec<usize>,
    /// Bytes the aggregator asks for per round, split evenly over the
    /// workers; or, with `per_worker`, what each worker sends.
    pub response_bytes: u64,
    pub per_worker: bool,
    pub rounds: u64,
    pub rto_min_ms: u32,
    /// Algorithms: bpf_dctcp (on bpf-step at K) and kernel ones (on droptail).
    pub algorithms: Vec<String>,
}

impl IncastConfig {
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(!self.workers.is_empty(), "give at least one worker count");
        if let Some(r) = &self.rtt.rtt {
            for &n in &self.workers {
                r.validate(n)?;
            }
        }
        for &n in &self.workers {
            anyhow::ensure!(
                (1..=MAX_SENDERS).contains(&n),
                "{n} workers out of range: 1 to {MAX_SENDERS}"
            );
        }
        anyhow::ensure!(
            (1_000..=1 << 30).contains(&self.response_bytes),
            "--response-bytes {}: 1000 to 1073741824",
            self.response_bytes
        );
        anyhow::ensure!(
            (2..=100_000).contains(&self.rounds),
            "--rounds {}: 2 to 100000 (the first is a warm-up)",
            self.rounds
        );
        anyhow::ensure!(
            (1..=1000).contains(&self.rto_min_ms),
            "--rto-min-ms {}: 1 to 1000",
            self.rto_min_ms
        );
        anyhow::ensure!(!self.algorithms.is_empty(), "give at least one algorithm");
        Bottleneck::step(self.rate_bps, self.buffer_pkts, self.k).validate()?;
        crate::traffic::cc::check_names(&self.algorithms)?;
        rpcgen()?;
        Ok(())
    }

    fn share(&self, n: usize) -> u64 {
        if self.per_worker {
            self.response_bytes
        } else {
            (self.response_bytes / n as u64).max(1)
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IncastRun {
    pub algorithm: String,
    pub workers: usize,
    pub bytes_per_worker: u64,
    pub rounds: u64,
    /// Responses the aggregator received whole, over every round (the
    /// client's count: workers x rounds when every worker answered).
    pub responses: u64,
    /// Query completion time, ms.
    pub qct_ms: Summary,
    /// The lower bound: the response at the link rate.
    pub ideal_ms: f64,
    /// Rounds slower than ideal + RTO_min: what a timeout does to a round.
    pub slow_round_fraction: f64,
    pub timeouts: u64,
    pub loss_probes: u64,
    pub retransmits: u64,
    pub drops: u64,
    pub queue: Summary,
    /// The guard's (ssthresh, cwnd, in-flight) repairs during the run
    /// (README "Known issue"; bpf_dctcp only).
    pub guard_repairs: Repairs,
    /// Every counted round's completion time, ms (raw data, not in runs.json).
    #[serde(skip)]
    pub qct_rounds_ms: Vec<f64>,
    pub rtt: RttMeasured,
}

fn one_run(
    cfg: &IncastConfig,
    algorithm: &str,
    cc: &str,
    n: usize,
    stop: &Arc<AtomicBool>,
) -> Result<IncastRun> {
    let bottleneck = switch_for(algorithm, cfg.rate_bps, cfg.buffer_pkts, cfg.k);
    // The paper's RTO_min on the workers' routes: they send the data.
    let mut star = RpcStar::start(
        n,
        cc,
        &bottleneck,
        cfg.rtt.or(Some(datacenter_rtt(cfg.rate_bps))),
        Some(cfg.rto_min_ms),
    )?;
    let share = cfg.share(n);
    let args: Vec<String> = [
        "--connect",
        &star.worker_addrs(),
        "--cc",
        cc,
        "--resp",
        &share.to_string(),
        "--rounds",
        &cfg.rounds.to_string(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let run = star.client(&args, stop)?;
    let samples = star.queue()?;
    let rtt = star.rtt()?;
    drop(star);
    // The first round opens every window from the initial one: a warm-up.
    let qct: Vec<f64> = run.report["round_us"]
        .as_array()
        .context("no round times")?
        .iter()
        .skip(1)
        .filter_map(|v| v.as_f64())
        .map(|us| us / 1e3)
        .collect();
    let ideal_ms = (share * n as u64) as f64 * 8.0 / cfg.rate_bps as f64 * 1e3;
    let slow = qct
        .iter()
        .filter(|&&q| q > ideal_ms + f64::from(cfg.rto_min_ms))
        .count();
    let queue: Vec<f64> = samples.iter().map(|s| f64::from(s.qlen)).collect();
    Ok(IncastRun {
        algorithm: algorithm.to_string(),
        workers: n,
        bytes_per_worker: share,
        rounds: cfg.rounds,
        responses: run.report["completed"].as_u64().context("no completed count")?,
        slow_round_fraction: slow as f64 / qct.len().max(1) as f64,
        qct_ms: summarize(&qct),
        ideal_ms,
        timeouts: run.tcp.timeouts,
        loss_probes: run.tcp.loss_probes,
        retransmits: run.tcp.retransmits,
        drops: run.qdisc.drops,
        queue: summarize(&queue),
        guard_repairs: Repairs::default(),
        qct_rounds_ms: qct,
        rtt,
    })
}

fn run(cfg: &IncastConfig, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<Report> {
    let algorithms = Algorithms::attach(&cfg.algorithms)?;
    let mut runs = Vec::new();
    let total = cfg.workers.len() * cfg.algorithms.len();
    let mut done = 0;
    for &n in &cfg.workers {
        for a in &cfg.algorithms {
            let cc = algorithms.cc(a);
            done += 1;
            let (mut r, repairs) =
                algorithms.counting_repairs(a, || one_run(cfg, a, &cc, n, stop))?;
            r.guard_repairs = repairs;
            eprintln!(
                "[{done}/{total}] {a:<9} N = {n:>3}: QCT p50 {:.1} p99 {:.1} max {:.1} ms (ideal {:.1}), \
                 {:.0}% of rounds slower than ideal + RTO_min, {} timeouts, {} loss probes, {} retransmits, {} drops, \
                 queue mean {:.1}{}",
                r.qct_ms.p50,
                r.qct_ms.p99,
                r.qct_ms.max,
                r.ideal_ms,
                r.slow_round_fraction * 100.0,
                r.timeouts,
                r.loss_probes,
                r.retransmits,
                r.drops,
                r.queue.mean,
                repairs_note(r.guard_repairs)
            );
            runs.push(r);
        }
    }
    write_csv(out, &runs)?;
    plots(out, cfg, &runs)?;
    out.write_json("runs.json", &runs)?;
    Ok(report(cfg, &runs))
}

fn write_csv(out: &ResultsDir, runs: &[IncastRun]) -> Result<()> {
    let mut w = out.csv("qct.csv.gz", "algorithm,workers,round,qct_ms")?;
    for r in runs {
        for (i, q) in r.qct_rounds_ms.iter().enumerate() {
            writeln!(w, "{},{},{},{q:.3}", r.algorithm, r.workers, i + 2)?;
        }
    }
    drop(w);
    Ok(())
}

fn plots(out: &ResultsDir, cfg: &IncastConfig, runs: &[IncastRun]) -> Result<()> {
    let by = |f: fn(&IncastRun) -> f64| -> Vec<Series> {
        cfg.algorithms
            .iter()
            .map(|a| Series {
                name: a.clone(),
                points: runs
                    .iter()
                    .filter(|r| &r.algorithm == a)
                    .map(|r| (r.workers as f64, f(r)))
                    .collect(),
            })
            .collect()
    };
    let what = format!(
        "{}, buffer {} packets, RTO_min {} ms",
        fmt_rate(cfg.rate_bps),
        cfg.buffer_pkts,
        cfg.rto_min_ms
    );
    let mut qct = by(|r| r.qct_ms.p99);
    for s in &mut qct {
        s.name = format!("{} p99", s.name);
    }
    qct.extend(by(|r| r.qct_ms.p50).into_iter().map(|mut s| {
        s.name = format!("{} median", s.name);
        s
    }));
    plot::draw(
        &out.file("qct.png"),
        &Chart::new(
            &format!("Query completion time against workers ({what})"),
            "workers N",
            "query completion time (ms)",
            qct,
        ),
    )?;
    plot::draw(
        &out.file("timeouts.png"),
        &Chart::new(
            &format!("Rounds stretched by a timer ({what})"),
            "workers N",
            "fraction of rounds slower than ideal + RTO_min",
            by(|r| r.slow_round_fraction),
        ),
    )
}

/// The smallest N at which more than `share` of an algorithm's rounds were
/// stretched by a retransmission timer.
fn onset(runs: &[IncastRun], algorithm: &str, share: f64) -> Option<usize> {
    runs.iter()
        .filter(|r| r.algorithm == algorithm && r.slow_round_fraction > share)
        .map(|r| r.workers)
        .min()
}

/// One row per N and algorithm.
fn runs_table(runs: &[IncastRun]) -> Table {
    Columns::<IncastRun>::new()
        .col("algorithm", "", |r| Cell::text(&r.algorithm))
        .col("N", "", |r| Cell::int(r.workers))
        .col("bytes each", "", |r| Cell::int(r.bytes_per_worker))
        .col("QCT p50", "ms", |r| Cell::num(r.qct_ms.p50, 1))
        .col("p99", "ms", |r| Cell::num(r.qct_ms.p99, 1))
        .col("max", "ms", |r| Cell::num(r.qct_ms.max, 1))
        .col("ideal", "ms", |r| Cell::num(r.ideal_ms, 1))
        .col("rounds stretched", "", |r| Cell::pct(r.slow_round_fraction, 1))
        .col("timeouts", "", |r| Cell::int(r.timeouts))
        .col("loss probes", "", |r| Cell::int(r.loss_probes))
        .col("retransmits", "", |r| Cell::int(r.retransmits))
        .col("drops", "", |r| Cell::int(r.drops))
        .col("queue mean", "packets", |r| Cell::num(r.queue.mean, 1))
        .col("queue max", "packets", |r| Cell::num(r.queue.max, 0))
        .table(runs)
}

/// Where each algorithm's rounds start to stretch, beside the paper's N.
fn onsets_table(cfg: &IncastConfig, runs: &[IncastRun]) -> Table {
    let tested = cfg.workers.iter().max().copied().unwrap_or(0);
    let measured = move |a: &str, share| {
        onset(runs, a, share).map_or(format!("none up to {tested}"), |n| n.to_string())
    };
    Columns::<String>::new()
        .col("algorithm", "", |a| Cell::text(a))
        .col("paper (static 100-packet buffer)", "", |a| {
            let n = if a == "bpf_dctcp" { PAPER_DCTCP_ONSET } else { PAPER_TCP_ONSET };
            Cell::text(format!("about {n}"))
        })
        .col("measured: first N with > 1 % of rounds stretched", "", move |a| {
            Cell::text(measured(a, 0.01))
        })
        .col("> 5 %", "", move |a| Cell::text(measured(a, 0.05)))
        .col("stretched rounds at the largest N", "", move |a| {
            let last = runs.iter().find(|r| &r.algorithm == a && r.workers == tested);
            Cell::pct(last.map_or(0.0, |r| r.slow_round_fraction), 1)
        })
        .table(&cfg.algorithms)
}

fn report(cfg: &IncastConfig, runs: &[IncastRun]) -> Report {
    let mut r = Report::new("Incast: DCTCP against TCP");
    r.text(format!(
        "An aggregator (the star's receiver) asks N workers (one namespace each) at once for {} bytes{}, {} rounds \
         per N (the first, which opens every window, not counted), through a {} bottleneck with a {}-packet buffer: bpf_dctcp on bpf-step at K = {}, kernel algorithms \
         on droptail. RTO_min {} ms on the workers' routes, as in the paper. Query completion time = the round's \
         last response. A round slower than the ideal transfer time plus RTO_min is counted as stretched: a \
         retransmission timer fired in it (a timeout, or a tail-loss probe, which waits about two round trips but \
         at least RTO_min here). The kernel's own counts, summed over the workers (TCPTimeouts, TCPLossProbes, \
         RetransSegs), are beside it.",
        cfg.response_bytes,
        if cfg.per_worker { " from each" } else { " in all, split evenly" },
        cfg.rounds,
        fmt_rate(cfg.rate_bps),
        cfg.buffer_pkts,
        cfg.k,
        cfg.rto_min_ms
    ))
    .markdown(crate::net::delay::summary_lines(
        runs.iter().map(|r| (format!("{} N = {}", r.algorithm, r.workers), &r.rtt)),
    ))
    .runs_table(runs_table(runs))
    .heading(2, "Where timeouts start, against the paper")
    .table(onsets_table(cfg, runs))
    .text(
        "The paper's testbed: 1 Gbit/s, 1 MB per query split over N servers, a Broadcom Triumph switch with a \
         static 100-packet buffer per port. Sweep points are the N given (`--workers`); an onset lies between the \
         last N without and the first N with.",
    )
    .text(repairs_line(
        runs.iter().map(|r| (format!("{} at N = {}", r.algorithm, r.workers), r.guard_repairs)),
    ))
    .heading(2, "Plots")
    .figures(vec![
        Figure::new("qct.png", "Query completion time (median and p99) against N"),
        Figure::new("timeouts.png", "The share of rounds a retransmission timer stretched, against N"),
    ])
    .text("Raw: `runs.csv` (the table above), `runs.json`, `qct.csv.gz` (every counted round).");
    r
}

/// Incast: N workers answer one aggregator at once (the DCTCP paper's
/// incast experiment).
///
/// For each N of --workers and each algorithm, one `rpcgen worker` per
/// star sender (a namespace each) and the aggregator, `rpcgen client
/// --rounds`, at the receiver: each round asks every worker for its share
/// of --response-bytes at once. bpf_dctcp runs on bpf-step at K, kernel
/// algorithms on droptail, all with a shallow buffer and RTO_min set on
/// the workers' routes. Writes results/incast/<timestamp>/: query
/// completion times, timeouts, retransmits, drops and queue per N, plots
/// against N, and where timeouts start beside the paper's 10 (TCP) and
/// 35 (DCTCP) senders. Round trip (--rtt) by default 100us at 1 Gbit/s
/// and above (the paper's testbed), 500us below.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("buffer", |a| {
    a.help("Switch buffer, packets (the paper: a static 100)")
        .default_value("100")
        .required(false)
}))]
pub struct IncastArgs {
    /// N = 1, 4, 16 with 20 rounds, for tests and a first look.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub switch: crate::experiments::RpcSwitchArgs,
    /// Worker counts to sweep, comma-separated (1 to 256).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,24,32,40,48,64"
    )]
    pub workers: Vec<usize>,
    /// Bytes per round, split evenly over the workers.
    #[arg(long, default_value_t = 1_000_000)]
    pub response_bytes: u64,
    /// --response-bytes is what each worker sends, not the total.
    #[arg(long)]
    pub per_worker: bool,
    /// Rounds per N and algorithm (default 200, 20 with --quick).
    #[arg(long)]
    pub rounds: Option<u64>,
    /// RTO_min of the workers' routes, ms.
    #[arg(long, default_value_t = 10)]
    pub rto_min_ms: u32,
    /// Algorithms: bpf_dctcp or bpf_prague (attached for the run) and kernel ones.
    #[arg(long, value_delimiter = ',', default_value = "bpf_dctcp,cubic,reno")]
    pub algorithms: Vec<String>,
    #[command(flatten)]
    pub rtt: crate::net::delay::RttArgs,
    /// Results directory (default results/incast/<timestamp>).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

impl IncastArgs {
    pub fn config(&self) -> IncastConfig {
        let quick = self.quick;
        IncastConfig {
            rate_bps: self.switch.rate,
            rtt: self.rtt.clone(),
            k: self.switch.k,
            buffer_pkts: self.switch.buffer,
            workers: if quick {
                vec![1, 4, 16]
            } else {
                self.workers.clone()
            },
            response_bytes: self.response_bytes,
            per_worker: self.per_worker,
            rounds: self.rounds.unwrap_or(if quick { 20 } else { 200 }),
            rto_min_ms: self.rto_min_ms,
            algorithms: self.algorithms.clone(),
        }
    }
}

crate::experiments::register!("incast", IncastArgs => IncastConfig);

#[cfg(test)]
mod tests {
    use super::*;

    /// The report prints the figures of the run recorded with the
    /// hand-written summary (`experiments::recorded`).
    #[test]
    fn the_report_prints_the_recorded_runs_figures() {
        use crate::experiments::recorded;
        let cfg = recorded::args::<IncastArgs>("incast").config();
        let runs: Vec<IncastRun> = recorded::data("incast", "runs.json");
        recorded::assert_same_figures("incast", &report(&cfg, &runs), &[]);
    }

    fn run(algorithm: &str, workers: usize, hit: f64) -> IncastRun {
        IncastRun {
            algorithm: algorithm.into(),
            workers,
            bytes_per_worker: 1,
            rounds: 1,
            responses: workers as u64,
            qct_ms: Summary::default(),
            ideal_ms: 1.0,
            slow_round_fraction: hit,
            rtt: RttMeasured::default(),
            timeouts: 0,
            loss_probes: 0,
            retransmits: 0,
            drops: 0,
            queue: Summary::default(),
            guard_repairs: Repairs::default(),
            qct_rounds_ms: vec![],
        }
    }

    #[test]
    fn onset_is_the_first_n_with_timeouts() {
        let runs = [
            run("cubic", 4, 0.0),
            run("cubic", 16, 0.3),
            run("cubic", 8, 0.02),
            run("bpf_dctcp", 16, 0.0),
        ];
        assert_eq!(onset(&runs, "cubic", 0.01), Some(8));
        assert_eq!(onset(&runs, "cubic", 0.05), Some(16));
        assert_eq!(onset(&runs, "bpf_dctcp", 0.01), None);
        // More than the share: a run exactly at it is not the onset.
        assert_eq!(onset(&runs, "cubic", 0.02), Some(16));
    }

    fn config() -> IncastConfig {
        IncastConfig {
            rate_bps: 1_000_000_000,
            rtt: RttArgs::default(),
            k: 20,
            buffer_pkts: 100,
            workers: vec![1],
            response_bytes: 1_000_000,
            per_worker: false,
            rounds: 1,
            rto_min_ms: 10,
            algorithms: vec!["cubic".into()],
        }
    }

    /// Each bad value is refused, named, before anything runs.
    #[test]
    fn refusals_name_what_is_wrong() {
        let ok = IncastConfig {
            workers: vec![4, 16],
            rounds: 10,
            algorithms: vec!["bpf_dctcp".into(), "reno".into()],
            ..config()
        };
        crate::experiments::assert_each_refused(
            vec![
                (
                    IncastConfig {
                        workers: vec![],
                        ..ok.clone()
                    },
                    "at least one worker",
                ),
                (
                    IncastConfig {
                        workers: vec![4, 0],
                        ..ok.clone()
                    },
                    "0 workers out of range",
                ),
                (
                    IncastConfig {
                        workers: vec![257],
                        ..ok.clone()
                    },
                    "257 workers out of range",
                ),
                (
                    IncastConfig {
                        response_bytes: 999,
                        ..ok.clone()
                    },
                    "--response-bytes 999",
                ),
                (
                    IncastConfig {
                        rounds: 1,
                        ..ok.clone()
                    },
                    "--rounds 1",
                ),
                (
                    IncastConfig {
                        rto_min_ms: 0,
                        ..ok.clone()
                    },
                    "--rto-min-ms 0",
                ),
                (
                    IncastConfig {
                        algorithms: vec![],
                        ..ok.clone()
                    },
                    "at least one algorithm",
                ),
                (
                    IncastConfig {
                        buffer_pkts: 1,
                        ..ok.clone()
                    },
                    "buffer of 1 packets",
                ),
                (
                    IncastConfig {
                        algorithms: vec!["bpf_dctcp".into(), "no_such_cc".into()],
                        ..ok.clone()
                    },
                    "algorithm `no_such_cc` is not in this kernel",
                ),
            ],
            IncastConfig::validate,
        );
    }

    #[test]
    fn shares_split_the_response() {
        let mut cfg = config();
        assert_eq!(cfg.share(40), 25_000);
        cfg.per_worker = true;
        assert_eq!(cfg.share(40), 1_000_000);
    }
}
