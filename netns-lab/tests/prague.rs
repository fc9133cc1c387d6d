//! bpf_prague in the kernel: real flows through the lab's marking switch,
//! the codepoint of every data packet counted at the switch, and every
//! traced alpha update, RTT scaling and cut checked exactly against
//! loader::model::prague.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use loader::algo::Algo;
use loader::intf::{
    dctcp_event, dctcp_event_type_DCTCP_EV_CUT as EV_CUT,
    dctcp_event_type_DCTCP_EV_STATE as EV_STATE, dctcp_event_type_DCTCP_EV_WINDOW as EV_WINDOW,
    prague_mode_PRAGUE_MODE_WINDOW as MODE_WINDOW, PRAGUE_ALPHA_BITS, PRAGUE_DEFAULT_G,
    PRAGUE_DEFAULT_CLASSIC_QDELAY_US, PRAGUE_DEFAULT_RTT_TARGET_US,
};
use loader::model::prague as model;
use netns_lab::measure::scenario::{self, RunData, Scenario};
use netns_lab::net::delay::{DelayBackend, RoundTrip, Rtt};
use netns_lab::traffic::bulk::FlowSpec;
use netns_lab::traffic::cc::LabCc;

mod common;

use common::{figures, require_root, serial, skip};

const TCP_CA_CWR: u8 = 2;
const ECT_1: u8 = 1;

fn is(e: &dctcp_event, t: u32) -> bool {
    u32::from(e.type_) == t
}

/// Flows of `ccs` (one sender each) through a 100 Mbit/s bpf-step switch
/// (K = 20), `trace` traced.
fn run(trace: &str, ccs: &[&str], secs: u64) -> RunData {
    let step = tc_qdisc::Bottleneck::step(100_000_000, 425, 20);
    run_through(step, None, trace, ccs, secs)
}

/// ... through `bottleneck`, `rtt` added.
fn run_through(
    bottleneck: tc_qdisc::Bottleneck,
    rtt: Option<Duration>,
    trace: &str,
    ccs: &[&str],
    secs: u64,
) -> RunData {
    let mut scn = Scenario {
        trace_algorithm: Some(trace.to_string()),
        round_trip: rtt.map(|rtt| RoundTrip::new(Rtt::uniform(rtt), DelayBackend::Auto)),
        ..Scenario::long_flows(
            trace,
            bottleneck,
            0,
            trace,
            Duration::from_secs(secs),
            Duration::from_secs(1),
        )
    };
    scn.flows = ccs
        .iter()
        .enumerate()
        .map(|(i, cc)| FlowSpec::long(i, cc))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let run = scenario::run(&scn, &stop, |_| {}).unwrap();
    let trace = run.cc_trace.as_ref().unwrap();
    assert_eq!(trace.counts.dropped, 0, "{:?}", trace.counts);
    run
}

/// The traced events of the sender socket of flow `sender`.
fn events_of(run: &RunData, sender: usize) -> Vec<dctcp_event> {
    let f = run.outcome.flows.iter().find(|f| f.sender == sender).unwrap();
    run.cc_trace
        .as_ref()
        .unwrap()
        .events
        .iter()
        .filter(|e| e.flow.sport == f.sport && e.flow.dport == f.dport)
        .copied()
        .collect()
}

/// Data packets (not pure ACKs) of flow `sender` by codepoint as they
/// reached the switch: [Not-ECT, ECT(1), ECT(0), CE].
fn codepoints(run: &RunData, sender: usize) -> [u64; 4] {
    let f = run.outcome.flows.iter().find(|f| f.sender == sender).unwrap();
    let mut n = [0; 4];
    for s in run.samples.iter().filter(|s| s.sport == f.sport && s.len > 200) {
        n[usize::from(s.ecn & 3)] += 1;
    }
    n
}

