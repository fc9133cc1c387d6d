//! What the fault tests (tests/faults.rs) judge, shared with the stock-kernel
//! tier (tests/vm.rs), which runs the same judgments under Debian's kernels.
//! Each judge is strict: the host's tests run on their own CPU, away from the
//! platform's agent, where the kernel issue (README "Known issue") does not
//! strike (`super::serial`), and the stock kernels never showed it.

use serde_json::Value;

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The receiver's counter rides after the faults on the same hook (tcx, or
/// clsact before 6.6): it counts exactly every TCP segment they let through
/// on the way in, handshakes and closes included, which the faults count as
/// crossed and leave alone. Ahead of them it would count the dropped too.
pub fn assert_receiver_counts_what_the_faults_let_through(o: &Value, what: &str) {
    let d = &o["faults"]["data"];
    let rx: u64 = o["rx"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| u(&f["pkts"]))
        .sum();
    let passed = u(&d["crossed"]) - u(&d["dropped"]);
    assert_eq!(
        rx, passed,
        "{what}: the receiver counted {rx}, the faults let {passed} segments through: {d}"
    );
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Goodput of all flows after the warmup, bit/s.
pub fn goodput(o: &Value) -> f64 {
    o["goodput_bps"].as_array().unwrap().iter().map(f).sum()
}

/// The flows kept the link of `rate_bps` busy through the fault (at
/// 100 Mbit/s on the host they fill 94.5-95.7 % of it as goodput with or
/// without one, 90.0 % with 15 % of the lab's CPU stolen), as far as the
/// CPU the hypervisor left allowed (`super::busy_floor`).
pub fn assert_link_busy(o: &Value, rate_bps: f64, what: &str) {
    let (g, steal) = (goodput(o), f(&o["steal_share"]));
    assert!(
        g >= super::busy_floor(0.85, steal) * rate_bps,
        "{what}: goodput {:.1} Mbit/s with {:.1} % of the lab's CPU stolen",
        g / 1e6,
        steal * 100.0
    );
}

/// Sum over the senders of a tcp_info field.
pub fn senders(o: &Value, field: &str) -> u64 {
    o["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fl| u(&fl["info"][field]))
        .sum()
}

/// Sum over the traced flows of a loss-reaction field.
pub fn reactions(o: &Value, field: &str) -> u64 {
    o["trace_check"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fl| u(&fl["loss"][field]))
        .sum()
}

/// Traced flows whose init never ran: zeroed state and none of the ACK
/// path, what a refused fallback left before it went to the kernel's reno
/// (docs/kernels.md, "a refused fallback").
pub fn never_started(o: &Value) -> usize {
    o["trace_check"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|fl| u(&fl["starts"]) == 0)
        .count()
}

/// Sum over the traced flows of a field of their check.
pub fn traced(o: &Value, field: &str) -> u64 {
    o["trace_check"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fl| u(&fl[field]))
        .sum()
}

/// Flows that negotiated ECN.
pub fn ecn_flows(o: &Value) -> usize {
    o["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|fl| fl["info"]["ecn"] == true)
        .count()
}

/// Each run of consecutive intervals of a flow's series that delivered under
/// a tenth of its median (the flow stalled there), as its length.
pub fn stalls(series: &[u64]) -> Vec<usize> {
    let mut sorted = series.to_vec();
    sorted.sort_unstable();
    let floor = sorted[sorted.len() / 2] / 10;
    series
        .chunk_by(|a, b| (*a < floor) == (*b < floor))
        .filter(|run| run[0] < floor)
        .map(<[u64]>::len)
        .collect()
}

/// Whether `hits` of `n` draws is a plausible outcome of probability `p`:
/// within five binomial standard deviations (and one draw) of n p.
pub fn binomial(hits: u64, n: u64, p: f64) -> bool {
    let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
    (hits as f64 - mean).abs() <= 5.0 * sd + 1.0
}

/// Random loss at probability `p`: the losses and retransmissions of both
/// runs, their goodput side by side, and bpf_dctcp's loss reactions (see
/// the test in tests/faults.rs for the spread these bounds come from).
pub fn judge_random_loss(ours: &Value, cubic: &Value, p: f64, rate_bps: f64) {
    for (o, what) in [(ours, "bpf_dctcp"), (cubic, "cubic")] {
        let d = &o["faults"]["data"];
        let (seen, dropped) = (u(&d["seen"]), u(&d["dropped"]));
        assert!(
            binomial(dropped, seen, p),
            "{what}: dropped {dropped} of {seen} at {p}"
        );
        assert_receiver_counts_what_the_faults_let_through(o, what);
        let retrans = senders(o, "total_retrans");
        assert!(
            retrans as f64 >= 0.6 * dropped as f64,
            "{what}: {retrans} retransmissions for {dropped} segments lost"
        );
        assert_link_busy(o, rate_bps, what);
    }
    // The two runs come one after the other, each with its own steal: a
    // fresh clone (2026-11-29) read 90.1 Mbit/s for bpf_dctcp with 12 %
    // of the lab's CPU stolen and 81.2 for cubic with 28 %, 1.109.
    let ratio = goodput(ours) / goodput(cubic);
    let (s_ours, s_cubic) = (f(&ours["steal_share"]), f(&cubic["steal_share"]));
    assert!(
        super::ratio_band(0.9, 1.1, s_ours, s_cubic).contains(&ratio),
        "goodput bpf_dctcp / cubic {ratio:.3} at {p} loss (steal {:.1} % / {:.1} %)",
        s_ours * 100.0,
        s_cubic * 100.0
    );

    assert_eq!(
        never_started(ours),
        0,
        "bpf_dctcp's flows traced without init (guard repairs {}) at {p}",
        ours["guard_repairs"]
    );
    // The analysis leaves a recovery the guard repaired unjudged and says
    // so in the summary; here none may be left out.
    assert_eq!(
        reactions(ours, "recoveries_repaired"),
        0,
        "recoveries the guard repaired at {p} (guard repairs {})",
        ours["guard_repairs"]
    );
    let dropped = u(&ours["faults"]["data"]["dropped"]);
    let recoveries = reactions(ours, "recoveries");
    let (seen, halved) = (
        reactions(ours, "recoveries_seen"),
        reactions(ours, "halved_once"),
    );
    let (quick, after_cwr) = (
        reactions(ours, "cuts_within_half_rtt"),
        reactions(ours, "cuts_within_half_rtt_after_cwr"),
    );
    assert!(
        recoveries as f64 >= 0.5 * dropped as f64
            && recoveries as f64 <= 1.15 * dropped as f64 + 3.0,
        "{recoveries} recoveries for {dropped} losses"
    );
    assert_eq!(halved, seen, "recoveries that did not halve exactly once");
    assert!(
        seen as f64 >= 0.9 * recoveries as f64,
        "{seen} of {recoveries} recoveries traced"
    );
    assert_eq!(
        quick, after_cwr,
        "a second cut within an RTT not after a recovery from CWR"
    );
    assert!(
        quick as f64 <= 0.1 * recoveries as f64 + 1.0,
        "{quick} second cuts within an RTT in {recoveries} recoveries"
    );
}

/// 10 % of the receiver's pure ACKs lost (tests/faults.rs): no flow stalls,
/// and the ECN echo stays true.
pub fn judge_ack_loss(o: &Value, rate_bps: f64) {
    let a = &o["faults"]["acks"];
    assert!(
        binomial(u(&a["dropped"]), u(&a["seen"]), 0.1),
        "ACK loss: {a}"
    );
    // Cumulative ACKs cover for the lost ones: no flow stalls, but for a rare
    // retransmission timeout when every ACK of a flight and the tail probe's
    // were lost. A fresh clone of 8a4bb35 (2026-11-29) had one: a 100 ms
    // interval at 0, one spurious retransmission, no drop; 100 pinned runs
    // the same hour had none (one retransmission, no stall). So: at most one
    // stall a run, at most 3 intervals long (a 200 ms minimum RTO across
    // interval edges; a backed-off second one is longer), in a flow that
    // retransmitted. A sender that stops for any other reason fails it.
    let mut timeouts = 0;
    for fl in o["flows"].as_array().unwrap() {
        let series: Vec<u64> = fl["series"].as_array().unwrap().iter().map(u).collect();
        let after_warmup = &series[series.len() / 4..series.len() - 1];
        let stalls = stalls(after_warmup);
        let what = format!(
            "stalls {stalls:?} (guard repairs {}): {fl}",
            o["guard_repairs"]
        );
        assert!(stalls.iter().all(|&n| n <= 3), "{what}");
        assert!(
            stalls.is_empty() || u(&fl["info"]["total_retrans"]) >= 1,
            "a stall with no retransmission: {what}"
        );
        timeouts += stalls.len();
    }
    assert!(timeouts <= 1, "{timeouts} stalls in one run");
    let (delivered, ce) = (
        traced(o, "sender_delivered"),
        traced(o, "sender_delivered_ce"),
    );
    let (rx, rx_ce) = (traced(o, "receiver_pkts"), traced(o, "receiver_ce_pkts"));
    let (f_sender, f_rx) = (ce as f64 / delivered as f64, rx_ce as f64 / rx as f64);
    assert!(f_rx > 0.02, "too few marks to compare: {f_rx}");
    assert!(
        (f_sender - f_rx).abs() <= 0.1 * f_rx,
        "F at the sender {f_sender:.4} against CE at the receiver {f_rx:.4}"
    );
    assert_link_busy(o, rate_bps, "bpf_dctcp");
}

/// 1 % of data segments reordered (tests/faults.rs): every detour comes
/// back, both senders see it, bpf_dctcp drops nothing and retransmits
/// spuriously no more than cubic.
pub fn judge_reorder(ours: &Value, cubic: &Value, rate_bps: f64) {
    let mut retrans = Vec::new();
    for (run, o) in [("bpf_dctcp", ours), ("cubic", cubic)] {
        let d = &o["faults"]["data"];
        let (seen, sent, back) = (u(&d["seen"]), u(&d["reordered"]), u(&d["returned"]));
        assert_eq!(sent, back, "{run}: detoured segments lost: {d}");
        assert_eq!(u(&d["detour_failed"]), 0, "{run}: {d}");
        assert!(
            binomial(sent, seen, 0.01),
            "{run}: reordered {sent} of {seen}"
        );
        assert!(
            senders(o, "reord_seen") > 0,
            "{run}: the senders saw no reordering"
        );
        // cubic's retransmissions leave Not-ECT and the step marker drops
        // them above K (0-2 per run); bpf_dctcp's keep ECT.
        if run.contains("dctcp") {
            assert_eq!(u(&o["drops"]), 0, "{run}: drops");
        }
        assert_link_busy(o, rate_bps, run);
        retrans.push(senders(o, "total_retrans"));
    }
    assert!(
        retrans[0] as f64 <= 1.5 * retrans[1] as f64 + 10.0,
        "spurious retransmits: bpf_dctcp {} against cubic {}",
        retrans[0],
        retrans[1]
    );
}
