//! `lab convergence` (seed 000, the paper's Fig. 16): one long flow, the
//! other senders joining one by one and then leaving one by one, DCTCP on
//! its step marker against TCP on drop-tail. The paper's finding: DCTCP
//! takes a few round trips longer than TCP to reach the fair share, and
//! varies much less once there.
//!
//! Each flow's rate is the receiver's byte count per interval. After every
//! change of the flows, the convergence time is how long until every
//! active flow stays within a tolerance of the fair share (the link's
//! goodput over the number of flows) for a hold time; over each phase's
//! second half, Jain's index of the flows' mean rates and each flow's
//! coefficient of variation say how evenly and how steadily they share.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};
use tc_qdisc::Bottleneck;

use crate::experiments::{parse_variant, Sweep, Variant, DEFAULT_VARIANTS};
use crate::measure::fairness::{Criterion, Grid};
use crate::measure::scenario::{Outcome, RunData, Scenario};
use crate::measure::theory::{goodput_bps, PAYLOAD_SHARE};
use crate::net::delay::{bdp_pkts, datacenter_rtt, fmt_duration, RoundTrip, RttArgs, RttMeasured};
use crate::net::topology::SEGMENT_BYTES;
use crate::report::plot::{self, Chart, Series};
use crate::report::results::ResultsDir;
use crate::report::model::{Cell, Columns, Figure, Report, Table};
use crate::report::tables::{repairs_line, Repairs};
use crate::stats::{weighted_summary, Summary};
use crate::traffic::cc::Algorithms;
use crate::traffic::schedule::{parse_time, Phase, Schedule};
use crate::units::{fmt_rate, parse_rate, rate_tag};

/// The paper (Fig. 16, 1 Gbit/s, 5 senders): DCTCP converges a few round
/// trips slower than TCP, with much less variability once converged;
/// seed 000 (100 Mbit/s in Mininet) matched it "perfectly".
const PAPER_SAYS: &str = "DCTCP takes a few round trips longer than TCP to reach the fair share, \
     and its rates vary much less once there (paper Fig. 16; seed 000 at 100 Mbit/s: the same)";

