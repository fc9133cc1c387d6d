//! One scrape's figures in the Prometheus exposition format (OpenMetrics
//! text, which Prometheus reads natively): names under `dctcp_bpf_`,
//! counters ending in `_total`, ratios from 0 to 1, each with its HELP.
//! A fresh registry per scrape: every value is read from the maps at that
//! moment, so nothing here keeps state between scrapes.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::instance::Instance;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// alpha's buckets: fine near 0, where a DCTCP flow on a well-set K lives,
/// and up to 1, where a flow sits after init or under heavy marking.
const ALPHA_BUCKETS: [f64; 9] = [0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0];

/// An attached instance and its live flows, as read at one scrape.
pub struct InstanceNow {
    pub instance: Instance,
    /// alpha (0 to 1) of every live flow running the instance (not its
    /// fallback).
    pub alphas: Vec<f64>,
    /// Packets delivered and of those echoed with ECE, summed over the same
    /// flows since each started.
    pub delivered: u64,
    pub delivered_ce: u64,
    /// Prague only (None for the others): of the same flows, those in the
    /// rate mode and those under the classic-ECN fallback now.
    pub prague: Option<PragueNow>,
}

/// What a Prague instance's live flows are doing at one scrape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PragueNow {
    pub rate_mode: u64,
    pub classic: u64,
}

/// A running lab switch, as read at one scrape.
pub struct SwitchNow {
    pub prefix: String,
    pub queue_packets: u32,
    pub queue_bytes: u32,
    pub packets: u64,
    pub bytes: u64,
    pub marked: u64,
    pub dropped: u64,
    /// DualPI2's L and C queues, on a bpf-dualpi2 switch.
    pub dualpi2: Option<[tc_qdisc::pins::QueueNow; 2]>,
}

