//! DualPI2 in BPF (RFC 9332) on a controlled queue: UDP at about twice a
//! 10 Mbit/s bottleneck, a third of it ECT(1), a third ECT(0), a third
//! Not-ECT, with every decision and controller update traced. Each must be
//! the Rust model's (tc_qdisc::dualpi2), exactly; packets must reach the
//! leaf of their class; the counters must add up to htb's and to the
//! receiver's.

use std::time::{Duration, Instant};

use netns_lab::net::topology::{Star, StarSpec, RECEIVER_ADDR};
use tc_qdisc::dualpi2::{self, Dualpi2};
use tc_qdisc::intf::{queue_action_QA_DROP, queue_action_QA_MARK, DUALPI2_C, DUALPI2_L};
use tc_qdisc::{Backend, Bottleneck, BpfSwitch};

mod common;

use common::{figures, require_root, serial, udp_with_tos};

const RATE: u64 = 10_000_000;
const BUFFER: u32 = 200;
const ECT1: u8 = 1;
const ECT0: u8 = 2;

/// The packets each leaf qdisc (110: L, 120: C) sent, from tc.
fn leaf_sent(star: &Star) -> (u64, u64) {
    let sent = |handle| {
        tc_qdisc::qdisc_stats::sent_by(star.switch.name(), &star.bottleneck_if, handle).unwrap()
    };
    (sent("110:"), sent("120:"))
}

/// DualPI2 with its defaults at RATE on the star's bottleneck, every
/// decision and controller update traced.
fn traced_dualpi2(star: &Star) -> (Bottleneck, tc_qdisc::intf::marker_config, BpfSwitch) {
    let b = Bottleneck {
        rate_bps: RATE,
        buffer_pkts: BUFFER,
        backend: Backend::BpfDualpi2(Dualpi2::default()),
    };
    b.validate().unwrap();
    b.install(star.switch.name(), &star.bottleneck_if).unwrap();
    let mut cfg = b.backend.marker_config(BUFFER, 1);
    cfg.dualpi2.trace = 1;
    let sw = BpfSwitch::start(
        None,
        cfg,
        RATE,
        false,
        &star.switch.path(),
        &star.bottleneck_if,
        &star.receiver.ns.path(),
        &star.receiver.ifname,
    )
    .unwrap();
    (b, cfg, sw)
}

