//! `lab convergence --quick` end to end (100 Mbit/s at 500 us, 3 senders, a
//! change every 5 s, bpf_dctcp on bpf-step at K = 20 against cubic and
//! reno on a 425-packet drop-tail queue): the flows start and stop on
//! time, DCTCP shares the link evenly from the start at a queue near K,
//! TCP unevenly at a queue a deep buffer lets it build, and the summary
//! shows what runs.json measured. Bad schedules are refused.

use netns_lab::measure::fairness::{Criterion, Grid};
use serde_json::Value;

mod common;

use common::{
    judged_twice,
    assert_csv, assert_plots, assert_refused, busy_floor, figures, json, lab, namespaces_with, require_root,
    row_numbers, serial, stderr, tmpdir,
};

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The phases of two or more flows.
fn shared(r: &Value) -> impl Iterator<Item = &Value> {
    r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["flows"].as_u64().unwrap() >= 2)
}

fn min_jain(r: &Value) -> f64 {
    shared(r)
        .map(|p| num(&p["jain"]))
        .fold(f64::INFINITY, f64::min)
}

/// Convergence after each change per interval (`convergence_s`) or on
/// means (`smoothed_s`), the phase's length where never.
fn changes(r: &Value, key: &str) -> Vec<f64> {
    changes_leaving(r, key, 1)
}

/// `changes`, after only those that leave at least `flows` flows.
fn changes_leaving(r: &Value, key: &str, flows: u64) -> Vec<f64> {
    r["phases"].as_array().unwrap()[1..]
        .iter()
        .filter(|p| p["flows"].as_u64().unwrap() >= flows)
        .map(|p| {
            p[key]
                .as_f64()
                .unwrap_or(num(&p["end_s"]) - num(&p["start_s"]))
        })
        .collect()
}

fn never(r: &Value, key: &str) -> usize {
    r["phases"].as_array().unwrap()[1..]
        .iter()
        .filter(|p| p[key].is_null())
        .count()
}

