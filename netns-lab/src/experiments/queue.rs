//! `lab queue` (paper Fig. 1; seed 000's setup validation): two long flows
//! into one receiver through a K-marking switch; DCTCP keeps the queue near
//! K while TCP's sawtooth fills the buffer.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;
use tc_qdisc::intf::queue_sample;
use tc_qdisc::Bottleneck;

use crate::experiments::{parse_variant, StarArgs, Sweep, Variant, DEFAULT_VARIANTS};
use crate::measure::cctrace::CcTrace;
use crate::measure::cctrace::{FlowCheck, TraceCheck};
use crate::measure::scenario::{window_cap_pkts, Outcome, Scenario};
use crate::net::delay::{datacenter_rtt, RoundTrip, RttArgs};
use crate::net::link_faults::FaultArgs;
use crate::net::topology::SEGMENT_BYTES;
use crate::net::topology::{Star, StarSpec};
use crate::report::model::{Cell, Check, Columns, Figure, Fmt, Report, Table};
use crate::report::plot::{self, Chart, Series};
use crate::report::results::ResultsDir;
use crate::report::tables::found_note;
use crate::stats::{cdf, Summary};
use crate::traffic::cc::Algorithms;
use crate::units::{fmt_rate, parse_rate, rate_tag};

/// Queue occupancy, DCTCP against TCP (paper Fig. 1).
///
/// Two long flows into one receiver through the switch; DCTCP (bpf_dctcp,
/// attached for the run) on a K-marking backend against cubic and reno on
/// droptail, at each rate. The round trip (--rtt) is by default the
/// seed's at each rate: 500us below 1 Gbit/s (seed 000's Mininet runs),
/// 100us at 1 Gbit/s and above (the paper's testbed). Writes
/// results/queue/<timestamp>/.
#[derive(Debug, Clone, clap::Args)]
pub struct QueueArgs {
    /// Short runs (4 s) for tests and a first look.
    #[arg(long)]
    pub quick: bool,
    /// Bottleneck rates, comma-separated (100M, 1G, 250mbit, ...).
    #[arg(long, value_delimiter = ',', value_parser = parse_rate, default_value = "100M,1G")]
    pub rates: Vec<u64>,
    #[command(flatten)]
    pub star: StarArgs,
    /// Seconds per run (default 20, or 4 with --quick).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Comparisons as algorithm:backend, comma-separated. Algorithms:
    /// bpf_dctcp or bpf_prague (TCP Prague, Linux 6.10+, its ECT(1)
    /// program on every sender), attached for the run, with parameters
    /// after `+` if need be (`bpf_prague+rtt_scaling=0:bpf-step`), or any
    /// kernel one (dctcp, cubic, reno). Backends: droptail, bpf-step,
    /// bpf-red, bpf-dualpi2 (RFC 9332's coupled dual queue with its
    /// defaults, K unused; these on tcx, Linux 6.6+), red, fq_codel
    /// (kernels with those qdiscs, e.g. `just vm-test`).
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_VARIANTS)]
    pub variants: Vec<String>,
    #[command(flatten)]
    pub rtt: RttArgs,
    /// Rate of each sender's link to the switch (100M, 1G, ...), shaped
    /// by htb on the sender's side as a NIC would pace it; default:
    /// unshaped, as fast as veth forwards.
    #[arg(long, value_parser = parse_rate)]
    pub access_rate: Option<u64>,
    /// Results directory (default results/queue/<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Do not record bpf_dctcp's live trace (cc_trace.csv.gz,
    /// sawtooth.png): no tracing cost on the measured run.
    #[arg(long)]
    pub no_trace: bool,
    /// Clamp each receiver's window at this many packets
    /// (TCP_WINDOW_CLAMP) in the runs on a marking backend; 0 for none.
    /// Default: per rate, twice the most one DCTCP flow can hold there
    /// (C x RTT + K packets), and at least 64: 64 up to about 1.4 Gbit/s
    /// at 100 us with K = 20, 298 at 10 Gbit/s with K = 65, so it never
    /// limits a flow's rate. The window scale the handshake then picks
    /// bounds the window for good at under twice the clamp (90 packets for
    /// 64); it stops a window corrupted by the kernel issue (README) from
    /// bursting into the buffer. Droptail runs are never capped: TCP
    /// needs its full window to build the sawtooth.
    #[arg(long, value_name = "PKTS")]
    pub rwnd_clamp: Option<u32>,
    #[command(
        flatten,
        next_help_heading = "Faults between the switch and the receiver"
    )]
    pub faults: FaultArgs,
}

