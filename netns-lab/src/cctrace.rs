//! What a lab records of its BPF algorithm: the live trace (cwnd on ACKs,
//! alpha per window, state changes) through the same ring buffer as
//! `loader trace`, checked against what the switch and the receiver counted.

use std::io::Write;

use anyhow::Result;
use loader::event::{Decoder, Event};
use loader::intf::dctcp_event_type_DCTCP_EV_WINDOW as EV_WINDOW;
use loader::intf::{dctcp_event, dctcp_event_type_DCTCP_EV_ACK as EV_ACK};
use loader::trace::{Counts, Detail, Session};
use serde::Serialize;
use tc_qdisc::RxFlow;

use crate::plot::Series;
use crate::results::ResultsDir;
use crate::traffic::FlowResult;

/// Per-ACK tracing, sampled so a run records a few thousand ACKs per second
/// and flow whatever the rate: every ACK at 100 Mbit/s, one in 10 at 1 Gbit/s.
pub fn detail_for(rate_bps: u64) -> Detail {
    Detail::PerAck {
        every: rate_bps.div_ceil(100_000_000).max(1) as u32,
    }
}

/// A recording in progress.
pub struct Recorder(Session);

impl Recorder {
    pub fn start(algorithm: &str, rate_bps: u64) -> Result<Recorder> {
        Ok(Recorder(Session::start(
            algorithm,
            detail_for(rate_bps),
            false,
        )?))
    }

    pub fn finish(self) -> Result<CcTrace> {
        let (events, counts) = self.0.stop()?;
        Ok(CcTrace { events, counts })
    }
}

pub struct CcTrace {
    pub events: Vec<dctcp_event>,
    pub counts: Counts,
}

/// One sender's stream beside the receiver's count of the same flow.
#[derive(Clone, Debug, Serialize)]
pub struct FlowCheck {
    pub sender: usize,
    pub sport: u16,
    pub events: u64,
    pub windows: u64,
    pub acks: u64,
    pub alpha_max: f64,
    /// Mean alpha over the windows of the run's second half: the EWMA of F
    /// once the start (alpha_on_init) has washed out.
    pub alpha_late_mean: f64,
    /// F over the same windows.
    pub fraction_marked_late: f64,
    /// Sum of the windows' ECE-echoed over delivered packets.
    pub fraction_marked: f64,
    /// delivered_ce / delivered of the sender over the run.
    pub sender_delivered: u64,
    pub sender_delivered_ce: u64,
    /// CE-marked and all data packets the receiver counted for this flow.
    pub receiver_pkts: u64,
    pub receiver_ce_pkts: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TraceCheck {
    pub counts: Counts,
    pub flows: Vec<FlowCheck>,
}

/// F over windows: ECE-echoed over delivered packets, summed.
fn window_fraction(windows: &[&dctcp_event]) -> f64 {
    let (d, c) = windows.iter().fold((0u64, 0u64), |(d, c), e| {
        (
            d + u64::from(e.win_delivered),
            c + u64::from(e.win_delivered_ce),
        )
    });
    c as f64 / d.max(1) as f64
}

/// The windows of the second half of the time they span.
fn second_half<'s, 'a>(windows: &'s [&'a dctcp_event]) -> &'s [&'a dctcp_event] {
    let (Some(a), Some(b)) = (windows.first(), windows.last()) else {
        return windows;
    };
    let mid = a.ts_ns + (b.ts_ns - a.ts_ns) / 2;
    &windows[windows.partition_point(|e| e.ts_ns < mid)..]
}

impl CcTrace {
    /// The sender side of `f`: its socket's own port is the flow's source.
    pub fn sender_events<'a>(&'a self, f: &'a FlowResult) -> impl Iterator<Item = &'a dctcp_event> {
        self.events
            .iter()
            .filter(move |e| e.flow.sport == f.sport && e.flow.dport == f.dport)
    }

    pub fn check(&self, flows: &[FlowResult], rx: &[RxFlow]) -> TraceCheck {
        let flows = flows
            .iter()
            .map(|f| {
                let mine: Vec<&dctcp_event> = self.sender_events(f).collect();
                let count = |t: u32| mine.iter().filter(|e| u32::from(e.type_) == t).count() as u64;
                let windows: Vec<&dctcp_event> = mine
                    .iter()
                    .copied()
                    .filter(|e| u32::from(e.type_) == EV_WINDOW)
                    .collect();
                let late = second_half(&windows);
                let span = |pick: fn(&dctcp_event) -> u32| match (mine.first(), mine.last()) {
                    (Some(a), Some(b)) => u64::from(pick(b).wrapping_sub(pick(a))),
                    _ => 0,
                };
                let r = rx.iter().find(|r| r.sport == f.sport && r.dport == f.dport);
                FlowCheck {
                    sender: f.sender,
                    sport: f.sport,
                    events: mine.len() as u64,
                    windows: count(EV_WINDOW),
                    acks: count(EV_ACK),
                    alpha_max: mine
                        .iter()
                        .map(|e| loader::flows::alpha_fraction(e.alpha))
                        .fold(0.0, f64::max),
                    alpha_late_mean: late
                        .iter()
                        .map(|e| loader::flows::alpha_fraction(e.alpha))
                        .sum::<f64>()
                        / late.len().max(1) as f64,
                    fraction_marked_late: window_fraction(late),
                    fraction_marked: window_fraction(&windows),
                    sender_delivered: span(|e| e.delivered),
                    sender_delivered_ce: span(|e| e.delivered_ce),
                    receiver_pkts: r.map_or(0, |r| r.pkts),
                    receiver_ce_pkts: r.map_or(0, |r| r.ce_pkts),
                }
            })
            .collect();
        TraceCheck {
            counts: self.counts,
            flows,
        }
    }

    /// Every event, as `loader trace --format csv` writes them.
    pub fn write_csv(&self, dir: &ResultsDir, name: &str) -> Result<()> {
        let mut w = dir.csv(name, Event::CSV_HEADER)?;
        let mut decoder = Decoder::default();
        for e in &self.events {
            writeln!(w, "{}", decoder.decode(e).csv_row())?;
        }
        Ok(())
    }

    /// cwnd (every traced ACK) and alpha (every window) of each sender from
    /// `t0_ns` for `span_s` seconds, for plotting beside the queue.
    pub fn series(
        &self,
        flows: &[FlowResult],
        t0_ns: u64,
        span_s: f64,
    ) -> (Vec<Series>, Vec<Series>) {
        let mut cwnd = Vec::new();
        let mut alpha = Vec::new();
        for f in flows {
            let pts = |t: u32, y: fn(&dctcp_event) -> f64| -> Vec<(f64, f64)> {
                self.sender_events(f)
                    .filter(|e| u32::from(e.type_) == t && e.ts_ns >= t0_ns)
                    .map(|e| ((e.ts_ns - t0_ns) as f64 / 1e9, y(e)))
                    .take_while(|(x, _)| *x <= span_s)
                    .collect()
            };
            cwnd.push(Series {
                name: format!("flow {}", f.sender),
                points: pts(EV_ACK, |e| f64::from(e.cwnd)),
            });
            alpha.push(Series {
                name: format!("flow {}", f.sender),
                points: pts(EV_WINDOW, |e| loader::flows::alpha_fraction(e.alpha)),
            });
        }
        (cwnd, alpha)
    }
}
