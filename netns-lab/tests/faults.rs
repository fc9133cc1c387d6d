//! Faults between the switch and the receiver (`lab queue --loss`,
//! `--ack-loss`, `--ecn-bleach`, `--bleach-syn`, `--reorder`): each on real
//! flows at 100 Mbit/s, asserting what RFC 8257 and the kernel's TCP do
//! under it, and the fault's own counters against what the switch, the
//! receiver and the senders saw. Bounds from the spread of quick runs
//! (docs/testing.md lists them).

mod common;

use common::faults::*;
use common::{assert_refused, outcome, quick_queue as queue, require_root, serial, steal_capped};

const RATE_BPS: f64 = 100e6;

/// Random loss after the switch, 0.1 % and 1 % of data segments. bpf_dctcp
/// reacts as Reno does (RFC 8257 3.5): every recovery halves once,
/// ssthresh = max(cwnd / 2, 2), and stays there until it ends; a second
/// cut within half an RTT comes only from the kernel's CWR-then-recovery
/// path (cctrace::LossReactions), and rarely. Both algorithms repair every
/// loss and keep the link busy. Measured over 6 rounds: recoveries 0.90-1.06
/// per loss, halved once in every traced recovery, second cuts 1.6-4.6 %
/// of recoveries at 1 %, retransmissions 0.83-1.06 per loss (those after
/// the senders' last tcp_info read are not in it), goodput 94.5-95.6
/// Mbit/s for both, their ratio 0.999-1.002 (asserted within 0.9-1.1,
/// widened by each run's steal: `common::ratio_band`).
#[test]
fn random_loss_halves_once_per_recovery_and_keeps_pace_with_cubic() {
    require_root();
    let _serial = serial();
    steal_capped(random_loss_halves_once_per_recovery_and_keeps_pace_with_cubic_once);
}

