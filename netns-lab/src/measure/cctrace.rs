//! What a lab records of its BPF algorithm: the live trace (cwnd on ACKs,
//! alpha per window, state changes) through the same ring buffer as
//! `loader trace`, checked against what the switch and the receiver counted.

use std::io::Write;

use anyhow::Result;
use loader::event::{Decoder, Event};
use loader::intf::dctcp_event_type_DCTCP_EV_WINDOW as EV_WINDOW;
use loader::intf::{dctcp_event, dctcp_event_type_DCTCP_EV_ACK as EV_ACK};
use loader::intf::{
    dctcp_event_type_DCTCP_EV_FALLBACK as EV_FALLBACK,
    dctcp_event_type_DCTCP_EV_REPAIR as EV_REPAIR, dctcp_event_type_DCTCP_EV_START as EV_START,
    dctcp_event_type_DCTCP_EV_STATE as EV_STATE,
};
use loader::trace::{Counts, Detail, Session};
use serde::{Deserialize, Serialize};
use tc_qdisc::RxFlow;

use crate::report::plot::Series;
use crate::report::results::ResultsDir;
use crate::traffic::bulk::FlowResult;

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
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
    /// Handed to the Reno fallback: ECN was not negotiated.
    pub fallbacks: u64,
    /// The algorithm's init ran for this socket while traced (its `start`
    /// event). A flow traced without one ran with zeroed state and none of
    /// the ACK path (seen once in a suite run on this machine's 6.18,
    /// beside the known issue's repairs: README).
    pub starts: u64,
    /// The guard's repairs of this flow's window (README, known issue).
    /// A burst it repairs also delays the other flows behind it in the
    /// queue, so whether a run was struck is `guard_repairs`' business.
    pub repairs: u64,
    pub loss: LossReactions,
}

/// TCP_CA_CWR, TCP_CA_Recovery and TCP_CA_Loss: the states a reduction
/// puts a sender in.
const CA_CWR: u8 = 2;
const CA_RECOVERY: u8 = 3;
const CA_LOSS: u8 = 4;

/// How a flow reacted to loss (RFC 8257 3.5: as Reno does, halving at most
/// once per window of data), from its state changes and the ssthresh its
/// ACKs carried after each.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LossReactions {
    /// Entries into fast recovery, one reduction each.
    pub recoveries: u64,
    /// Entries into Loss (a retransmission timeout).
    pub timeouts: u64,
    /// Shortest time from one reduction to the next, in the smoothed RTTs
    /// of the second.
    pub min_gap_rtts: Option<f64>,
    /// Reductions less than half a smoothed RTT after the one before: a
    /// second cut within a window of data. A recovery lasts about an RTT at
    /// least (until what was in flight when it began is acknowledged; the
    /// shortest measured at 1 % loss was 0.95 srtt), so a reduction that
    /// soon means the one before ended early.
    pub cuts_within_half_rtt: u64,
    /// ... of them, those whose previous reduction was a recovery entered
    /// during an ECN reduction (CWR). Such a recovery keeps the CWR's
    /// high_seq (tcp_enter_recovery skips tcp_init_cwnd_reduction while a
    /// reduction is under way), may end at the next ACK, and the loss not
    /// yet repaired starts a new one.
    pub cuts_within_half_rtt_after_cwr: u64,
    /// Recoveries whose later ACKs were traced, and of them those whose
    /// ssthresh was exactly Reno's halving of the cwnd they started from,
    /// max(cwnd / 2, 2), and never lower before the recovery ended.
    pub recoveries_seen: u64,
    pub halved_once: u64,
    /// Recoveries during which bpf_dctcp's guard repaired the window (the
    /// README's known issue): not judged, their ssthresh is the guard's.
    pub recoveries_repaired: u64,
}

/// A reduction under way: when it began, whether it was a recovery entered
/// from CWR, and for a recovery its target, the lowest ssthresh since and
/// whether the guard repaired anything meanwhile.
struct Cut {
    ts_ns: u64,
    from_cwr: bool,
    recovery: Option<Watch>,
}

struct Watch {
    target: u32,
    low: Option<u32>,
    repaired: bool,
}

impl LossReactions {
    /// Judges a recovery that has ended.
    fn close(&mut self, w: Watch) {
        if w.repaired {
            self.recoveries_repaired += 1;
        } else if let Some(low) = w.low {
            self.recoveries_seen += 1;
            self.halved_once += u64::from(low == w.target);
        }
    }
}