/// Convergence and fairness as flows come and go (seed 000, paper Fig. 16).
///
/// One long flow; the other senders (default 4 more) join one every
/// --join (30 s), then leave one every --leave in the order they came,
/// or any --schedule. bpf_dctcp on bpf-step at K against cubic and reno
/// on droptail, at 100 Mbit/s (RTT 500us) and 1 Gbit/s (100us). After
/// each change: the time until every flow stays within --tolerance of
/// the fair share for --hold, per --interval and on --smooth means;
/// over each phase: Jain's index, each flow's coefficient of variation,
/// the queue and drops. The paper: DCTCP converges a few round trips
/// slower, with less variability.
/// Writes results/convergence/<timestamp>/: rates_<rate>.png (the
/// paper's figure), convergence.png, rates.csv, phases.csv, summary.md.
#[derive(Debug, Clone, clap::Args)]
pub struct ConvergenceArgs {
    /// 100 Mbit/s only, 3 senders, a change every 5 s.
    #[arg(long)]
    pub quick: bool,
    /// Bottleneck rates, comma-separated (default 100M,1G; 100M with
    /// --quick).
    #[arg(long, value_delimiter = ',', value_parser = parse_rate)]
    pub rates: Option<Vec<u64>>,
    /// Comparisons as algorithm:backend, as in `lab queue`: bpf_dctcp or
    /// bpf_prague (attached for the run) or a kernel algorithm, on droptail, bpf-step,
    /// bpf-red, or red / fq_codel where the kernel has them (the VM tier:
    /// dctcp:red).
    #[arg(long, value_delimiter = ',', value_parser = parse_variant, default_value = DEFAULT_VARIANTS)]
    pub variants: Vec<Variant>,
    /// Senders (default 5, seed 000's; 3 with --quick; with --schedule,
    /// as many as it has entries).
    #[arg(long)]
    pub senders: Option<usize>,
    /// Time between joins: sender i starts at i x JOIN (default 30s, seed
    /// 000's; 5s with --quick).
    #[arg(long, value_parser = parse_time)]
    pub join: Option<Duration>,
    /// Time between leaves once every sender runs, first come first gone;
    /// sender 0 runs alone for a last LEAVE (default: JOIN).
    #[arg(long, value_parser = parse_time)]
    pub leave: Option<Duration>,
    /// Any schedule instead of --join/--leave: per sender, comma-separated,
    /// its flows as START-STOP spans joined by `+` (seconds, or with s /
    /// ms), e.g. `0-60,10-50,20-30+40-50`. One flow at a time per sender;
    /// some flow must start at 0.
    #[arg(long, value_parser = Schedule::parse)]
    pub schedule: Option<Schedule>,
    /// Marking threshold K, packets (marking backends).
    #[arg(long, default_value_t = 20)]
    pub k: u32,
    /// Bottleneck buffer, packets.
    #[arg(long, default_value_t = 425)]
    pub buffer: u32,
    /// Converged: every flow within this many per cent of the fair share
    /// (the link's goodput over the flows)...
    #[arg(long, default_value_t = 10.0)]
    pub tolerance: f64,
    /// ...in every interval for this long.
    #[arg(long, value_parser = parse_time, default_value = "1s")]
    pub hold: Duration,
    /// Rate-sampling interval (the receiver's byte counts).
    #[arg(long, value_parser = parse_time, default_value = "100ms")]
    pub interval: Duration,
    /// A second convergence time on each flow's mean rate over this long
    /// (the intervals ending at each one, after the change): how long the
    /// sharing takes, apart from the interval-to-interval jitter of a few
    /// packets' windows. A whole number of intervals.
    #[arg(long, value_parser = parse_time, default_value = "1s")]
    pub smooth: Duration,
    #[command(flatten)]
    pub rtt: RttArgs,
    /// Results directory (default results/convergence/<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl ConvergenceArgs {
    pub fn config(&self) -> ConvergenceConfig {
        let q = self.quick;
        let senders = self.senders.unwrap_or(match &self.schedule {
            Some(s) => s.0.len(),
            None if q => 3,
            None => 5,
        });
        let join = self
            .join
            .unwrap_or(Duration::from_secs(if q { 5 } else { 30 }));
        let leave = self.leave.unwrap_or(join);
        ConvergenceConfig {
            rates_bps: self.rates.clone().unwrap_or_else(|| {
                if q {
                    vec![100_000_000]
                } else {
                    vec![100_000_000, 1_000_000_000]
                }
            }),
            variants: self.variants.clone(),
            senders,
            schedule: self
                .schedule
                .clone()
                .unwrap_or_else(|| Schedule::staggered(senders, join, leave)),
            k: self.k,
            buffer_pkts: self.buffer,
            tolerance: self.tolerance / 100.0,
            hold: self.hold,
            interval: self.interval,
            smooth: self.smooth,
            rtt: self.rtt.clone(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ConvergenceConfig {
    pub rates_bps: Vec<u64>,
    pub variants: Vec<Variant>,
    pub senders: usize,
    pub schedule: Schedule,
    pub k: u32,
    pub buffer_pkts: u32,
    /// A fraction of the fair share.
    pub tolerance: f64,
    pub hold: Duration,
    pub interval: Duration,
    pub smooth: Duration,
    pub rtt: RttArgs,
}

/// Senders one lab holds here at the rates of this experiment.
const MAX_SENDERS: usize = 16;

impl ConvergenceConfig {
    pub fn validate(&self) -> Result<()> {
        ensure!(
            !self.rates_bps.is_empty(),
            "--rates: give at least one rate"
        );
        ensure!(!self.variants.is_empty(), "--variants: give at least one");
        let names: Vec<String> = self.variants.iter().map(|v| v.cc.clone()).collect();
        crate::traffic::cc::check_names(&names)?;
        ensure!(
            (1..=MAX_SENDERS).contains(&self.senders),
            "--senders {}: 1 to {MAX_SENDERS}",
            self.senders
        );
        self.schedule.validate(self.senders)?;
        ensure!(
            self.tolerance > 0.0 && self.tolerance < 1.0,
            "--tolerance {}: a percentage above 0 and below 100",
            self.tolerance * 100.0
        );
        ensure!(
            (Duration::from_millis(10)..=Duration::from_secs(1)).contains(&self.interval),
            "--interval {:?}: 10ms to 1s",
            self.interval
        );
        ensure!(
            self.smooth >= self.interval && self.smooth <= Duration::from_secs(10),
            "--smooth {:?}: from one --interval ({:?}) to 10 s",
            self.smooth,
            self.interval
        );
        ensure!(
            self.hold >= self.interval,
            "--hold {:?} is shorter than one --interval ({:?})",
            self.hold,
            self.interval
        );
        for p in self.schedule.phases() {
            ensure!(
                p.len() > self.hold + self.smooth,
                "the phase from {:?} to {:?} is not longer than --hold {:?} and --smooth {:?}: nothing could \
                 converge in it",
                p.start,
                p.end,
                self.hold,
                self.smooth
            );
        }
        if let Some(rt) = &self.rtt.rtt {
            rt.validate(self.senders)?;
        }
        for &rate in &self.rates_bps {
            for v in &self.variants {
                self.bottleneck(v, rate).validate()?;
            }
        }
        Ok(())
    }

    /// `--smooth` in intervals.
    fn smooth_intervals(&self) -> usize {
        (self.smooth.as_secs_f64() / self.interval.as_secs_f64())
            .round()
            .max(1.0) as usize
    }

    fn bottleneck(&self, v: &Variant, rate_bps: u64) -> Bottleneck {
        Bottleneck {
            rate_bps,
            buffer_pkts: self.buffer_pkts,
            backend: v.backend.at(self.k, rate_bps),
        }
    }

    fn round_trip(&self, rate_bps: u64) -> Option<RoundTrip> {
        self.rtt.or(Some(datacenter_rtt(rate_bps)))
    }

    /// Each receiver's window cap on a marking backend, packets: half as
    /// much again as one flow alone needs at the longest round trip
    /// (C x RTT + K + 1), at least 16. A window the known issue (README)
    /// corrupts bursts at most this into the queue; what a receiver
    /// advertises is never under 65535 bytes (45 packets), so at the
    /// defaults five flows' bursts, 225 packets, fit the buffer of 425.
    fn window_cap(&self, rate_bps: u64) -> u32 {
        let rtt = self
            .round_trip(rate_bps)
            .and_then(|rt| rt.rtt.0.iter().max().copied())
            .unwrap_or_default();
        let alone = bdp_pkts(rate_bps, rtt) + f64::from(self.k) + 1.0;
        crate::measure::scenario::window_cap_pkts(alone, 1.5, 16)
    }
}

/// One phase of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseResult {
    pub start_s: f64,
    pub end_s: f64,
    pub change: String,
    pub flows: usize,
    /// Seconds from the change until the flows settled (None: never, in
    /// this phase), per interval and on `--smooth` means.
    pub convergence_s: Option<f64>,
    pub smoothed_s: Option<f64>,
    /// Over the phase's second half.
    pub jain: f64,
    pub cov: f64,
    /// The flows' goodput over the link's (payload of full segments).
    pub goodput_share: f64,
    /// Over the whole phase, from the queue over time.
    pub queue_mean: f64,
    pub queue_p95: f64,
    /// Data packets dropped.
    pub drops: u64,
}

impl PhaseResult {
    /// The convergence time per interval, or on the smoothed rates.
    pub fn time(&self, smoothed: bool) -> Option<f64> {
        if smoothed {
            self.smoothed_s
        } else {
            self.convergence_s
        }
    }

    /// The same, a change that never converged counting as the phase's
    /// length.
    pub fn time_or_length(&self, smoothed: bool) -> f64 {
        self.time(smoothed).unwrap_or(self.end_s - self.start_s)
    }
}

/// One algorithm at one rate through the whole schedule.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConvRun {
    pub rate_bps: u64,
    pub variant: String,
    pub is_dctcp: bool,
    pub phases: Vec<PhaseResult>,
    /// Per flow: the receiver's first byte less the flow's start, and its
    /// last byte less the flow's stop (flows that stop before the end).
    pub start_lag_s: Vec<Option<f64>>,
    pub stop_lag_s: Vec<Option<f64>>,
    /// Data packets dropped (the phases' sum).
    pub drops: u64,
    /// Every packet the switch dropped, the aborted flows' resets with them.
    pub all_drops: u64,
    pub guard_repairs: Repairs,
    /// Share of the lab's CPU the hypervisor took over the run (Outcome).
    pub steal_share: f64,
    pub rtt: RttMeasured,
    /// Each flow's rate per interval, Mbit/s, and when each interval ended.
    pub rates_mbps: Vec<Vec<f64>>,
    pub ends_s: Vec<f64>,
}

impl ConvRun {
    /// The changes after the start: joins and leaves.
    pub fn changes(&self) -> impl Iterator<Item = &PhaseResult> {
        self.phases.iter().filter(|p| p.start_s > 0.0)
    }

    /// Median convergence time over the changes, counting one that never
    /// converged as its phase's length.
    pub fn median_convergence(&self, smoothed: bool) -> Option<f64> {
        let mut t: Vec<f64> = self.changes().map(|p| p.time_or_length(smoothed)).collect();
        t.sort_by(f64::total_cmp);
        (!t.is_empty()).then(|| t[(t.len() - 1) / 2])
    }

    /// Mean coefficient of variation over the phases of two or more flows.
    pub fn mean_cov(&self) -> f64 {
        crate::stats::mean(
            &self
                .phases
                .iter()
                .filter(|p| p.flows >= 2)
                .map(|p| p.cov)
                .collect::<Vec<_>>(),
        )
    }

    /// Changes after which the flows never settled.
    pub fn unconverged(&self, smoothed: bool) -> usize {
        self.changes()
            .filter(|p| p.time(smoothed).is_none())
            .count()
    }
}

/// Arrivals at least this long (on the wire) carry data: the resets of
/// flows aborted at their stop (54 bytes, not ECN-capable, so a marker
/// drops them above K) do not count as drops.
const DATA_BYTES: u32 = 100;

/// Each flow's rate (bit/s) per interval, and when the intervals ended.
fn flow_rates(o: &Outcome) -> (Vec<f64>, Vec<Vec<f64>>) {
    let ends = o
        .flows
        .first()
        .map(|f| f.series_end_s.clone())
        .unwrap_or_default();
    let rates = o
        .flows
        .iter()
        .map(|f| {
            f.series
                .iter()
                .enumerate()
                .map(|(j, &b)| {
                    let begin = j.checked_sub(1).map_or(0.0, |i| ends[i]);
                    b as f64 * 8.0 / (ends[j] - begin).max(1e-6)
                })
                .collect()
        })
        .collect();
    (ends, rates)
}

/// The switch's records between two times of the schedule. Its clock
/// starts at the first tick (`t0` seconds into the run), which opened the
/// measurement window at `window_start_ns` on the probes' clock.
struct SwitchRecord<'a> {
    data: &'a RunData,
    t0: f64,
}

impl SwitchRecord<'_> {
    /// The queue over time between `from` and `until`.
    fn queue(&self, from: f64, until: f64) -> Summary {
        let mut t = self.t0;
        let mut pairs = Vec::new();
        for &(q, held) in &self.data.queue_steps {
            let (a, b) = (t.max(from), (t + held).min(until));
            if b > a {
                pairs.push((f64::from(q), b - a));
            }
            t += held;
            if t >= until {
                break;
            }
        }
        weighted_summary(&pairs)
    }

