//! `lab variants` (seed 002): DCTCP against each of Kuehlewind et al.'s
//! sender modifications, attached side by side under their own names
//! (bpf_kdctcp with one switch on each, and all four together): cwnd and
//! alpha over time as in their Fig. 1, the queue, throughput, and how fast a
//! flow settles after slow start.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use loader::algo::Algo;
use loader::intf::{
    dctcp_event, dctcp_event_type_DCTCP_EV_ACK as EV_ACK,
    dctcp_event_type_DCTCP_EV_STATE as EV_STATE, dctcp_event_type_DCTCP_EV_WINDOW as EV_WINDOW,
};
use loader::params::Assignment;
use serde::{Deserialize, Serialize};
use tc_qdisc::Bottleneck;

use crate::experiments::{OneRate, Sweep};
use crate::measure::cctrace::CcTrace;
use crate::measure::scenario::{Outcome, Scenario};
use crate::net::delay::{datacenter_rtt, RttArgs, RttMeasured};
use crate::report::plot::{self, Chart, Series};
use crate::report::results::ResultsDir;
use crate::report::model::{Cell, Columns, Figure, Fmt, Report, Table};
use crate::report::tables::Repairs;
use crate::stats::{cdf, jain, Summary};
use crate::traffic::bulk::FlowResult;
use crate::traffic::cc::{LabCc, KDCTCP_ALL_FOUR};
use crate::units::fmt_rate;

/// A contender: an algorithm and the switches it runs with.
pub struct Contender {
    pub label: &'static str,
    pub algo: Algo,
    pub params: &'static [&'static str],
}

/// DCTCP, then each seed 002 modification alone, per-ACK alpha with the
/// resolution the seed gave it, then all four. Per-ACK alpha comes with the
/// seed's g = 1/2^8 (bpf_kdctcp's g_ack default).
pub const CONTENDERS: &[Contender] = &[
    Contender {
        label: "DCTCP",
        algo: Algo::Dctcp,
        params: &[],
    },
    Contender {
        label: "per-ACK alpha",
        algo: Algo::Kdctcp,
        params: &["per_ack_alpha=1"],
    },
    Contender {
        label: "progressive cut",
        algo: Algo::Kdctcp,
        params: &["progressive=1"],
    },
    Contender {
        label: "growth in CWR",
        algo: Algo::Kdctcp,
        params: &["cwr_growth=1"],
    },
    Contender {
        label: "alpha 1/2^20",
        algo: Algo::Kdctcp,
        params: &["fine_alpha=1"],
    },
    Contender {
        label: "per-ACK, 1/2^20",
        algo: Algo::Kdctcp,
        params: &["per_ack_alpha=1", "fine_alpha=1"],
    },
    Contender {
        label: "all four",
        algo: Algo::Kdctcp,
        params: KDCTCP_ALL_FOUR,
    },
];

#[derive(Clone, Debug, Serialize)]
pub struct VariantsConfig {
    pub rate_bps: u64,
    /// `--rtt`; the data-center RTT at the rate by default.
    pub rtt: RttArgs,
    pub k: u32,
    pub buffer_pkts: u32,
    pub flows: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub rounds: usize,
}

impl VariantsConfig {
    pub fn validate(&self) -> Result<()> {
        if let Some(r) = &self.rtt.rtt {
            r.validate(self.flows)?;
        }
        anyhow::ensure!(
            (1..=16).contains(&self.flows),
            "--flows {} out of range: 1 to 16",
            self.flows
        );
        anyhow::ensure!(
            (1..=20).contains(&self.rounds),
            "--rounds {} out of range: 1 to 20",
            self.rounds
        );
        anyhow::ensure!(
            self.duration >= self.warmup + Duration::from_secs(1),
            "--duration must exceed the warmup ({:?}) by a second",
            self.warmup
        );
        Bottleneck::step(self.rate_bps, self.buffer_pkts, self.k).validate()
    }
}

