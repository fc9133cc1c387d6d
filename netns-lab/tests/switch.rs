//! The BPF switch's marking decisions against a controlled queue: a 1 Mbit/s
//! bottleneck is filled by a burst of UDP packets faster than it drains, so
//! arrival i finds about i packets queued, and the probe reports, for every
//! arrival, the queue it found and what the marker did.

use std::time::Duration;

use netns_lab::net::topology::{Star, StarSpec, RECEIVER_ADDR};
use tc_qdisc::intf::{
    queue_action_QA_DROP, queue_action_QA_MARK, queue_action_QA_PASS, queue_action_QA_TAILDROP,
    queue_sample,
};
use tc_qdisc::{Backend, Bottleneck, BpfSwitch};

mod common;

use common::{kernel, udp_with_tos};

const BURST: usize = 60;
const BUFFER: u32 = 50;

fn require_root() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "lab tests create namespaces and load BPF: run them as root (just test)"
    );
}

/// A one-sender star whose 1 Mbit/s bottleneck of `BUFFER` packets runs
/// `backend`, with the BPF switch on it (and its departure probe if asked).
fn switch_at_1mbit(backend: Backend, departures: bool) -> (Star, BpfSwitch) {
    switch_probing(backend, departures, 1)
}

/// The same with the probe taking one arrival in `sample`.
fn switch_probing(backend: Backend, departures: bool, sample: u32) -> (Star, BpfSwitch) {
    let star = Star::build(&StarSpec::senders(1)).unwrap();
    let b = Bottleneck {
        rate_bps: 1_000_000,
        buffer_pkts: BUFFER,
        backend,
    };
    b.validate().unwrap();
    b.install(star.switch.name(), &star.bottleneck_if).unwrap();
    let sw = BpfSwitch::start(
        None,
        b.backend.marker_config(BUFFER, sample),
        b.rate_bps,
        departures,
        &star.switch.path(),
        &star.bottleneck_if,
        &star.receiver.ns.path(),
        &star.receiver.ifname,
    )
    .unwrap();
    (star, sw)
}