/// Everything one scrape shows.
#[derive(Default)]
pub struct Snapshot {
    pub instances: Vec<InstanceNow>,
    pub switches: Vec<SwitchNow>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    algorithm: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SwitchLabels {
    switch: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    switch: String,
    /// `l` or `c`.
    queue: String,
}

type Ratio = Gauge<f64, AtomicU64>;

/// A counter read from what a scrape found: (name without `_total`, HELP,
/// the reader).
type Counted<T> = (&'static str, &'static str, fn(&T) -> u64);

fn alpha_histogram() -> Histogram {
    Histogram::new(ALPHA_BUCKETS)
}

/// A counter family read from each instance's stats.
struct InstanceCounter {
    family: Family<InstanceLabels, Counter>,
    read: fn(&Instance) -> u64,
}

/// The per-instance counters.
const INSTANCE_COUNTERS: [Counted<Instance>; 15] = [
    (
        "flows_started",
        "Sockets initialised with the algorithm (with ECN)",
        |i| i.inits,
    ),
    (
        "flows_released",
        "Sockets that ran the algorithm and have closed",
        |i| i.inits.saturating_sub(i.sockets),
    ),
    (
        "fallbacks",
        "Sockets without ECN handed to the instance's Reno fallback",
        |i| i.fallbacks,
    ),
    (
        "fallbacks_refused",
        "Fallbacks the kernel refused; those sockets run the kernel's reno",
        |i| i.fallback_refused,
    ),
    (
        "alpha_updates",
        "Per-window updates of alpha, the estimate of the fraction of marked packets",
        |i| i.alpha_updates,
    ),
    (
        "window_reductions",
        "Congestion window reductions (ssthresh calls), on ECN echo or on loss",
        |i| i.reductions,
    ),
    (
        "loss_reactions",
        "Halvings on loss (fast recovery entered, or a retransmission timeout)",
        |i| i.loss_reactions,
    ),
    (
        "guard_ssthresh_repairs",
        "Impossible ssthresh values found in a socket and recomputed (README, Known issue)",
        |i| i.ssthresh_repairs,
    ),
    (
        "guard_cwnd_repairs",
        "Impossible congestion windows found in a socket and reset",
        |i| i.cwnd_repairs,
    ),
    (
        "guard_inflight_holds",
        "Times sending was held with far more in flight than the window allows",
        |i| i.inflight_holds,
    ),
    (
        "progressive_cuts",
        "kdctcp: ssthresh lowered again inside CWR on an ECN echo",
        |i| i.progressive_cuts,
    ),
    (
        "cwr_growth",
        "kdctcp: ssthresh raised by one segment inside CWR",
        |i| i.cwr_growth,
    ),
    (
        "ect1_packets",
        "Prague: packets its tcx program rewrote from ECT(0) to ECT(1)",
        |i| i.ect1_packets,
    ),
    (
        "events",
        "Trace events the programs produced (only while a tracer runs)",
        |i| i.events,
    ),
    (
        "events_dropped",
        "Trace events lost because the ring buffer was full",
        |i| i.events_dropped,
    ),
];

/// The text of one scrape.
pub fn render(s: &Snapshot) -> String {
    let mut reg = Registry::with_prefix("dctcp_bpf");

    let registered = Family::<InstanceLabels, Gauge>::default();
    reg.register(
        "registered",
        "1 when the instance is registered with the kernel, 0 for stale pins",
        registered.clone(),
    );
    let sockets = Family::<InstanceLabels, Gauge>::default();
    reg.register(
        "sockets",
        "Sockets running the algorithm now",
        sockets.clone(),
    );
    let fallback_sockets = Family::<InstanceLabels, Gauge>::default();
    reg.register(
        "fallback_sockets",
        "Sockets running the instance's Reno fallback now",
        fallback_sockets.clone(),
    );
    let counters: Vec<InstanceCounter> = INSTANCE_COUNTERS
        .iter()
        .map(|&(name, help, read)| {
            let family = Family::<InstanceLabels, Counter>::default();
            reg.register(name, help, family.clone());
            InstanceCounter { family, read }
        })
        .collect();
    let alpha = Family::<InstanceLabels, Histogram, fn() -> Histogram>::new_with_constructor(
        alpha_histogram,
    );
    reg.register(
        "alpha",
        "alpha of the live flows running the algorithm (0 to 1)",
        alpha.clone(),
    );
    let ce = Family::<InstanceLabels, Ratio>::default();
    reg.register(
        "ce_echoed_ratio",
        "Of the packets the live flows delivered, the fraction echoed with ECE (absent without flows)",
        ce.clone(),
    );

    let rate_mode = Family::<InstanceLabels, Gauge>::default();
    reg.register(
        "prague_rate_mode_sockets",
        "Prague: live flows whose pacing rate leads (the rate mode, under 4 MTUs of window)",
        rate_mode.clone(),
    );
    let classic = Family::<InstanceLabels, Gauge>::default();
    reg.register(
        "prague_classic_sockets",
        "Prague: live flows answering marks as Reno behind a classic ECN AQM (classic_ecn=1)",
        classic.clone(),
    );

    for i in &s.instances {
        let l = InstanceLabels {
            algorithm: i.instance.algo.clone(),
            name: i.instance.name.clone(),
        };
        registered
            .get_or_create(&l)
            .set(i64::from(i.instance.registered));
        sockets.get_or_create(&l).set(gauge(i.instance.sockets));
        fallback_sockets
            .get_or_create(&l)
            .set(gauge(i.instance.fallback_sockets));
        for c in &counters {
            c.family.get_or_create(&l).inc_by((c.read)(&i.instance));
        }
        let h = alpha.get_or_create(&l);
        for a in &i.alphas {
            h.observe(*a);
        }
        if i.delivered > 0 {
            ce.get_or_create(&l)
                .set(i.delivered_ce as f64 / i.delivered as f64);
        }
        if let Some(p) = i.prague {
            rate_mode.get_or_create(&l).set(gauge(p.rate_mode));
            classic.get_or_create(&l).set(gauge(p.classic));
        }
    }

    if !s.switches.is_empty() {
        let sub = reg.sub_registry_with_prefix("switch");
        let queue = Family::<SwitchLabels, Gauge>::default();
        sub.register(
            "queue_packets",
            "The lab switch's bottleneck queue as the last arrival found it",
            queue.clone(),
        );
        let backlog = Family::<SwitchLabels, Gauge>::default();
        sub.register("queue_bytes", "The same queue in bytes", backlog.clone());
        let kinds: [Counted<SwitchNow>; 4] = [
            ("packets", "Packets that reached the bottleneck", |w| {
                w.packets
            }),
            ("bytes", "Bytes that reached the bottleneck", |w| w.bytes),
            ("marked", "Packets marked CE", |w| w.marked),
            ("dropped", "Packets dropped by the switch", |w| w.dropped),
        ];
        let families: Vec<_> = kinds
            .iter()
            .map(|&(name, help, read)| {
                let f = Family::<SwitchLabels, Counter>::default();
                sub.register(name, help, f.clone());
                (f, read)
            })
            .collect();
        for w in &s.switches {
            let l = SwitchLabels {
                switch: w.prefix.clone(),
            };
            queue.get_or_create(&l).set(i64::from(w.queue_packets));
            backlog.get_or_create(&l).set(i64::from(w.queue_bytes));
            for (f, read) in &families {
                f.get_or_create(&l).inc_by(read(w));
            }
        }
        dualpi2_queues(sub, &s.switches);
    }

    let mut out = String::new();
    encode(&mut out, &reg).expect("writing to a String cannot fail");
    out
}

/// Each bpf-dualpi2 switch's L and C queues (`switch_dualpi2_*`).
fn dualpi2_queues(sub: &mut Registry, switches: &[SwitchNow]) {
    use tc_qdisc::pins::QueueNow;
    if switches.iter().all(|w| w.dualpi2.is_none()) {
        return;
    }
    let kinds: [Counted<QueueNow>; 6] = [
        ("dualpi2_arrivals", "Packets that arrived at the queue", |q| {
            q.arrivals
        }),
        (
            "dualpi2_marked",
            "Packets marked CE by the coupled probability (L: k p', C: p'^2)",
            |q| q.marked,
        ),
        ("dualpi2_step_marked", "L packets marked CE by the step", |q| {
            q.step_marked
        }),
        ("dualpi2_dropped", "Packets dropped early or at the limit", |q| {
            q.dropped
        }),
        ("dualpi2_departures", "Packets that left the queue", |q| {
            q.departures
        }),
        (
            "dualpi2_stamped",
            "Departures that carried their enqueue time (one per ms of the link's time at most)",
            |q| q.stamped,
        ),
    ];
    let families: Vec<_> = kinds
        .iter()
        .map(|&(name, help, read)| {
            let f = Family::<QueueLabels, Counter>::default();
            sub.register(name, help, f.clone());
            (f, read)
        })
        .collect();
    let sojourn = Family::<QueueLabels, Counter<f64, AtomicU64>>::default();
    sub.register(
        "dualpi2_sojourn_seconds",
        "Sum of the stamped departures' sojourn in the queue (over dualpi2_stamped: the mean)",
        sojourn.clone(),
    );
    for w in switches {
        let Some(queues) = &w.dualpi2 else { continue };
        for (name, q) in ["l", "c"].iter().zip(queues) {
            let l = QueueLabels {
                switch: w.prefix.clone(),
                queue: name.to_string(),
            };
            for (f, read) in &families {
                f.get_or_create(&l).inc_by(read(q));
            }
            sojourn.get_or_create(&l).inc_by(q.sojourn_ns as f64 / 1e9);
        }
    }
}

fn gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(name: &str, algo: &str) -> Instance {
        Instance {
            name: name.into(),
            algo: algo.into(),
            fallback: format!("{name}_reno"),
            mode: "link",
            registered: true,
            params: Default::default(),
            sockets: 3,
            inits: 10,
            fallbacks: 2,
            fallback_sockets: 1,
            fallback_refused: 0,
            alpha_updates: 500,
            loss_reactions: 4,
            reductions: 40,
            ssthresh_repairs: 0,
            cwnd_repairs: 0,
            inflight_holds: 0,
            progressive_cuts: 0,
            cwr_growth: 0,
            events: 7,
            events_dropped: 1,
            found_ssthresh: 0,
            found_cwnd: 0,
            ect1_packets: 0,
            pin: String::new(),
            params_raw: Default::default(),
        }
    }