/// One run of one contender, as the summary needs it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariantRun {
    pub label: String,
    pub round: usize,
    pub queue: Summary,
    pub utilization: f64,
    /// Share of the lab's CPU the hypervisor took (Outcome::steal_share).
    pub steal_share: f64,
    pub goodput_mbps: Vec<f64>,
    pub jain: f64,
    pub drops: u64,
    /// Mean alpha over the windows of the run's second half, per flow.
    pub alpha_late: f64,
    /// CWR entries per second and flow.
    pub cwr_per_s: f64,
    /// After start, when cwnd settled (see `settle_time`), mean over flows;
    /// None if a flow never did.
    pub settle_ms: Option<f64>,
    /// ... and alpha.
    pub alpha_settle_ms: Option<f64>,
    pub guard_repairs: Repairs,
    pub rtt: RttMeasured,
}

/// One value of one sender's events over time, (seconds since its first
/// event, value): cwnd on traced ACKs, alpha on windows.
fn flow_points(
    trace: &CcTrace,
    f: &FlowResult,
    kind: u32,
    value: fn(&dctcp_event) -> f64,
) -> Vec<(f64, f64)> {
    let mine: Vec<&dctcp_event> = trace.sender_events(f).collect();
    let Some(t0) = mine.first().map(|e| e.ts_ns) else {
        return vec![];
    };
    mine.iter()
        .filter(|e| u32::from(e.type_) == kind)
        .map(|e| ((e.ts_ns - t0) as f64 / 1e9, value(e)))
        .collect()
}

fn cwnd_points(trace: &CcTrace, f: &FlowResult) -> Vec<(f64, f64)> {
    flow_points(trace, f, EV_ACK, |e| f64::from(e.cwnd))
}

fn alpha_points(trace: &CcTrace, f: &FlowResult) -> Vec<(f64, f64)> {
    flow_points(trace, f, EV_WINDOW, |e| {
        loader::flows::alpha_fraction(e.alpha)
    })
}

/// Bins for settling: 20 ms; settled means 10 bins (200 ms) in a row within
/// 25 % of the second half's mean.
const BIN_S: f64 = 0.02;
const HOLD_BINS: usize = 10;
const BAND: f64 = 0.25;

/// When a value of a flow (cwnd, alpha) settles after start: the first
/// 20 ms bin from which 200 ms of bin means all lie within 25 % of its
/// steady-state mean (the mean over the run's second half). alpha starts at
/// 1 and decays towards the marked fraction; slow start overshoots and the
/// first cuts with alpha near 1 undershoot. How soon the band is reached is
/// the adaptation seed 002's Fig. 1 shows.
pub fn settle_time(points: &[(f64, f64)]) -> Option<f64> {
    let end = points.last()?.0;
    let late: Vec<f64> = points
        .iter()
        .filter(|p| p.0 >= end / 2.0)
        .map(|p| p.1)
        .collect();
    let steady = late.iter().sum::<f64>() / late.len().max(1) as f64;
    let nbins = (end / BIN_S) as usize;
    let mut bins = vec![(0.0, 0usize); nbins];
    for &(t, c) in points {
        if let Some(b) = bins.get_mut((t / BIN_S) as usize) {
            b.0 += c;
            b.1 += 1;
        }
    }
    let within = |b: &(f64, usize)| b.1 > 0 && ((b.0 / b.1 as f64) / steady - 1.0).abs() <= BAND;
    (0..nbins.saturating_sub(HOLD_BINS))
        .find(|&i| bins[i..i + HOLD_BINS].iter().all(within))
        .map(|i| i as f64 * BIN_S)
}

