//! `lab ksweep --quick` end to end (seed 001 at 100 Mbit/s and 8 ms): the
//! queue runs empty at K = K_opt / 4 and never at 10 K_opt, and the
//! bisection finds the boundary between; bad input is refused.

use serde_json::Value;

mod common;

use common::{
    assert_plots, assert_refused, busy_floor, figures, json, lab, namespaces_with, require_root, serial,
    stderr, judged_twice, tmpdir,
};

/// Bounds from 6 quick runs on this kernel (K = 2, 8, 28, 95 and the
/// bisection's 5 and 6): at K = 2 (K/K_opt 0.21) empty 76-79 % of the time
/// and utilization 77-82 %; at K = 95 (10 K_opt) empty 0.0 % and 99.7-99.8
/// %; K_min 8 (K/K_opt 0.84) in five, 44 in the one where the kernel issue
/// struck at K = 28.
#[test]
fn ksweep_finds_the_queue_empty_below_k_opt_and_busy_above() {
    require_root();
    let _serial = serial();
    judged_twice(ksweep_finds_the_queue_empty_below_k_opt_and_busy_above_once);
}

fn ksweep_finds_the_queue_empty_below_k_opt_and_busy_above_once() {
    let before = namespaces_with("dl");
    let out = tmpdir("ksweep");
    let o = lab(&["ksweep", "--quick", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = json(&out.join("runs.json"));
    let runs = runs.as_array().unwrap();
    let at = |k: u64| {
        runs.iter()
            .find(|r| r["k"] == k && r["bisection"] == false)
            .unwrap_or_else(|| panic!("no grid run at K = {k}: {runs:?}"))
    };
    let (low, high) = (at(2), at(95));
    let f = |r: &Value, key: &str| r[key].as_f64().unwrap();
    let k = json(&out.join("k_min.json"));
    let k = &k[0];
    let (k_min, below) = (
        k["k_min"].as_u64().expect("K_min found"),
        k["k_below"].as_u64().unwrap(),
    );
    let ratio = k_min as f64 / k["k_opt"].as_f64().unwrap();
    figures(&[
        ("empty_low", f(low, "empty")),
        ("util_low", f(low, "utilization")),
        ("empty_high", f(high, "empty")),
        ("util_high", f(high, "utilization")),
        ("k_min_over_k_opt", ratio),
        ("steal_high", f(high, "steal_share")),
    ]);
    // K_opt/4 runs the queue empty two thirds of the time and the link
    // below 90 % (ten runs on the lab's own CPU, 2026-11-28: empty
    // 75.3-78.0 %, utilization 77.8-85.0 %; ten more, 2026-12-05,
    // tools/spread: 76.0-78.2 %, 78.0-82.1 %; K = 95: empty 0 %, 99.7-100 %).
    // (Unpinned, a strike of the known issue (README) could fill it: a
    // fresh clone's suite, 2026-11-26, read empty 9.3 % after 6 / 6 / 126
    // guard repairs; the test runs on its own CPU, `serial`.)
    assert!(
        f(low, "empty") >= 0.65,
        "K = K_opt/4: empty {} (guard repairs {})",
        low["empty"],
        low["guard_repairs"]
    );
    assert!(
        f(low, "utilization") <= 0.9,
        "K = K_opt/4: {} (guard repairs {})",
        low["utilization"],
        low["guard_repairs"]
    );
    assert!(
        f(high, "empty") <= 0.02,
        "K = 10 K_opt: empty {}",
        high["empty"]
    );
    // The direction, and the link busy at 10 K_opt: not the 95 % target
    // (summary, `just bench`), which a short CPU can take from a run (CI,
    // 2026-11-28: a quick queue run at K read 90.4 %).
    assert!(
        f(high, "utilization") >= busy_floor(0.85, f(high, "steal_share"))
            && f(high, "utilization") > f(low, "utilization"),
        "K = 10 K_opt: {} against {} at K_opt/4",
        high["utilization"],
        low["utilization"]
    );
    // K_min and the K below it are what their runs measured (grid or
    // bisection): empty more often than the target at `below`, at most it
    // at K_min. (`below < k_min` alone held by construction.)
    let target = json(&out.join("config.json"))["empty_target"].as_f64().unwrap();
    let empty_at = |want: u64| {
        runs.iter()
            .find(|r| r["k"] == want)
            .map(|r| f(r, "empty"))
            .unwrap_or_else(|| panic!("no run at K = {want}: {k}"))
    };
    assert!(empty_at(k_min) <= target, "K_min {k_min}: {k}");
    if below > 0 {
        assert!(empty_at(below) > target, "K below {below}: {k}");
    }
    // Seed 001 finds the queue stops running empty near 2 K_opt; the lab
    // finds it at 0.84 K_opt (K_min 8 at K_opt 9.5): DCTCP's oscillation
    // here is smaller than the analysis', so a lower K keeps the link busy
    // (docs/lab/ksweep.md). Quick runs on the lab's own CPU read 0.84 in
    // all 25 (ten 2026-11-28, five later, ten 2026-12-05 by tools/spread;
    // no guard repair); unpinned 0.84 in 9 of 10 and 1.36 once; a fresh
    // clone's suite 1.89 (2026-11-28: K = 8 empty 5.7 % against the 5 %
    // target, the bisection's K = 13 10.8 %); the Debian VM 2.1. K = 8 sits
    // near the target, so a noisy run can move K_min a bisection step:
    // judged twice. Held within 0.5-1.5 K_opt (K_min 5-14), which the
    // seed's 2 lies outside: a marker that never marks puts it at the
    // grid's first K (0.21), one that marks late at 18 or more (1.89+).
    assert!(
        (0.5..=1.5).contains(&ratio),
        "K_min / K_opt {ratio:.2}: {k}"
    );
    // Every K of the bisection lies between the grid's neighbours of the boundary.
    for r in runs.iter().filter(|r| r["bisection"] == true) {
        let kk = r["k"].as_u64().unwrap();
        assert!(kk > 2 && kk < 95, "bisection at K = {kk}");
    }
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains(&format!("| 100 Mbit/s at 8 ms | 9.5 | 67 | {k_min} |")),
        "{summary}"
    );
    assert_plots(&out, &["empty.png", "utilization.png", "queue_by_k.png"]);
    assert_eq!(namespaces_with("dl"), before, "namespaces left behind");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn ksweep_refuses_bad_input_before_anything_is_built() {
    require_root();
    let _serial = serial();
    assert_refused(&[
        (&["ksweep", "--pairs", "100M"], "expected RATE@RTT"),
        (&["ksweep", "--pairs", "100M@0ms"], "must be positive"),
        (&["ksweep", "--pairs", "20G@1ms"], "1 Mbit/s to 10 Gbit/s"),
        (&["ksweep", "--points", "1"], "2 to 40"),
        (&["ksweep", "--empty-target", "1"], "between 0 and 1"),
        (&["ksweep", "--duration", "1"], "at least 2 s"),
        (&["ksweep", "--flows", "0"], "1 to 16"),
    ]);
}