#[test]
fn dualpi2_decides_as_its_model_and_steers_each_class_into_its_queue() {
    require_root();
    let _serial = serial();
    let star = Star::build(&StarSpec::senders(1)).unwrap();
    let (_, cfg, mut sw) = traced_dualpi2(&star);
    // One packet in four stamped with its enqueue time, as at 50 Mbit/s
    // (10 Mbit/s stamps every one).
    let link = tc_qdisc::marker::link_rate(RATE);
    sw.set_link(&tc_qdisc::intf::link_rate {
        stamp_shift: 2,
        ..link
    })
    .unwrap();

    // A burst of 30 L packets, then 1.5 s at about 20 Mbit/s (three
    // 1,000-byte datagrams every 1.2 ms), then quiet while the queue drains.
    star.senders[0]
        .ns
        .run(|| {
            let socks = [udp_with_tos(ECT1), udp_with_tos(ECT0), udp_with_tos(0)];
            // First a burst of L packets: its queue passes the step.
            for _ in 0..30 {
                socks[0].send_to(&[0u8; 1000], (RECEIVER_ADDR, 9)).unwrap();
            }
            let start = Instant::now();
            let mut next = start;
            while start.elapsed() < Duration::from_millis(1500) {
                for (i, s) in socks.iter().enumerate() {
                    s.send_to(&[0u8; 1000], (RECEIVER_ADDR, 9 + i as u16))
                        .unwrap();
                }
                next += Duration::from_micros(1200);
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let trace = sw.take_dualpi2_trace().unwrap();
    let [l, c] = sw.dualpi2_stats().unwrap().unwrap();
    let (l_sent, c_sent) = leaf_sent(&star);

    // Every decision is the model's, and both queues saw all kinds.
    let dc = cfg.dualpi2;
    let udp: Vec<_> = trace
        .decisions
        .iter()
        .filter(|d| d.backlog > 0 || d.prob > 0)
        .collect();
    assert!(
        trace.decisions.len() > 1000,
        "{} decisions",
        trace.decisions.len()
    );
    let ns_per_kbyte = tc_qdisc::marker::link_rate(RATE).ns_per_kbyte;
    for d in &trace.decisions {
        // The step's wait: the L backlog at the link's rate.
        assert_eq!(
            d.l_wait_ns,
            dualpi2::estimated_wait_ns(d.l_backlog, ns_per_kbyte),
            "{d:?}"
        );
        let want = dualpi2::decide(&dc, d);
        assert_eq!(
            (u32::from(d.action), d.step != 0),
            want,
            "decision at {} differs from the model: {d:?}",
            d.ts_ns
        );
        assert_eq!(u32::from(d.queue), dualpi2::classify(&dc, d.ecn), "{d:?}");
        // Only the draws a decision reads are drawn (u32::MAX: none).
        if d.prob == 0 {
            assert_eq!((d.roll1, d.roll2, d.roll_l), (u32::MAX, u32::MAX, u32::MAX), "{d:?}");
        }
        if d.roll1 > d.prob {
            assert_eq!(d.roll2, u32::MAX, "p'^2's second draw after a miss: {d:?}");
        }
    }
    let drawn = trace.decisions.iter().filter(|d| d.roll2 != u32::MAX).count();
    assert!(drawn > 10, "{drawn} second draws");
    assert!(!udp.is_empty());
    let count = |q: u32, a: u32| {
        trace
            .decisions
            .iter()
            .filter(|d| u32::from(d.queue) == q && u32::from(d.action) == a)
            .count() as u64
    };
    eprintln!(
        "decisions {} updates {} peak p' {:?}; L {:?} C {:?}; leaves sent {l_sent} {c_sent}",
        trace.decisions.len(),
        trace.updates.len(),
        trace.updates.iter().map(|u| u.prob_after).max(),
        (
            l.arrivals,
            l.marked,
            l.step_marked,
            l.dropped,
            l.taildrop,
            l.departures
        ),
        (
            c.arrivals,
            c.marked,
            c.step_marked,
            c.dropped,
            c.taildrop,
            c.departures
        ),
    );
    // The queue stayed above target: p' rose, C was marked and dropped, L
    // marked (by the step and by k p').
    assert!(count(DUALPI2_C, queue_action_QA_MARK) > 10, "C marks");
    assert!(count(DUALPI2_C, queue_action_QA_DROP) > 10, "C drops");
    assert!(
        l.marked > 10 && l.step_marked > 10,
        "L marks {l:?}",
        l = (l.marked, l.step_marked)
    );

    // Every controller update is the model's; p' rose above 1 %.
    assert!(trace.updates.len() >= 60, "{} updates", trace.updates.len());
    assert_eq!(dualpi2::first_update_mismatch(&dc, &trace.updates), None);
    let peak = trace.updates.iter().map(|u| u.prob_after).max().unwrap();
    assert!(
        f64::from(peak) / f64::from(u32::MAX) > 0.01,
        "p' peaked at {peak}"
    );

    // Each leaf sent what its class brought and the marker let in.
    assert_eq!(l_sent, l.arrivals - l.dropped - l.taildrop, "L leaf");
    assert_eq!(c_sent, c.arrivals - c.dropped - c.taildrop, "C leaf");
    assert_eq!(
        l.arrivals,
        count(DUALPI2_L, 0) + count(DUALPI2_L, 1) + count(DUALPI2_L, 2) + l.taildrop
    );
    // The counters are the decisions' (the receiver's CE counter counts
    // TCP only: the lab's test of l4s checks marks against it).
    let step = trace.decisions.iter().filter(|d| d.step != 0).count() as u64;
    assert_eq!(
        l.marked + l.step_marked,
        count(DUALPI2_L, queue_action_QA_MARK)
    );
    assert_eq!(l.step_marked, step);
    assert_eq!(c.marked, count(DUALPI2_C, queue_action_QA_MARK));
    assert_eq!(
        (l.dropped, c.dropped),
        (
            count(DUALPI2_L, queue_action_QA_DROP),
            count(DUALPI2_C, queue_action_QA_DROP)
        )
    );

    // Departures: the stamped packets' sojourn, L's far below C's (L goes
    // first). The 6.18 tracepoint misses up to a few per mille of dequeues.
    for (what, q, sent) in [("L", &l, l_sent), ("C", &c, c_sent)] {
        assert!(
            q.departures <= sent && q.departures as f64 >= 0.97 * sent as f64,
            "{what}: {} departures seen of {sent} sent",
            q.departures
        );
        let share = q.stamped as f64 / q.departures as f64;
        assert!(
            (0.2..0.3).contains(&share),
            "{what}: {} of {} departures stamped, not one in four",
            q.stamped,
            q.departures
        );
        assert_eq!(q.hist.iter().sum::<u64>(), q.stamped, "{what} histogram");
    }
    let mean = |q: &tc_qdisc::intf::dualpi2_queue_stats| q.sojourn_ns as f64 / q.stamped as f64;
    eprintln!(
        "sojourn mean L {:.2} ms C {:.2} ms; estimate error mean |e| L {:.2} ms C {:.2} ms, bias L {:.2} C {:.2}",
        mean(&l) / 1e6,
        mean(&c) / 1e6,
        l.est_err_abs_ns as f64 / l.stamped as f64 / 1e6,
        c.est_err_abs_ns as f64 / c.stamped as f64 / 1e6,
        l.est_err_ns as f64 / l.stamped as f64 / 1e6,
        c.est_err_ns as f64 / c.stamped as f64 / 1e6,
    );
    assert!(
        mean(&l) * 4.0 < mean(&c),
        "L {} ns against C {} ns",
        mean(&l),
        mean(&c)
    );
}

/// A rate change mid-run moves the link (htb's classes, both leaves) and
/// the marker's clock together: the L queue drains at the new rate, and
/// every decision after the change estimates its wait at that rate.
#[test]
fn a_rate_change_moves_the_link_and_the_markers_estimate_together() {
    require_root();
    let _serial = serial();
    const AFTER: u64 = RATE / 2;
    // A 1,000-byte UDP payload on the wire.
    const WIRE: f64 = (1000 + 8 + 20 + 14) as f64 * 8.0;
    let star = Star::build(&StarSpec::senders(1)).unwrap();
    let (b, _, mut sw) = traced_dualpi2(&star);
    let l_sent = || (leaf_sent(&star).0, dctcp_utils::clock::monotonic_ns());
    let rate =
        |a: (u64, u64), b: (u64, u64)| (b.0 - a.0) as f64 * WIRE / ((b.1 - a.1) as f64 / 1e9);
    // ECT(1) at about 13 Mbit/s for 1.4 s: the L queue never empties, at
    // 10 Mbit/s and after the change to 5.
    let (before, changed, after) = std::thread::scope(|s| {
        s.spawn(|| {
            star.senders[0]
                .ns
                .run(|| {
                    let sock = udp_with_tos(ECT1);
                    let start = Instant::now();
                    let mut next = start;
                    while start.elapsed() < Duration::from_millis(1400) {
                        sock.send_to(&[0u8; 1000], (RECEIVER_ADDR, 9)).unwrap();
                        next += Duration::from_micros(600);
                        if let Some(wait) = next.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                    }
                })
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(200));
        let p0 = l_sent();
        std::thread::sleep(Duration::from_millis(400));
        let p1 = l_sent();
        let t_a = dctcp_utils::clock::monotonic_ns();
        b.set_rate(star.switch.name(), &star.bottleneck_if, AFTER)
            .unwrap();
        sw.set_rate(AFTER).unwrap();
        let t_b = dctcp_utils::clock::monotonic_ns();
        std::thread::sleep(Duration::from_millis(100));
        let p2 = l_sent();
        std::thread::sleep(Duration::from_millis(500));
        let p3 = l_sent();
        (rate(p0, p1), (t_a, t_b), rate(p2, p3))
    });
    std::thread::sleep(Duration::from_millis(300));
    let trace = sw.take_dualpi2_trace().unwrap();
    figures(&[
        ("before_of_rate", before / RATE as f64),
        ("after_of_rate", after / AFTER as f64),
    ]);
    // The leaf's rate within 5 % of the class's, before and after: 0.997-1.002
    // and 0.995-1.006 of it in ten runs (2026-12-05, tools/spread); with the
    // class left at 10 Mbit/s it reads 2.0 after.
    assert!(
        (before / RATE as f64 - 1.0).abs() < 0.05,
        "{before} bit/s at 10 Mbit/s"
    );
    assert!(
        (after / AFTER as f64 - 1.0).abs() < 0.05,
        "{after} bit/s at 5 Mbit/s"
    );

    let wait_at = |rate: u64, d: &tc_qdisc::intf::dualpi2_decision| {
        dualpi2::estimated_wait_ns(d.l_backlog, tc_qdisc::marker::link_rate(rate).ns_per_kbyte)
    };
    let (mut old, mut new) = (0, 0);
    for d in trace.decisions.iter().filter(|d| d.l_backlog > 0) {
        if d.ts_ns < changed.0 {
            assert_eq!(d.l_wait_ns, wait_at(RATE, d), "before the change: {d:?}");
            old += 1;
        } else if d.ts_ns > changed.1 {
            assert_eq!(d.l_wait_ns, wait_at(AFTER, d), "after the change: {d:?}");
            new += 1;
        }
    }
    assert!(
        old > 500 && new > 500,
        "{old} decisions before, {new} after"
    );
    // At 10 and 5 Mbit/s a packet takes over 1 ms: every one is stamped.
    let [l, _] = sw.dualpi2_stats().unwrap().unwrap();
    assert!(l.departures > 1000, "{} departures", l.departures);
    assert_eq!(l.stamped, l.departures);
}