    /// Data packets dropped between `from` and `until`: by a marker, or
    /// at a full queue as the probe foresaw it.
    fn drops(&self, from: f64, until: f64) -> u64 {
        let ns = |t: f64| self.data.window_start_ns as f64 + (t - self.t0) * 1e9;
        let window = ns(from)..ns(until);
        self.data
            .samples
            .iter()
            .filter(|s| window.contains(&(s.ts_ns as f64)) && s.action >= 2 && s.len >= DATA_BYTES)
            .count() as u64
    }
}

fn measure(
    cfg: &ConvergenceConfig,
    v: &Variant,
    rate_bps: u64,
    phases: &[Phase],
    data: &RunData,
) -> ConvRun {
    let o = &data.outcome;
    let (ends, rates) = flow_rates(o);
    let grid = Grid {
        ends: &ends,
        rates: &rates,
    };
    let link = goodput_bps(rate_bps);
    let criterion = |smooth| Criterion {
        tolerance: cfg.tolerance,
        hold: cfg.hold.as_secs_f64(),
        smooth,
    };
    let switch = SwitchRecord {
        data,
        t0: ends.first().copied().unwrap_or(0.0),
    };
    let phases: Vec<PhaseResult> = phases
        .iter()
        .map(|p| {
            let (from, until) = (p.start.as_secs_f64(), p.end.as_secs_f64());
            let n = p.active.len();
            let fair = link / n as f64;
            let steady = grid.within((from + until) / 2.0, until);
            let q = switch.queue(from, until);
            PhaseResult {
                start_s: from,
                end_s: until,
                change: p.change(),
                flows: n,
                convergence_s: grid.convergence_time(&p.active, fair, (from, until), criterion(1)),
                smoothed_s: grid.convergence_time(
                    &p.active,
                    fair,
                    (from, until),
                    criterion(cfg.smooth_intervals()),
                ),
                jain: grid.jain(&p.active, steady.clone()),
                cov: grid.cov(&p.active, steady.clone()),
                goodput_share: grid.total(steady) / link,
                queue_mean: q.mean,
                queue_p95: q.p95,
                drops: switch.drops(from, until),
            }
        })
        .collect();
    let data_drops = phases.iter().map(|p| p.drops).sum();
    let specs = cfg.schedule.flows("");
    // A flow that joins a standing queue never sees the base round trip:
    // only those that start with the run say what the path's RTT was.
    let mut rtt = o.rtt.clone();
    rtt.flows = rtt
        .flows
        .into_iter()
        .zip(&specs)
        .filter(|(_, s)| s.start.is_zero())
        .map(|(f, _)| f)
        .collect();
    ConvRun {
        rate_bps,
        variant: v.label(),
        is_dctcp: v.is_dctcp(),
        phases,
        start_lag_s: o
            .flows
            .iter()
            .zip(&specs)
            .map(|(f, s)| f.first_byte_s.map(|t| t - s.start.as_secs_f64()))
            .collect(),
        stop_lag_s: o
            .flows
            .iter()
            .zip(&specs)
            .map(|(f, s)| Some(f.last_byte_s? - s.stop?.as_secs_f64()))
            .collect(),
        drops: data_drops,
        all_drops: o.drops,
        guard_repairs: o.guard_repairs,
        steal_share: o.steal_share,
        rtt,
        rates_mbps: rates
            .iter()
            .map(|r| r.iter().map(|v| v / 1e6).collect())
            .collect(),
        ends_s: ends,
    }
}

