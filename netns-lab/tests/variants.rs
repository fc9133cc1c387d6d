//! xDCTCP and the seed 002 variants in the kernel: real flows through the
//! lab's marking switch, every traced cut and alpha update checked exactly
//! against loader::model, and `loader set` changing live flows.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use dctcp_utils::clock::monotonic_ns;
use loader::algo::Algo;
use loader::intf::{
    dctcp_event, dctcp_event_type_DCTCP_EV_REPAIR as EV_REPAIR,
    dctcp_event_type_DCTCP_EV_STATE as EV_STATE, dctcp_event_type_DCTCP_EV_WINDOW as EV_WINDOW,
    dctcp_repair_DCTCP_REPAIR_CWND as REPAIR_CWND,
    dctcp_repair_DCTCP_REPAIR_INFLIGHT as REPAIR_INFLIGHT,
    dctcp_repair_DCTCP_REPAIR_SSTHRESH as REPAIR_SSTHRESH, DCTCP_ALPHA_ONE, DCTCP_BOGUS_SSTHRESH,
    DCTCP_ONE,
};
use loader::model;
use netns_lab::measure::scenario::{self, RunData, Scenario};
use netns_lab::traffic::cc::LabCc;

const TCP_CA_CWR: u8 = 2;

mod common;

use common::{busy_floor, require_root, serial, steal_capped};

fn assignments(list: &[&str]) -> Vec<loader::params::Assignment> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

