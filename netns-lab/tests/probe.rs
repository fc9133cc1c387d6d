//! The queue as the switch's pins report it, against the qdisc's own: a live
//! lab's `queue_now` and `marker_stats` pins, read the way `loader top`
//! reads them, beside `tc -s qdisc` of the bottleneck, tick after tick.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use dctcp_utils::clock::monotonic_ns;
use netns_lab::measure::scenario::{self, Scenario};
use tc_qdisc::pins::{read_all, SwitchNow};

mod common;

use common::{require_root, serial};

/// The root qdisc of the lab's bottleneck: the one non-default root in the
/// switch namespace. Returns (qlen, backlog bytes, sent packets).
fn qdisc_now(ns: &str) -> (u64, u64, u64) {
    let out = std::process::Command::new("tc")
        .args(["-n", ns, "-s", "-j", "qdisc", "show"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let root = all
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["root"] == true && q["kind"] != "noqueue")
        .unwrap_or_else(|| panic!("no shaper in {all}"));
    let n = |k: &str| root[k].as_u64().unwrap();
    (n("qlen"), n("backlog"), n("packets"))
}

/// One switch pinned under LAB_ROOT (these tests run one lab at a time).
fn the_switch() -> Option<(String, SwitchNow)> {
    let found = read_all();
    assert!(found.len() <= 1, "more than one lab switch: {found:?}");
    let r = found.into_iter().next()?;
    Some((r.prefix, r.now.expect("the pins read")))
}

/// Two cubic flows fill a 425-packet drop-tail buffer at 100 Mbit/s: a
/// standing queue of hundreds of packets that moves by tens per
/// millisecond. Each tick reads the pins, then the qdisc, then the pins
/// again; the qdisc's queue must lie between the two pin readings, less
/// what the link sent since the last arrival, in packets and in bytes.
#[test]
fn the_pins_report_the_qdiscs_own_backlog() {
    require_root();
    let _serial = serial();
    let scn = Scenario::long_flows(
        "cubic",
        tc_qdisc::Bottleneck {
            rate_bps: 100_000_000,
            buffer_pkts: 425,
            backend: tc_qdisc::Backend::Droptail,
        },
        2,
        "cubic",
        Duration::from_secs(3),
        Duration::from_secs(1),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut ticks = Vec::new();
    let run = scenario::run(&scn, &stop, |t| {
        if t < Duration::from_millis(500) {
            return;
        }
        let (prefix, before) = the_switch().expect("a running lab's switch is pinned");
        let t1 = monotonic_ns();
        let q = qdisc_now(&format!("{prefix}-sw"));
        let t2 = monotonic_ns();
        let (_, after) = the_switch().unwrap();
        ticks.push((before, (t1, t2), q, after));
    })
    .unwrap();
    assert!(the_switch().is_none(), "the pins outlived the run");
    assert!(ticks.len() >= 20, "{} ticks", ticks.len());

    // The pins hold the queue an arrival found (that arrival not yet in
    // it), refreshed by the first arrival of each jiffy. Arrivals only add
    // and the link sends at most `pps`, so the qdisc, read at some time in
    // [t1, t2], holds at least the first reading less what the link sent
    // from that arrival to t2, and at most the second reading plus what it
    // sent from t1 to the second reading's arrival (if that came after t1),
    // plus what arrived in the jiffy after that reading, which no reading
    // shows: at most what the link drains in a jiffy (10 ms at the coarsest
    // HZ) in a standing queue. One packet of slack each way.
    let pps = 100e6 / (1514.0 * 8.0) / 1e9;
    let sent = |from: u64, to: u64| (to.saturating_sub(from) as f64 * pps).ceil() as u64;
    let jiffy = sent(0, 10_000_000);
    let mut mean_q = 0.0;
    let mut mean_gap = 0.0;
    for (before, (t1, t2), (qlen, backlog, _), after) in &ticks {
        let (down, up) = (sent(before.queue.ts_ns, *t2), sent(*t1, after.queue.ts_ns));
        let (a, b) = (u64::from(before.queue.qlen), u64::from(after.queue.qlen));
        assert!(
            (a.saturating_sub(down + 1)..=b + up + jiffy + 1).contains(qlen),
            "qdisc qlen {qlen}: pins {a} then {b}, link sent at most {down} / {up} between"
        );
        let (a, b) = (
            u64::from(before.queue.backlog),
            u64::from(after.queue.backlog),
        );
        assert!(
            (a.saturating_sub((down + 1) * 1514)..=b + (up + jiffy + 1) * 1514).contains(backlog),
            "qdisc backlog {backlog} B: pins {a} then {b} B, link sent at most {down} / {up} between"
        );
        mean_q += *qlen as f64 / ticks.len() as f64;
        mean_gap += (f64::from(before.queue.qlen) - *qlen as f64) / ticks.len() as f64;
        // A live switch: its counters move forward.
        assert!(after.stats.pkts >= before.stats.pkts);
    }
    eprintln!(
        "{} ticks: mean qdisc queue {mean_q:.1}, first pin reading above it by {mean_gap:.1} \
         on average",
        ticks.len()
    );
    // Averaged over the ticks, the two agree within the few packets the link
    // sends while `tc` runs (five runs, 2026-11-25, a reading per arrival:
    // 1.5-3.4 of 357; three with a reading per jiffy: -4.6 to -5.9 of
    // 357-361).
    assert!(
        mean_gap.abs() <= 0.05 * mean_q,
        "{mean_gap} against {mean_q}"
    );
    // A standing queue, far from empty: the comparison means something.
    assert!(mean_q > 100.0, "mean queue {mean_q}");
    // The marker counted every packet the qdisc took in and sent (drop-tail:
    // it marks nothing, and drops only at the buffer).
    let last = &ticks.last().unwrap().3;
    assert!(last.stats.pkts <= run.outcome.marker.pkts);
    assert_eq!(last.stats.marked, 0);
}