impl LossReactions {
    /// Two flows' reactions together (counts added, the shorter gap).
    pub fn add(&self, o: &LossReactions) -> LossReactions {
        LossReactions {
            recoveries: self.recoveries + o.recoveries,
            timeouts: self.timeouts + o.timeouts,
            min_gap_rtts: match (self.min_gap_rtts, o.min_gap_rtts) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            cuts_within_half_rtt: self.cuts_within_half_rtt + o.cuts_within_half_rtt,
            cuts_within_half_rtt_after_cwr: self.cuts_within_half_rtt_after_cwr
                + o.cuts_within_half_rtt_after_cwr,
            recoveries_seen: self.recoveries_seen + o.recoveries_seen,
            halved_once: self.halved_once + o.halved_once,
            recoveries_repaired: self.recoveries_repaired + o.recoveries_repaired,
        }
    }

    /// From one flow's events in time order.
    pub fn of(events: &[&dctcp_event]) -> LossReactions {
        let mut r = LossReactions::default();
        let mut last: Option<Cut> = None;
        for e in events {
            let ty = u32::from(e.type_);
            let watch = last.as_mut().and_then(|c| c.recovery.as_mut());
            if ty == EV_ACK {
                if let Some(w) = watch {
                    w.low = Some(w.low.map_or(e.ssthresh, |l| l.min(e.ssthresh)));
                }
                continue;
            }
            if ty == EV_REPAIR {
                if let Some(w) = watch {
                    w.repaired = true;
                }
                continue;
            }
            if ty != EV_STATE || e.value == e.ca_state {
                continue;
            }
            // Any change of state ends the recovery's watch.
            if let Some(w) = last.as_mut().and_then(|c| c.recovery.take()) {
                r.close(w);
            }
            if e.value != CA_RECOVERY && e.value != CA_LOSS {
                continue;
            }
            if e.value == CA_RECOVERY {
                r.recoveries += 1;
            } else {
                r.timeouts += 1;
            }
            if let Some(prev) = &last {
                let gap = (e.ts_ns - prev.ts_ns) as f64 / (f64::from(e.srtt_us.max(1)) * 1e3);
                r.min_gap_rtts = Some(r.min_gap_rtts.map_or(gap, |g: f64| g.min(gap)));
                if gap < 0.5 {
                    r.cuts_within_half_rtt += 1;
                    r.cuts_within_half_rtt_after_cwr += u64::from(prev.from_cwr);
                }
            }
            last = Some(Cut {
                ts_ns: e.ts_ns,
                from_cwr: e.value == CA_RECOVERY && e.ca_state == CA_CWR,
                recovery: (e.value == CA_RECOVERY).then(|| Watch {
                    target: (e.cwnd >> 1).max(2),
                    low: None,
                    repaired: false,
                }),
            });
        }
        if let Some(w) = last.and_then(|c| c.recovery) {
            r.close(w);
        }
        r
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
                    fallbacks: count(EV_FALLBACK),
                    starts: count(EV_START),
                    repairs: count(EV_REPAIR),
                    loss: LossReactions::of(&mine),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ms: u64, ty: u32, from: u8, to: u8, cwnd: u32, ssthresh: u32) -> dctcp_event {
        dctcp_event {
            ts_ns: ms * 1_000_000,
            type_: ty as u8,
            ca_state: from,
            value: to,
            cwnd,
            ssthresh,
            srtt_us: 1000,
            ..Default::default()
        }
    }

    fn ack(ms: u64, cwnd: u32, ssthresh: u32) -> dctcp_event {
        ev(ms, EV_ACK, 0, 0, cwnd, ssthresh)
    }

    fn state(ms: u64, from: u8, to: u8, cwnd: u32) -> dctcp_event {
        // The state event carries the ssthresh from before the reaction.
        ev(ms, EV_STATE, from, to, cwnd, 999)
    }

    fn reactions(evs: &[dctcp_event]) -> LossReactions {
        LossReactions::of(&evs.iter().collect::<Vec<_>>())
    }