impl VariantRun {
    fn of(label: &str, round: usize, o: &Outcome, trace: &CcTrace, window_s: f64) -> VariantRun {
        let tc = o.trace_check.as_ref();
        let flows = o.flows.len().max(1) as f64;
        let cwr = trace
            .events
            .iter()
            .filter(|e| u32::from(e.type_) == EV_STATE && e.value == 2)
            .filter(|e| o.flows.iter().any(|f| f.sport == e.flow.sport))
            .count() as f64;
        let settled = |points: fn(&CcTrace, &FlowResult) -> Vec<(f64, f64)>| {
            o.flows
                .iter()
                .map(|f| settle_time(&points(trace, f)))
                .collect::<Option<Vec<f64>>>()
                .map(|v| v.iter().sum::<f64>() / v.len().max(1) as f64 * 1e3)
        };
        VariantRun {
            label: label.to_string(),
            round,
            queue: o.queue.clone(),
            utilization: o.utilization,
            steal_share: o.steal_share,
            goodput_mbps: o.goodput_bps.iter().map(|g| g / 1e6).collect(),
            jain: jain(&o.goodput_bps),
            drops: o.drops,
            alpha_late: tc.map_or(0.0, |t| {
                t.flows.iter().map(|f| f.alpha_late_mean).sum::<f64>() / flows
            }),
            cwr_per_s: cwr / flows / window_s,
            settle_ms: settled(cwnd_points),
            alpha_settle_ms: settled(alpha_points),
            guard_repairs: o.guard_repairs,
            rtt: o.rtt.clone(),
        }
    }
}

fn scenario(cfg: &VariantsConfig, label: &str, cc: &str) -> Scenario {
    Scenario {
        trace_algorithm: Some(cc.to_string()),
        round_trip: cfg.rtt.or(Some(datacenter_rtt(cfg.rate_bps))),
        ..Scenario::long_flows(
            label,
            Bottleneck::step(cfg.rate_bps, cfg.buffer_pkts, cfg.k),
            cfg.flows,
            cc,
            cfg.duration,
            cfg.warmup,
        )
    }
}

/// Seconds of cwnd shown from each flow's start: slow start, the first
/// cuts and some steady state.
const START_SPAN_S: f64 = 1.5;