fn random_loss_halves_once_per_recovery_and_keeps_pace_with_cubic_once() {
    for p in ["0.001", "0.01"] {
        let dir = queue("loss", "bpf_dctcp:bpf-step,cubic:bpf-step", &["--loss", p]);
        let p: f64 = p.parse().unwrap();
        let (ours, cubic) = (
            outcome(&dir, "100M-bpf_dctcp-bpf-step"),
            outcome(&dir, "100M-cubic-bpf-step"),
        );
        judge_random_loss(&ours, &cubic, p, RATE_BPS);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A middlebox clears the ECN field of everything after the switch: every
/// CE the switch marked is cleared, none reaches the receiver or comes
/// back to the sender, alpha decays, and without ECN feedback the flows
/// fill the buffer as TCP does, losing packets at its tail instead. The
/// receivers' window is not clamped (`--rwnd-clamp 0`), so that the
/// buffer, not the window, is what stops them; a 150-packet buffer fills
/// within the quick run (425 takes Reno's linear growth about 6 s here).
#[test]
fn bleached_ce_never_reaches_the_sender_and_the_buffer_takes_over() {
    require_root();
    let _serial = serial();
    steal_capped(bleached_ce_never_reaches_the_sender_and_the_buffer_takes_over_once);
}

fn bleached_ce_never_reaches_the_sender_and_the_buffer_takes_over_once() {
    let dir = queue(
        "bleach",
        "bpf_dctcp:bpf-step",
        &["--ecn-bleach", "1", "--rwnd-clamp", "0", "--buffer", "150"],
    );
    let o = outcome(&dir, "100M-bpf_dctcp-bpf-step");
    let d = &o["faults"]["data"];
    let marks = u(&o["marker"]["marked"]);
    assert!(marks > 1000, "the switch marked {marks}");
    assert_eq!(u(&d["ce_bleached"]), marks, "every mark bleached: {d}");
    assert!(u(&d["ect_bleached"]) > 0, "{d}");
    assert_eq!(
        u(&o["probe_check"]["receiver_ce"]),
        0,
        "CE reached the receiver"
    );
    assert_eq!(
        traced(&o, "sender_delivered_ce"),
        0,
        "ECE reached the sender"
    );
    for fl in o["trace_check"]["flows"].as_array().unwrap() {
        assert!(
            f(&fl["alpha_late_mean"]) < 0.01,
            "alpha did not decay: {fl}"
        );
    }
    assert_eq!(
        ecn_flows(&o),
        2,
        "ECN is still negotiated: only the field is bleached"
    );
    assert!(u(&o["drops"]) > 0, "no tail drop at the buffer");
    // K is 20: the queue stands far above it, near the buffer.
    assert!(
        f(&o["queue"]["mean"]) > 60.0 && f(&o["queue"]["p95"]) >= 120.0,
        "queue {} with no ECN feedback",
        o["queue"]
    );
    assert_link_busy(&o, RATE_BPS, "bpf_dctcp");
    let _ = std::fs::remove_dir_all(&dir);
}

/// ECE and CWR stripped from every SYN: the receiver never agrees to ECN,
/// bpf_dctcp hands each flow to its Reno fallback (traced, and the socket
/// says so), nothing but the SYNs leaves ECN-capable, and the step marker drops at K
/// what it would have marked. cubic, asking for ECN by the lab's sysctl,
/// runs without it the same way.
#[test]
fn stripped_ecn_negotiation_falls_back_and_counts_it() {
    require_root();
    let _serial = serial();
    steal_capped(stripped_ecn_negotiation_falls_back_and_counts_it_once);
}

fn stripped_ecn_negotiation_falls_back_and_counts_it_once() {
    let dir = queue(
        "syn",
        "bpf_dctcp:bpf-step,cubic:bpf-step",
        &["--bleach-syn"],
    );
    for run in ["100M-bpf_dctcp-bpf-step", "100M-cubic-bpf-step"] {
        let o = outcome(&dir, run);
        let d = &o["faults"]["data"];
        assert_eq!((u(&d["syns"]), u(&d["syn_bleached"])), (2, 2), "{run}: {d}");
        assert_eq!(
            ecn_flows(&o),
            0,
            "{run}: ECN negotiated through a stripped SYN"
        );
        assert_eq!(u(&o["marks"]), 0, "{run}: marked Not-ECT packets");
        // Linux sends the SYN of an algorithm that needs ECN as ECT(0)
        // (tcp_ecn_send_syn): one per flow, nothing after it.
        assert!(
            u(&o["marker"]["ect"]["pkts"]) <= 2,
            "{run}: ECN-capable packets left the senders: {}",
            o["marker"]
        );
        assert!(u(&o["drops"]) > 0, "{run}: the marker dropped nothing at K");
        assert_link_busy(&o, RATE_BPS, run);
    }
    let o = outcome(&dir, "100M-bpf_dctcp-bpf-step");
    assert_eq!(traced(&o, "fallbacks"), 2, "fallbacks in the trace");
    for fl in o["flows"].as_array().unwrap() {
        let used = fl["cc_used"].as_str().unwrap();
        assert!(
            used.ends_with("_reno"),
            "flow ran {used}, not the Reno fallback"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// 10 % of the receiver's pure ACKs lost: cumulative ACKs cover for them,
/// no flow stalls but for one rare retransmission timeout (`judge_ack_loss`
/// says when), and the ECN echo stays true: the share of delivered
/// packets bpf_dctcp counts as ECE-echoed (F) is within 10 % of the share
/// of packets that arrived CE-marked (the two differ by 2-4 % with no loss;
/// 1.3-3.2 % under this loss over 6 rounds, ACK loss 9.7-10.2 %).
///
/// Unpinned, the known issue (README) struck 7 of 8 runs (2026-11-26), and
/// a repaired flow's burst could cost a flow a spurious timeout (1-2
/// near-empty 100 ms intervals); on the test's own CPU no stall at all is
/// allowed.
#[test]
fn ack_loss_stalls_nothing_and_keeps_the_ce_echo() {
    require_root();
    let _serial = serial();
    steal_capped(ack_loss_stalls_nothing_and_keeps_the_ce_echo_once);
}

fn ack_loss_stalls_nothing_and_keeps_the_ce_echo_once() {
    let dir = queue("ackloss", "bpf_dctcp:bpf-step", &["--ack-loss", "0.1"]);
    let o = outcome(&dir, "100M-bpf_dctcp-bpf-step");
    judge_ack_loss(&o, RATE_BPS);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What counts as a stall: runs of intervals under a tenth of the median.
#[test]
fn stalls_are_runs_under_a_tenth_of_the_median() {
    use common::faults::stalls;
    // Median 100, floor 10: 9 is a stall, 10 is not.
    let s = [100, 9, 0, 100, 10, 100, 100, 5, 100, 0];
    assert_eq!(stalls(&s), vec![2, 1, 1]);
    assert!(stalls(&[100, 100, 10, 100]).is_empty());
}

/// 1 % of data segments reordered (held on the detour about four packets'
/// time): nothing is lost, every detoured segment comes back, both senders
/// notice the reordering, and bpf_dctcp retransmits spuriously no more than
/// cubic does under the same reordering (both run the kernel's RACK).
/// Measured over 6 rounds: retransmissions 12-16 for bpf_dctcp against
/// 15-20 for cubic, reorderings seen 277-317, goodput 95.3-95.6 Mbit/s.
#[test]
fn reordering_costs_bpf_dctcp_no_more_spurious_retransmits_than_cubic() {
    require_root();
    let _serial = serial();
    steal_capped(reordering_costs_bpf_dctcp_no_more_spurious_retransmits_than_cubic_once);
}

fn reordering_costs_bpf_dctcp_no_more_spurious_retransmits_than_cubic_once() {
    let dir = queue(
        "reorder",
        "bpf_dctcp:bpf-step,cubic:bpf-step",
        &["--reorder", "0.01"],
    );
    judge_reorder(
        &outcome(&dir, "100M-bpf_dctcp-bpf-step"),
        &outcome(&dir, "100M-cubic-bpf-step"),
        RATE_BPS,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Probabilities outside [0, 1] and a reorder delay without reordering are
/// refused (exit 2) before anything is built.
#[test]
fn bad_fault_options_are_refused_before_anything_is_built() {
    require_root();
    let _serial = serial();
    let q = |extra: &'static [&'static str]| -> Vec<&'static str> {
        let mut v = vec![
            "queue",
            "--quick",
            "--rates",
            "100M",
            "--variants",
            "cubic:bpf-step",
        ];
        v.extend_from_slice(extra);
        v
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (q(&["--loss", "1.5"]), "--loss 1.5: a probability"),
        (q(&["--ack-loss=-0.1"]), "--ack-loss -0.1: a probability"),
        (q(&["--ecn-bleach", "2"]), "--ecn-bleach 2: a probability"),
        (q(&["--reorder", "1.01"]), "--reorder 1.01: a probability"),
        (
            q(&["--reorder-delay", "1ms"]),
            "--reorder-delay without --reorder",
        ),
        (
            q(&["--reorder", "0.1", "--reorder-delay", "5s"]),
            "`5s` is above the lab's limit of 1s",
        ),
    ];
    let cases: Vec<(&[&str], &str)> = cases.iter().map(|(a, e)| (a.as_slice(), *e)).collect();
    assert_refused(&cases);
}
