//! What the faults on a run's links did to its flows, for the summary:
//! the ECN echo end to end and each algorithm's loss reactions beside what
//! each path dropped, bleached or reordered (`lab queue`'s faults).

use crate::measure::cctrace::{FlowCheck, LossReactions};
use crate::measure::scenario::Outcome;
use crate::net::link_faults::FaultArgs;
use crate::report::tables::table_header;

/// The ECN feedback end to end over a run's traced flows: the share of
/// delivered packets the senders counted as ECE-echoed (F), beside the
/// share of data packets the receiver saw CE-marked. None without a trace.
pub fn ce_echo(o: &Outcome) -> Option<(f64, f64)> {
    let flows = &o.trace_check.as_ref()?.flows;
    let sum = |f: fn(&FlowCheck) -> u64| flows.iter().map(f).sum::<u64>() as f64;
    Some((
        sum(|f| f.sender_delivered_ce) / sum(|f| f.sender_delivered).max(1.0),
        sum(|f| f.receiver_ce_pkts) / sum(|f| f.receiver_pkts).max(1.0),
    ))
}

/// A summary's section on the faults: what was injected, what each path
/// did, and how the senders took it.
pub fn summary_section(args: &FaultArgs, outcomes: &[Outcome]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "\n## Faults\n");
    let _ = writeln!(
        s,
        "Injected between the switch and the receiver (BPF on the receiver's interface, tcx or clsact, ahead of its \
         counter): {}. Loss and reordering act on data segments on the way in and pure ACKs on the way out \
         (handshakes and closes pass); ECN bleaching on any segment on the way in.{}\n",
        args.describe(),
        if args.reorder > 0.0 {
            " A reordered segment is held by the delay element on a detour and handed back to the receiver's \
             interface; the hold and the element's lateness are in each run's outcome.json."
        } else {
            ""
        }
    );
    table_header(
        &mut s,
        &[
            "rate",
            "algorithm@backend",
            "goodput (Mbit/s)",
            "data seen / dropped",
            "CE / ECT bleached",
            "ECN SYNs stripped",
            "reordered / back",
            "ACKs seen / dropped",
            "sender retransmits",
            "reorderings seen",
            "ECN negotiated",
            "recoveries / RTOs",
            "halved once",
            "second cuts within half an RTT (after CWR)",
            "min gap (RTTs)",
            "fallbacks",
            "F (sender) / CE (receiver)",
        ],
    );
    for o in outcomes {
        let Some(r) = &o.faults else { continue };
        let d = r.data.unwrap_or_default();
        let a = r.acks.unwrap_or_default();
        let traced = o.trace_check.as_ref();
        let loss = traced.map(|t| {
            t.flows
                .iter()
                .fold(LossReactions::default(), |acc, f| acc.add(&f.loss))
        });
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {} / {} | {} / {} | {} of {} | {} / {} | {} / {} | {} | {} | {} of {} | {} | {} | {} | {} | {} | {} |",
            crate::units::fmt_rate(o.rate_bps),
            o.label,
            o.goodput_bps.iter().sum::<f64>() / 1e6,
            d.seen,
            d.dropped,
            d.ce_bleached,
            d.ect_bleached,
            d.syn_bleached,
            d.syns,
            d.reordered,
            d.returned,
            a.seen,
            a.dropped,
            o.flows.iter().map(|f| u64::from(f.info.total_retrans)).sum::<u64>(),
            o.flows.iter().map(|f| u64::from(f.info.reord_seen)).sum::<u64>(),
            o.flows.iter().filter(|f| f.info.ecn).count(),
            o.flows.len(),
            loss.as_ref().map_or("-".into(), |l| format!("{} / {}", l.recoveries, l.timeouts)),
            loss.as_ref().map_or("-".into(), |l| format!(
                "{} of {}{}",
                l.halved_once,
                l.recoveries_seen,
                if l.recoveries_repaired > 0 {
                    format!(" ({} repaired)", l.recoveries_repaired)
                } else {
                    String::new()
                }
            )),
            loss.as_ref().map_or("-".into(), |l| format!(
                "{} ({})",
                l.cuts_within_half_rtt, l.cuts_within_half_rtt_after_cwr
            )),
            loss.as_ref().and_then(|l| l.min_gap_rtts).map_or("-".into(), |g| format!("{g:.2}")),
            traced.map_or("-".into(), |t| t.flows.iter().map(|f| f.fallbacks).sum::<u64>().to_string()),
            ce_echo(o).map_or("-".into(), |(f, ce)| format!("{:.4} / {:.4}", f, ce)),
        );
    }
    let _ = writeln!(
        s,
        "\nRecoveries / RTOs, halved once, min gap and fallbacks come from bpf_dctcp's live trace (`-` where the \
         algorithm is the kernel's and untraced). Halved once: recoveries after which every traced ACK carried \
         ssthresh = max(cwnd / 2, 2) of the cwnd the recovery started from, and never less (RFC 8257 3.5: react \
         to loss as Reno does, at most once per window); recoveries in which the guard repaired the window \
         (the README's known issue) are counted apart, in brackets, and not judged. Second cuts within half an RTT: loss reactions less than \
         half a smoothed RTT after the one before (a recovery lasts about an RTT at least), and in brackets those that followed a recovery entered during an ECN \
         reduction (CWR): such a recovery keeps the CWR's high_seq (tcp_enter_recovery does not restart the \
         reduction while one is under way), ends at the next ACK, and the loss not yet repaired starts a second \
         recovery, which halves again. That is the kernel's TCP, not the algorithm: the algorithm is asked for \
         ssthresh on each entry. Min gap: the shortest time from one loss reaction to the next, in RTTs. Sender retransmits and \
         reorderings seen are the senders' tcp_info (total_retrans, reord_seen); ECN negotiated is its \
         TCPI_OPT_ECN. F (sender): delivered packets the senders counted ECE-echoed, over all delivered; CE \
         (receiver): data packets that arrived CE-marked, over all (the receiver's counter, after the faults)."
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::cctrace::TraceCheck;

    /// Sums over flows, then divides: a flow with few packets weighs little.
    #[test]
    fn ce_echo_is_the_share_over_every_traced_flow() {
        let flow = |delivered, echoed, rx, ce| FlowCheck {
            sender_delivered: delivered,
            sender_delivered_ce: echoed,
            receiver_pkts: rx,
            receiver_ce_pkts: ce,
            ..Default::default()
        };
        let mut o = Outcome::default();
        assert_eq!(ce_echo(&o), None);
        o.trace_check = Some(TraceCheck {
            flows: vec![flow(900, 90, 1000, 120), flow(100, 30, 100, 0)],
            ..Default::default()
        });
        assert_eq!(ce_echo(&o), Some((0.12, 120.0 / 1100.0)));
        o.trace_check = Some(TraceCheck::default());
        assert_eq!(ce_echo(&o), Some((0.0, 0.0)));
    }
}