fn run(cfg: &VariantsConfig, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<Report> {
    // All attached at once, each under its own (lab) name.
    let attached: Vec<LabCc> = CONTENDERS
        .iter()
        .map(|c| {
            let params: Vec<Assignment> =
                c.params.iter().map(|a| a.parse().expect("valid")).collect();
            LabCc::attach(c.algo, params)
        })
        .collect::<Result<_>>()?;
    let mut sweep = Sweep::new(CONTENDERS.len() * cfg.rounds, stop);
    let mut runs = Vec::new();
    let mut cwnd_panels: Vec<(String, Vec<Series>)> = Vec::new();
    let mut alpha_lines = Vec::new();
    let mut queue_cdfs = Vec::new();
    for round in 1..=cfg.rounds {
        for (c, cc) in CONTENDERS.iter().zip(&attached) {
            let scn = scenario(cfg, c.label, &cc.name);
            let run = sweep.run(&scn, Some(cc), c.label)?;
            let trace = run.cc_trace.as_ref().expect("traced");
            let o = &run.outcome;
            let v = VariantRun::of(c.label, round, o, trace, o.window_s);
            sweep.said(
                &format!(
                    "{:<16} round {round}: queue mean {:.1} p95 {:.0}, util {:.1}%, Jain {:.3}, alpha {:.3}, {:.1} CWR/s, \
                     cwnd / alpha settled after {} / {}, drops {}",
                    c.label,
                    v.queue.mean,
                    v.queue.p95,
                    v.utilization * 100.0,
                    v.jain,
                    v.alpha_late,
                    v.cwr_per_s,
                    ms_or_never(v.settle_ms),
                    ms_or_never(v.alpha_settle_ms),
                    v.drops
                ),
                o,
            );
            let dir = out.sub(&format!(
                "r{round}-{}",
                c.label.replace([' ', '/', ','], "_").replace("__", "_")
            ))?;
            dir.write_json("outcome.json", o)?;
            trace.write_csv(&dir, "cc_trace.csv.gz")?;
            if round == 1 {
                let t0 = trace.events.first().map_or(0, |e| e.ts_ns);
                let (_, alpha) = trace.series(&o.flows, t0, START_SPAN_S);
                cwnd_panels.push((
                    c.label.to_string(),
                    o.flows
                        .iter()
                        .map(|f| Series {
                            name: format!("flow {}", f.sender),
                            points: cwnd_points(trace, f)
                                .into_iter()
                                .take_while(|p| p.0 <= START_SPAN_S)
                                .collect(),
                        })
                        .collect(),
                ));
                if let Some(a) = alpha.into_iter().next() {
                    alpha_lines.push(Series {
                        name: c.label.to_string(),
                        points: a.points,
                    });
                }
                let q: Vec<f64> = run.samples.iter().map(|s| f64::from(s.qlen)).collect();
                queue_cdfs.push(Series {
                    name: c.label.to_string(),
                    points: cdf(&q),
                });
            }
            runs.push(v);
        }
    }
    plot_traces(out, cfg, cwnd_panels, alpha_lines, queue_cdfs)?;
    out.write_json("runs.json", &runs)?;
    Ok(report(cfg, &runs))
}

fn plot_traces(
    out: &ResultsDir,
    cfg: &VariantsConfig,
    cwnd_panels: Vec<(String, Vec<Series>)>,
    alpha_lines: Vec<Series>,
    queue_cdfs: Vec<Series>,
) -> Result<()> {
    let what = format!(
        "{} flows, {}, K = {}",
        cfg.flows,
        fmt_rate(cfg.rate_bps),
        cfg.k
    );
    let titles: Vec<String> = cwnd_panels
        .iter()
        .map(|(label, _)| format!("{label}: cwnd from the start ({what})"))
        .collect();
    let charts: Vec<Chart> = cwnd_panels
        .into_iter()
        .zip(&titles)
        .map(|((_, series), title)| {
            Chart::new(
                title,
                "time since the flow's start (s)",
                "cwnd (packets)",
                series,
            )
        })
        .collect();
    plot::draw_stack(&out.file("cwnd.png"), &charts)?;
    plot::draw(
        &out.file("alpha.png"),
        &Chart::new(
            &format!("alpha of flow 0 from the start ({what})"),
            "time since the first flow's start (s)",
            "alpha",
            alpha_lines,
        )
        .y_max(1.02),
    )?;
    plot::draw(
        &out.file("queue_cdf.png"),
        &Chart::new(
            &format!("Queue length CDF ({what})"),
            "queue (packets)",
            "fraction of arrivals",
            queue_cdfs,
        )
        .hline(f64::from(cfg.k), format!("K = {}", cfg.k))
        .y_max(1.02),
    )
}

fn ms_or_never(ms: Option<f64>) -> String {
    ms.map_or("never".into(), |ms| format!("{ms:.0} ms"))
}

/// One row per contender and round.
fn runs_table(runs: &[VariantRun]) -> Table {
    Columns::<VariantRun>::new()
        .col("contender", "", |r| Cell::text(&r.label))
        .col("round", "", |r| Cell::int(r.round))
        .col("queue mean", "packets", |r| Cell::num(r.queue.mean, 1))
        .col("p95", "packets", |r| Cell::num(r.queue.p95, 0))
        .col("utilization", "", |r| Cell::pct(r.utilization, 1))
        .col("goodput per flow", "Mbit/s", |r| Cell::List(r.goodput_mbps.clone(), Fmt::dp(1)))
        .col("Jain", "", |r| Cell::num(r.jain, 3))
        .col("alpha (2nd half)", "", |r| Cell::num(r.alpha_late, 3))
        .col("CWR per s and flow", "", |r| Cell::num(r.cwr_per_s, 1))
        .col("cwnd / alpha settled after", "", |r| {
            Cell::text(format!("{} / {}", ms_or_never(r.settle_ms), ms_or_never(r.alpha_settle_ms)))
        })
        .col("drops", "", |r| Cell::int(r.drops))
        .col("guard repairs", "", |r| Cell::text(r.guard_repairs.to_string()))
        .table(runs)
}

/// What seed 002 says of each modification, beside the mean of its rounds
/// against DCTCP's.
fn seed_table(runs: &[VariantRun]) -> Table {
    let mean = |label: &str, f: fn(&VariantRun) -> Option<f64>| {
        let v: Vec<f64> = runs
            .iter()
            .filter(|r| r.label == label)
            .filter_map(f)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let claims = [
        ("per-ACK alpha", "alpha catches the congestion level as it happens instead of once per RTT (Fig. 1: adapts faster after slow start)"),
        ("progressive cut", "the cut follows the marks of the whole CWR round trip (Fig. 1: adapts faster after slow start)"),
        ("growth in CWR", "linear growth is not interrupted by every window recalculation"),
        ("alpha 1/2^20", "with very few marks cwnd does not converge to a fixed value"),
        ("per-ACK, 1/2^20", "per-ACK alpha as the seed ran it, at the finer resolution"),
        ("all four", "after slow start the implementation adapts faster, otherwise behaves alike (Fig. 1)"),
    ];
    Columns::<(&str, &str)>::new()
        .col("modification", "", |(label, _)| Cell::text(*label))
        .col("what seed 002 says", "", |(_, claim)| Cell::text(*claim))
        .col("measured here (mean of rounds), against DCTCP", "", move |(label, _)| {
            let of = |l: &str, f: fn(&VariantRun) -> Option<f64>| mean(l, f);
            let value = |l: &str, f: fn(&VariantRun) -> Option<f64>| of(l, f).unwrap_or(0.0);
            Cell::text(format!(
                "cwnd settled after {} vs {}, alpha after {} vs {}; queue mean {:.1} vs {:.1}; utilization {:.1}% vs {:.1}%; alpha {:.3} vs {:.3}",
                ms_or_never(of(label, |r| r.settle_ms)),
                ms_or_never(of("DCTCP", |r| r.settle_ms)),
                ms_or_never(of(label, |r| r.alpha_settle_ms)),
                ms_or_never(of("DCTCP", |r| r.alpha_settle_ms)),
                value(label, |r| Some(r.queue.mean)),
                value("DCTCP", |r| Some(r.queue.mean)),
                value(label, |r| Some(r.utilization)) * 100.0,
                value("DCTCP", |r| Some(r.utilization)) * 100.0,
                value(label, |r| Some(r.alpha_late)),
                value("DCTCP", |r| Some(r.alpha_late)),
            ))
        })
        .table(&claims)
}

fn report(cfg: &VariantsConfig, runs: &[VariantRun]) -> Report {
    let mut r = Report::new("DCTCP and the modifications of seed 002 (Kuehlewind et al.)");
    r.text(format!(
        "{} long flows into one receiver through a {} bpf-step switch, K = {}, buffer {} packets; {} round(s) of \
         {:.0} s per contender, contenders interleaved; measured after {:.0} s. Each modification is bpf_kdctcp \
         with one switch on (per_ack_alpha with g_ack = 1/256 as in the seed), attached under its own name beside \
         plain bpf_dctcp.",
        cfg.flows,
        fmt_rate(cfg.rate_bps),
        cfg.k,
        cfg.buffer_pkts,
        cfg.rounds,
        cfg.duration.as_secs_f64(),
        cfg.warmup.as_secs_f64()
    ))
    .markdown(crate::net::delay::summary_lines(
        runs.iter().map(|r| (format!("{} round {}", r.label, r.round), &r.rtt)),
    ))
    .runs_table(runs_table(runs))
    .heading(2, "Against the seed")
    .table(seed_table(runs))
    .text(
        "Per-ACK alpha at 10 bits: with g = 1/256, alpha g rounds to 0 whenever alpha < 0.25, and the \
         kernel's rule (decay all the way once the decrement rounds to 0) then zeroes alpha on the next unmarked \
         ACK. A flow's alpha is either above 0.25 or near 0, and a flow near 0 hardly cuts: compare Jain's index \
         with that of per-ACK alpha at 1/2^20.",
    )
    .text(
        "Settled: the first 20 ms from which 200 ms of 20 ms means (of cwnd, or of alpha) all lie within 25 % \
         of the flow's mean over the run's second half. The seed ran one DCTCP flow at 10 Mbit/s with a 25 ms RTT in a \
         simulator with a Linux 3.2 kernel inside; this kernel has no netem, so the lab's round trip is the \
         queue's (about K packets), and PRR, not the 3.2 kernel's direct cut, walks cwnd down in CWR.",
    )
    .heading(2, "Plots")
    .figures(vec![
        Figure::new("cwnd.png", "Each contender's cwnd from its flows' start (seed 002's Fig. 1)"),
        Figure::new("alpha.png", "Each contender's alpha from its flows' start"),
        Figure::new("queue_cdf.png", "The queue's CDF under each contender"),
    ])
    .text("Raw: `runs.csv` (the table of runs), `r<round>-<contender>/cc_trace.csv.gz` (every traced event), `outcome.json`, `runs.json`.");
    r
}

/// DCTCP against each modification of seed 002, side by side.
///
/// Plain bpf_dctcp and bpf_kdctcp attached under their own names with
/// one switch on each (per-ACK alpha, progressive cut, growth in CWR,
/// alpha in 1/2^20) and with all four; each carries the same long flows
/// through the bpf-step switch, traced. Writes results/variants/<timestamp>/:
/// cwnd and alpha from the flows' start (seed 002's Fig. 1), the queue,
/// throughput, fairness and when cwnd settles after slow start. Round
/// trip (--rtt) by default 500us below 1 Gbit/s, 100us at 1 Gbit/s and
/// above, data-center RTTs (seed 002's 25 ms is its Internet scenario,
/// `--rate 10M --rtt 25ms`).
#[derive(Debug, Clone, clap::Args)]
pub struct VariantsArgs {
    /// Short runs for tests and a first look: 4 s, one round.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub link: OneRate,
    /// Rounds over all contenders (default 2, 1 with --quick).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Seconds per run (default 10, 4 with --quick).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Results directory (default results/variants/<timestamp>).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

impl VariantsArgs {
    pub fn config(&self) -> VariantsConfig {
        let quick = self.quick;
        let OneRate { rate, star, rtt } = &self.link;
        VariantsConfig {
            rate_bps: *rate,
            rtt: rtt.clone(),
            k: star.k,
            buffer_pkts: star.buffer,
            flows: star.flows,
            duration: Duration::from_secs_f64(self.duration.unwrap_or(if quick {
                4.0
            } else {
                10.0
            })),
            warmup: Duration::from_secs(if quick { 1 } else { 2 }),
            rounds: self.rounds.unwrap_or(if quick { 1 } else { 2 }),
        }
    }
}

crate::experiments::register!("variants", VariantsArgs => VariantsConfig);

#[cfg(test)]
mod tests {
    use super::*;

    /// The report prints the figures of the run recorded with the
    /// hand-written summary (`experiments::recorded`).
    #[test]
    fn the_report_prints_the_recorded_runs_figures() {
        use crate::experiments::recorded;
        let cfg = recorded::args::<VariantsArgs>("variants").config();
        let runs: Vec<VariantRun> = recorded::data("variants", "runs.json");
        recorded::assert_same_figures("variants", &report(&cfg, &runs), &[]);
    }
    use crate::measure::cctrace::{FlowCheck, TraceCheck};

    #[test]
    fn settling_is_found_after_an_overshoot_and_not_in_a_flow_that_never_settles() {
        // (HOLD_BINS x BIN_S is the time a value must stay in the band.)
        // 3 s at 1 kHz: 200 packets for 0.3 s, then 20 +/- 2.
        let settled: Vec<(f64, f64)> = (0..3000)
            .map(|i| {
                let t = i as f64 / 1000.0;
                (
                    t,
                    if t < 0.3 {
                        200.0
                    } else {
                        20.0 + (i % 5) as f64 - 2.0
                    },
                )
            })
            .collect();
        let at = settle_time(&settled).unwrap();
        assert!((0.3..=0.32).contains(&at), "{at}");
        // Swinging between 5 and 40 every 100 ms: never within 25 %.
        let swinging: Vec<(f64, f64)> = (0..3000)
            .map(|i| {
                (
                    i as f64 / 1000.0,
                    if (i / 100) % 2 == 0 { 5.0 } else { 40.0 },
                )
            })
            .collect();
        assert_eq!(settle_time(&swinging), None);
        assert_eq!(settle_time(&[]), None);
        // The steady state is the second half's: in a 2.1 s run whose first
        // 0.4 s overshoot to 200, it is 20 (the mean from 0.1 s on, 47,
        // would leave every bin outside the band).
        let short: Vec<(f64, f64)> = (0..2100)
            .map(|i| (i as f64 / 1000.0, if i < 400 { 200.0 } else { 20.0 }))
            .collect();
        assert_eq!(settle_time(&short), Some(0.4));
    }

    /// One sender's traced stream: an ACK every ms for 3 s at cwnd 200 for
    /// `overshoot_ms`, then 20; a window every 10 ms with alpha 1 for the
    /// same time, then 1/16 (none at all without `windows`).
    fn stream(sport: u16, overshoot_ms: u64, windows: bool) -> Vec<dctcp_event> {
        let mut v = Vec::new();
        for ms in 0..3000u64 {
            let before = ms < overshoot_ms;
            let mut e = dctcp_event {
                ts_ns: 5_000_000_000 + ms * 1_000_000,
                cwnd: if before { 200 } else { 20 },
                alpha: if before { 1 << 20 } else { 1 << 16 },
                ..Default::default()
            };
            e.flow.sport = sport;
            e.flow.dport = 5001;
            e.type_ = EV_ACK as u8;
            v.push(e);
            if windows && ms % 10 == 0 {
                e.type_ = EV_WINDOW as u8;
                v.push(e);
            }
        }
        v
    }

    fn cwr(sport: u16, state: u8) -> dctcp_event {
        let mut e = dctcp_event {
            value: state,
            ..Default::default()
        };
        e.type_ = EV_STATE as u8;
        e.flow.sport = sport;
        e.flow.dport = 5001;
        e
    }

    /// Two flows: the figures a run's line holds come from its outcome and
    /// its trace, each flow read from its own events only.
    #[test]
    fn a_run_is_read_from_its_outcome_and_each_flows_own_events() {
        let flow = |sender, sport| FlowResult {
            sender,
            sport,
            dport: 5001,
            ..Default::default()
        };
        let mut o = Outcome {
            flows: vec![flow(0, 1001), flow(1, 1002)],
            goodput_bps: vec![30e6, 10e6],
            utilization: 0.97,
            drops: 3,
            guard_repairs: [1, 2, 3].into(),
            ..Default::default()
        };
        o.trace_check = Some(TraceCheck {
            flows: [0.1, 0.3]
                .map(|a| FlowCheck {
                    alpha_late_mean: a,
                    ..Default::default()
                })
                .into(),
            ..Default::default()
        });
        let mut events = stream(1001, 300, true);
        events.extend(stream(1002, 500, true));
        // Three CWR entries of one flow, one of the other; a recovery (3)
        // and a flow not of this run are no CWR of it.
        events.extend([
            cwr(1001, 2),
            cwr(1001, 2),
            cwr(1001, 2),
            cwr(1002, 2),
            cwr(1002, 3),
            cwr(7777, 2),
        ]);
        let trace = CcTrace {
            events,
            counts: Default::default(),
        };
        let r = VariantRun::of("dctcp", 1, &o, &trace, 2.0);
        assert_eq!((r.label.as_str(), r.round, r.drops), ("dctcp", 1, 3));
        assert_eq!(r.guard_repairs, [1, 2, 3].into());
        assert_eq!(r.goodput_mbps, vec![30.0, 10.0]);
        assert!((r.jain - 0.8).abs() < 1e-12, "{}", r.jain);
        assert!((r.alpha_late - 0.2).abs() < 1e-12, "{}", r.alpha_late);
        // 4 CWR entries over 2 flows and 2 s.
        assert_eq!(r.cwr_per_s, 1.0);
        // cwnd settles at 0.30 s and 0.50 s: 400 ms on average; alpha with it.
        let settle = r.settle_ms.unwrap();
        assert!((400.0..=420.0).contains(&settle), "{settle}");
        let alpha = r.alpha_settle_ms.unwrap();
        assert!((400.0..=420.0).contains(&alpha), "{alpha}");
        assert!((r.utilization - 0.97).abs() < 1e-12);

        // A flow whose windows were never traced has no alpha settling, and
        // the run none either; without a trace check alpha_late is 0.
        let mut events = stream(1001, 300, true);
        events.extend(stream(1002, 500, false));
        o.trace_check = None;
        let trace = CcTrace {
            events,
            counts: Default::default(),
        };
        let r = VariantRun::of("dctcp", 0, &o, &trace, 2.0);
        assert_eq!(r.alpha_settle_ms, None);
        assert!(r.settle_ms.is_some());
        assert_eq!((r.alpha_late, r.cwr_per_s), (0.0, 0.0));
    }

    #[test]
    fn points_start_at_a_flows_first_event_and_keep_its_kind() {
        let mut events = stream(1002, 0, true);
        events.extend(stream(1001, 100, true));
        let trace = CcTrace {
            events,
            counts: Default::default(),
        };
        let f = FlowResult {
            sport: 1001,
            dport: 5001,
            ..Default::default()
        };
        let cwnd = cwnd_points(&trace, &f);
        assert_eq!(cwnd.len(), 3000);
        assert_eq!((cwnd[0], cwnd[150]), ((0.0, 200.0), (0.15, 20.0)));
        let alpha = alpha_points(&trace, &f);
        assert_eq!(alpha.len(), 300);
        assert_eq!((alpha[0], alpha[20]), ((0.0, 1.0), (0.2, 1.0 / 16.0)));
        let none = FlowResult {
            sport: 9,
            ..Default::default()
        };
        assert!(cwnd_points(&trace, &none).is_empty());
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let args = |a: &[&str]| {
            use clap::Parser;
            #[derive(clap::Parser)]
            struct Cli {
                #[command(flatten)]
                v: VariantsArgs,
            }
            let mut argv = vec!["variants", "--quick"];
            argv.extend(a);
            Cli::parse_from(argv).v.config()
        };
        args(&[]).validate().unwrap();
        let refused = |a: &[&str], what: &str| {
            let e = format!("{:#}", args(a).validate().unwrap_err());
            assert!(e.contains(what), "{a:?}: {e}");
        };
        refused(&["--flows", "0"], "--flows");
        refused(&["--flows", "17"], "--flows");
        refused(&["--rounds", "0"], "--rounds");
        refused(&["--rounds", "21"], "--rounds");
        refused(&["--duration", "1.5"], "--duration");
        refused(&["--k", "0"], "K");
        let cfg = args(&["--duration", "2"]);
        assert_eq!(
            (cfg.duration, cfg.warmup, cfg.rounds),
            (Duration::from_secs(2), Duration::from_secs(1), 1)
        );
        let full = {
            let mut c = args(&[]);
            c.validate().unwrap();
            c.rounds = 2;
            c
        };
        let sc = scenario(&full, "x", "cubic");
        assert_eq!(sc.trace_algorithm.as_deref(), Some("cubic"));
        assert_eq!(sc.flows.len(), full.flows);
        assert!(sc.round_trip.is_some());
    }

    #[test]
    fn contenders_are_valid_loader_parameters() {
        for c in CONTENDERS {
            let mut p = c.algo.default_params();
            let a: Vec<Assignment> = c.params.iter().map(|a| a.parse().unwrap()).collect();
            loader::params::apply(c.algo, &mut p, &a).unwrap();
        }
    }
}
