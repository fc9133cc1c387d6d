//! The BPF switch's marking decisions against a controlled queue: a 1 Mbit/s
//! bottleneck is filled by a burst of UDP packets faster than it drains, so
//! arrival i finds about i packets queued, and the probe reports, for every
//! arrival, the queue it found and what the marker did.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;

use netns_lab::topology::{Star, StarSpec, RECEIVER_ADDR};
use tc_qdisc::intf::{
    queue_action_QA_DROP, queue_action_QA_MARK, queue_action_QA_PASS, queue_action_QA_TAILDROP,
    queue_sample,
};
use tc_qdisc::{Backend, Bottleneck, BpfSwitch};

const BURST: usize = 60;
const BUFFER: u32 = 50;

fn require_root() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "lab tests create namespaces and load BPF: run them as root (just test)"
    );
}

/// Sends `BURST` UDP datagrams of 1000 bytes with the given ECN field from
/// sender 0 and returns the probe's samples of them.
fn burst_through(backend: Backend, ecn: u8) -> Vec<queue_sample> {
    require_root();
    let star = Star::build(&StarSpec::senders(1)).unwrap();
    let b = Bottleneck {
        rate_bps: 1_000_000,
        buffer_pkts: BUFFER,
        backend,
    };
    b.install(star.switch.name(), &star.bottleneck_if).unwrap();
    let mut sw = BpfSwitch::start(
        None,
        b.backend.marker_config(BUFFER, 1),
        false,
        &star.switch.path(),
        &star.bottleneck_if,
        &star.receiver.ns.path(),
        &star.receiver.ifname,
    )
    .unwrap();
    star.senders[0]
        .ns
        .run(move || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            let tos = libc::c_int::from(ecn);
            // SAFETY: setting IP_TOS on our own socket.
            let rc = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_TOS,
                    (&tos as *const libc::c_int).cast(),
                    4,
                )
            };
            assert_eq!(rc, 0);
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