/// alpha / g after each window is the model's update of the one before
/// (none until the first marked round: no AQM seen yet); the growth per ACK
/// is the model's (rtt / target)^2 wherever it is scaled; the classic-ECN
/// evidence and fallback are the model's after each marked round
/// (`classic_qdelay_us`; none at all with the fallback off). Returns the
/// windows checked and how many of them had their growth scaled.
fn check_windows(
    flow: &[dctcp_event],
    g: u32,
    target_us: u32,
    classic_qdelay_us: Option<u32>,
) -> (usize, usize) {
    let (mut up, mut saw_ce, mut checked, mut scaled) = (0u64, false, 0, 0);
    let (mut score, mut classic) = (0u32, false);
    for e in flow.iter().filter(|e| is(e, EV_WINDOW)) {
        if let (Some(q), true) = (classic_qdelay_us, e.win_delivered_ce > 0) {
            score = model::classic_score(score, e.srtt8, e.min_rtt_us, q);
            classic = model::classic(score, classic);
        }
        assert_eq!(
            (e.classic_score, e.classic != 0),
            (score, classic),
            "classic evidence at {} (srtt {} / 8 us, min RTT {} us)",
            e.ts_ns,
            e.srtt8,
            e.min_rtt_us
        );
        saw_ce |= e.win_delivered_ce > 0;
        let want = if saw_ce {
            model::ewma(up, e.win_delivered, e.win_delivered_ce, g)
        } else {
            up
        };
        assert_eq!(
            e.upscaled_alpha, want,
            "window at {} (d {}, ce {}) from alpha / g {up}",
            e.ts_ns, e.win_delivered, e.win_delivered_ce
        );
        if u64::from(e.ai_per_ack) != model::ONE_CWND {
            assert_eq!(
                e.ai_per_ack,
                model::ai_per_ack(e.srtt8, target_us, true),
                "growth at srtt {} (1/8 us)",
                e.srtt8
            );
            scaled += 1;
        }
        up = e.upscaled_alpha;
        checked += 1;
    }
    (checked, scaled)
}

/// Each cut in window mode: the window after it is the model's cut of the
/// window at CWR entry (the state event just before) by the alpha then.
fn check_cuts(flow: &[dctcp_event], g: u32) -> usize {
    let mut checked = 0;
    for pair in flow.windows(2) {
        let (entry, cut) = (&pair[0], &pair[1]);
        if !is(cut, EV_CUT) || u32::from(cut.mode) != MODE_WINDOW {
            continue;
        }
        assert!(
            is(entry, EV_STATE) && entry.value == TCP_CA_CWR,
            "a cut not right after CWR entry: {entry:?}"
        );
        // Behind a classic AQM, Reno's half.
        let alpha = if entry.classic != 0 {
            1 << PRAGUE_ALPHA_BITS
        } else {
            model::alpha(entry.upscaled_alpha, g)
        };
        assert_eq!(
            cut.frac_cwnd,
            model::cut(entry.frac_cwnd, alpha),
            "cut at {} from {} at alpha / g {}",
            cut.ts_ns,
            entry.frac_cwnd,
            entry.upscaled_alpha
        );
        checked += 1;
    }
    checked
}

fn prague_or_skip() -> Option<LabCc> {
    if let Err(e) = Algo::Prague.require_kernel() {
        skip(&format!("{e}"));
        return None;
    }
    Some(LabCc::attach(Algo::Prague, vec![]).unwrap())
}

/// Two Prague flows and a cubic one share the switch at veth's own round
/// trip: every Prague data packet arrives ECT(1), every cubic one ECT(0);
/// alpha, the cuts and the scaled growth equal the model's throughout.
#[test]
fn prague_data_leaves_ect1_and_every_traced_update_and_cut_is_the_models() {
    require_root();
    let _serial = serial();
    let Some(cc) = prague_or_skip() else { return };
    let run = run(&cc.name, &[&cc.name, &cc.name, "cubic"], 5);

    for sender in [0, 1] {
        let [not_ect, ect1, ect0, ce] = codepoints(&run, sender);
        eprintln!("prague flow {sender}: {ect1} ECT(1), {ect0} ECT(0), {not_ect} Not-ECT, {ce} CE");
        assert!(ect1 > 1000, "flow {sender}: {ect1} ECT(1) data packets");
        assert_eq!((not_ect, ect0, ce), (0, 0, 0), "flow {sender}: only ECT(1) arrives");
    }
    let [not_ect, ect1, ect0, ce] = codepoints(&run, 2);
    assert!(ect0 > 100, "cubic: {ect0} ECT(0)");
    assert_eq!((not_ect, ect1, ce), (0, 0, 0), "cubic's packets are left alone");

    let mut cuts = 0;
    for sender in [0, 1] {
        let flow = events_of(&run, sender);
        let (windows, scaled) = check_windows(&flow, PRAGUE_DEFAULT_G, PRAGUE_DEFAULT_RTT_TARGET_US, None);
        let checked = check_cuts(&flow, PRAGUE_DEFAULT_G);
        eprintln!("prague flow {sender}: {windows} windows ({scaled} scaled), {checked} cuts checked");
        cuts += checked;
        // Once RTT-independent (4 rounds after slow start) at a sub-ms RTT,
        // a round is a target RTT of 25 ms: about 200 in 5 s (199-204 in
        // three runs on 2026-12-01, 196-198 of them scaled).
        assert!(windows > 50, "{windows} windows");
        assert!(scaled * 2 > windows, "{scaled} of {windows} windows scaled");
        // Every event after the flow's start (taken before init marks it).
        assert!(
            flow.iter().skip(1).all(|e| e.ect == ECT_1),
            "an event says ECT(0)"
        );
    }
    // Cuts in window mode (the others are the rate mode's): 89 and 171 for
    // the two flows in two runs on 2026-12-01 (17 the fewest of one flow),
    // 109 for one flow in a third.
    assert!(cuts > 20, "{cuts} cuts checked");
}