/// Sends `BURST` UDP datagrams of 1000 bytes with the given ECN field from
/// sender 0 and returns the probe's samples of them.
fn burst_through(backend: Backend, ecn: u8) -> Vec<queue_sample> {
    require_root();
    let (star, mut sw) = switch_at_1mbit(backend, false);
    star.senders[0]
        .ns
        .run(move || {
            let s = udp_with_tos(ecn);
            for _ in 0..BURST {
                s.send_to(&[0u8; 1000], (RECEIVER_ADDR, 9)).unwrap();
            }
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let trace = sw.take_trace().unwrap();
    trace.samples.into_iter().filter(|s| s.dport == 9).collect()
}

fn action(s: &queue_sample) -> u32 {
    u32::from(s.action)
}

#[test]
fn step_marks_ect_exactly_at_k() {
    let samples = burst_through(Backend::BpfStep { k: 20 }, 0b10);
    assert_eq!(samples.len(), BURST, "every arrival probed");
    let max_q = samples.iter().map(|s| s.qlen).max().unwrap();
    assert!(max_q >= 30, "the burst did not build a queue (max {max_q})");
    for s in &samples {
        let want = if s.qlen >= BUFFER {
            queue_action_QA_TAILDROP
        } else if s.qlen >= 20 {
            queue_action_QA_MARK
        } else {
            queue_action_QA_PASS
        };
        assert_eq!(action(s), want, "arrival found {} queued", s.qlen);
    }
}

#[test]
fn step_drops_non_ect_where_it_would_mark() {
    let samples = burst_through(Backend::BpfStep { k: 20 }, 0);
    assert!(
        samples.iter().any(|s| s.qlen >= 20),
        "queue never reached K"
    );
    for s in &samples {
        let want = if s.qlen >= 20 {
            queue_action_QA_DROP
        } else {
            queue_action_QA_PASS
        };
        assert_eq!(action(s), want, "arrival found {} queued", s.qlen);
    }
    assert!(samples.iter().any(|s| action(s) == queue_action_QA_DROP));
    // Dropped before the qdisc, so the queue stops growing at K.
    assert!(samples.iter().all(|s| s.qlen <= 20));
}

#[test]
fn red_marks_nothing_below_min_and_everything_above_max() {
    // wlog 0: the average is the instantaneous queue, so the bands are exact.
    let samples = burst_through(
        Backend::BpfRed {
            min: 5,
            max: 15,
            max_p: 0.5,
            wlog: 0,
        },
        0b01,
    );
    assert!(samples.iter().any(|s| s.qlen >= 15));
    for s in samples.iter().filter(|s| s.qlen < BUFFER) {
        match s.qlen {
            q if q < 5 => assert_eq!(action(s), queue_action_QA_PASS, "marked at {q} < min"),
            q if q >= 15 => assert_eq!(action(s), queue_action_QA_MARK, "not marked at {q} >= max"),
            _ => {}
        }
    }
    let between: Vec<_> = samples
        .iter()
        .filter(|s| (5..15).contains(&s.qlen))
        .collect();
    assert!(
        between.iter().any(|s| action(s) == queue_action_QA_MARK),
        "RED never marked between min and max"
    );
}

#[test]
fn droptail_only_probes() {
    let samples = burst_through(Backend::Droptail, 0b10);
    assert_eq!(samples.len(), BURST, "every arrival probed");
    assert!(
        samples.iter().any(|s| s.qlen >= BUFFER),
        "the burst never filled the buffer"
    );
    for s in &samples {
        let want = if s.qlen >= BUFFER {
            queue_action_QA_TAILDROP
        } else {
            queue_action_QA_PASS
        };
        assert_eq!(action(s), want);
    }
}

/// What one arrival's packet was: ECN-capable (ECT(0)) or not.
const ECT0: u8 = 0b10;

/// Sends `pairs` pairs of 1000-byte UDP datagrams from sender 0, one ECT(0)
/// then one Not-ECT, through `backend`, and returns the probe's samples of
/// them with the marker's and the qdisc's counters read after the drain.
fn mixed_burst_through(
    backend: Backend,
    pairs: usize,
) -> (
    Vec<queue_sample>,
    tc_qdisc::intf::marker_stats,
    tc_qdisc::qdisc_stats::QdiscCounters,
) {
    mixed_bursts_through(backend, &[(pairs, Duration::ZERO)], false)
}

/// As [`mixed_burst_through`], for several bursts, each followed by its
/// pause; `departures` attaches the departure probe, which tells the dual
/// AQM when the queue went empty.
fn mixed_bursts_through(
    backend: Backend,
    bursts: &[(usize, Duration)],
    departures: bool,
) -> (
    Vec<queue_sample>,
    tc_qdisc::intf::marker_stats,
    tc_qdisc::qdisc_stats::QdiscCounters,
) {
    require_root();
    let (star, mut sw) = switch_at_1mbit(backend, departures);
    let bursts = bursts.to_vec();
    star.senders[0]
        .ns
        .run(move || {
            let (ect, plain) = (udp_with_tos(ECT0), udp_with_tos(0));
            for (pairs, pause) in bursts {
                for _ in 0..pairs {
                    ect.send_to(&[0u8; 1000], (RECEIVER_ADDR, 9)).unwrap();
                    plain.send_to(&[0u8; 1000], (RECEIVER_ADDR, 9)).unwrap();
                }
                std::thread::sleep(pause);
            }
        })
        .unwrap();
    // The queue drains at 1 Mbit/s: 50 packets of 1042 bytes in 0.42 s.
    std::thread::sleep(Duration::from_millis(700));
    let trace = sw.take_trace().unwrap();
    let stats = sw.stats().unwrap();
    let qdisc = tc_qdisc::qdisc_stats::read(star.switch.name(), &star.bottleneck_if).unwrap();
    let samples = trace.samples.into_iter().filter(|s| s.dport == 9).collect();
    (samples, stats, qdisc)
}

/// RED's average as the program keeps it (bytes << 8, w = 2^-wlog),
/// replayed over the backlog every arrival found.
fn replay_average(samples: &[queue_sample], wlog: u32) -> Vec<f64> {
    let mut avg: u64 = 0;
    samples
        .iter()
        .map(|s| {
            avg = avg - (avg >> wlog) + ((u64::from(s.backlog) << 8) >> wlog);
            avg as f64 / 256.0
        })
        .collect()
}

/// Seed 002's dual AQM on a controlled queue: the ECT profile a step at K
/// on the instantaneous backlog (w = 1), the Not-ECT profile RED on its own
/// slow average (w = 2^-3) with a drop slope between 4 and 30 packets. Every
/// decision in a band where the profile is certain is checked against the
/// average replayed from the backlog each arrival found; neither class ever
/// gets the other's action; the counters per class add up to the samples and
/// to the qdisc's own.
#[test]
fn dual_marks_ect_at_k_and_drops_non_ect_on_its_own_average() {
    const WIRE: u32 = 1042; // 1000 bytes of UDP payload on the wire
    let k = 20 * WIRE;
    let (rmin, rmax) = (4 * WIRE, 30 * WIRE);
    let reno = tc_qdisc::RedProfile {
        min_bytes: rmin,
        max_bytes: rmax,
        max_p: 0.5,
        weight: 0.125,
    };
    let (samples, stats, qdisc) = mixed_burst_through(
        Backend::BpfDual {
            ect: tc_qdisc::RedProfile::step(k),
            not_ect: reno,
        },
        BURST,
    );
    assert_eq!(samples.len(), 2 * BURST, "every arrival probed");
    assert!(
        samples.iter().any(|s| s.backlog >= k),
        "the burst never reached K"
    );
    let avg = replay_average(&samples, 3);
    let (mut slope_drops, mut slope_passes) = (0, 0);
    for (s, &a) in samples.iter().zip(&avg) {
        let what = format!("arrival ecn {} backlog {} avg {a:.0}", s.ecn, s.backlog);
        if s.qlen >= BUFFER {
            assert_eq!(action(s), queue_action_QA_TAILDROP, "{what}");
            continue;
        }
        if s.ecn == ECT0 {
            let want = if s.backlog >= k {
                queue_action_QA_MARK
            } else {
                queue_action_QA_PASS
            };
            assert_eq!(action(s), want, "ECT: {what}");
            continue;
        }
        assert_eq!(s.ecn, 0);
        // The program's fixed point rounds each step down: a byte of slack.
        if a < f64::from(rmin) - 1.0 {
            assert_eq!(action(s), queue_action_QA_PASS, "Not-ECT below min: {what}");
        } else if a >= f64::from(rmax) + 1.0 {
            assert_eq!(action(s), queue_action_QA_DROP, "Not-ECT above max: {what}");
        } else if a > f64::from(rmin) + 1.0 && a < f64::from(rmax) - 1.0 {
            assert_ne!(action(s), queue_action_QA_MARK, "Not-ECT marked: {what}");
            match action(s) {
                a if a == queue_action_QA_DROP => slope_drops += 1,
                _ => slope_passes += 1,
            }
        }
    }
    assert!(
        slope_drops > 0 && slope_passes > 0,
        "on the slope: {slope_drops} drops, {slope_passes} passes"
    );
    // The slow average lags the queue: Not-ECT packets passed untouched
    // while the backlog they found was already past min, and the average
    // reached max, where every one is dropped.
    assert!(
        samples
            .iter()
            .zip(&avg)
            .any(|(s, &a)| s.ecn == 0 && s.backlog >= rmin + 2 * WIRE && a < f64::from(rmin)),
        "the Not-ECT profile followed the instantaneous queue, not its average"
    );
    assert!(
        avg.iter().any(|&a| a >= f64::from(rmax) + 1.0),
        "the average never reached max"
    );

    // Counters: per class against the samples, and against the qdisc.
    let count = |ecn: u8, act: u32| {
        samples
            .iter()
            .filter(|s| s.ecn == ecn && action(s) == act)
            .count() as u64
    };
    let (e, n) = (stats.ect, stats.not_ect);
    assert_eq!((e.pkts, n.pkts), (BURST as u64, BURST as u64));
    assert_eq!(e.marked, count(ECT0, queue_action_QA_MARK));
    assert_eq!(
        (e.dropped, n.marked),
        (0, 0),
        "a class got the other's action"
    );
    assert_eq!(n.dropped, count(0, queue_action_QA_DROP));
    assert_eq!(
        e.taildrop + n.taildrop,
        count(ECT0, queue_action_QA_TAILDROP) + count(0, queue_action_QA_TAILDROP)
    );
    assert_eq!(stats.marked, e.marked + n.marked);
    assert_eq!(stats.dropped, e.dropped + n.dropped);
    // The qdisc saw what the marker let through: it sent it or tail-dropped
    // it (plus a few packets of neighbour discovery before the burst).
    let enqueued = e.pkts + n.pkts - stats.dropped;
    assert_eq!(qdisc.drops, stats.taildrop, "{qdisc:?}");
    assert!(
        (enqueued..=enqueued + 5).contains(&(qdisc.sent_packets + qdisc.drops)),
        "qdisc {qdisc:?} against {enqueued} enqueued"
    );
}

/// The DCTCP profile as a slope on the instantaneous queue: ECT packets are
/// marked with a probability that rises between min and max, never dropped,
/// while Not-ECT packets below the Not-ECT profile's min pass untouched.
#[test]
fn dual_slope_marks_between_min_and_max_and_never_drops_ect() {
    const WIRE: u32 = 1042;
    let (samples, stats, _) = mixed_burst_through(
        Backend::BpfDual {
            ect: tc_qdisc::RedProfile {
                min_bytes: 5 * WIRE,
                max_bytes: 25 * WIRE,
                max_p: 0.5,
                weight: 1.0,
            },
            not_ect: tc_qdisc::RedProfile {
                min_bytes: 40 * WIRE,
                max_bytes: 45 * WIRE,
                max_p: 0.1,
                weight: 1.0,
            },
        },
        BURST,
    );
    let ect: Vec<_> = samples
        .iter()
        .filter(|s| s.ecn == ECT0 && s.qlen < BUFFER)
        .collect();
    for s in &ect {
        let want_mark = s.backlog >= 25 * WIRE;
        let no_mark = s.backlog < 5 * WIRE;
        assert_ne!(
            action(s),
            queue_action_QA_DROP,
            "ECT dropped at {}",
            s.backlog
        );
        if want_mark {
            assert_eq!(action(s), queue_action_QA_MARK, "at {}", s.backlog);
        }
        if no_mark {
            assert_eq!(action(s), queue_action_QA_PASS, "at {}", s.backlog);
        }
    }
    let slope: Vec<_> = ect
        .iter()
        .filter(|s| (6 * WIRE..24 * WIRE).contains(&s.backlog))
        .collect();
    let marked = slope
        .iter()
        .filter(|s| action(s) == queue_action_QA_MARK)
        .count();
    assert!(
        marked > 0 && marked < slope.len(),
        "slope: {marked} of {} marked",
        slope.len()
    );
    for s in samples
        .iter()
        .filter(|s| s.ecn == 0 && s.backlog < 40 * WIRE)
    {
        assert_eq!(action(s), queue_action_QA_PASS, "Not-ECT at {}", s.backlog);
    }
    assert_eq!(stats.ect.dropped, 0);
}

/// RED's idle rule in the dual AQM: a burst drives the Not-ECT profile's
/// slow average far above max, so its last Not-ECT packets are all dropped;
/// the queue drains and the link idles for about 80 packet times, which age
/// the average by (7/8)^80 at the next arrival, and the next burst's first
/// Not-ECT packet passes. Without the aging the average would still be above
/// max there (it falls by 1/8 per arrival) and that packet would be dropped.
#[test]
fn dual_ages_its_averages_over_an_idle_link() {
    const WIRE: u32 = 1042;
    let (samples, _, _) = mixed_bursts_through(
        Backend::BpfDual {
            ect: tc_qdisc::RedProfile::step(45 * WIRE),
            not_ect: tc_qdisc::RedProfile {
                min_bytes: 2 * WIRE,
                max_bytes: 6 * WIRE,
                max_p: 0.1,
                weight: 0.125,
            },
        },
        // The first burst drains in 0.3 s at 1 Mbit/s; 1.3 s of pause.
        &[(30, Duration::from_millis(1300)), (5, Duration::ZERO)],
        true,
    );
    assert_eq!(samples.len(), 70, "every arrival probed");
    let not_ect: Vec<&queue_sample> = samples.iter().filter(|s| s.ecn == 0).collect();
    let (first, second) = not_ect.split_at(30);
    assert!(
        first[25..]
            .iter()
            .all(|s| action(s) == queue_action_QA_DROP),
        "the first burst's average never passed max: {:?}",
        first
            .iter()
            .map(|s| (s.backlog, action(s)))
            .collect::<Vec<_>>()
    );
    let idle_ns = second[0].ts_ns - first[29].ts_ns;
    assert!(idle_ns > 1_000_000_000, "pause of {idle_ns} ns");
    assert_eq!(
        action(second[0]),
        queue_action_QA_PASS,
        "after {idle_ns} ns of idle link the average still dropped the first Not-ECT packet"
    );
}

/// RED's idle rule in bpf-red too: a burst drives the slow average far
/// above max, so the burst's last ECN-capable packets are all marked (and
/// its Not-ECT ones dropped); the link then idles for about 65 packet
/// times (12 ms each at 1 Mbit/s), which age the average by (7/8)^65 at
/// the next arrival, and the
/// next burst's first packets pass. Without the aging the average would
/// still be above max (it falls by 1/8 per arrival) and they would be hit:
/// a sender that backs off behind such a RED finds every packet marked for
/// as long as its few arrivals take to bring the average down.
#[test]
fn red_ages_its_average_over_an_idle_link() {
    let (samples, _, _) = mixed_bursts_through(
        Backend::BpfRed {
            min: 2,
            max: 6,
            max_p: 0.1,
            wlog: 3,
        },
        // The first burst drains in 0.5 s at 1 Mbit/s; 1.3 s of pause.
        &[(30, Duration::from_millis(1300)), (2, Duration::ZERO)],
        true,
    );
    assert_eq!(samples.len(), 64, "every arrival probed");
    let (first, second) = samples.split_at(60);
    assert!(
        first[50..].iter().all(|s| action(s) != queue_action_QA_PASS),
        "the first burst's average never passed max: {:?}",
        first.iter().map(|s| (s.qlen, action(s))).collect::<Vec<_>>()
    );
    let idle_ns = second[0].ts_ns - first[59].ts_ns;
    assert!(idle_ns > 1_000_000_000, "pause of {idle_ns} ns");
    assert_eq!(
        (action(&second[0]), action(&second[1])),
        (queue_action_QA_PASS, queue_action_QA_PASS),
        "after {idle_ns} ns of idle link the average still hit the next burst's first packets"
    );
}

/// The probe sampling one arrival in 16 takes about 1/16 of them, at random
/// gaps: datagram i is 64 + i mod 16 bytes long, so a fixed stride of 16
/// would see one length only. The probe takes arrivals whether the qdisc
/// queues or drops them, so the burst can overrun the buffer.
#[test]
fn the_probe_samples_one_arrival_in_n_at_random_gaps() {
    require_root();
    const SENT: usize = 4000;
    let (star, mut sw) = switch_probing(Backend::Droptail, false, 16);
    star.senders[0]
        .ns
        .run(move || {
            let s = udp_with_tos(0b10);
            for i in 0..SENT {
                s.send_to(&vec![0u8; 64 + i % 16], (RECEIVER_ADDR, 9))
                    .unwrap();
            }
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let arrivals = sw.stats().unwrap().pkts;
    let samples: Vec<queue_sample> = sw
        .take_trace()
        .unwrap()
        .samples
        .into_iter()
        .filter(|s| s.dport == 9)
        .collect();
    assert!(
        arrivals >= SENT as u64,
        "the marker saw {arrivals} arrivals"
    );
    eprintln!("{} samples of {arrivals} arrivals", samples.len());
    // Gaps uniform on [0, 30]: 250 samples expected, standard deviation
    // sqrt(4000 x 80 / 16^3) = 8.8; the bounds are 7 of them.
    assert!(
        (190..=310).contains(&samples.len()),
        "{} samples of {SENT} arrivals, expected about {}",
        samples.len(),
        SENT / 16
    );
    let lengths: std::collections::BTreeSet<u32> = samples.iter().map(|s| s.len).collect();
    assert!(
        lengths.len() >= 12,
        "sampled arrivals of only {} lengths of 16: {lengths:?}",
        lengths.len()
    );
    assert!(
        samples.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns),
        "samples out of time order"
    );
}

/// What bpftool lists on the tc hooks of `dev` in namespace `ns`.
fn tc_hooks(ns: &str, dev: &str) -> String {
    let o = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "bpftool", "net", "show", "dev", dev])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// On 6.6 and later the switch's probe rides tcx egress of the bottleneck
/// and the receiver's counter tcx ingress: links the kernel detaches with
/// the program, not the clsact filters a 6.1 gets (`vm.rs`'s
/// `before_tcx_*` tests the other side).
#[test]
fn from_6_6_the_probe_and_the_counter_ride_tcx_not_clsact() {
    require_root();
    if kernel() < (6, 6) {
        eprintln!(
            "kernel {:?} has no tcx: the 6.1 VM tier tests clsact",
            kernel()
        );
        return;
    }
    let (star, sw) = switch_at_1mbit(Backend::BpfStep { k: 10 }, false);
    let at_switch = tc_hooks(star.switch.name(), &star.bottleneck_if);
    let at_receiver = tc_hooks(star.receiver.ns.name(), &star.receiver.ifname);
    assert!(
        at_switch.contains("tcx/egress") && !at_switch.contains("clsact"),
        "the bottleneck's hooks: {at_switch}"
    );
    assert!(
        at_receiver.contains("tcx/ingress") && !at_receiver.contains("clsact"),
        "the receiver's hooks: {at_receiver}"
    );
    drop(sw);
    assert!(
        !tc_hooks(star.switch.name(), &star.bottleneck_if).contains("tcx/"),
        "the probe outlived its switch"
    );
}
