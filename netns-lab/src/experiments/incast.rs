//! `lab incast` (the DCTCP paper's incast experiment; seed 000 could not
//! start N = 40 hosts): an aggregator asks N workers at once for a share of
//! a response, over and over; their answers collide in the switch's shallow
//! buffer. Per N and algorithm: query completion time (median, p99, max),
//! retransmission timeouts and the rounds they stretched, retransmissions,
//! drops and the queue. Each worker is an `rpcgen worker` in a namespace of
//! its own (a star sender); the aggregator, `rpcgen client --rounds`, is the
//! receiver.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loader::algo::Algo;
use serde::Serialize;
use tc_qdisc::{qdisc_stats, Backend, Bottleneck, BpfSwitch};

use crate::cc::LabCc;
use crate::experiments::table_header;
use crate::netns::Netns;
use crate::plot::{self, Chart, Series};
use crate::results::ResultsDir;
use crate::stats::{summarize, Summary};
use crate::topology::{sender_addr, Star, StarSpec, MAX_SENDERS};
use crate::units::fmt_rate;

const WORKER_PORT: u16 = 7000;

/// The paper (Alizadeh et al. 2010, static 100-packet buffer, RTO_min
/// 10 ms): TCP times out beyond about 10 senders, DCTCP from about 35.
const PAPER_TCP_ONSET: usize = 10;
const PAPER_DCTCP_ONSET: usize = 35;

#[derive(Clone, Debug, Serialize)]
pub struct IncastConfig {
    pub rate_bps: u64,
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
        let available =
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                .unwrap_or_default();
        for a in self.algorithms.iter().filter(|a| a.as_str() != "bpf_dctcp") {
            anyhow::ensure!(
                available.split_whitespace().any(|x| x == a),
                "algorithm `{a}` is not in this kernel (it has {}; bpf_dctcp is attached for the run)",
                available.trim()
            );
        }
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

/// The rpcgen binary built beside this one.
fn rpcgen() -> Result<PathBuf> {
    let p = std::env::current_exe()?
        .parent()
        .context("no directory of lab")?
        .join("rpcgen");
    anyhow::ensure!(
        p.exists(),
        "{} is missing: build the workspace (just build)",
        p.display()
    );
    Ok(p)
}

/// The TCP MIB summed over the worker namespaces (each has its own
/// /proc/net): retransmission timeouts, tail-loss probes, retransmitted
/// segments.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TcpCounters {
    pub timeouts: u64,
    pub loss_probes: u64,
    pub retransmits: u64,
}

fn tcp_counters(namespaces: &[&Netns]) -> Result<TcpCounters> {
    let mut total = TcpCounters::default();
    for ns in namespaces {
        let c = ns.run(|| -> Result<TcpCounters> {
            // thread-self: this thread is the one in the namespace.
            let value = |file: &str, group: &str, key: &str| -> Result<u64> {
                let text = std::fs::read_to_string(format!("/proc/thread-self/net/{file}"))?;
                let mut lines = text.lines().filter(|l| l.starts_with(group));
                let (names, values) = (lines.next(), lines.next());
                let (Some(names), Some(values)) = (names, values) else {
                    bail!("{file}: no {group} lines");
                };
                names
                    .split_whitespace()
                    .zip(values.split_whitespace())
                    .find(|(n, _)| *n == key)
                    .and_then(|(_, v)| v.parse().ok())
                    .with_context(|| format!("{file}: no {key}"))
            };
            Ok(TcpCounters {
                timeouts: value("netstat", "TcpExt:", "TCPTimeouts")?,
                loss_probes: value("netstat", "TcpExt:", "TCPLossProbes")?,
                retransmits: value("snmp", "Tcp:", "RetransSegs")?,
            })
        })??;
        total.timeouts += c.timeouts;
        total.loss_probes += c.loss_probes;
        total.retransmits += c.retransmits;
    }
    Ok(total)
}

/// Worker processes, killed (SIGTERM, then waited for) when dropped.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &self.0 {
            // SAFETY: signalling a child we spawned.
            unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
        }
        for w in &mut self.0 {
            let _ = w.wait();
        }
    }
}

fn nsenter(ns: &Netns, bin: &PathBuf) -> Command {
    let mut c = Command::new("nsenter");
    c.arg(format!("--net={}", ns.path().display())).arg(bin);
    c
}

#[derive(Clone, Debug, Serialize)]
pub struct IncastRun {
    pub algorithm: String,
    pub workers: usize,
    pub bytes_per_worker: u64,
    pub rounds: u64,
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
}