/// RTT independence is a parameter: with it off no growth is scaled, and
/// the cut is not held to one per target RTT (more cuts in the same time).
#[test]
fn without_rtt_scaling_growth_is_unscaled_and_cuts_come_every_round() {
    require_root();
    let _serial = serial();
    let Some(on) = prague_or_skip() else { return };
    let off = LabCc::attach(Algo::Prague, vec!["rtt_scaling=0".parse().unwrap()]).unwrap();
    let with = run(&on.name, &[&on.name, &on.name], 4);
    let without = run(&off.name, &[&off.name, &off.name], 4);
    let (mut cuts_on, mut cuts_off) = (0, 0);
    for sender in [0, 1] {
        let flow = events_of(&without, sender);
        let (windows, scaled) = check_windows(&flow, PRAGUE_DEFAULT_G, PRAGUE_DEFAULT_RTT_TARGET_US, None);
        assert!(windows > 50 && scaled == 0, "{windows} windows, {scaled} scaled");
        cuts_off += check_cuts(&flow, PRAGUE_DEFAULT_G);
        cuts_on += check_cuts(&events_of(&with, sender), PRAGUE_DEFAULT_G);
    }
    eprintln!("cuts: {cuts_on} with RTT scaling, {cuts_off} without");
    assert!(cuts_off > 2 * cuts_on, "{cuts_off} cuts without scaling, {cuts_on} with");
}

/// Prague beside cubic through a classic ECN AQM (RED from 5 to 15 ms of
/// queue, 50 Mbit/s, 20 ms): with `classic_ecn=1` the evidence builds over
/// the marked rounds exactly as the model's, the fallback comes into force,
/// and from then on the cuts are Reno's half. The rate ratio it buys is
/// `lab l4s`'s finding (tests/l4s.rs).
#[test]
fn behind_a_classic_aqm_the_fallback_comes_as_the_models_and_cuts_by_half() {
    require_root();
    let _serial = serial();
    if let Err(e) = Algo::Prague.require_kernel() {
        return skip(&format!("{e}"));
    }
    let cc = LabCc::attach(Algo::Prague, vec!["classic_ecn=1".parse().unwrap()]).unwrap();
    let red = tc_qdisc::Bottleneck {
        rate_bps: 50_000_000,
        buffer_pkts: 425,
        backend: tc_qdisc::Backend::BpfRed {
            min: 21,
            max: 62,
            max_p: 0.1,
            wlog: 9,
        },
    };
    let run = run_through(red, Some(Duration::from_millis(20)), &cc.name, &[&cc.name, "cubic"], 8);
    let flow = events_of(&run, 0);
    let (windows, _) = check_windows(
        &flow,
        PRAGUE_DEFAULT_G,
        PRAGUE_DEFAULT_RTT_TARGET_US,
        Some(PRAGUE_DEFAULT_CLASSIC_QDELAY_US),
    );
    let halved = flow
        .windows(2)
        .filter(|p| is(&p[1], EV_CUT) && p[0].classic != 0)
        .count();
    let cuts = check_cuts(&flow, PRAGUE_DEFAULT_G);
    let first = flow.iter().find(|e| e.classic != 0).map(|e| e.ts_ns - flow[0].ts_ns);
    figures(&[
        ("windows", windows as f64),
        ("cuts", cuts as f64),
        ("halved", halved as f64),
        ("fallback_from_s", first.map_or(f64::NAN, |ns| ns as f64 / 1e9)),
    ]);
    // Ten runs (2026-12-05, tools/spread): in force from 1.60-2.20 s, 9-12
    // of 21-26 cuts halved. Held to half the fewest halved cuts and a
    // fallback by 4 s of the 8 s run; with the fallback never engaged
    // (tools/bpf-mutants' mutant 16) none comes into force.
    let from = first.expect("the fallback never came into force") as f64 / 1e9;
    assert!(from <= 4.0, "the fallback in force only from {from:.2} s");
    assert!(halved >= 5, "{halved} of {cuts} cuts behind the classic AQM Reno's half");
}
