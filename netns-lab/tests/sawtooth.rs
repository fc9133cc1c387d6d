//! `lab sawtooth --quick` end to end (seed 000's setting: 100 Mbit/s at
//! 500 us, K = 20, N = 2 and 10): the queue peaks near K + N and higher
//! with more flows, the flows are not synchronized, and the summary shows
//! what runs.json measured; bad input is refused.

use serde_json::Value;

mod common;

use common::{
    assert_csv, assert_plots, assert_refused, busy_floor, figures, json, lab, lab_cpu, namespaces_with,
    require_root, serial, stderr, steal_capped, tmpdir,
};

/// Bounds from 10 quick runs on this kernel, on one CPU (`--cpus`, as the
/// test runs it: away from the platform's agent, so the known issue never
/// struck; 2026-11-28); each assertion names their spread.
#[test]
fn sawtooth_peaks_near_k_plus_n_with_unsynchronized_flows() {
    require_root();
    let _serial = serial();
    steal_capped(sawtooth_peaks_near_k_plus_n_with_unsynchronized_flows_once);
}

fn sawtooth_peaks_near_k_plus_n_with_unsynchronized_flows_once() {
    let before = namespaces_with("dl");
    let out = tmpdir("sawtooth");
    let cpu = lab_cpu();
    let o = lab(&[
        "--cpus",
        &cpu,
        "sawtooth",
        "--quick",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = json(&out.join("runs.json"));
    let runs = runs.as_array().unwrap();
    let at = |n: u64| {
        runs.iter()
            .find(|r| r["flows"] == n)
            .unwrap_or_else(|| panic!("no run with N = {n}: {runs:?}"))
    };
    let (two, ten) = (at(2), at(10));
    let f = |r: &Value, path: &[&str]| {
        path.iter()
            .fold(r, |v, k| &v[*k])
            .as_f64()
            .unwrap_or_else(|| panic!("{path:?} in {r}"))
    };
    let top = |r: &Value| f(r, &["queue", "cycles", "top"]);
    let window_top = |r: &Value| f(r, &["window", "cycles", "top"]) - f(r, &["theory", "bdp"]);
    // The queue's swing over the analysis' A = 1/2 sqrt(2N (C x RTT + K)).
    let amplitude = |r: &Value| f(r, &["queue", "cycles", "amplitude"]) / f(r, &["theory", "amplitude"]);
    let opt = |r: &Value, path: &[&str]| path.iter().fold(r, |v, k| &v[*k]).as_f64().unwrap_or(f64::NAN);
    figures(&[
        ("top_2", top(two)),
        ("top_10", top(ten)),
        ("amplitude_2", f(two, &["queue", "cycles", "amplitude"])),
        ("amplitude_10", f(ten, &["queue", "cycles", "amplitude"])),
        ("amplitude_2_of_theory", amplitude(two)),
        ("amplitude_10_of_theory", amplitude(ten)),
        ("window_period_10_s", opt(ten, &["window", "period", "seconds"])),
        ("queue_period_10_s", opt(ten, &["queue", "period", "seconds"])),
        ("theory_period_10_s", f(ten, &["theory_period_s"])),
        ("correlation_2", opt(two, &["synchrony", "mean_correlation"])),
        ("steal_10", f(ten, &["steal_share"])),
    ]);
    // N = 2: the queue's cycles top out at K + N = 22 (runs: 21 in all ten),
    // the summed windows at C x RTT + 21.8 (all ten).
    assert!(
        (19.0..=25.0).contains(&top(two)),
        "N = 2 cycle top {}",
        top(two)
    );
    assert!(
        (18.0..=26.0).contains(&window_top(two)),
        "N = 2 window top - C x RTT {}",
        window_top(two)
    );
    // More flows, a higher peak: K + N = 30 against 22 (runs: N = 10 tops
    // 28, 7 above N = 2's, in all ten).
    assert!(
        top(ten) >= top(two) + 3.0,
        "N = 10 top {} against N = 2's {}",
        top(ten),
        top(two)
    );
    // And Qmax = K + N at N = 10 itself: 28 against 30 in all ten, held
    // within 3 of it. (Unpinned, where the issue struck every run, ten tops
    // read 25-29 and a fresh clone's 41, under the plateau a burst left.)
    assert!(
        (25.0..=31.0).contains(&top(ten)),
        "N = 10 cycle top {}, K + N = 30",
        top(ten)
    );
    // The swing is the analysis' A, a little more: queue cycles of 5-6
    // packets at N = 2 (A = 4.9) and 13-14 at N = 10 (A = 11.0), 1.02-1.27
    // times A in ten runs (2026-12-05, tools/spread).
    for (r, n) in [(two, 2), (ten, 10)] {
        let a = amplitude(r);
        assert!((0.8..=1.6).contains(&a), "N = {n}: the queue's swing {a:.2} times A");
    }
    // The period is longer than the analysis' T_c, as docs/lab/sawtooth.md
    // explains (at 2-4 packets a flow a cut is a whole packet): the summed
    // windows' at N = 10 read 18.2-19.3 ms against T_c = 3.8 ms, 4.8-5.1
    // times, in ten runs (2026-12-05); held to 3-8 times.
    let period = opt(ten, &["window", "period", "seconds"]) / f(ten, &["theory_period_s"]);
    assert!((3.0..=8.0).contains(&period), "N = 10: the summed windows' period {period:.2} T_c");
    // Not synchronized, as seed 000 found: the two flows' cwnd correlate
    // at most weakly (runs: -0.50 to -0.40), far from the analysis's 1.
    let sync = f(two, &["synchrony", "mean_correlation"]);
    assert!(sync < 0.5, "N = 2 cwnd correlation {sync}");
    // The analysis cuts the known issue's bursts out (README; the summary
    // says how much): the ten pinned runs had none to cut; unpinned ones
    // cut 4.9-14.4 % at N = 2 and 9.4-24.0 % at N = 10. A pinned run that
    // cuts out more than 2 % met the issue after all.
    for r in [two, ten] {
        let cut = f(r, &["cut_out"]);
        assert!(
            cut <= 0.02,
            "N = {}: {:.0} % cut out",
            r["flows"],
            cut * 100.0
        );
    }
    for r in [two, ten] {
        // Runs: 0 drops, utilization 99.9-100 %; the buffer holds every
        // window a receiver can advertise, so a burst is never dropped.
        // Utilization is bounded well below the 95 % target the summary
        // reports: a short CPU took a quick queue run to 90.4 % in CI.
        assert_eq!(r["drops"], 0, "{r}");
        let floor = busy_floor(0.8, f(r, &["steal_share"]));
        assert!(f(r, &["utilization"]) >= floor, "{r}");
    }
    // The summary's row for N = 2 carries the measured figures.
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let row = format!(
        "| 2 | 22 | {:.1} | 17.1 | {:.1} | 4.9 | {:.1} |",
        top(two),
        f(two, &["queue", "cycles", "bottom"]),
        f(two, &["queue", "cycles", "amplitude"])
    );
    assert!(summary.contains(&row), "{row} not in\n{summary}");
    assert_csv(&out, &["runs.csv"]);
    assert_plots(
        &out,
        &[
            "queue_100M_500us_n2.png",
            "queue_100M_500us_n10.png",
            "cwnd_100M_500us_n2.png",
            "cwnd_100M_500us_n10.png",
        ],
    );
    assert_eq!(namespaces_with("dl"), before, "namespaces left behind");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sawtooth_refuses_bad_input_before_anything_is_built() {
    require_root();
    let _serial = serial();
    assert_refused(&[
        (&["sawtooth", "--flows", "0"], "each N from 1 to 64"),
        (&["sawtooth", "--flows", "2,65"], "each N from 1 to 64"),
        (&["sawtooth", "--pairs", "100M"], "expected RATE@RTT"),
        (&["sawtooth", "--pairs", "100M@0ms"], "must be positive"),
        (&["sawtooth", "--k", "0"], "1 to 1000"),
        (&["sawtooth", "--duration", "1"], "at least 2 s"),
    ]);
}