fn one_run(
    cfg: &IncastConfig,
    algorithm: &str,
    cc: &str,
    n: usize,
    stop: &Arc<AtomicBool>,
) -> Result<IncastRun> {
    let bin = rpcgen()?;
    let star = Star::build(&StarSpec {
        senders: n,
        delay: None,
    })?;
    star.sysctl_hosts("net.ipv4.tcp_ecn", "1")?;
    let backend = if algorithm == "bpf_dctcp" {
        Backend::BpfStep { k: cfg.k }
    } else {
        Backend::Droptail
    };
    let bottleneck = Bottleneck {
        rate_bps: cfg.rate_bps,
        buffer_pkts: cfg.buffer_pkts,
        backend,
    };
    bottleneck.install(star.switch.name(), &star.bottleneck_if)?;
    let mut switch = BpfSwitch::start(
        None,
        bottleneck.backend.marker_config(cfg.buffer_pkts, 1),
        &star.switch.path(),
        &star.bottleneck_if,
        &star.receiver.ns.path(),
        &star.receiver.ifname,
    )?;
    // The paper's RTO_min on the workers' routes (the senders of the data).
    let rto = format!("{}ms", cfg.rto_min_ms);
    for (i, h) in star.senders.iter().enumerate() {
        let gw = format!("198.18.{i}.254");
        h.ns.ip(&["route", "replace", "default", "via", &gw, "rto_min", &rto])?;
    }
    let workers = Workers(
        star.senders
            .iter()
            .map(|h| {
                let listen = format!("{}:{WORKER_PORT}", h.addr);
                nsenter(&h.ns, &bin)
                    .args(["worker", "--listen", &listen, "--cc", cc])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("starting rpcgen workers")
            })
            .collect::<Result<_>>()?,
    );
    // Every worker listening before the aggregator connects.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    for i in 0..n {
        let addr = std::net::SocketAddr::from((sender_addr(i), WORKER_PORT));
        let ready = star.receiver.ns.run(move || {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        })?;
        if !ready {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "worker {i} did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let hosts: Vec<&Netns> = star.senders.iter().map(|h| &h.ns).collect();
    let c0 = tcp_counters(&hosts)?;
    let q0 = qdisc_stats::read(star.switch.name(), &star.bottleneck_if)?;
    let share = cfg.share(n);
    let connect: Vec<String> = (0..n)
        .map(|i| format!("{}:{WORKER_PORT}", sender_addr(i)))
        .collect();
    let mut client = nsenter(&star.receiver.ns, &bin)
        .args(["client", "--connect", &connect.join(","), "--cc", cc])
        .args([
            "--resp",
            &share.to_string(),
            "--rounds",
            &cfg.rounds.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    while client.try_wait()?.is_none() {
        if stop.load(Ordering::Relaxed) {
            let _ = client.kill();
            let _ = client.wait();
            bail!("interrupted");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = client.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "aggregator failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let c1 = tcp_counters(&hosts)?;
    let q1 = qdisc_stats::read(star.switch.name(), &star.bottleneck_if)?;
    let samples = switch.take_trace()?.samples;
    drop(switch);
    drop(workers);
    // The first round opens every window from the initial one: a warm-up.
    let qct: Vec<f64> = report["round_us"]
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
        slow_round_fraction: slow as f64 / qct.len().max(1) as f64,
        qct_ms: summarize(&qct),
        ideal_ms,
        timeouts: c1.timeouts - c0.timeouts,
        loss_probes: c1.loss_probes - c0.loss_probes,
        retransmits: c1.retransmits - c0.retransmits,
        drops: q1.drops - q0.drops,
        queue: summarize(&queue),
    })
}

pub fn run(cfg: &IncastConfig, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<Vec<IncastRun>> {
    cfg.validate()?;
    out.write_json("config.json", cfg)?;
    let bpf = cfg
        .algorithms
        .iter()
        .any(|a| a == "bpf_dctcp")
        .then(|| LabCc::attach(Algo::Dctcp, vec![]))
        .transpose()?;
    let mut runs = Vec::new();
    let total = cfg.workers.len() * cfg.algorithms.len();
    let mut done = 0;
    for &n in &cfg.workers {
        for a in &cfg.algorithms {
            let cc = match (&bpf, a.as_str()) {
                (Some(b), "bpf_dctcp") => b.name.clone(),
                _ => a.clone(),
            };
            done += 1;
            let r = one_run(cfg, a, &cc, n, stop)?;
            eprintln!(
                "[{done}/{total}] {a:<9} N = {n:>3}: QCT p50 {:.1} p99 {:.1} max {:.1} ms (ideal {:.1}), \
                 {:.0}% of rounds slower than ideal + RTO_min, {} timeouts, {} loss probes, {} retransmits, {} drops, \
                 queue mean {:.1}",
                r.qct_ms.p50,
                r.qct_ms.p99,
                r.qct_ms.max,
                r.ideal_ms,
                r.slow_round_fraction * 100.0,
                r.timeouts,
                r.loss_probes,
                r.retransmits,
                r.drops,
                r.queue.mean
            );
            runs.push(r);
        }
    }
    write_csv(out, &runs)?;
    out.write_json("runs.json", &runs)?;
    plots(out, cfg, &runs)?;
    out.write_text("summary.md", &summary(cfg, &runs))?;
    Ok(runs)
}

fn write_csv(out: &ResultsDir, runs: &[IncastRun]) -> Result<()> {
    let mut w = out.csv(
        "runs.csv",
        "algorithm,workers,bytes_per_worker,rounds,qct_p50_ms,qct_p99_ms,qct_max_ms,ideal_ms,\
         slow_round_fraction,timeouts,loss_probes,retransmits,drops,queue_mean,queue_max",
    )?;
    for r in runs {
        writeln!(
            w,
            "{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.4},{},{},{},{},{:.2},{}",
            r.algorithm,
            r.workers,
            r.bytes_per_worker,
            r.rounds,
            r.qct_ms.p50,
            r.qct_ms.p99,
            r.qct_ms.max,
            r.ideal_ms,
            r.slow_round_fraction,
            r.timeouts,
            r.loss_probes,
            r.retransmits,
            r.drops,
            r.queue.mean,
            r.queue.max
        )?;
    }
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
            &format!("Rounds stretched by a retransmission timer against workers ({what})"),
            "workers N",
            "fraction of rounds slower than ideal + RTO_min",
            by(|r| r.slow_round_fraction),
        )
        .y_max(1.02)
        .hline(0.0, String::new()),
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

fn summary(cfg: &IncastConfig, runs: &[IncastRun]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Incast: DCTCP against TCP\n");
    let _ = writeln!(
        s,
        "An aggregator (the star's receiver) asks N workers (one namespace each) at once for {} bytes{}, {} rounds \
         per N (the first, which opens every window, not counted), through a {} bottleneck with a {}-packet buffer: bpf_dctcp on bpf-step at K = {}, kernel algorithms \
         on droptail. RTO_min {} ms on the workers' routes, as in the paper. Query completion time = the round's \
         last response. A round slower than the ideal transfer time plus RTO_min is counted as stretched: a \
         retransmission timer fired in it (a timeout, or a tail-loss probe, which waits about two round trips but \
         at least RTO_min here). The kernel's own counts, summed over the workers (TCPTimeouts, TCPLossProbes, \
         RetransSegs), are beside it.\n",
        cfg.response_bytes,
        if cfg.per_worker { " from each" } else { " in all, split evenly" },
        cfg.rounds,
        fmt_rate(cfg.rate_bps),
        cfg.buffer_pkts,
        cfg.k,
        cfg.rto_min_ms
    );
    table_header(
        &mut s,
        &[
            "algorithm",
            "N",
            "bytes each",
            "QCT p50 (ms)",
            "p99",
            "max",
            "ideal",
            "rounds stretched",
            "timeouts",
            "loss probes",
            "retransmits",
            "drops",
            "queue mean",
            "queue max",
        ],
    );
    for r in runs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1}% | {} | {} | {} | {} | {:.1} | {:.0} |",
            r.algorithm,
            r.workers,
            r.bytes_per_worker,
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
            r.queue.max
        );
    }
    let _ = writeln!(s, "\n## Where timeouts start, against the paper\n");
    table_header(
        &mut s,
        &[
            "algorithm",
            "paper (static 100-packet buffer)",
            "measured: first N with > 1 % of rounds stretched",
            "> 5 %",
            "stretched rounds at the largest N",
        ],
    );
    for a in &cfg.algorithms {
        let paper = if a == "bpf_dctcp" {
            format!("about {PAPER_DCTCP_ONSET}")
        } else {
            format!("about {PAPER_TCP_ONSET}")
        };
        let tested = cfg.workers.iter().max().copied().unwrap_or(0);
        let measured =
            |share| onset(runs, a, share).map_or(format!("none up to {tested}"), |n| n.to_string());
        let last = runs
            .iter()
            .find(|r| &r.algorithm == a && r.workers == tested)
            .map_or(0.0, |r| r.slow_round_fraction * 100.0);
        let _ = writeln!(
            s,
            "| {a} | {paper} | {} | {} | {last:.1}% |",
            measured(0.01),
            measured(0.05)
        );
    }
    let _ = writeln!(
        s,
        "\nThe paper's testbed: 1 Gbit/s, 1 MB per query split over N servers, a Broadcom Triumph switch with a \
         static 100-packet buffer per port. Sweep points are the N given (`--workers`); an onset lies between the \
         last N without and the first N with. Plots: `qct.png`, `timeouts.png`; raw: `runs.csv`, `runs.json`."
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(algorithm: &str, workers: usize, hit: f64) -> IncastRun {
        IncastRun {
            algorithm: algorithm.into(),
            workers,
            bytes_per_worker: 1,
            rounds: 1,
            qct_ms: Summary::default(),
            ideal_ms: 1.0,
            slow_round_fraction: hit,
            timeouts: 0,
            loss_probes: 0,
            retransmits: 0,
            drops: 0,
            queue: Summary::default(),
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
    }

    #[test]
    fn shares_split_the_response() {
        let mut cfg = IncastConfig {
            rate_bps: 1_000_000_000,
            k: 20,
            buffer_pkts: 100,
            workers: vec![1],
            response_bytes: 1_000_000,
            per_worker: false,
            rounds: 1,
            rto_min_ms: 10,
            algorithms: vec!["cubic".into()],
        };
        assert_eq!(cfg.share(40), 25_000);
        cfg.per_worker = true;
        assert_eq!(cfg.share(40), 1_000_000);
    }
}