    /// The value of the sample line that starts with `series` (name and
    /// labels as written).
    fn sample(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// A Prague instance shows its rewrites and how many of its flows are in
    /// the rate mode and under the classic fallback; a DCTCP one shows no
    /// Prague gauges.
    #[test]
    fn a_prague_instance_counts_its_ect1_rewrites_and_its_flows_modes() {
        let mut prague = instance("bpf_prague", "prague");
        prague.ect1_packets = 12_345;
        let s = Snapshot {
            instances: vec![
                InstanceNow {
                    instance: prague,
                    alphas: vec![0.02],
                    delivered: 10,
                    delivered_ce: 1,
                    prague: Some(PragueNow {
                        rate_mode: 2,
                        classic: 1,
                    }),
                },
                InstanceNow {
                    instance: instance("bpf_dctcp", "dctcp"),
                    alphas: vec![],
                    delivered: 0,
                    delivered_ce: 0,
                    prague: None,
                },
            ],
            switches: vec![],
        };
        let t = render(&s);
        let l = r#"{algorithm="prague",name="bpf_prague"}"#;
        assert_eq!(sample(&t, &format!("dctcp_bpf_ect1_packets_total{l}")), 12_345.0);
        assert_eq!(sample(&t, &format!("dctcp_bpf_prague_rate_mode_sockets{l}")), 2.0);
        assert_eq!(sample(&t, &format!("dctcp_bpf_prague_classic_sockets{l}")), 1.0);
        assert!(!t.contains(r#"dctcp_bpf_prague_classic_sockets{algorithm="dctcp""#), "{t}");
    }

    #[test]
    fn an_instance_is_counted_under_its_labels_with_help_and_units() {
        let s = Snapshot {
            instances: vec![InstanceNow {
                instance: instance("bpf_dctcp", "dctcp"),
                alphas: vec![0.004, 0.06, 1.0],
                delivered: 1000,
                delivered_ce: 125,
                prague: None,
            }],
            switches: vec![],
        };
        let t = render(&s);
        let l = r#"{algorithm="dctcp",name="bpf_dctcp"}"#;
        assert_eq!(sample(&t, &format!("dctcp_bpf_sockets{l}")), 3.0);
        assert_eq!(
            sample(&t, &format!("dctcp_bpf_flows_started_total{l}")),
            10.0
        );
        assert_eq!(
            sample(&t, &format!("dctcp_bpf_flows_released_total{l}")),
            7.0
        );
        assert_eq!(
            sample(&t, &format!("dctcp_bpf_window_reductions_total{l}")),
            40.0
        );
        assert_eq!(
            sample(&t, &format!("dctcp_bpf_loss_reactions_total{l}")),
            4.0
        );
        assert_eq!(
            sample(&t, &format!("dctcp_bpf_events_dropped_total{l}")),
            1.0
        );
        assert_eq!(sample(&t, &format!("dctcp_bpf_ce_echoed_ratio{l}")), 0.125);
        // alpha: three flows, one at or below 0.01, two at or below 0.1.
        let b = |le: &str| {
            sample(
                &t,
                &format!(
                    r#"dctcp_bpf_alpha_bucket{{le="{le}",algorithm="dctcp",name="bpf_dctcp"}}"#
                ),
            )
        };
        assert_eq!(
            (b("0.01"), b("0.1"), b("0.75"), b("1.0")),
            (1.0, 2.0, 2.0, 3.0)
        );
        assert_eq!(sample(&t, &format!("dctcp_bpf_alpha_count{l}")), 3.0);
        for name in [
            "dctcp_bpf_sockets",
            "dctcp_bpf_guard_ssthresh_repairs",
            "dctcp_bpf_alpha",
        ] {
            assert!(t.contains(&format!("# HELP {name} ")), "{name}: {t}");
        }
        assert!(
            t.contains("# TYPE dctcp_bpf_window_reductions counter"),
            "{t}"
        );
        assert!(t.ends_with("# EOF\n"), "{t}");
        // No lab switch, no switch metrics.
        assert!(!t.contains("dctcp_bpf_switch"), "{t}");
    }

    #[test]
    fn without_flows_the_ce_ratio_is_absent_not_zero() {
        let s = Snapshot {
            instances: vec![InstanceNow {
                instance: instance("x", "xdctcp"),
                alphas: vec![],
                delivered: 0,
                delivered_ce: 0,
                prague: None,
            }],
            switches: vec![],
        };
        let t = render(&s);
        assert!(!t.contains("dctcp_bpf_ce_echoed_ratio{"), "{t}");
        assert_eq!(
            sample(&t, r#"dctcp_bpf_alpha_count{algorithm="xdctcp",name="x"}"#),
            0.0
        );
    }

    #[test]
    fn a_lab_switch_has_its_queue_marks_and_drops() {
        let s = Snapshot {
            instances: vec![],
            switches: vec![SwitchNow {
                prefix: "dl1a2b3".into(),
                queue_packets: 17,
                queue_bytes: 17 * 1514,
                packets: 9000,
                bytes: 9000 * 1514,
                marked: 300,
                dropped: 2,
                dualpi2: None,
            }],
        };
        let t = render(&s);
        let l = r#"{switch="dl1a2b3"}"#;
        assert!(!t.contains("dualpi2"), "no DualPI2 on a step switch: {t}");
        assert_eq!(
            sample(&t, &format!("dctcp_bpf_switch_queue_packets{l}")),
            17.0
        );
        assert_eq!(
            sample(&t, &format!("dctcp_bpf_switch_marked_total{l}")),
            300.0
        );
        assert_eq!(
            sample(&t, &format!("dctcp_bpf_switch_dropped_total{l}")),
            2.0
        );
        assert_eq!(
            sample(&t, &format!("dctcp_bpf_switch_packets_total{l}")),
            9000.0
        );
    }

    /// A bpf-dualpi2 switch: each queue's counters under its own label, and
    /// the sojourn sum in seconds.
    #[test]
    fn a_dualpi2_switch_has_each_queues_counters() {
        use tc_qdisc::pins::QueueNow;
        let q = |n: u64| QueueNow {
            arrivals: 1000 * n,
            marked: 10 * n,
            step_marked: 3 * n,
            dropped: n,
            departures: 990 * n,
            stamped: 250 * n,
            sojourn_ns: 2_000_000_000 * n,
        };
        let s = Snapshot {
            instances: vec![],
            switches: vec![SwitchNow {
                prefix: "dl1a2b3".into(),
                queue_packets: 0,
                queue_bytes: 0,
                packets: 3000,
                bytes: 0,
                marked: 0,
                dropped: 0,
                dualpi2: Some([q(1), q(2)]),
            }],
        };
        let t = render(&s);
        let at = |name: &str, queue: &str| {
            sample(
                &t,
                &format!(r#"dctcp_bpf_switch_{name}{{switch="dl1a2b3",queue="{queue}"}}"#),
            )
        };
        assert_eq!(at("dualpi2_arrivals_total", "l"), 1000.0);
        assert_eq!(at("dualpi2_arrivals_total", "c"), 2000.0);
        assert_eq!(at("dualpi2_marked_total", "c"), 20.0);
        assert_eq!(at("dualpi2_step_marked_total", "l"), 3.0);
        assert_eq!(at("dualpi2_dropped_total", "c"), 2.0);
        assert_eq!(at("dualpi2_departures_total", "l"), 990.0);
        assert_eq!(at("dualpi2_stamped_total", "c"), 500.0);
        assert_eq!(at("dualpi2_sojourn_seconds_total", "c"), 4.0);
    }
}