/// Seconds after the last change until the one flow left (flow 0) holds,
/// on 1 s means, within 25 % of its rate over the phase's second half; the
/// phase's length if it never does. Not 10 %: the flow's own 1 s means
/// wander 2.4-9.6 % at most from that rate over the phase (3 runs of each,
/// 2026-12-02, the CPU, not the flow: 100 ms rates of 63-95 Mbit/s), so a
/// slow patch just after the leave read as a late takeover (0.8 s and 1.0 s
/// against 0.0 s in the others). A flow that never took the freed link
/// stays at half of it.
fn takeover_s(r: &Value) -> f64 {
    let ends: Vec<f64> = r["ends_s"].as_array().unwrap().iter().map(num).collect();
    let rates: Vec<Vec<f64>> = r["rates_mbps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_array().unwrap().iter().map(num).collect())
        .collect();
    let p = r["phases"].as_array().unwrap().last().unwrap();
    let (from, until) = (num(&p["start_s"]), num(&p["end_s"]));
    assert_eq!(p["flows"], 1, "the schedule ends with one flow: {p}");
    let grid = Grid {
        ends: &ends,
        rates: &rates,
    };
    let second_half = grid.within((from + until) / 2.0, until);
    let held = rates[0][second_half.clone()].iter().sum::<f64>() / second_half.len() as f64;
    let interval = ends[1] - ends[0];
    let criterion = Criterion {
        tolerance: 0.25,
        hold: 1.0,
        smooth: (1.0 / interval).round() as usize,
    };
    grid.convergence_time(&[0], held, (from, until), criterion)
        .unwrap_or(until - from)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

/// `lab convergence --quick` into `out`; its runs.json.
fn convergence_runs(out: &std::path::Path) -> Value {
    let _ = std::fs::remove_dir_all(out);
    let o = lab(&["convergence", "--quick", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    json(&out.join("runs.json"))
}

/// DCTCP's least even phase, at least: min Jain read 0.996-1.000 in 10 runs
/// on the lab's own CPU (2026-11-28; cubic's 0.746-0.854, reno's
/// 0.816-0.984), and unpinned, with the known issue striking, 0.961-1.000
/// in 18.
const FAIR: f64 = 0.95;

/// Bounds from 6 quick runs on this kernel; each assertion names their
/// spread.
#[test]
fn dctcp_shares_evenly_from_the_start_while_tcp_builds_a_queue() {
    require_root();
    let _serial = serial();
    judged_twice(dctcp_shares_evenly_from_the_start_while_tcp_builds_a_queue_once);
}

fn dctcp_shares_evenly_from_the_start_while_tcp_builds_a_queue_once() {
    let before = namespaces_with("dl");
    let out = tmpdir("convergence");
    // Unpinned, the known issue struck every run here (17-30 ssthresh
    // repairs), and one (a fresh clone's suite, 2026-11-26, repairs 26 / 18
    // / 491) let the third flow take 80 Mbit/s for 10 s (min Jain 0.49);
    // the test runs on its own CPU (`serial`), where it does not strike.
    let runs = convergence_runs(&out);
    let runs = runs.as_array().unwrap();
    let by = |v: &str| {
        runs.iter()
            .find(|r| r["variant"] == v)
            .unwrap_or_else(|| panic!("no {v} run"))
    };
    let (dctcp, cubic, reno) = (
        by("bpf_dctcp@bpf-step"),
        by("cubic@droptail"),
        by("reno@droptail"),
    );
    let mean_jain = |r: &Value| {
        let j: Vec<f64> = shared(r).map(|p| num(&p["jain"])).collect();
        j.iter().sum::<f64>() / j.len() as f64
    };
    let q = |r: &Value| -> Vec<f64> {
        r["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| num(&p["queue_mean"]))
            .collect()
    };
    let fold = |v: Vec<f64>, f: fn(f64, f64) -> f64| v.into_iter().reduce(f).unwrap();
    let all = |each: &dyn Fn(&Value) -> Vec<f64>| runs.iter().flat_map(each).collect::<Vec<f64>>();
    let shares = |r: &Value| -> Vec<f64> {
        r["phases"].as_array().unwrap().iter().map(|p| num(&p["goodput_share"])).collect()
    };
    let tcp_queues: Vec<f64> = [cubic, reno].into_iter().flat_map(q).collect();
    figures(&[
        ("dctcp_min_jain", min_jain(dctcp)),
        ("cubic_min_jain", min_jain(cubic)),
        ("dctcp_mean_jain", mean_jain(dctcp)),
        ("cubic_mean_jain", mean_jain(cubic)),
        ("cubic_converge_s", median(changes_leaving(cubic, "smoothed_s", 2))),
        ("dctcp_converge_s", median(changes_leaving(dctcp, "smoothed_s", 2))),
        ("dctcp_queue_lo", fold(q(dctcp), f64::min)),
        ("dctcp_queue_hi", fold(q(dctcp), f64::max)),
        ("tcp_queue_over_dctcp", fold(tcp_queues, f64::min) / fold(q(dctcp), f64::max)),
        ("share_lo", fold(all(&shares), f64::min)),
        ("last_leave_s", fold(all(&|r| vec![takeover_s(r)]), f64::max)),
        ("steal_hi", fold(all(&|r| vec![num(&r["steal_share"])]), f64::max)),
    ]);

    // The schedule as the receiver saw it: 0-5, 5-10, 10-15 (3 flows),
    // 15-20, 20-25 s. Through DCTCP's short queue each flow's first byte
    // came 5-6 ms after its start, its last 2-11 ms after its stop.
    for (i, lag) in dctcp["start_lag_s"].as_array().unwrap().iter().enumerate() {
        let lag = num(lag);
        assert!((0.0..0.05).contains(&lag), "flow {i} started {lag} s late");
    }
    let stops: Vec<f64> = dctcp["stop_lag_s"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    assert_eq!(stops.len(), 2, "flows 1 and 2 stop before the end");
    for lag in stops {
        assert!((-0.05..0.05).contains(&lag), "a flow stopped {lag} s off");
    }
    for r in runs {
        let ends: Vec<f64> = r["ends_s"].as_array().unwrap().iter().map(num).collect();
        // First come, first gone.
        let spans = [(0.0, 25.0), (5.0, 15.0), (10.0, 20.0)];
        for (f, rates) in r["rates_mbps"].as_array().unwrap().iter().enumerate() {
            let (from, to) = spans[f];
            for (j, v) in rates.as_array().unwrap().iter().enumerate() {
                let begin = if j == 0 { 0.0 } else { ends[j - 1] };
                // Nothing before its start, nothing once a queue's drain
                // after its stop is over (cubic's: 42-58 ms).
                if ends[j] <= from || begin >= to + 0.2 {
                    assert_eq!(num(v), 0.0, "{}: flow {f} at {}", r["variant"], ends[j]);
                }
            }
        }
        let steal = num(&r["steal_share"]);
        for p in r["phases"].as_array().unwrap() {
            // The flows keep the link busy in every phase's second half:
            // 99.6-100 % in ten pinned runs, but a fresh clone's run on a
            // new machine (2026-11-28, no guard repair, DCTCP's queue at
            // 18.7 packets, never empty) read 0.960 for DCTCP's three
            // flows and 0.982-0.995 in its other phases: the switch's CPU,
            // not the flows, was short; another (2026-11-28, the machine
            // busy beside it) 0.858 for cubic's last two-flow phase. One
            // flow stalled for the second half of a three-flow phase would
            // read at most 0.67, of a two-flow phase 0.5. The floor gives
            // way to what the hypervisor took from the lab's CPU.
            let share = num(&p["goodput_share"]);
            assert!(
                share >= busy_floor(0.80, steal),
                "{}: {p}, {:.1} % of the CPU stolen",
                r["variant"],
                steal * 100.0
            );
        }
        // After the last leave the one flow left takes the freed link
        // within half a second: its 1 s means come within 25 % of the rate
        // it holds over the phase's second half (runs: 0.0-0.1 s for all
        // three, at 10 %; 0.0 s in 3 more of each at 25 %), and that rate is the
        // link's (the floor above). Against
        // the link's nominal rate instead, a stolen CPU read as a stall: a
        // fresh clone's reno (2026-11-28) never came within 10 % of it.
        let last = takeover_s(r);
        assert!(
            last <= 0.5,
            "{}: {last} s to take the freed link",
            r["variant"]
        );
    }

    // DCTCP shares evenly in every phase (FAIR).
    let dj = min_jain(dctcp);
    assert!(dj >= FAIR, "DCTCP min Jain {dj}");
    // Cubic on a deep drop-tail queue shares less evenly, but over a
    // phase's second half (2.5 s) it can come near: its min Jain read
    // 0.54-0.94 in the same 18 runs, 0.94 against DCTCP's 0.96 in the
    // CI run's. Its mean over the shared phases read 0.84-0.92 in six
    // runs against DCTCP's 0.994-1.000, and 0.82-0.96 in ten pinned ones
    // (2026-12-05) against 0.998-1.000, at least 0.036 below: the direction
    // is asserted, on the mean of the three phases rather than the worst.
    let (dm, cm) = (mean_jain(dctcp), mean_jain(cubic));
    assert!(dm > cm, "DCTCP mean Jain {dm} against cubic's {cm}");
    // On 1 s means cubic's flows are not within 10 % of the fair share for
    // 1 s after a change that leaves two or more flows: the median of the
    // quick run's three such changes was the phase's 5 s in every run (ten
    // pinned runs on 2026-12-05, tools/spread, six on 2026-11-29, two of the
    // three in a CI run). DCTCP's usually converge at once (medians 0.0 s
    // in those ten), but not always: a fresh clone's run (2026-12-05, no
    // steal) held its flows about 55 / 45 through every phase (min Jain
    // 0.96) and read [5.0, 5.0, 5.0], as an unpinned one read [5.0, 5.0,
    // 2.2]: so DCTCP's time is reported (summary.md), not asserted. The
    // fourth change leaves one flow to take the freed link, which cubic too
    // does at once or nearly (0.0-0.5 s, 1.3 s in CI's): a median over all
    // four read 1.3 s in that CI run ([0.7, 5.0, 5.0, 1.3]) and failed it.
    // The CoV is reported, not asserted: the paper's steadier DCTCP does
    // not show at this scale (six runs: DCTCP 0.061-0.089, cubic
    // 0.044-0.071, reno 0.068-0.130), where a DCTCP flow's window is 8-12
    // packets and one packet more or less moves its 100 ms rate by about
    // 10 %.
    let cu = changes_leaving(cubic, "smoothed_s", 2);
    assert!(median(cu.clone()) >= 2.5, "cubic on means {cu:?}");
    // Queues: DCTCP's mean per phase 16.5-18.8 in twenty pinned runs (K =
    // 20; 16.0-24.5 unpinned); TCP's at least 11.3 times DCTCP's largest in
    // every one of them.
    let dq = q(dctcp);
    assert!(dq.iter().all(|m| (14.0..=24.0).contains(m)), "DCTCP {dq:?}");
    let top = dq.iter().copied().fold(0.0, f64::max);
    for r in [cubic, reno] {
        let tq = q(r);
        assert!(
            tq.iter().all(|m| *m >= 8.0 * top),
            "{}: {tq:?} against DCTCP's {dq:?}",
            r["variant"]
        );
        // Runs: cubic 47-74, reno 150-403 data packets dropped.
        assert!(r["drops"].as_u64().unwrap() >= 10, "{}", r["variant"]);
    }
    // DCTCP loses no data: its windows (receivers' cap 64 packets each)
    // never fill the 425-packet buffer. The marker drops only the resets of
    // the flows that stop (runs: 0-4 of them).
    assert_eq!(dctcp["drops"], 0, "{}", dctcp["drops"]);

    // The summary's rows carry runs.json's figures.
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for r in [dctcp, cubic, reno] {
        let cells = row_numbers(&summary, &format!("| {} |", r["variant"].as_str().unwrap()));
        let cov: Vec<f64> = shared(r).map(|p| num(&p["cov"])).collect();
        let cov = cov.iter().sum::<f64>() / cov.len() as f64;
        // (figure, the unit of its last printed digit)
        let expect = [
            (median(changes(r, "convergence_s")), 0.1),
            (median(changes(r, "smoothed_s")), 0.1),
            (never(r, "convergence_s") as f64, 1.0),
            (never(r, "smoothed_s") as f64, 1.0),
            (changes(r, "convergence_s").len() as f64, 1.0),
            (cov, 1e-3),
            (min_jain(r), 1e-3),
            (num(&r["drops"]), 1.0),
            (num(&r["all_drops"]), 1.0),
        ];
        assert_eq!(cells.len(), expect.len(), "{cells:?}");
        for (c, (e, unit)) in cells.iter().zip(expect) {
            assert!(
                (c - e).abs() <= unit / 2.0 + 1e-9,
                "{}: row {cells:?}, runs.json {expect:?}",
                r["variant"]
            );
        }
    }
    assert_csv(&out, &["rates.csv", "phases.csv"]);
    assert_plots(&out, &["rates_100M.png", "convergence.png"]);
    assert_eq!(namespaces_with("dl"), before, "namespaces left behind");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn convergence_refuses_bad_schedules_before_anything_is_built() {
    require_root();
    let _serial = serial();
    assert_refused(&[
        (&["convergence", "--schedule", "0-10+5-20"], "overlap"),
        (&["convergence", "--schedule", "0-10,-2-8"], "is not a time"),
        (
            &["convergence", "--schedule", "0-10,8-4"],
            "stops before it starts",
        ),
        (
            &[
                "convergence",
                "--schedule",
                "0-10,0-10,0-10",
                "--senders",
                "2",
            ],
            "3 entries for 2 senders",
        ),
        (
            &["convergence", "--schedule", "1-10"],
            "no flow starts at 0",
        ),
        (
            &["convergence", "--join", "1500ms"],
            "not longer than --hold",
        ),
        (&["convergence", "--smooth", "20s"], "to 10 s"),
        (&["convergence", "--senders", "0"], "1 to 16"),
        (
            &["convergence", "--tolerance", "0"],
            "above 0 and below 100",
        ),
        (
            &["convergence", "--variants", "bpf_dctcp:nosuch"],
            "backend `nosuch`",
        ),
    ]);
}