/// One run: `v` at `rate`, the schedule's flows on `cc` (the attached
/// instance's name for ours), each from its start to its stop, the rates
/// read every interval, the receivers' windows capped where `v` marks.
fn scenario(cfg: &ConvergenceConfig, v: &Variant, rate: u64, cc: &str) -> Scenario {
    Scenario {
        flows: cfg.schedule.flows(cc),
        round_trip: cfg.round_trip(rate),
        interval: cfg.interval,
        rwnd_clamp_bytes: v.marks().then(|| cfg.window_cap(rate) * SEGMENT_BYTES),
        ..Scenario::long_flows(
            &v.label(),
            cfg.bottleneck(v, rate),
            0,
            cc,
            cfg.schedule.end(),
            Duration::ZERO,
        )
    }
}

fn run(cfg: &ConvergenceConfig, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<Report> {
    let names: Vec<String> = cfg.variants.iter().map(|v| v.cc.clone()).collect();
    let algorithms = Algorithms::attach(&names)?;
    let phases = cfg.schedule.phases();
    let mut sweep = Sweep::new(cfg.rates_bps.len() * cfg.variants.len(), stop);
    let mut runs = Vec::new();
    for &rate in &cfg.rates_bps {
        for v in &cfg.variants {
            let scn = scenario(cfg, v, rate, &algorithms.cc(&v.cc));
            let what = format!("{} at {}", v.label(), fmt_rate(rate));
            let data = sweep.run(&scn, algorithms.ours(&v.cc), &what)?;
            let r = measure(cfg, v, rate, &phases, &data);
            sweep.said(&line(&r), &data.outcome);
            runs.push(r);
        }
    }
    write_csv(out, &runs)?;
    plot_rates(out, cfg, &runs)?;
    plot_convergence(out, cfg, &runs)?;
    out.write_json("runs.json", &runs)?;
    Ok(report(cfg, &runs))
}

fn secs(v: Option<f64>) -> String {
    v.map_or("never".into(), |t| format!("{t:.1} s"))
}

fn line(r: &ConvRun) -> String {
    format!(
        "{} at {}: convergence {} per interval, {} on means (median over {} changes, never {} / {}), CoV {:.3} with \
         2+ flows, drops {}",
        r.variant,
        fmt_rate(r.rate_bps),
        secs(r.median_convergence(false)),
        secs(r.median_convergence(true)),
        r.changes().count(),
        r.unconverged(false),
        r.unconverged(true),
        r.mean_cov(),
        r.drops
    )
}

fn write_csv(out: &ResultsDir, runs: &[ConvRun]) -> Result<()> {
    let mut w = out.csv("rates.csv", "rate_bps,variant,flow,t_end_s,mbps")?;
    for r in runs {
        for (f, rates) in r.rates_mbps.iter().enumerate() {
            for (t, v) in r.ends_s.iter().zip(rates) {
                writeln!(w, "{},{},{f},{t:.3},{v:.3}", r.rate_bps, r.variant)?;
            }
        }
    }
    drop(w);
    let phases: Vec<(&ConvRun, &PhaseResult)> = runs
        .iter()
        .flat_map(|r| r.phases.iter().map(move |p| (r, p)))
        .collect();
    out.csv_rows(
        "phases.csv",
        &phases,
        &[
            ("rate_bps", |(r, _)| r.rate_bps.to_string()),
            ("variant", |(r, _)| r.variant.to_string()),
            ("start_s", |(_, p)| format!("{:.3}", p.start_s)),
            ("end_s", |(_, p)| format!("{:.3}", p.end_s)),
            ("change", |(_, p)| p.change.to_string()),
            ("flows", |(_, p)| p.flows.to_string()),
            ("convergence_s", |(_, p)| seconds(p.convergence_s)),
            ("smoothed_s", |(_, p)| seconds(p.smoothed_s)),
            ("jain", |(_, p)| format!("{:.4}", p.jain)),
            ("cov", |(_, p)| format!("{:.4}", p.cov)),
            ("goodput_share", |(_, p)| format!("{:.4}", p.goodput_share)),
            ("queue_mean", |(_, p)| format!("{:.2}", p.queue_mean)),
            ("queue_p95", |(_, p)| format!("{:.2}", p.queue_p95)),
            ("drops", |(_, p)| p.drops.to_string()),
        ],
    )
}

fn seconds(t: Option<f64>) -> String {
    t.map_or(String::new(), |t| format!("{t:.3}"))
}

/// The paper's figure: per algorithm, each flow's rate over time, the
/// changes drawn across.
fn plot_rates(out: &ResultsDir, cfg: &ConvergenceConfig, runs: &[ConvRun]) -> Result<()> {
    for &rate in &cfg.rates_bps {
        let mine: Vec<&ConvRun> = runs.iter().filter(|r| r.rate_bps == rate).collect();
        let titles: Vec<String> = mine
            .iter()
            .map(|r| format!("{} at {}: each flow's rate", r.variant, fmt_rate(rate)))
            .collect();
        let charts: Vec<Chart> = mine
            .iter()
            .zip(&titles)
            .map(|(r, title)| {
                let series = r
                    .rates_mbps
                    .iter()
                    .enumerate()
                    .map(|(f, v)| Series {
                        name: format!("flow {f}"),
                        points: r.ends_s.iter().copied().zip(v.iter().copied()).collect(),
                    })
                    .collect();
                r.changes().fold(
                    Chart::new(title, "time (s)", "Mbit/s", series).y_max(rate as f64 / 1e6 * 1.1),
                    |c, p| c.vline(p.start_s),
                )
            })
            .collect();
        plot::draw_stack(&out.file(&format!("rates_{}.png", rate_tag(rate))), &charts)?;
    }
    Ok(())
}

/// Convergence time after each change, every algorithm side by side.
fn plot_convergence(out: &ResultsDir, cfg: &ConvergenceConfig, runs: &[ConvRun]) -> Result<()> {
    let panels: Vec<(u64, bool)> = cfg
        .rates_bps
        .iter()
        .flat_map(|&rate| [(rate, true), (rate, false)])
        .collect();
    let titles: Vec<String> = panels
        .iter()
        .map(|&(rate, smoothed)| {
            format!(
                "{}: to within {:.0} % of fair for {}, {} (never: phase length)",
                fmt_rate(rate),
                cfg.tolerance * 100.0,
                fmt_duration(cfg.hold),
                if smoothed {
                    format!("{} means", fmt_duration(cfg.smooth))
                } else {
                    "per interval".to_string()
                }
            )
        })
        .collect();
    let charts: Vec<Chart> = panels
        .iter()
        .zip(&titles)
        .map(|(&(rate, smoothed), title)| {
            let mine: Vec<&ConvRun> = runs.iter().filter(|r| r.rate_bps == rate).collect();
            // Side by side: each algorithm's markers a little apart.
            let gap = 0.04 * mine.first().map_or(1.0, |r| r.phases[0].end_s);
            let series = mine
                .iter()
                .enumerate()
                .map(|(i, r)| Series {
                    name: r.variant.clone(),
                    points: r
                        .changes()
                        .map(|p| {
                            let x = p.start_s + gap * (i as f64 - (mine.len() - 1) as f64 / 2.0);
                            (x, p.time_or_length(smoothed))
                        })
                        .collect(),
                })
                .collect();
            Chart::new(title, "change at (s)", "convergence time (s)", series).points()
        })
        .collect();
    plot::draw_stack(&out.file("convergence.png"), &charts)
}

/// Each algorithm's convergence, variation and drops over the schedule;
/// with the rate first where the rows are every rate's (runs.csv).
fn algorithm_columns<'a>(with_rate: bool) -> Columns<'a, ConvRun> {
    Columns::<ConvRun>::new()
        .col_if(with_rate, "rate", "", |r| Cell::text(fmt_rate(r.rate_bps)))
        .col("algorithm", "", |r| Cell::text(&r.variant))
        .col("median convergence: per interval / on means", "", |r| {
            Cell::text(format!("{} / {}", secs(r.median_convergence(false)), secs(r.median_convergence(true))))
        })
        .col("never: per interval / on means", "", |r| {
            Cell::text(format!(
                "{} / {} of {}",
                r.unconverged(false),
                r.unconverged(true),
                r.changes().count()
            ))
        })
        .col("mean CoV (2+ flows)", "", |r| Cell::num(r.mean_cov(), 3))
        .col("min Jain", "", |r| {
            let min = r
                .phases
                .iter()
                .filter(|p| p.flows >= 2)
                .map(|p| p.jain)
                .fold(f64::INFINITY, f64::min);
            Cell::num(min, 3)
        })
        .col("drops: data (probe) / all (qdisc, marker)", "", |r| {
            Cell::text(format!("{} / {}", r.drops, r.all_drops))
        })
}

/// Each phase of each algorithm at one rate, phase by phase.
fn phases_table(cfg: &ConvergenceConfig, runs: &[&ConvRun]) -> Table {
    let phases = cfg.schedule.phases();
    let rows: Vec<(&crate::traffic::schedule::Phase, &ConvRun, &PhaseResult)> = phases
        .iter()
        .enumerate()
        .flat_map(|(i, p)| runs.iter().map(move |r| (p, *r, &r.phases[i])))
        .collect();
    // Bound before it is returned: the columns borrow from `phases` and go
    // first (a tail expression's temporaries would outlive it).
    let table = Columns::<(&crate::traffic::schedule::Phase, &ConvRun, &PhaseResult)>::new()
        .col("phase", "", |(p, _, ph)| Cell::text(format!("{:.0} s: {}", p.start.as_secs_f64(), ph.change)))
        .col("algorithm", "", |(_, r, _)| Cell::text(&r.variant))
        .col("convergence: per interval / on means", "", |(p, _, ph)| {
            if p.start.is_zero() {
                Cell::Missing
            } else {
                Cell::text(format!("{} / {}", secs(ph.convergence_s), secs(ph.smoothed_s)))
            }
        })
        .col("Jain", "", |(_, _, ph)| Cell::num(ph.jain, 3))
        .col("CoV", "", |(_, _, ph)| Cell::num(ph.cov, 3))
        .col("goodput / link", "", |(_, _, ph)| Cell::pct(ph.goodput_share, 1))
        .col("queue mean", "packets", |(_, _, ph)| Cell::num(ph.queue_mean, 1))
        .col("queue p95", "packets", |(_, _, ph)| Cell::num(ph.queue_p95, 0))
        .col("drops", "", |(_, _, ph)| Cell::int(ph.drops))
        .table(&rows);
    table
}

/// When each run's flows were seen to start and stop at the receiver.
fn lags_table(runs: &[ConvRun]) -> Table {
    let range = |v: &[Option<f64>]| {
        let v: Vec<f64> = v.iter().flatten().map(|t| t * 1e3).collect();
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
        if v.is_empty() {
            Cell::Missing
        } else {
            Cell::text(format!("{lo:.0} to {hi:.0}"))
        }
    };
    Columns::<ConvRun>::new()
        .col("run", "", |r| Cell::text(format!("{} at {}", r.variant, fmt_rate(r.rate_bps))))
        .col("first byte after start", "ms", move |r| range(&r.start_lag_s))
        .col("last byte after stop", "ms", move |r| range(&r.stop_lag_s))
        .table(runs)
}

fn report(cfg: &ConvergenceConfig, runs: &[ConvRun]) -> Report {
    let phases = cfg.schedule.phases();
    let mut r = Report::new("Convergence as flows come and go (seed 000, paper Fig. 16)");
    r.text(format!(
        "{} senders; {} phases over {:.0} s. Each flow's rate: the receiver's bytes per {} interval. \
         Converged: every active flow within {:.0} % of the fair share (the link's goodput, {:.1} % of its rate \
         for full segments, over the number of flows) in every interval for {}; \"never\" when that did not \
         happen before the next change. The same on each flow's mean rate over the {} before each interval's end \
         (\"on means\"; the time runs to where the first fitting mean's {} begins): the interval-to-interval \
         jitter of windows a few packets wide (a one-packet change is 10-20 % of a flow's rate here) keeps \
         flows out of a 10 % band per interval long after they share the link evenly. Jain's index (of the flows' mean rates) and CoV (each flow's standard \
         deviation over its mean, averaged over the flows) over each phase's second half; the queue (over time) \
         and drops over the whole phase. Drops per phase are the queue probe's count of data packets: a marker's \
         drops exactly, tail drops as the probe foresees them from the queue it reads (a few per cent over the \
         qdisc's own count, which the algorithm table gives beside them for the whole run); a flow that stops \
         aborts its connection, and its resets, not ECN-capable, are dropped by a marker above K but are not \
         data. Marking runs at K = {}, buffer {} packets.",
        cfg.senders,
        phases.len(),
        cfg.schedule.end().as_secs_f64(),
        fmt_duration(cfg.interval),
        cfg.tolerance * 100.0,
        100.0 * PAYLOAD_SHARE,
        fmt_duration(cfg.hold),
        fmt_duration(cfg.smooth),
        fmt_duration(cfg.smooth),
        cfg.k,
        cfg.buffer_pkts
    ))
    .markdown(crate::net::delay::summary_lines(
        runs.iter().map(|r| (format!("{} at {}", r.variant, fmt_rate(r.rate_bps)), &r.rtt)),
    ));
    r.runs = Some(algorithm_columns(true).table(runs));
    for &rate in &cfg.rates_bps {
        let mine: Vec<&ConvRun> = runs.iter().filter(|r| r.rate_bps == rate).collect();
        r.heading(2, fmt_rate(rate))
            .table(algorithm_columns(false).table(mine.iter().copied()))
            .table(phases_table(cfg, &mine));
    }
    r.heading(2, "Beside the paper").text(format!("The paper: {PAPER_SAYS}."));
    let verdicts: String = cfg
        .rates_bps
        .iter()
        .flat_map(|&rate| {
            let mine: Vec<&ConvRun> = runs.iter().filter(|r| r.rate_bps == rate).collect();
            verdicts(rate, &mine)
        })
        .map(|v| format!("- {v}\n"))
        .collect();
    r.markdown(verdicts)
        .text(
            "The schedule as the receiver saw it (first byte less the flow's start; last byte less its stop: \
             the stopping sender aborts its connection, and what the queue held still arrives, so a deep queue \
             adds its drain, and a joining flow's handshake and first data wait in the queue it joins). The round \
             trip above is that of the flows that start with the run: those that join later find a queue.",
        )
        .table(lags_table(runs))
        .text(repairs_line(runs.iter().map(|r| {
            (format!("{} at {}", r.variant, fmt_rate(r.rate_bps)), r.guard_repairs)
        })))
        .heading(2, "Plots");
    let mut figs: Vec<Figure> = cfg
        .rates_bps
        .iter()
        .map(|&rate| {
            Figure::new(
                format!("rates_{}.png", rate_tag(rate)),
                format!("Each flow's rate at {}, one chart per algorithm, the changes drawn across", fmt_rate(rate)),
            )
        })
        .collect();
    figs.push(Figure::new(
        "convergence.png",
        "Time to converge after each change, the algorithms side by side",
    ));
    r.figures(figs)
        .text("Raw: `runs.csv` (the algorithms' table, every rate), `rates.csv`, `phases.csv`, `runs.json`.");
    r
}

/// Whether each DCTCP converged slower and varied less than the TCPs at
/// `rate`, a sentence each.
fn verdicts(rate: u64, runs: &[&ConvRun]) -> Vec<String> {
    let (dctcp, tcp): (Vec<&ConvRun>, Vec<&ConvRun>) = runs.iter().partition(|r| r.is_dctcp);
    if dctcp.is_empty() || tcp.is_empty() {
        return vec![format!(
            "{}: no DCTCP and TCP runs to compare.",
            fmt_rate(rate)
        )];
    }
    dctcp.iter().map(|d| verdict(rate, d, &tcp)).collect()
}

fn verdict(rate: u64, d: &ConvRun, tcp: &[&ConvRun]) -> String {
    let others = |f: &dyn Fn(&ConvRun) -> String| -> String {
        tcp.iter()
            .map(|r| format!("{} {}", r.variant, f(r)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // On means: how long the sharing takes.
    let med = |r: &ConvRun| r.median_convergence(true).unwrap_or(f64::NAN);
    let pace = if tcp.iter().all(|r| med(d) > med(r)) {
        "slower than every TCP, as the paper says"
    } else if tcp.iter().all(|r| med(d) < med(r)) {
        "faster than every TCP, unlike the paper"
    } else {
        "neither slower nor faster than every TCP"
    };
    let steadier = tcp.iter().all(|r| d.mean_cov() < r.mean_cov());
    format!(
        "{}: {} converged on means in {} (median over the changes; {} never), against {}: {}. Its mean CoV {:.3} \
         against {}: {}.",
        fmt_rate(rate),
        d.variant,
        secs(d.median_convergence(true)),
        d.unconverged(true),
        others(&|r| format!("{} ({} never)", secs(r.median_convergence(true)), r.unconverged(true))),
        pace,
        d.mean_cov(),
        others(&|r| format!("{:.3}", r.mean_cov())),
        if steadier { "steadier, as the paper says" } else { "not steadier than every TCP, unlike the paper" },
    )
}

crate::experiments::register!("convergence", ConvergenceArgs => ConvergenceConfig);

#[cfg(test)]
mod tests {
    use super::*;

    /// The report prints the figures of the run recorded with the
    /// hand-written summary (`experiments::recorded`).
    #[test]
    fn the_report_prints_the_recorded_runs_figures() {
        use crate::experiments::recorded;
        let cfg = recorded::args::<ConvergenceArgs>("convergence").config();
        let runs: Vec<ConvRun> = recorded::data("convergence", "runs.json");
        recorded::assert_same_figures("convergence", &report(&cfg, &runs), &[]);
    }
    use crate::net::delay::FlowRtt;
    use crate::traffic::bulk::FlowResult;
    use tc_qdisc::intf::queue_sample;

    fn args() -> ConvergenceArgs {
        ConvergenceArgs {
            quick: false,
            rates: None,
            variants: DEFAULT_VARIANTS
                .split(',')
                .map(|v| parse_variant(v).unwrap())
                .collect(),
            senders: None,
            join: None,
            leave: None,
            schedule: None,
            k: 20,
            buffer: 425,
            tolerance: 10.0,
            hold: Duration::from_secs(1),
            interval: Duration::from_millis(100),
            smooth: Duration::from_secs(1),
            rtt: RttArgs::default(),
            out: None,
        }
    }

    #[test]
    fn defaults_follow_the_seed() {
        let cfg = args().config();
        cfg.validate().unwrap();
        assert_eq!(cfg.senders, 5);
        assert_eq!(cfg.schedule.end(), Duration::from_secs(270));
        assert_eq!(cfg.schedule.phases().len(), 9);
        let quick = ConvergenceArgs {
            quick: true,
            ..args()
        }
        .config();
        quick.validate().unwrap();
        assert_eq!(quick.schedule.end(), Duration::from_secs(25));
    }

    /// Without --rtt, the data center's round trip of each rate; each
    /// receiver's cap half as much again as one flow alone needs there
    /// (its BDP, K and one packet), at least 16.
    #[test]
    fn a_run_is_planned_from_the_schedule_and_the_variant() {
        let cfg = ConvergenceArgs {
            schedule: Some(Schedule::parse("0-9,3-6").unwrap()),
            senders: Some(2),
            interval: Duration::from_millis(50),
            ..args()
        }
        .config();
        let dctcp = parse_variant("bpf_dctcp:bpf-step").unwrap();
        let s = scenario(&cfg, &dctcp, 100_000_000, "dl1");
        assert_eq!(format!("{:?}", s.flows), format!("{:?}", cfg.schedule.flows("dl1")));
        assert_eq!(s.flows.len(), 2);
        assert_eq!(s.round_trip, cfg.round_trip(100_000_000));
        assert!(s.round_trip.is_some());
        assert_eq!(s.interval, cfg.interval);
        assert_ne!(s.interval, Duration::from_millis(100), "the default would hide it");
        assert_eq!(s.rwnd_clamp_bytes, Some(38 * SEGMENT_BYTES));
        assert_eq!((s.duration, s.warmup), (cfg.schedule.end(), Duration::ZERO));
        let cubic = parse_variant("cubic:droptail").unwrap();
        assert_eq!(scenario(&cfg, &cubic, 100_000_000, "cubic").rwnd_clamp_bytes, None);
    }

    #[test]
    fn each_rate_gets_its_round_trip_and_window_cap() {
        let cfg = args().config();
        let rt = cfg.round_trip(100_000_000).unwrap();
        assert_eq!(rt.rtt.0.iter().max(), Some(&Duration::from_micros(500)));
        // 100 Mbit/s over 500 us: 1.5 x (4.17 + 20 + 1) = 37.75.
        assert_eq!(cfg.window_cap(100_000_000), 38);
        // 1 Gbit/s over 100 us: 1.5 x (8.33 + 20 + 1) = 44.0.
        assert_eq!(cfg.window_cap(1_000_000_000), 44);
        // 1 Mbit/s: 1.5 x (0.04 + 20 + 1) = 31.6; with K = 1, 3.06: the floor.
        assert_eq!(cfg.window_cap(1_000_000), 32);
        let small = ConvergenceArgs { k: 1, ..args() }.config();
        assert_eq!(small.window_cap(1_000_000), 16);
    }

    /// Two flows through a made-up run of 9 s in 100 ms intervals: sender
    /// 0 alone, sender 1 from 3 s to 6 s. After the join both are off the
    /// fair share for 0.5 s, after the leave sender 0 for 0.3 s (or never);
    /// the queue is 10 then 20, 30 and 5 packets in the three phases; the
    /// switch drops four data packets and a reset in the second (one just
    /// after its start), one in the third.
    fn made_up_run(leave_settles: bool) -> (ConvergenceConfig, RunData) {
        let cfg = ConvergenceArgs {
            schedule: Some(Schedule::parse("0-9,3-6").unwrap()),
            senders: Some(2),
            rates: Some(vec![100_000_000]),
            ..args()
        }
        .config();
        cfg.validate().unwrap();
        let link = goodput_bps(100_000_000);
        let (dt, n) = (0.1, 90);
        let ends: Vec<f64> = (1..=n).map(|j| j as f64 * dt).collect();
        // Each flow's share of the link in the interval that begins at t.
        let share = |sender: usize, t: f64| -> f64 {
            match (sender, t) {
                (0, t) if t < 2.95 => 1.0,
                (1, t) if t < 2.95 => 0.0,
                (0, t) if t < 3.45 => 0.8,
                (1, t) if t < 3.45 => 0.2,
                (_, t) if t < 5.95 => 0.5,
                (1, _) => 0.0,
                (0, t) if t < 6.25 || !leave_settles => 0.5,
                _ => 1.0,
            }
        };
        let mut data = RunData::default();
        for (sender, first, last) in [(0, 0.01, 9.0), (1, 3.02, 6.05)] {
            let series = (0..n)
                .map(|j| (share(sender, j as f64 * dt) * link * dt / 8.0).round() as u64)
                .collect();
            data.outcome.flows.push(FlowResult {
                sender,
                series,
                series_end_s: ends.clone(),
                first_byte_s: Some(first),
                last_byte_s: Some(last),
                ..Default::default()
            });
            data.outcome.rtt.flows.push(FlowRtt {
                sender,
                configured_us: None,
                min_rtt_us: 100 + sender as u32,
            });
        }
        data.outcome.drops = 7;
        // The switch's clock starts at the end of the first interval.
        data.queue_steps = vec![(10, 2.4), (20, 0.5), (30, 3.0), (5, 3.0)];
        data.window_start_ns = 1_000_000_000;
        let at = |t: f64, action: u8, len: u32| queue_sample {
            ts_ns: 1_000_000_000 + ((t - 0.1) * 1e9) as u64,
            action,
            len,
            ..Default::default()
        };
        data.samples = vec![
            at(1.0, 1, 1514),
            at(3.1, 2, 1514),
            at(3.5, 2, 1514),
            at(4.0, 3, 1514),
            at(4.5, 2, 1514),
            at(5.0, 2, 54),
            at(7.0, 2, 1514),
        ];
        (cfg, data)
    }

    #[test]
    fn measure_reads_each_phase_from_the_flows_and_the_switch() {
        let (cfg, data) = made_up_run(true);
        let v = &cfg.variants[0];
        let r = measure(&cfg, v, 100_000_000, &cfg.schedule.phases(), &data);
        assert_eq!((r.variant.clone(), r.is_dctcp), (v.label(), v.is_dctcp()));
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        let p = &r.phases;
        assert_eq!(p.len(), 3);
        assert_eq!(p.iter().map(|p| p.flows).collect::<Vec<_>>(), [1, 2, 1]);
        assert_eq!((p[1].start_s, p[1].end_s), (3.0, 6.0));
        // Settled 0.5 s after the join; on 1 s means, from the window that
        // takes in one unsettled interval (0.8 and 0.2 with nine at 0.5).
        assert!(close(p[1].convergence_s.unwrap(), 0.5), "{:?}", p[1]);
        assert!(close(p[1].smoothed_s.unwrap(), 0.4), "{:?}", p[1]);
        assert!(close(p[2].convergence_s.unwrap(), 0.3), "{:?}", p[2]);
        assert!(close(p[1].jain, 1.0) && close(p[1].cov, 0.0), "{:?}", p[1]);
        for ph in p {
            assert!(close(ph.goodput_share, 1.0), "{ph:?}");
        }
        let queues: Vec<f64> = p.iter().map(|p| p.queue_mean).collect();
        // 10 for 2.4 s and 20 for 0.5 s: the first phase's 2.9 s on the
        // switch's clock.
        assert!(
            close(queues[0], 34.0 / 2.9) && close(queues[1], 30.0) && close(queues[2], 5.0),
            "{queues:?}"
        );
        // A mark is no drop, nor is a reset's 54 bytes.
        assert_eq!(p.iter().map(|p| p.drops).collect::<Vec<_>>(), [0, 4, 1]);
        assert_eq!((r.drops, r.all_drops), (5, 7));
        assert!(close(r.start_lag_s[0].unwrap(), 0.01) && close(r.start_lag_s[1].unwrap(), 0.02));
        assert_eq!(r.stop_lag_s[0], None);
        assert!(close(r.stop_lag_s[1].unwrap(), 0.05));
        // Only a flow that started with the run tells the path's RTT.
        assert_eq!(r.rtt.flows.len(), 1);
        assert_eq!(r.rtt.flows[0].sender, 0);
        assert_eq!(r.rates_mbps.len(), 2);
        // To the byte a series counts in 100 ms: 80 bit/s.
        let mbps = |a: f64, b: f64| (a - b).abs() < 1e-4;
        assert!(mbps(r.rates_mbps[0][0], goodput_bps(100_000_000) / 1e6));
        assert!(mbps(r.rates_mbps[1][40], goodput_bps(100_000_000) / 2e6));
        assert_eq!(r.ends_s.len(), 90);
        // Over the changes: 0.5 and 0.3.
        assert_eq!(r.changes().count(), 2);
        assert!(close(r.median_convergence(false).unwrap(), 0.3));
        assert_eq!(r.unconverged(false), 0);
        assert!(close(r.mean_cov(), 0.0));

        // Sender 0 never takes the link back: that change counts as its
        // phase's 3 s, and the median is the join's 0.5 s.
        let (cfg, data) = made_up_run(false);
        let r = measure(&cfg, v, 100_000_000, &cfg.schedule.phases(), &data);
        assert_eq!(
            (r.phases[2].convergence_s, r.phases[2].smoothed_s),
            (None, None)
        );
        assert!(close(r.phases[2].time_or_length(false), 3.0));
        assert!(close(r.phases[2].time_or_length(true), 3.0));
        assert!(close(r.phases[1].time_or_length(true), 0.4));
        assert_eq!((r.unconverged(false), r.unconverged(true)), (1, 1));
        assert!(close(r.median_convergence(false).unwrap(), 0.5));
        assert!(close(r.median_convergence(true).unwrap(), 0.4));
        assert!(close(r.phases[2].goodput_share, 0.5));
    }

    #[test]
    fn mean_cov_takes_only_phases_of_two_or_more_flows() {
        let (cfg, data) = made_up_run(true);
        let mut r = measure(
            &cfg,
            &cfg.variants[0],
            100_000_000,
            &cfg.schedule.phases(),
            &data,
        );
        r.phases[0].cov = 9.0;
        r.phases[1].cov = 0.2;
        r.phases[2].cov = 7.0;
        assert!((r.mean_cov() - 0.2).abs() < 1e-12);
        assert!(ConvRun {
            phases: vec![],
            ..r
        }
        .median_convergence(false)
        .is_none());
    }

    #[test]
    fn bad_settings_are_refused() {
        let bad = |a: ConvergenceArgs| a.config().validate().is_err();
        assert!(bad(ConvergenceArgs {
            senders: Some(0),
            ..args()
        }));
        assert!(bad(ConvergenceArgs {
            tolerance: 0.0,
            ..args()
        }));
        assert!(bad(ConvergenceArgs {
            hold: Duration::from_millis(10),
            ..args()
        }));
        // A phase shorter than the hold.
        assert!(bad(ConvergenceArgs {
            join: Some(Duration::from_millis(800)),
            ..args()
        }));
        assert!(bad(ConvergenceArgs {
            schedule: Some(Schedule::parse("0-10,2-8,4-6").unwrap()),
            senders: Some(2),
            ..args()
        }));
    }
}