/// Two long flows of `cc` through a 100 Mbit/s bpf-step switch (K = 20),
/// traced; at `set_at`, `loader set cc <set>`. Returns the run and the
/// monotonic interval in which the set happened.
fn traced_run(cc: &LabCc, secs: u64, set_at: Duration, set: &[&str]) -> (RunData, (u64, u64)) {
    let scn = Scenario {
        trace_algorithm: Some(cc.name.clone()),
        ..Scenario::long_flows(
            &cc.name,
            tc_qdisc::Bottleneck::step(100_000_000, 425, 20),
            2,
            &cc.name,
            Duration::from_secs(secs),
            Duration::from_secs(1),
        )
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut set_window = None;
    let run = scenario::run(&scn, &stop, |t| {
        if t >= set_at && set_window.is_none() {
            let before = monotonic_ns();
            loader::instance::set(&cc.name, &assignments(set)).unwrap();
            set_window = Some((before, monotonic_ns()));
        }
    })
    .unwrap();
    let trace = run.cc_trace.as_ref().unwrap();
    assert_eq!(trace.counts.dropped, 0, "{:?}", trace.counts);
    (run, set_window.expect("the run reached the set"))
}

/// The events of each long flow's sender socket.
fn per_sender(run: &RunData) -> Vec<Vec<dctcp_event>> {
    let events = &run.cc_trace.as_ref().unwrap().events;
    run.outcome
        .flows
        .iter()
        .map(|f| {
            events
                .iter()
                .filter(|e| e.flow.sport == f.sport && e.flow.dport == f.dport)
                .copied()
                .collect()
        })
        .collect()
}

fn is(e: &dctcp_event, t: u32) -> bool {
    u32::from(e.type_) == t
}

/// Every window event's alpha is the model's update of the previous one
/// (the first from alpha_on_init = 1.0), with the gain and resolution in
/// force at its time. Returns how many were checked.
fn check_alpha_updates(
    flow: &[dctcp_event],
    gain_bits_at: impl Fn(u64) -> Option<(u32, u32)>,
) -> usize {
    let mut alpha = DCTCP_ALPHA_ONE;
    let mut checked = 0;
    for e in flow.iter().filter(|e| is(e, EV_WINDOW)) {
        if let Some((g, bits)) = gain_bits_at(e.ts_ns) {
            let want = model::ewma(alpha, e.win_delivered, e.win_delivered_ce, g, bits);
            assert_eq!(
                e.alpha, want,
                "window at {} (d {}, ce {}, g {g}, {bits} bits) from alpha {alpha}",
                e.ts_ns, e.win_delivered, e.win_delivered_ce
            );
            checked += 1;
        }
        alpha = e.alpha;
    }
    checked
}

/// CWR entries: the cwnd the cut started from, the alpha and n it used.
fn cwr_entries(flow: &[dctcp_event]) -> impl Iterator<Item = &dctcp_event> {
    flow.iter()
        .filter(|e| is(e, EV_STATE) && e.value == TCP_CA_CWR)
}

#[test]
fn xdctcp_cuts_short_flows_by_ns_and_long_ones_by_nl_and_loader_set_retunes_them() {
    require_root();
    let _serial = serial();
    const SHORT_BYTES: u64 = 3_000_000;
    let cc = LabCc::attach(
        Algo::Xdctcp,
        assignments(&[
            "g=0.09",
            "ns=0.25",
            "nl=1",
            &format!("short_bytes={SHORT_BYTES}"),
        ]),
    )
    .unwrap();
    // Halfway, long flows start cutting by 0.5 alpha instead of alpha.
    let (run, (set_from, set_to)) = traced_run(&cc, 4, Duration::from_secs(2), &["nl=0.5"]);
    let repairs = cc.repairs().unwrap().ssthresh;

    let (ns, nl_before, nl_after) = (DCTCP_ONE / 4, DCTCP_ONE, DCTCP_ONE / 2);
    let (mut short, mut long_before, mut long_after, mut mismatched) = (0, 0, 0, 0);
    for flow in per_sender(&run) {
        // g never changed: every update is checked.
        let windows = check_alpha_updates(&flow, |_| Some((5898, 10)));
        assert!(windows > 50, "{windows} windows");
        for e in cwr_entries(&flow) {
            let want_n = if e.bytes_sent < SHORT_BYTES {
                short += 1;
                ns
            } else if e.ts_ns < set_from {
                long_before += 1;
                nl_before
            } else if e.ts_ns > set_to {
                long_after += 1;
                nl_after
            } else {
                continue;
            };
            assert_eq!(
                e.reduction, want_n,
                "cut at {} after {} bytes",
                e.ts_ns, e.bytes_sent
            );
            if e.ssthresh != model::reduced(e.cwnd, e.alpha, e.reduction) {
                mismatched += 1;
            }
        }
    }
    eprintln!(
        "cuts: {short} short, {long_before} long before the set, {long_after} after; \
         {mismatched} ssthresh mismatches, {repairs} guard repairs"
    );
    assert!(short >= 2 && long_before >= 5 && long_after >= 5);
    // ssthresh = cwnd (1 - n alpha) exactly, but where this kernel's
    // corruption (README, known issue) struck and the guard repaired it.
    assert!(mismatched <= repairs, "{mismatched} cuts off the model");
}

#[test]
fn kdctcp_switches_change_alpha_and_cwr_as_seed_002_describes() {
    require_root();
    let _serial = serial();
    let cc = LabCc::attach(
        Algo::Kdctcp,
        assignments(&[
            "per_ack_alpha=1",
            "g_ack=0.00390625",
            "fine_alpha=1",
            "progressive=1",
            "cwr_growth=1",
        ]),
    )
    .unwrap();
    // Halfway: back to one update per window, still at 20 bits.
    let (run, (set_from, set_to)) =
        traced_run(&cc, 4, Duration::from_secs(2), &["per_ack_alpha=0"]);
    let inst = loader::instance::describe(&dctcp_utils::bpffs::InstanceDir::new(&cc.name)).unwrap();
    eprintln!(
        "progressive cuts {}, cwr growth {}, alpha updates {}",
        inst.progressive_cuts, inst.cwr_growth, inst.alpha_updates
    );
    assert!(inst.progressive_cuts > 0 && inst.cwr_growth > 0, "{inst:?}");

    for flow in per_sender(&run) {
        let windows = |from: u64, to: u64| {
            flow.iter()
                .filter(|e| is(e, EV_WINDOW) && e.ts_ns >= from && e.ts_ns < to)
                .count()
        };
        let first = flow.first().unwrap().ts_ns;
        let (per_ack, per_window) = (
            windows(first, set_from) as f64 / (set_from - first) as f64,
            windows(set_to, u64::MAX) as f64 / (flow.last().unwrap().ts_ns - set_to) as f64,
        );
        // An update per ACK is several per window of data.
        assert!(
            per_ack > 4.0 * per_window,
            "{per_ack} vs {per_window} per ns"
        );
        let checked = check_alpha_updates(&flow, |t| {
            (t < set_from)
                .then_some((256, 20))
                .or((t > set_to).then_some((4096, 20)))
        });
        assert!(checked > 100, "{checked}");
        // 20 bits of resolution in use: values 10-bit alpha cannot hold.
        assert!(flow.iter().any(|e| is(e, EV_WINDOW) && e.alpha % 1024 != 0));
        // CWR entry still cuts from cwnd by alpha / 2.
        for e in cwr_entries(&flow) {
            assert_eq!(e.reduction, DCTCP_ONE / 2);
        }
    }
}

/// The guard at work, on purpose: with inject_ssthresh=3 each flow's first
/// three cuts hand the kernel the impossible ssthresh this 6.18 guest was
/// seen to store (README, Known issue). Each must be repaired at once to
/// the cut DCTCP computed, traced as a `repair` event and counted, and the
/// flows go on at full rate.
#[test]
fn the_guard_repairs_an_injected_ssthresh_and_the_flows_go_on() {
    require_root();
    let _serial = serial();
    steal_capped(the_guard_repairs_an_injected_ssthresh_and_the_flows_go_on_once);
}

fn the_guard_repairs_an_injected_ssthresh_and_the_flows_go_on_once() {
    let cc = LabCc::attach(Algo::Dctcp, assignments(&["inject_ssthresh=3"])).unwrap();
    // Halfway, injection off: `loader set` reaches it like any tunable.
    let (run, _) = traced_run(&cc, 3, Duration::from_millis(1500), &["inject_ssthresh=0"]);
    let ssthresh_repairs = cc.repairs().unwrap().ssthresh;
    let events = &run.cc_trace.as_ref().unwrap().events;
    let traced = events
        .iter()
        .filter(|e| is(e, EV_REPAIR) && u32::from(e.value) == REPAIR_SSTHRESH)
        .count() as u64;
    assert_eq!(ssthresh_repairs, traced, "every counted repair is traced");
    // The value itself is kept as found (the last repaired: an injected
    // one, or the kernel issue's own), never the repaired one.
    let (_, (found, _)) = cc.guard().unwrap();
    assert!(
        found > 1 << 16,
        "found ssthresh {found:#x} after {ssthresh_repairs} repairs"
    );
    for flow in per_sender(&run) {
        let cuts: Vec<usize> = (0..flow.len())
            .filter(|&i| is(&flow[i], EV_STATE) && (2..=4).contains(&flow[i].value))
            .collect();
        assert!(cuts.len() > 10, "{} cuts", cuts.len());
        for &i in &cuts[..3] {
            let (cut, next) = (&flow[i], &flow[i + 1]);
            assert_eq!(
                cut.ssthresh, DCTCP_BOGUS_SSTHRESH,
                "injected at {}",
                cut.ts_ns
            );
            assert!(
                is(next, EV_REPAIR) && u32::from(next.value) == REPAIR_SSTHRESH,
                "no repair right after the cut at {}",
                cut.ts_ns
            );
            // The cut DCTCP computed: cwnd (1 - alpha / 2) from the window
            // the reduction began with.
            assert_eq!(
                next.ssthresh,
                model::reduced(cut.cwnd, cut.alpha, cut.reduction),
                "repaired ssthresh at {}",
                next.ts_ns
            );
        }
    }
    // No cwnd bound over the whole run: this kernel's own issue still puts
    // an impossible cwnd in now and then, and events can show it before the
    // guard's next check repairs it (that is what the count includes).
    assert!(ssthresh_repairs >= 6, "{ssthresh_repairs} repairs");
    // The link stays busy (not the 95 % target: a short CPU read 89.4 %
    // here and 90.4 % in a quick queue run, 2026-11-28).
    let steal = run.outcome.steal_share;
    assert!(
        run.outcome.utilization > busy_floor(0.8, steal),
        "utilization {} with {steal} of the CPU stolen",
        run.outcome.utilization
    );
    // A second run on the same instance, injecting its first cut again:
    // what the labs report per run (cc::guarded) is that run's repairs
    // alone, the first run's being in the counters already.
    let ((run2, _), repairs2, _) = netns_lab::traffic::cc::guarded(Some(&cc), || {
        Ok(traced_run(
            &cc,
            2,
            Duration::from_millis(500),
            &["inject_ssthresh=1"],
        ))
    })
    .unwrap();
    let traced2 = |kind: u32| {
        run2.cc_trace
            .as_ref()
            .unwrap()
            .events
            .iter()
            .filter(|e| is(e, EV_REPAIR) && u32::from(e.value) == kind)
            .count() as u64
    };
    assert_eq!(
        repairs2,
        [
            traced2(REPAIR_SSTHRESH),
            traced2(REPAIR_CWND),
            traced2(REPAIR_INFLIGHT)
        ]
        .into(),
        "the second run's repairs, counted apart from the first's"
    );
}

/// `guard=0` turns the guard off and `loader set guard=1` back on while
/// flows run. With every cut injected: no repair while it is off, though
/// the flows carry the impossible ssthresh; once it is back on, a flow seen
/// with an impossible value is repaired. (A flow that the unguarded bursts
/// left in timeouts may send nothing more in the run: nothing to check.)
#[test]
fn the_guard_switches_off_and_on_while_flows_run() {
    require_root();
    let _serial = serial();
    let cc = LabCc::attach(
        Algo::Dctcp,
        assignments(&["inject_ssthresh=4294967295", "guard=0"]),
    )
    .unwrap();
    let (run, (set_from, set_to)) = traced_run(
        &cc,
        3,
        Duration::from_millis(1500),
        &["guard=1", "inject_ssthresh=0"],
    );
    let events = &run.cc_trace.as_ref().unwrap().events;
    let count = |f: &dyn Fn(&dctcp_event) -> bool| events.iter().filter(|e| f(e)).count();
    let bogus_off = count(&|e| e.ts_ns < set_from && e.ssthresh == DCTCP_BOGUS_SSTHRESH);
    let repairs_off = count(&|e| e.ts_ns < set_from && is(e, EV_REPAIR));
    assert!(
        bogus_off > 0,
        "no impossible ssthresh while the guard was off"
    );
    assert_eq!(repairs_off, 0, "repairs while the guard was off");
    const SANE: u32 = 1 << 24;
    for flow in per_sender(&run) {
        let after: Vec<&dctcp_event> = flow.iter().filter(|e| e.ts_ns > set_to).collect();
        let impossible = after
            .iter()
            .filter(|e| e.cwnd >= SANE || (e.ssthresh >= SANE && e.ssthresh != 0x7fff_ffff))
            .count();
        let repairs = after.iter().filter(|e| is(e, EV_REPAIR)).count();
        assert!(
            impossible == 0 || repairs > 0,
            "{impossible} events with an impossible window after the guard was back on, no repair"
        );
    }
    let r = cc.repairs().unwrap();
    let (ssthresh, cwnd, holds) = (r.ssthresh, r.cwnd, r.inflight);
    assert_eq!(
        (ssthresh + cwnd + holds) as usize,
        count(&|e| is(e, EV_REPAIR)),
        "every counted repair is traced"
    );
}