    #[test]
    fn one_halving_per_recovery_counts_as_halved_once() {
        let r = reactions(&[
            ack(0, 40, 1000),
            state(1, 0, CA_RECOVERY, 40),
            // A window ending inside the recovery is not a change of state.
            ev(1, EV_WINDOW, CA_RECOVERY, 0, 40, 20),
            ack(2, 30, 20),
            ack(3, 22, 20),
            state(4, 3, 0, 20),
            ack(5, 21, 20),
            // 6 ms later, six RTTs: a new window, a new halving.
            state(7, 0, CA_RECOVERY, 21),
            ack(8, 15, 10),
        ]);
        assert_eq!(r.recoveries, 2);
        assert_eq!(r.timeouts, 0);
        assert_eq!((r.recoveries_seen, r.halved_once), (2, 2));
        assert_eq!(r.cuts_within_half_rtt, 0);
        assert!((r.min_gap_rtts.unwrap() - 6.0).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn two_flows_reactions_add_field_by_field_and_keep_the_shorter_gap() {
        let a = LossReactions {
            recoveries: 1,
            timeouts: 2,
            min_gap_rtts: Some(3.0),
            cuts_within_half_rtt: 4,
            cuts_within_half_rtt_after_cwr: 5,
            recoveries_seen: 6,
            halved_once: 7,
            recoveries_repaired: 8,
        };
        let b = LossReactions {
            recoveries: 10,
            timeouts: 20,
            min_gap_rtts: Some(2.0),
            cuts_within_half_rtt: 40,
            cuts_within_half_rtt_after_cwr: 50,
            recoveries_seen: 60,
            halved_once: 70,
            recoveries_repaired: 80,
        };
        let sum = a.add(&b);
        assert_eq!(
            sum,
            LossReactions {
                recoveries: 11,
                timeouts: 22,
                min_gap_rtts: Some(2.0),
                cuts_within_half_rtt: 44,
                cuts_within_half_rtt_after_cwr: 55,
                recoveries_seen: 66,
                halved_once: 77,
                recoveries_repaired: 88,
            }
        );
        let none = LossReactions::default();
        assert_eq!(a.add(&none).min_gap_rtts, Some(3.0));
        assert_eq!(none.add(&b).min_gap_rtts, Some(2.0));
        assert_eq!(none.add(&none).min_gap_rtts, None);
    }

    #[test]
    fn a_recovery_the_guard_repaired_is_counted_apart() {
        let r = reactions(&[
            state(1, 0, CA_RECOVERY, 24),
            ev(1, EV_REPAIR, 0, 1, 24, 10),
            ack(2, 23, 10),
            state(3, 3, 0, 10),
        ]);
        assert_eq!(
            (r.recoveries, r.recoveries_seen, r.recoveries_repaired),
            (1, 0, 1)
        );
    }

    #[test]
    fn a_second_cut_in_one_recovery_is_not_halved_once() {
        let r = reactions(&[
            state(1, 0, CA_RECOVERY, 40),
            ack(2, 30, 20),
            ack(2, 20, 10),
            state(3, 3, 0, 10),
        ]);
        assert_eq!((r.recoveries_seen, r.halved_once), (1, 0));
    }

    #[test]
    fn a_timeout_during_cwr_is_not_a_recovery_from_cwr() {
        // An RTO while the ECN reduction runs, then a recovery a fifth of an
        // RTT later: a quick second cut, but its first one was no recovery.
        let r = reactions(&[
            state(10, 0, CA_CWR, 20),
            state(11, CA_CWR, CA_LOSS, 14),
            state(11, CA_LOSS, 0, 4),
            dctcp_event {
                ts_ns: 11_200_000,
                ..state(0, 0, CA_RECOVERY, 4)
            },
        ]);
        assert_eq!((r.recoveries, r.timeouts), (1, 1));
        assert_eq!(
            (r.cuts_within_half_rtt, r.cuts_within_half_rtt_after_cwr),
            (1, 0)
        );
        assert!((r.min_gap_rtts.unwrap() - 0.2).abs() < 1e-9, "{r:?}");
    }

    /// A window event of flow `sport` at `ms` with `delivered` packets of
    /// which `ce` were ECE-echoed, alpha after it in 1/1024.
    fn window(sport: u16, ms: u64, delivered: u32, ce: u32, alpha_1024: u32) -> dctcp_event {
        let mut e = ev(ms, EV_WINDOW, 0, 0, 10, 10);
        e.flow.sport = sport;
        e.flow.dport = 5201;
        e.win_delivered = delivered;
        e.win_delivered_ce = ce;
        e.alpha = alpha_1024 * (loader::intf::DCTCP_ALPHA_ONE / 1024);
        e.delivered = 100 + 10 * ms as u32;
        e.delivered_ce = 7 + 2 * ms as u32;
        e
    }

    #[test]
    fn each_flow_is_checked_on_its_own_windows_and_its_second_half() {
        // Flow 1: windows at 0-40 ms; the middle (20 ms) opens the second
        // half. Flow 2's one window and the receiver's counts of flow 1
        // must not mix with it.
        let trace = CcTrace {
            events: vec![
                window(1, 0, 10, 0, 1024),
                window(1, 10, 10, 2, 512),
                window(2, 15, 50, 50, 1024),
                window(1, 20, 20, 4, 256),
                window(1, 30, 10, 6, 128),
                window(1, 40, 10, 10, 256),
            ],
            counts: Counts::default(),
        };
        let flow = |sender: usize, sport: u16| FlowResult {
            sender,
            sport,
            dport: 5201,
            ..FlowResult::default()
        };
        let rx = |sport: u16, pkts: u64, ce_pkts: u64| RxFlow {
            src: std::net::Ipv4Addr::UNSPECIFIED,
            sport,
            dst: std::net::Ipv4Addr::UNSPECIFIED,
            dport: 5201,
            pkts,
            data_bytes: 0,
            ce_pkts,
            ce_bytes: 0,
            ect_pkts: pkts,
        };
        let check = trace.check(
            &[flow(0, 1), flow(1, 2), flow(2, 3)],
            &[rx(2, 9, 9), rx(1, 60, 22)],
        );
        let one = &check.flows[0];
        assert_eq!((one.events, one.windows, one.acks), (5, 5, 0));
        // F: 22 of 60 over the run, 20 of 40 from 20 ms on.
        assert!((one.fraction_marked - 22.0 / 60.0).abs() < 1e-12, "{one:?}");
        assert!((one.fraction_marked_late - 0.5).abs() < 1e-12, "{one:?}");
        // alpha at 256, 128, 256 of 1024 in the second half; 1 at most.
        assert!((one.alpha_late_mean - 640.0 / 3.0 / 1024.0).abs() < 1e-12);
        assert_eq!(one.alpha_max, 1.0);
        // The sender's counters over its first and last event.
        assert_eq!((one.sender_delivered, one.sender_delivered_ce), (400, 80));
        assert_eq!((one.receiver_pkts, one.receiver_ce_pkts), (60, 22));
        let two = &check.flows[1];
        assert_eq!((two.windows, two.fraction_marked_late), (1, 1.0));
        assert_eq!((two.receiver_pkts, two.sender_delivered), (9, 0));
        // A flow never traced reads zero, not NaN.
        let three = &check.flows[2];
        assert_eq!((three.events, three.receiver_pkts), (0, 0));
        assert_eq!((three.fraction_marked, three.alpha_late_mean), (0.0, 0.0));
    }

    #[test]
    fn a_recovery_from_cwr_that_ends_at_once_explains_a_quick_second_cut() {
        let at = |ms: u64, us: u64, mut e: dctcp_event| {
            e.ts_ns = ms * 1_000_000 + us * 1000;
            e
        };
        let r = reactions(&[
            state(10, 0, CA_CWR, 20),
            // Loss during the ECN reduction: recovery, left at the next
            // ACK, entered again.
            at(11, 0, state(0, CA_CWR, CA_RECOVERY, 14)),
            at(11, 2, ack(0, 8, 7)),
            at(11, 3, state(0, CA_RECOVERY, 0, 8)),
            at(11, 4, state(0, 0, CA_RECOVERY, 8)),
            at(11, 6, ack(0, 8, 4)),
            // Half an RTT later, an RTO: not within half an RTT.
            at(11, 504, state(0, CA_RECOVERY, CA_LOSS, 4)),
            at(11, 600, state(0, CA_LOSS, 0, 4)),
            // A third of an RTT after it, another: quick, but not after a
            // recovery entered from CWR.
            at(11, 837, state(0, 0, CA_LOSS, 4)),
        ]);
        assert_eq!((r.recoveries, r.timeouts), (2, 2));
        assert_eq!((r.recoveries_seen, r.halved_once), (2, 2));
        assert_eq!(
            (r.cuts_within_half_rtt, r.cuts_within_half_rtt_after_cwr),
            (2, 1)
        );
        assert!((r.min_gap_rtts.unwrap() - 0.004).abs() < 1e-9, "{r:?}");
        // A recovery with no ACK traced after it is not judged.
        let r = reactions(&[state(1, 0, CA_RECOVERY, 40)]);
        assert_eq!(
            (r.recoveries, r.recoveries_seen, r.min_gap_rtts),
            (1, 0, None)
        );
    }
}