impl QueueArgs {
    pub fn config(&self) -> QueueConfig {
        let duration =
            Duration::from_secs_f64(self.duration.unwrap_or(if self.quick { 4.0 } else { 20.0 }));
        let warmup = if duration >= Duration::from_secs(10) {
            Duration::from_secs(3)
        } else {
            duration / 4
        };
        QueueConfig {
            rates_bps: self.rates.clone(),
            k: self.star.k,
            buffer_pkts: self.star.buffer,
            flows: self.star.flows,
            duration,
            warmup,
            variants: self.variants.clone(),
            rtt: self.rtt.clone(),
            access_rate_bps: self.access_rate,
            trace: !self.no_trace,
            rwnd_clamp_pkts: self.rwnd_clamp,
            faults: self.faults.clone(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct QueueConfig {
    pub rates_bps: Vec<u64>,
    pub k: u32,
    pub buffer_pkts: u32,
    pub flows: usize,
    pub duration: Duration,
    pub warmup: Duration,
    /// What to compare: algorithm:backend pairs, e.g. bpf_dctcp:bpf-step.
    pub variants: Vec<String>,
    /// `--rtt` and `--delay-backend`; without `--rtt`, each rate's seed RTT.
    pub rtt: RttArgs,
    /// Rate of each sender's link to the switch, if shaped.
    pub access_rate_bps: Option<u64>,
    /// Record bpf_dctcp's live trace in its runs.
    pub trace: bool,
    /// Receive-window cap of the runs on a marking backend, packets (0:
    /// none; absent: per rate, `default_rwnd_clamp_pkts`).
    pub rwnd_clamp_pkts: Option<u32>,
    /// Faults between the switch and the receiver, in every run.
    pub faults: FaultArgs,
}

/// The largest `--rwnd-clamp`: 16 K packets, 24 MB of window.
pub const RWND_CLAMP_MAX_PKTS: u32 = 1 << 14;

/// The smallest default clamp: it keeps a window the kernel issue corrupts
/// from bursting more than 90 packets per flow into the buffer.
pub const RWND_CLAMP_FLOOR_PKTS: u32 = 64;

/// The default receive-window cap at `rate_bps` over `rtt` with threshold
/// `k`: twice the window one DCTCP flow can hold there (the path's C x RTT
/// plus a queue at K), so the cap never limits a flow's rate, and never
/// under RWND_CLAMP_FLOOR_PKTS.
pub fn default_rwnd_clamp_pkts(rate_bps: u64, rtt: Duration, k: u32) -> u32 {
    let one_flow = crate::net::delay::bdp_pkts(rate_bps, rtt).ceil() + f64::from(k);
    window_cap_pkts(one_flow, 2.0, RWND_CLAMP_FLOOR_PKTS).min(RWND_CLAMP_MAX_PKTS)
}

impl QueueConfig {
    /// The round trip of the runs at `rate`.
    pub fn round_trip(&self, rate_bps: u64) -> Option<RoundTrip> {
        self.rtt.or(Some(datacenter_rtt(rate_bps)))
    }

    /// The receive-window cap, packets, of a marking run at `rate_bps`
    /// (0: none): `--rwnd-clamp`, or the default for the run's longest
    /// round trip.
    pub fn rwnd_clamp_at(&self, rate_bps: u64) -> u32 {
        self.rwnd_clamp_pkts.unwrap_or_else(|| {
            let rtt = self.round_trip(rate_bps).map_or(Duration::ZERO, |rt| {
                rt.rtt.0.iter().copied().max().unwrap_or_default()
            });
            default_rwnd_clamp_pkts(rate_bps, rtt, self.k)
        })
    }

    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(!self.rates_bps.is_empty(), "give at least one rate");
        anyhow::ensure!(
            (1..=64).contains(&self.flows),
            "--flows {} out of range: 1 to 64",
            self.flows
        );
        anyhow::ensure!(
            self.duration > self.warmup,
            "--duration must exceed the warmup ({:?})",
            self.warmup
        );
        anyhow::ensure!(
            !self.variants.is_empty(),
            "give at least one algorithm:backend"
        );
        let mut names = Vec::new();
        for v in &self.variants {
            let v = parse_variant(v).map_err(anyhow::Error::msg)?;
            names.push(v.cc.clone());
            for &rate in &self.rates_bps {
                Bottleneck {
                    rate_bps: rate,
                    buffer_pkts: self.buffer_pkts,
                    backend: v.backend.at(self.k, rate),
                }
                .validate()?;
            }
        }
        crate::traffic::cc::check_names(&names)?;
        if let Some(c) = self.rwnd_clamp_pkts {
            if c == 1 || c > RWND_CLAMP_MAX_PKTS {
                bail!("--rwnd-clamp {c}: give 0 (no clamp) or 2-{RWND_CLAMP_MAX_PKTS} packets");
            }
        }
        self.faults.validate()?;
        Star::validate(&StarSpec {
            access_rate_bps: self.access_rate_bps,
            round_trip: self.rtt.or(None),
            ..StarSpec::senders(self.flows)
        })
    }
}

fn run(cfg: &QueueConfig, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<Report> {
    let variants: Vec<Variant> = cfg
        .variants
        .iter()
        .map(|v| parse_variant(v).map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    // Our algorithm is attached under the lab's own name for this run.
    let names: Vec<String> = variants.iter().map(|v| v.cc.clone()).collect();
    let algorithms = Algorithms::attach(&names)?;

    let mut sweep = Sweep::new(cfg.rates_bps.len() * variants.len(), stop);
    let mut outcomes = Vec::new();
    let mut traces: Vec<(u64, String, Vec<queue_sample>)> = Vec::new();
    for &rate in &cfg.rates_bps {
        for v in &variants {
            let ours = algorithms.ours(&v.cc);
            let traced = ours.filter(|_| cfg.trace).map(|b| b.name.as_str());
            let scn = scenario(cfg, rate, v, &algorithms.cc(&v.cc), traced);
            let run = sweep.run(&scn, ours, &format!("{} {}", fmt_rate(rate), v.label()))?;
            let (outcome, samples) = (run.outcome, run.samples);
            let dir = out.sub(&run_dir(rate, &v.label()))?;
            write_run(&dir, &scn, &outcome, &samples)?;
            if let Some(t) = &run.cc_trace {
                t.write_csv(&dir, "cc_trace.csv.gz")?;
                plot_sawtooth(&dir, cfg, &outcome, &samples, t)?;
            }
            sweep.said(
                &format!(
                    "{} {:<20}: queue mean {:.1} p95 {:.0} pkts, util {:.1}%, drops {}, marks {}",
                    fmt_rate(rate),
                    v.label(),
                    outcome.queue.mean,
                    outcome.queue.p95,
                    outcome.utilization * 100.0,
                    outcome.drops,
                    outcome.marks
                ),
                &outcome,
            );
            if let Some(tc) = &outcome.trace_check {
                eprintln!("{}", trace_line(tc));
            }
            if let Some(f) = &outcome.faults {
                eprintln!("  faults: {}", crate::net::link_faults::counts_line(f));
            }
            traces.push((rate, v.label(), samples));
            outcomes.push(outcome);
        }
    }
    plot_rates(cfg, out, &traces)?;
    out.write_json("runs.json", &outcomes)?;
    Ok(report(cfg, &outcomes))
}

/// A run's folder: `100M-bpf_dctcp-bpf-step` for bpf_dctcp@bpf-step at 100 Mbit/s.
fn run_dir(rate_bps: u64, label: &str) -> String {
    format!("{}-{}", rate_tag(rate_bps), label.replacen('@', "-", 1))
}

fn write_run(
    dir: &ResultsDir,
    scn: &Scenario,
    o: &Outcome,
    samples: &[queue_sample],
) -> Result<()> {
    dir.write_json("scenario.json", scn)?;
    dir.write_json("outcome.json", o)?;
    let t0 = samples.first().map_or(0, |s| s.ts_ns);
    let mut w = dir.csv(
        "queue.csv.gz",
        "t_s,qlen_pkts,backlog_bytes,len,sport,dport,action,ecn",
    )?;
    for s in samples {
        writeln!(
            w,
            "{:.6},{},{},{},{},{},{},{}",
            (s.ts_ns - t0) as f64 / 1e9,
            s.qlen,
            s.backlog,
            s.len,
            s.sport,
            s.dport,
            s.action,
            s.ecn
        )?;
    }
    drop(w);
    let header: Vec<String> = std::iter::once("t_s".to_string())
        .chain(
            o.flows
                .iter()
                .map(|f| format!("flow{}_{}_mbps", f.sender, f.sport)),
        )
        .collect();
    let mut w = dir.csv("throughput.csv", &header.join(","))?;
    // Every flow's series shares one clock (the sampler reads all at once).
    let points: Vec<Vec<(f64, f64)>> = o.flows.iter().map(|f| f.rate_points()).collect();
    let n = points.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..n {
        let t = points.iter().find_map(|p| p.get(i)).map_or(0.0, |p| p.0);
        let row: Vec<String> = points
            .iter()
            .map(|p| format!("{:.3}", p.get(i).map_or(0.0, |p| p.1)))
            .collect();
        writeln!(w, "{t:.3},{}", row.join(","))?;
    }
    drop(w);
    plot::draw(
        &dir.file("throughput.png"),
        &Chart::new(
            &format!(
                "{} at {}: per-flow throughput",
                o.label,
                fmt_rate(o.rate_bps)
            ),
            "time (s)",
            "Mbit/s",
            o.flows
                .iter()
                .map(|f| Series {
                    name: format!("flow {} ({})", f.sender, f.cc_used),
                    points: f.rate_points(),
                })
                .collect(),
        )
        .y_max(o.rate_bps as f64 / 1e6 * 1.1),
    )
}

/// Seconds of queue shown over time: about 1 s at 100 Mbit/s and 0.25 s at
/// 1 Gbit/s (8,000 packets per 100 ms at 100 Mbit/s), enough for several
/// sawteeth.
fn excerpt_span_s(rate_bps: u64) -> f64 {
    (1e8 / rate_bps as f64).clamp(0.1, 1.0)
}

/// One run: `v` at `rate`, its senders on `cc` (the attached instance's
/// name for bpf_dctcp), the live trace of `traced` if asked; the receive
/// window capped only where the backend marks (a drop-tail queue is what
/// TCP fills).
fn scenario(cfg: &QueueConfig, rate: u64, v: &Variant, cc: &str, traced: Option<&str>) -> Scenario {
    let bottleneck = Bottleneck {
        rate_bps: rate,
        buffer_pkts: cfg.buffer_pkts,
        backend: v.backend.at(cfg.k, rate),
    };
    Scenario {
        round_trip: cfg.round_trip(rate),
        access_rate_bps: cfg.access_rate_bps,
        trace_algorithm: traced.map(str::to_string),
        rwnd_clamp_bytes: v
            .marks()
            .then(|| cfg.rwnd_clamp_at(rate))
            .filter(|&c| c > 0)
            .map(|c| c * SEGMENT_BYTES),
        faults: cfg.faults.clone(),
        ..Scenario::long_flows(
            &v.label(),
            bottleneck,
            cfg.flows,
            cc,
            cfg.duration,
            cfg.warmup,
        )
    }
}

/// Queue, cwnd and alpha over the same excerpt of one traced run, stacked
/// (the sawtooth of the paper's Fig. 12).
fn plot_sawtooth(
    dir: &ResultsDir,
    cfg: &QueueConfig,
    o: &Outcome,
    samples: &[queue_sample],
    trace: &CcTrace,
) -> Result<()> {
    let Some(first) = samples.first() else {
        return Ok(());
    };
    let (t0, span) = (first.ts_ns, excerpt_span_s(o.rate_bps));
    let queue: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| ((s.ts_ns - t0) as f64 / 1e9, f64::from(s.qlen)))
        .take_while(|(t, _)| *t <= span)
        .collect();
    let (cwnd, alpha) = trace.series(&o.flows, t0, span);
    let what = format!("{} at {}", o.label, fmt_rate(o.rate_bps));
    plot::draw_stack(
        &dir.file("sawtooth.png"),
        &[
            Chart::new(
                &format!("{what}: queue at every arrival"),
                "time (s)",
                "queue (packets)",
                vec![Series {
                    name: "queue".into(),
                    points: queue,
                }],
            )
            .hline(f64::from(cfg.k), format!("K = {}", cfg.k)),
            Chart::new(
                &format!("{what}: cwnd on traced ACKs"),
                "time (s)",
                "cwnd (packets)",
                cwnd,
            ),
            Chart::new(
                &format!("{what}: alpha per window"),
                "time (s)",
                "alpha",
                alpha,
            )
            .y_max(1.0),
        ],
    )
}

/// Queue over time (an excerpt of the window, every arrival) and queue CDF,
/// one chart each per rate, all algorithms together.
fn plot_rates(
    cfg: &QueueConfig,
    out: &ResultsDir,
    traces: &[(u64, String, Vec<queue_sample>)],
) -> Result<()> {
    for &rate in &cfg.rates_bps {
        let runs: Vec<_> = traces.iter().filter(|t| t.0 == rate).collect();
        let span_s = excerpt_span_s(rate);
        let mut over_time = Vec::new();
        let mut cdfs = Vec::new();
        for (_, label, samples) in &runs {
            let Some(first) = samples.first() else {
                continue;
            };
            let start = first.ts_ns;
            let points: Vec<(f64, f64)> = samples
                .iter()
                .map(|s| ((s.ts_ns - start) as f64 / 1e9, f64::from(s.qlen)))
                .take_while(|(t, _)| *t <= span_s)
                .collect();
            over_time.push(Series {
                name: label.to_string(),
                points,
            });
            let q: Vec<f64> = samples.iter().map(|s| f64::from(s.qlen)).collect();
            cdfs.push(Series {
                name: label.to_string(),
                points: cdf(&q),
            });
        }
        let tag = rate_tag(rate);
        plot::draw(
            &out.file(&format!("queue_{tag}.png")),
            &Chart::new(
                &format!(
                    "Queue at every arrival, {} flows, {} (K = {})",
                    cfg.flows,
                    fmt_rate(rate),
                    cfg.k
                ),
                "time (s)",
                "queue (packets)",
                over_time,
            )
            .hline(f64::from(cfg.k), format!("K = {}", cfg.k))
            .y_max(f64::from(cfg.buffer_pkts) * 1.05),
        )?;
        plot::draw(
            &out.file(&format!("queue_cdf_{tag}.png")),
            &Chart::new(
                &format!("Queue length CDF, {} flows, {}", cfg.flows, fmt_rate(rate)),
                "queue (packets)",
                "fraction of arrivals",
                cdfs,
            )
            .y_max(1.02),
        )?;
    }
    Ok(())
}

/// The recorded stream in one line: events and, per flow, alpha and F
/// beside the receiver's CE count.
fn trace_line(tc: &crate::measure::cctrace::TraceCheck) -> String {
    let flows: Vec<String> = tc
        .flows
        .iter()
        .map(|f| {
            format!(
                "flow {}: {} windows, {} ACKs, alpha {:.3} (2nd half; F there {:.3}), F {:.4} vs receiver CE {:.4}",
                f.sender,
                f.windows,
                f.acks,
                f.alpha_late_mean,
                f.fraction_marked_late,
                f.fraction_marked,
                f.receiver_ce_pkts as f64 / f.receiver_pkts.max(1) as f64
            )
        })
        .collect();
    format!(
        "  trace: {} events seen, {} dropped, {} produced; {}",
        tc.counts.seen,
        tc.counts.dropped,
        tc.counts.produced,
        flows.join("; ")
    )
}

fn rwnd_cell(o: &Outcome) -> Cell {
    match (o.rwnd_clamp_bytes, o.rwnd_limited_share()) {
        (Some(_), Some(share)) => Cell::pct(share, 2),
        (Some(_), None) => Cell::text("?"),
        (None, _) => Cell::text("no cap"),
    }
}

/// The host's share in the figures: a lab whose CPUs are busy forwarding
/// packets holds them back in its own backlogs, out of the switch's queue.
fn host_note(outcomes: &[Outcome]) -> String {
    let htb = match outcomes.first().and_then(|o| o.htb_hysteresis) {
        Some(true) => "on (htb sends its burst before it waits)",
        Some(false) => "off (htb arms a timer for every packet it holds back)",
        None => "unknown",
    };
    let ecn = match outcomes.first().map(|o| o.ecn_feedback) {
        Some(crate::net::ecn::EcnFeedback::Accecn) => "AccECN (tcp_ecn = 3, `lab --ecn accecn`)",
        _ => "classic RFC 3168 (tcp_ecn = 1)",
    };
    let mut s = format!(
        "Host softirq: the share of all CPUs in irq and softirq during the measured window. htb hysteresis: {htb}. \
         ECN feedback the hosts asked for: {ecn}."
    );
    if let Some(o) = outcomes.iter().find(|o| o.softirq_share > 0.5) {
        let _ = write!(
            s,
            " At {} the host spent {:.0}% of its CPUs forwarding: packets waited in its backlogs, not in the \
             switch's queue, so the queue there measures the host as much as DCTCP (docs/lab/README.md: the lab at 1 Gbit/s).",
            fmt_rate(o.rate_bps),
            o.softirq_share * 100.0
        );
    }
    // The lab's link is emulated on the lab's CPU: stolen time is link time.
    if let Some(o) = outcomes
        .iter()
        .max_by(|a, b| a.steal_share.total_cmp(&b.steal_share))
    {
        if o.steal_share >= 0.02 {
            let _ = write!(
                s,
                " The hypervisor took up to {:.0}% of the lab's CPU (steal, at {} {}): the emulated link stood \
                 still that long, and its utilization and goodput read lower for it (docs/testing.md, \"A stolen CPU\").",
                o.steal_share * 100.0,
                fmt_rate(o.rate_bps),
                o.label
            );
        }
    }
    s
}

/// The queue the checks read, and how it is named: over time where the
/// departure probe ran, as the reference traces were sampled and as the
/// theory's Q(t) is written; the queue found by arrivals is reported beside it.
fn judged_queue(o: &Outcome) -> (&Summary, &'static str) {
    match &o.queue_over_time {
        Some(t) => (t, " over time"),
        None => (&o.queue, ""),
    }
}

/// The table of runs: one row per rate and algorithm@backend.
fn runs_table(outcomes: &[Outcome]) -> Table {
    let over =
        |o: &Outcome, f: fn(&Summary) -> Cell| o.queue_over_time.as_ref().map_or(Cell::Missing, f);
    Columns::<Outcome>::new()
        .col("rate", "", |o| Cell::text(fmt_rate(o.rate_bps)))
        .col("algorithm@backend", "", |o| Cell::text(&o.label))
        .col("queue mean", "packets", |o| Cell::num(o.queue.mean, 1))
        .col("p5-p95", "packets", |o| {
            Cell::Range(o.queue.p5, o.queue.p95, Fmt::dp(0))
        })
        .col("over time: mean", "packets", move |o| {
            over(o, |t| Cell::num(t.mean, 1))
        })
        .col("over time: p5-p95", "packets", move |o| {
            over(o, |t| Cell::Range(t.p5, t.p95, Fmt::dp(0)))
        })
        .col("max", "packets", |o| Cell::num(o.queue.max, 0))
        .col("empty", "", |o| Cell::pct(o.queue_empty_fraction, 1))
        .col("utilization", "", |o| Cell::pct(o.utilization, 1))
        .col("drops", "", |o| Cell::int(o.drops))
        .col("marks", "", |o| Cell::int(o.marks))
        .col("CE at receiver", "", |o| Cell::pct(o.ce_fraction, 2))
        .col("goodput per flow", "Mbit/s", |o| {
            Cell::List(o.goodput_bps.iter().map(|g| g / 1e6).collect(), Fmt::dp(1))
        })
        .col("guard repairs", "", |o| {
            Cell::text(format!("{}{}", o.guard_repairs, found_note(o.guard_found)))
        })
        .col("rwnd-limited", "", rwnd_cell)
        .col("host softirq", "", |o| Cell::pct(o.softirq_share, 0))
        .table(outcomes)
}

/// Theory (Alizadeh et al. 2010, section 3.3) beside the measurements.
fn report(cfg: &QueueConfig, outcomes: &[Outcome]) -> Report {
    let dctcp_labels: Vec<String> = cfg
        .variants
        .iter()
        .filter_map(|v| parse_variant(v).ok())
        .filter(Variant::is_dctcp)
        .map(|v| v.label())
        .collect();
    let dctcp_labels = dctcp_labels.as_slice();
    let mut r = Report::new("Queue occupancy: DCTCP against TCP (paper Fig. 1)");
    r.text(format!(
        "{} long flows into one receiver; bottleneck buffer {} packets; marking backends at K = {}; rows are \
         algorithm@backend. {:.0} s per run, the first {:.0} s not measured. Queue = packets found by each arriving \
         packet (BPF probe at the bottleneck); over time = the queue weighted by how long it held each length, \
         rebuilt from every arrival and every dequeue, which is what a switch sampling its queue periodically \
         reports (the reference traces were sampled so).",
        cfg.flows,
        cfg.buffer_pkts,
        cfg.k,
        cfg.duration.as_secs_f64(),
        cfg.warmup.as_secs_f64()
    ))
    .markdown(crate::net::delay::summary_lines(
        outcomes
            .iter()
            .map(|o| (format!("{} {}", fmt_rate(o.rate_bps), o.label), &o.rtt)),
    ))
    .runs_table(runs_table(outcomes))
    .text(
        "Guard repairs: ssthresh / cwnd values bpf_dctcp found impossible and recomputed, and transmissions it \
         held while far more was in flight than the reduction started from (the kernel issue in the README); \
         0 / 0 / 0 means the run never met it. \"found\" is the last impossible value repaired, as the guard \
         found it (on the AMD hosts here a stale return address of the kernel's SRSO return thunk).",
    );
    if cfg.rates_bps.iter().any(|&r| cfg.rwnd_clamp_at(r) > 0) {
        let clamps: Vec<String> = cfg
            .rates_bps
            .iter()
            .map(|&r| format!("{} packets at {}", cfg.rwnd_clamp_at(r), fmt_rate(r)))
            .collect();
        r.text(format!(
            "Receive window: on a marking backend each receiver clamps its window at {} \
             (`--rwnd-clamp`, TCP_WINDOW_CLAMP; by default twice C x RTT + K, at least 64), so its handshake picks a window scale that can never \
             advertise more than {} packets, several times the window DCTCP holds here (K + C x RTT shared by \
             {} flows): a window the kernel issue corrupts cannot burst hundreds of packets into the buffer. \
             rwnd-limited: the largest share of a sender's busy time the receiver's window held it back \
             (tcp_info); near 0 means the cap only caught the issue's bursts and did not shape the run.",
            clamps.join(", "),
            outcomes
                .iter()
                .filter(|o| o.rwnd_clamp_bytes.is_some())
                .flat_map(|o| o.flows.iter().map(|f| f.receiver_max_window / SEGMENT_BYTES))
                .max()
                .unwrap_or(0),
            cfg.flows
        ));
    }
    r.text(host_note(outcomes));
    if !cfg.faults.is_none() {
        r.markdown(crate::measure::fault_effects::summary_section(
            &cfg.faults,
            outcomes,
        ));
    }
    r.heading(2, "Against theory and the reference traces").text(
        "Reference (mininet-tests, hardware DCTCP trace): mean 19.0 packets, p5-p95 17.1-20.7; TCP 331.",
    );
    for &rate in &cfg.rates_bps {
        let rows: Vec<&Outcome> = outcomes.iter().filter(|o| o.rate_bps == rate).collect();
        theory_at(&mut r, cfg, rate, &rows, dctcp_labels);
    }
    r.text(
        "The checks read the queue over time. Arrivals find less: the shaper lets packets leave in bunches (htb's \
         burst per timer) and the ACK clock brings the next arrivals right after each bunch, so they find the queue \
         at the bottom of each step, most at 1 Gbit/s (docs/lab/README.md, \"The lab at 1 Gbit/s\").",
    );
    r.heading(2, "Probe against the qdisc's own counters")
        .table(
            Columns::<Outcome>::new()
                .col("rate", "", |o| Cell::text(fmt_rate(o.rate_bps)))
                .col("algorithm", "", |o| Cell::text(&o.label))
                .col("probe arrivals enqueued", "", |o| Cell::int(o.probe_check.probe_enqueued))
                .col("qdisc sent + dropped", "", |o| Cell::int(o.probe_check.qdisc_accounted))
                .col("probe tail drops", "", |o| Cell::int(o.probe_check.probe_taildrops))
                .col("qdisc drops", "", |o| Cell::int(o.probe_check.qdisc_drops))
                .col("probe departures", "", |o| Cell::int(o.probe_check.probe_departed))
                .col("qdisc sent", "", |o| Cell::int(o.probe_check.qdisc_sent))
                .col("marks", "", |o| Cell::int(o.probe_check.marks))
                .col("CE at receiver", "", |o| Cell::int(o.probe_check.receiver_ce))
                .table(outcomes),
        )
        .text(
            "Probe departures: packets the kernel's qdisc_dequeue tracepoint saw leave the root qdisc. On 6.18 the \
             tracepoint itself (perf counts the same) skips some bulk dequeues: 0.1-0.5 % of the qdisc's sent counter at \
             20 and 100 Mbit/s, up to 2 % at 1 Gbit/s; the VM kernels skip none. Each event carries the queue length it \
             read, so a skipped dequeue moves the queue over time only until the next event, and the utilization counts \
             the window's departures from the arrivals instead (`window_departed` in outcome.json holds both counts).",
        );
    trace_section(&mut r, outcomes, dctcp_labels);
    r.heading(2, "Plots").figures(figures(cfg, outcomes)).text(
        "Raw samples: `<rate>-<algorithm>/queue.csv.gz`, `throughput.csv`, `cc_trace.csv.gz` (every traced event).",
    );
    r
}

/// One rate's theory (C, RTT, K_opt, Qmax, A, T_c) and the checks of its
/// DCTCP runs against it.
fn theory_at(
    r: &mut Report,
    cfg: &QueueConfig,
    rate: u64,
    rows: &[&Outcome],
    dctcp_labels: &[String],
) {
    let n = cfg.flows as f64;
    let k = f64::from(cfg.k);
    let c = rate as f64 / (f64::from(tc_qdisc::backend::PKT_BYTES) * 8.0);
    let measured = rows
        .iter()
        .flat_map(|o| o.flows.iter().map(|f| f.info.min_rtt_us))
        .filter(|&r| r > 0)
        .min()
        .unwrap_or(0) as f64
        / 1e6;
    // The theory takes the RTT the lab was asked for (the first sender's,
    // where they differ), or what veth gave without one.
    let configured = cfg.round_trip(rate).map(|r| r.rtt.of(0).as_secs_f64());
    let rtt = configured.unwrap_or(measured);
    let bdp = c * rtt;
    let amp = 0.5 * (2.0 * n * (bdp + k)).sqrt();
    let tc = 0.5 * (2.0 * (bdp + k) / n).sqrt();
    r.heading(3, fmt_rate(rate)).text(format!(
        "C = {:.0} packets/s, RTT {:.0} us ({}), C x RTT = {:.2} packets. \
         Full throughput needs K > C x RTT / 7 = {:.2}: K = {} {}. Theory for N = {}: Qmax = K + N = {:.0}, \
         amplitude A = {:.1} packets, period Tc = {:.1} RTTs.",
        c,
        rtt * 1e6,
        match configured {
            Some(_) => format!("configured; measured base RTT {:.0} us, min over flows", measured * 1e6),
            None => "no delay added: veth's own, min over flows".into(),
        },
        bdp,
        bdp / 7.0,
        cfg.k,
        if k > bdp / 7.0 { "satisfies it" } else { "does not" },
        cfg.flows,
        k + n,
        amp,
        tc
    ));
    let tcp_mean = rows
        .iter()
        .filter(|o| !dctcp_labels.contains(&o.label))
        .map(|o| judged_queue(o).0.mean)
        .fold(0.0, f64::max);
    let mut checks = vec![];
    for o in rows.iter().filter(|o| dctcp_labels.contains(&o.label)) {
        let l = &o.label;
        let (q, over) = judged_queue(o);
        checks.push(Check::judged(
            format!("{l} mean queue{over}"),
            format!("K +/- 3 = {:.0}-{:.0}", k - 3.0, k + 3.0),
            format!("{:.1}", q.mean),
            (q.mean - k).abs() <= 3.0,
        ));
        checks.push(Check::judged(
            format!("{l} p95 queue{over}"),
            format!("<= K + N + 5 = {:.0}", k + n + 5.0),
            format!("{:.0}", q.p95),
            q.p95 <= k + n + 5.0,
        ));
        if !over.is_empty() {
            checks.push(Check::reported(
                format!("{l} mean / p95 queue found by arrivals"),
                "(reported)",
                format!("{:.1} / {:.0}", o.queue.mean, o.queue.p95),
            ));
        }
        checks.push(Check::reported(
            format!("{l} max queue"),
            format!("Qmax = K + N = {:.0} (theory)", k + n),
            format!("{:.0}", o.queue.max),
        ));
        checks.push(Check::judged(
            format!("{l} utilization"),
            ">= 95%",
            format!("{:.1}%", o.utilization * 100.0),
            o.utilization >= 0.95,
        ));
        checks.push(Check::judged(
            format!("{l} drops"),
            "0",
            o.drops.to_string(),
            o.drops == 0,
        ));
        if tcp_mean > 0.0 {
            checks.push(Check::judged(
                format!("TCP mean queue{over} / {l}'s"),
                ">= 10",
                format!("{:.1}", tcp_mean / q.mean.max(1e-9)),
                tcp_mean >= 10.0 * q.mean,
            ));
        }
    }
    for o in rows.iter().filter(|o| !dctcp_labels.contains(&o.label)) {
        checks.push(Check::judged(
            format!("{} drops", o.label),
            "> 0",
            o.drops.to_string(),
            o.drops > 0,
        ));
    }
    r.checks(checks);
    if rows
        .iter()
        .any(|o| dctcp_labels.contains(&o.label) && o.label.ends_with("@fq_codel"))
    {
        r.text(format!(
            "fq_codel marks at dequeue, by how long a packet waited: the mark leaves at once instead of \
             queueing behind K packets, so the senders hear of the queue one queueing delay sooner and it \
             tops out near K, not K + N. Theory then puts its mean near K - A/2 = {:.1}.",
            k - amp / 2.0
        ));
    }
}

/// The live trace of the traced runs beside the receiver's counts.
fn trace_section(r: &mut Report, outcomes: &[Outcome], dctcp_labels: &[String]) {
    let flows: Vec<(&Outcome, &TraceCheck, &FlowCheck)> = outcomes
        .iter()
        .filter_map(|o| o.trace_check.as_ref().map(|t| (o, t)))
        .flat_map(|(o, t)| t.flows.iter().map(move |f| (o, t, f)))
        .collect();
    if flows.is_empty() {
        return;
    }
    r.heading(2, format!("Live trace of {} (ring buffer, as `loader trace`)", dctcp_labels.join(", ")))
        .text(
            "The sender's stream beside the receiver: F = ECE-echoed / delivered packets summed over the alpha \
             windows; the receiver's CE fraction is counted at its ingress.",
        )
        .table(
            Columns::<(&Outcome, &TraceCheck, &FlowCheck)>::new()
                .col("rate", "", |(o, _, _)| Cell::text(fmt_rate(o.rate_bps)))
                .col("algorithm", "", |(o, _, _)| Cell::text(&o.label))
                .col("flow", "", |(_, _, f)| Cell::int(f.sender))
                .col("events seen / dropped / produced", "", |(_, t, _)| {
                    Cell::text(format!("{} / {} / {}", t.counts.seen, t.counts.dropped, t.counts.produced))
                })
                .col("windows", "", |(_, _, f)| Cell::int(f.windows))
                .col("traced ACKs", "", |(_, _, f)| Cell::int(f.acks))
                .col("alpha, 2nd half", "", |(_, _, f)| Cell::num(f.alpha_late_mean, 3))
                .col("F there", "", |(_, _, f)| Cell::num(f.fraction_marked_late, 3))
                .col("F (sender)", "", |(_, _, f)| Cell::num(f.fraction_marked, 4))
                .col("CE fraction (receiver)", "", |(_, _, f)| {
                    Cell::num(f.receiver_ce_pkts as f64 / f.receiver_pkts.max(1) as f64, 4)
                })
                .col("delivered_ce (sender)", "", |(_, _, f)| Cell::int(f.sender_delivered_ce))
                .col("CE packets (receiver)", "", |(_, _, f)| Cell::int(f.receiver_ce_pkts))
                .table(&flows),
        );
}

/// The plots of a run, each with what it shows.
fn figures(cfg: &QueueConfig, outcomes: &[Outcome]) -> Vec<Figure> {
    let mut f = vec![];
    for &rate in &cfg.rates_bps {
        let tag = rate_tag(rate);
        f.push(Figure::new(
            format!("queue_{tag}.png"),
            format!(
                "The queue at every arrival over {:.2} s at {}",
                excerpt_span_s(rate),
                fmt_rate(rate)
            ),
        ));
        f.push(Figure::new(
            format!("queue_cdf_{tag}.png"),
            format!(
                "The queue's CDF over the measured window at {}",
                fmt_rate(rate)
            ),
        ));
    }
    for o in outcomes {
        let dir = run_dir(o.rate_bps, &o.label);
        if o.trace_check.is_some() {
            f.push(Figure::new(
                format!("{dir}/sawtooth.png"),
                format!(
                    "{} at {}: queue, cwnd and alpha over the same excerpt",
                    o.label,
                    fmt_rate(o.rate_bps)
                ),
            ));
        }
        f.push(Figure::new(
            format!("{dir}/throughput.png"),
            format!(
                "{} at {}: each flow's throughput",
                o.label,
                fmt_rate(o.rate_bps)
            ),
        ));
    }
    f
}

crate::experiments::register!("queue", QueueArgs => QueueConfig);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_note_names_the_most_stolen_run_from_two_percent() {
        let run = |label: &str, steal_share: f64| Outcome {
            label: label.into(),
            rate_bps: 100_000_000,
            steal_share,
            ..Outcome::default()
        };
        let quiet = host_note(&[run("a", 0.0), run("b", 0.019)]);
        assert!(!quiet.contains("hypervisor"), "{quiet}");
        let stolen = host_note(&[run("a", 0.03), run("b", 0.15), run("c", 0.01)]);
        assert!(
            stolen.contains("up to 15% of the lab's CPU (steal, at 100 Mbit/s b)"),
            "{stolen}"
        );
    }

    #[test]
    fn the_default_clamp_grows_with_the_path_and_keeps_its_floor() {
        let us = Duration::from_micros;
        // The seed's pairs: C x RTT + K well under 32 packets.
        assert_eq!(default_rwnd_clamp_pkts(100_000_000, us(500), 20), 64);
        assert_eq!(default_rwnd_clamp_pkts(1_000_000_000, us(100), 20), 64);
        // 10 Gbit/s, 100 us, K = 65: C x RTT is 83.3 packets of 1500 bytes.
        assert_eq!(
            default_rwnd_clamp_pkts(10_000_000_000, us(100), 65),
            2 * (84 + 65)
        );
        assert_eq!(
            default_rwnd_clamp_pkts(100_000_000_000, us(10_000), 65),
            RWND_CLAMP_MAX_PKTS
        );
    }

    fn config(args: &[&str]) -> QueueConfig {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            queue: QueueArgs,
        }
        let argv = std::iter::once("queue").chain(args.iter().copied());
        <Cli as clap::Parser>::try_parse_from(argv)
            .unwrap()
            .queue
            .config()
    }

    /// The defaults pass; each bad value is refused, named, before
    /// anything runs.
    #[test]
    fn refusals_name_what_is_wrong() {
        config(&[]).validate().unwrap();
        config(&["--rwnd-clamp", "2"]).validate().unwrap();
        config(&["--rwnd-clamp", "0"]).validate().unwrap();
        let most = RWND_CLAMP_MAX_PKTS.to_string();
        config(&["--rwnd-clamp", &most]).validate().unwrap();
        let ok = config(&["--quick"]);
        ok.validate().unwrap();
        crate::experiments::assert_each_refused(
            vec![
                (
                    QueueConfig {
                        rates_bps: vec![],
                        ..ok.clone()
                    },
                    "at least one rate",
                ),
                (
                    QueueConfig {
                        flows: 0,
                        ..ok.clone()
                    },
                    "--flows 0 out of range",
                ),
                (
                    QueueConfig {
                        flows: 65,
                        ..ok.clone()
                    },
                    "--flows 65 out of range",
                ),
                (
                    QueueConfig {
                        duration: ok.warmup,
                        ..ok.clone()
                    },
                    "--duration must exceed",
                ),
                (
                    QueueConfig {
                        variants: vec![],
                        ..ok.clone()
                    },
                    "at least one algorithm:backend",
                ),
                (
                    QueueConfig {
                        variants: vec!["cubic".into()],
                        ..ok.clone()
                    },
                    "expected algorithm:backend",
                ),
                (
                    QueueConfig {
                        buffer_pkts: 1,
                        ..ok.clone()
                    },
                    "buffer of 1 packets",
                ),
                (
                    QueueConfig {
                        rwnd_clamp_pkts: Some(1),
                        ..ok.clone()
                    },
                    "--rwnd-clamp 1",
                ),
                (
                    QueueConfig {
                        rwnd_clamp_pkts: Some(RWND_CLAMP_MAX_PKTS + 1),
                        ..ok.clone()
                    },
                    "--rwnd-clamp",
                ),
            ],
            QueueConfig::validate,
        );
        // What the star itself refuses: round trips that fit no sender
        // count, an access link the shaper cannot take.
        let star = |args: &[&str]| format!("{:#}", config(args).validate().unwrap_err());
        let rtts = star(&["--flows", "3", "--rtt", "1ms,2ms"]);
        assert!(rtts.contains("lists 2 round trips for 3 senders"), "{rtts}");
        let access = star(&["--access-rate", "100G"]);
        assert!(access.contains("--access-rate"), "{access}");
        assert_eq!(excerpt_span_s(100_000_000), 1.0);
        assert_eq!(excerpt_span_s(400_000_000), 0.25);
        assert_eq!(excerpt_span_s(10_000_000_000), 0.1);
    }

    /// A run's plan carries the config: the round trip, the access links,
    /// the faults, the trace only when asked, and the window cap only
    /// where the backend marks.
    #[test]
    fn each_run_is_planned_from_the_config() {
        let c = config(&[
            "--rtt",
            "1ms",
            "--access-rate",
            "200M",
            "--loss",
            "0.01",
            "--k",
            "30",
        ]);
        let dctcp = parse_variant("bpf_dctcp:bpf-step").unwrap();
        let s = scenario(&c, 100_000_000, &dctcp, "dl123", Some("dl123"));
        assert_eq!(s.label, "bpf_dctcp@bpf-step");
        assert_eq!(s.round_trip, c.round_trip(100_000_000));
        assert_eq!(s.round_trip.unwrap().rtt.0, vec![Duration::from_millis(1)]);
        assert_eq!(s.access_rate_bps, Some(200_000_000));
        assert_eq!(s.faults.loss, 0.01);
        assert_eq!(s.trace_algorithm.as_deref(), Some("dl123"));
        assert_eq!(
            s.rwnd_clamp_bytes,
            Some(c.rwnd_clamp_at(100_000_000) * SEGMENT_BYTES)
        );
        assert_eq!(s.bottleneck.backend, dctcp.backend.at(30, 100_000_000));
        assert_eq!(s.bottleneck.buffer_pkts, c.buffer_pkts);
        assert!(s.flows.iter().all(|f| f.cc == "dl123") && s.flows.len() == c.flows);
        let cubic = parse_variant("cubic:droptail").unwrap();
        let s = scenario(&c, 100_000_000, &cubic, "cubic", None);
        assert_eq!((s.rwnd_clamp_bytes, s.trace_algorithm), (None, None));
        let unclamped = config(&["--rwnd-clamp", "0"]);
        let s = scenario(&unclamped, 100_000_000, &dctcp, "dl123", None);
        assert_eq!(s.rwnd_clamp_bytes, None);
        // The trace is on unless --no-trace says.
        assert!(c.trace && !config(&["--no-trace"]).trace);
    }

    /// The report prints the figures of the run recorded with the
    /// hand-written summary (`experiments::recorded`).
    #[test]
    fn the_report_prints_the_recorded_runs_figures() {
        use crate::experiments::recorded;
        let cfg = recorded::args::<QueueArgs>("queue").config();
        let outcomes: Vec<Outcome> = recorded::data("queue", "runs.json");
        recorded::assert_same_figures("queue", &report(&cfg, &outcomes), &[]);
    }

    #[test]
    fn each_rate_gets_the_default_clamp_of_its_own_path_unless_one_is_given() {
        // 100 Mbit/s over 500 us and 10 Gbit/s over 100 us (the seed RTTs).
        let c = config(&["--rates", "100M,10G", "--k", "65"]);
        assert_eq!(c.rwnd_clamp_at(100_000_000), 2 * (5 + 65));
        assert_eq!(c.rwnd_clamp_at(10_000_000_000), 2 * (84 + 65));
        // The longest of several round trips sets it.
        let c = config(&["--rates", "10G", "--k", "65", "--rtt", "100us,1ms"]);
        assert_eq!(c.rwnd_clamp_at(10_000_000_000), 2 * (834 + 65));
        let none = config(&["--rwnd-clamp", "0"]);
        assert_eq!(none.rwnd_clamp_at(10_000_000_000), 0);
        assert_eq!(
            config(&["--rwnd-clamp", "90"]).rwnd_clamp_at(100_000_000),
            90
        );
    }
}
