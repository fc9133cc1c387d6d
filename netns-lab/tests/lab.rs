//! The `lab` binary end to end: a quick queue experiment, its results and
//! its checks; refusals of bad input and missing backends; Ctrl-C and two
//! labs at once; a 64-sender star.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netns_lab::net::topology::{Star, StarSpec};
use serde_json::Value;

mod common;

use common::{
    assert_near, assert_refused, assert_results, busy_floor, figures, json, judged_twice,
    judged_twice_to, lab, namespaces_with, outcome, processes, quick_queue, ratio_band,
    require_root, row_numbers, run_quick_queue, serial, stderr, steal_capped, steal_capped_to,
    stolen_ceiling, tmpdir, wait_until_gone,
};

/// Starts lab in the background, stderr captured.
fn spawn_lab(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// DCTCP on a marking switch never overflows a 425-packet buffer. (A run
/// the known issue of README struck could, before the tests ran on their
/// own CPU, away from the platform's agent; `serial`.)
fn assert_drop_free(r: &Value) {
    assert_eq!(
        r["drops"], 0,
        "DCTCP dropped (guard repairs {}): {}",
        r["guard_repairs"], r["probe_check"]
    );
}

#[test]
fn quick_queue_experiment_reproduces_the_shape_of_fig1() {
    require_root();
    let _serial = serial();
    steal_capped(quick_queue_experiment_reproduces_the_shape_of_fig1_once);
}

fn quick_queue_experiment_reproduces_the_shape_of_fig1_once() {
    let out = quick_queue("queue", "bpf_dctcp:bpf-step,cubic:droptail", &[]);
    assert_results(&out, &["config.json", "summary.md", "queue_100M.png", "queue_cdf_100M.png"]);
    let dctcp = outcome(&out, "100M-bpf_dctcp-bpf-step");
    let cubic = outcome(&out, "100M-cubic-droptail");
    assert_results(
        &out.join("100M-bpf_dctcp-bpf-step"),
        &["queue.csv.gz", "throughput.csv", "throughput.png"],
    );
    // On the test's own CPU (`serial`) the kernel issue of the README
    // ("Known issue") does not strike: the guard repaired nothing in 10
    // pinned `lab queue` runs and 40 of the other experiments
    // (docs/kernels.md); a repair here means the platform's agent reached
    // the lab's CPU, and every bound below would judge the platform.
    let repairs = &dctcp["guard_repairs"];
    assert!(
        repairs[0] == 0 && repairs[1] == 0,
        "the guard repaired ssthresh / cwnd {repairs} on the lab's own CPU"
    );
    // Bounds from 10 quick runs on the lab's own CPU (2026-11-28, no guard
    // repair in any): DCTCP's median queue per arrival 17-18, its mean over
    // time 18.11-18.16, cubic's mean 20.3-22.0 times DCTCP's median,
    // DCTCP's utilization 99.98-100 % with no drops. (Unpinned, 6 runs of
    // 2026-11-24 with repairs in each: the mean over time 18.2-19.9.)
    let median = dctcp["queue"]["p50"].as_f64().unwrap();
    let cubic_mean = cubic["queue"]["mean"].as_f64().unwrap();
    assert!(
        (15.0..=21.0).contains(&median),
        "DCTCP median queue {median}, K = 20"
    );
    let over_time = dctcp["queue_over_time"]["mean"].as_f64().unwrap();
    figures(&[
        ("dctcp_median", median),
        ("dctcp_mean_over_time", over_time),
        ("cubic_over_dctcp", cubic_mean / median),
        ("dctcp_util", dctcp["utilization"].as_f64().unwrap()),
        ("steal_dctcp", dctcp["steal_share"].as_f64().unwrap()),
    ]);
    assert!(
        (16.0..=21.0).contains(&over_time),
        "DCTCP mean queue over time {over_time}, K = 20"
    );
    assert!(
        cubic_mean >= 12.0 * median,
        "cubic {cubic_mean} vs DCTCP {median}"
    );
    assert_eq!(
        dctcp["drops"], 0,
        "DCTCP dropped (guard repairs {})",
        dctcp["guard_repairs"]
    );
    // The cap is on the DCTCP run only, and never shaped it: DCTCP's own
    // window stays far below 64 packets. Droptail runs are left uncapped.
    // What bounds the window for good is the scale the receiver chose at
    // the handshake, read back from the receiver: 65535 << 1 for a clamp of
    // 64 x 1448 bytes, over 425 packets uncapped.
    for f in cubic["flows"].as_array().unwrap() {
        assert!(f["receiver_max_window"].as_u64().unwrap() > 425 * 1448);
    }
    // Every packet the switch dropped in the window was sent again:
    // tcp_info's total_retrans (whole run) covers them.
    let retrans: u64 = cubic["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["info"]["total_retrans"].as_u64().unwrap())
        .sum();
    let cubic_drops = cubic["drops"].as_u64().unwrap();
    assert!(
        retrans >= cubic_drops,
        "{cubic_drops} drops, {retrans} retransmissions"
    );
    for f in dctcp["flows"].as_array().unwrap() {
        assert_eq!(f["receiver_max_window"], 65535 << 1);
        let busy = f["info"]["busy_us"].as_f64().unwrap();
        let limited = f["info"]["rwnd_limited_us"].as_f64().unwrap();
        assert!(busy > 1e6, "tcp_info busy time {busy} us in a 4 s run");
        assert!(
            limited <= 0.02 * busy,
            "rwnd-limited {limited} of {busy} us"
        );
    }
    // The link stays busy. Not the summary's >= 95 % target: CI's run of
    // 2026-11-28 read 90.4 % with the queue at K (a short CPU, not an
    // empty queue); a DCTCP that overreacts empties the queue for good.
    // The floor gives way to what the hypervisor took from the lab's CPU.
    let steal = dctcp["steal_share"].as_f64().unwrap();
    assert!(
        dctcp["utilization"].as_f64().unwrap() >= busy_floor(0.8, steal),
        "{} with {steal} of the CPU stolen",
        dctcp["utilization"]
    );
    assert!(dctcp["marks"].as_u64().unwrap() > 0);
    // Both flows really ran our algorithm, with ECN.
    for f in dctcp["flows"].as_array().unwrap() {
        assert_ne!(f["cc_used"], "cubic");
        assert!(
            !f["cc_used"].as_str().unwrap().ends_with("_reno"),
            "fell back: {f}"
        );
        assert!(
            f["info"]["delivered_ce"].as_u64().unwrap() > 0,
            "no CE echoed: {f}"
        );
    }
    // The probe agrees with the qdisc and the receiver.
    for o in [&dctcp, &cubic] {
        let p = &o["probe_check"];
        // The qdisc also counts what it queued before the probe was attached
        // (neighbour discovery): a few packets at most.
        let (pe, qa) = (
            p["probe_enqueued"].as_u64().unwrap(),
            p["qdisc_accounted"].as_u64().unwrap(),
        );
        assert!(qa >= pe && qa - pe <= 5, "{p}");
        let (pt, qd) = (
            p["probe_taildrops"].as_u64().unwrap(),
            p["qdisc_drops"].as_u64().unwrap(),
        );
        assert!(pt.abs_diff(qd) <= 2 + qd / 100, "{p}");
        assert_eq!(p["marks"], p["receiver_ce"], "{p}");
        // Departures: the kernel's qdisc_dequeue tracepoint, which on 6.18
        // misses whole bulk dequeues (it would also see a requeued packet
        // twice): 0.00-0.46 % at 100 Mbit/s in the runs of 2026-11-29, 1.21 %
        // (395 of 32,639) in one fresh clone's suite. The kernel's, not the
        // probe's: perf counts the same events, the driver's tracepoint
        // net_dev_start_xmit the same packets, the receiver gets all, and
        // the program is never skipped (departure_misses, asserted 0). A
        // probe that lost a path of its own would miss far more.
        assert_eq!(p["departure_misses"], 0, "{p}");
        let (pd, qs) = (
            p["probe_departed"].as_u64().unwrap(),
            p["qdisc_sent"].as_u64().unwrap(),
        );
        assert!(pd.abs_diff(qs) <= 5 + qs / 40, "{p}");
        // The utilization counts the window's departures from the arrivals
        // instead (the queue the first found, plus what was queued, less
        // what the last found): over the same span the tracepoint falls
        // short by what it skips and no more; a count from arrivals that
        // went wrong (a queue length misread, an arrival counted twice or
        // not at all) leaves that band by the queue's size or more.
        let w = &p["window_departed"];
        let (ba, bt) = (
            w["by_arrivals"].as_u64().unwrap(),
            w["by_tracepoint"].as_u64().unwrap(),
        );
        assert!(bt <= ba + 2 && ba - bt.min(ba) <= 5 + ba / 40, "{p}");
        // The queue over time, rebuilt from arrivals and departures, tells
        // the arrivals' story: cubic's standing queue reads the same either
        // way; DCTCP's stays near K.
        let t = &o["queue_over_time"];
        let (tm, am) = (
            t["mean"].as_f64().unwrap(),
            o["queue"]["mean"].as_f64().unwrap(),
        );
        assert!(
            t["n"].as_u64().unwrap() > o["queue"]["n"].as_u64().unwrap(),
            "no departures among the events: {t}"
        );
        if o["label"].as_str().unwrap().starts_with("cubic") {
            assert!(
                (tm - am).abs() <= 0.05 * am,
                "cubic over time {tm} vs per arrival {am}"
            );
        }
    }
    // (Runs: 18 in all six.)
    let over_time = dctcp["queue_over_time"]["p50"].as_f64().unwrap();
    assert!(
        (15.0..=23.0).contains(&over_time),
        "DCTCP median queue over time {over_time}, K = 20"
    );
    // The summary's checks carry the run's own figures.
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let row = format!(
        "| {} mean queue over time | K +/- 3 = 17-23 | {:.1} |",
        dctcp["label"].as_str().unwrap(),
        dctcp["queue_over_time"]["mean"].as_f64().unwrap()
    );
    assert!(summary.contains(&row), "{row} not in\n{summary}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// The lab records bpf_dctcp's live stream (the ring buffer `loader trace`
/// reads) and it agrees with what the switch and the receiver counted.
#[test]
fn traced_dctcp_flows_match_the_receivers_marks() {
    require_root();
    let _serial = serial();
    let out = quick_queue("trace", "bpf_dctcp:bpf-step", &[]);
    let run = out.join("100M-bpf_dctcp-bpf-step");
    assert_results(&run, &["cc_trace.csv.gz", "sawtooth.png"]);
    let dctcp = outcome(&out, "100M-bpf_dctcp-bpf-step");
    let tc = &dctcp["trace_check"];
    let c = &tc["counts"];
    let (seen, dropped, produced) = (
        c["seen"].as_u64().unwrap(),
        c["dropped"].as_u64().unwrap(),
        c["produced"].as_u64().unwrap(),
    );
    assert_eq!(seen + dropped, produced, "{c}");
    assert!(seen > 1000, "{c}");
    let flows = tc["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "{tc}");
    for f in flows {
        let n = |k: &str| f[k].as_u64().unwrap();
        let x = |k: &str| f[k].as_f64().unwrap();
        // cwnd events for every flow, alpha windows, and alpha held above 0
        // by the marks: in the second half it tracks F (its EWMA).
        assert!(n("acks") > 100 && n("windows") > 10, "{f}");
        let (alpha, f_late) = (x("alpha_late_mean"), x("fraction_marked_late"));
        assert!(alpha > 0.02, "alpha {alpha} with marks: {f}");
        assert!(
            (0.5 * f_late..=1.5 * f_late).contains(&alpha),
            "alpha {alpha} does not follow F {f_late}: {f}"
        );
        assert!(
            n("receiver_ce_pkts") > 100,
            "no marks reached the receiver: {f}"
        );
        // F from the windows against the receiver's CE fraction, and the
        // sender's echoed count against the receiver's CE count.
        let rx_f = n("receiver_ce_pkts") as f64 / n("receiver_pkts") as f64;
        assert!(
            (x("fraction_marked") - rx_f).abs() <= 0.03 * rx_f.max(0.1),
            "F {} vs receiver {rx_f}: {f}",
            x("fraction_marked")
        );
        let (s_ce, r_ce) = (n("sender_delivered_ce"), n("receiver_ce_pkts"));
        assert!(s_ce.abs_diff(r_ce) as f64 <= 0.03 * r_ce as f64, "{f}");
        // tcp_info's delivered_ce (its offset from the kernel's BTF) is
        // the counter the trace reads, taken when the sender stopped
        // writing: what its send buffer still held then is not in it (six
        // flows: 0.90-0.995 of the trace's final count).
        let info = dctcp["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["sender"] == f["sender"])
            .map(|o| &o["info"])
            .unwrap();
        let ce = info["delivered_ce"].as_u64().unwrap();
        assert!(
            ce <= s_ce + 10 && ce as f64 >= 0.7 * s_ce as f64,
            "tcp_info delivered_ce {ce} against the trace's {s_ce}: {info}"
        );
    }
    // Every line of the recording parses and names a flow.
    let csv = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("zcat {}", run.join("cc_trace.csv.gz").display()))
        .output()
        .unwrap();
    let text = String::from_utf8(csv.stdout).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("ts_ns,event,netns,local,remote"),
        "{header}"
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len() as u64, seen, "recording vs events seen");
    assert!(rows.iter().any(|r| r.contains(",window,")));
    assert!(rows.iter().any(|r| r.contains(",start,")));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn bad_parameters_are_refused_before_anything_is_built() {
    require_root();
    let _serial = serial();
    let cases: &[(&[&str], &str)] = &[
        (&["queue", "--rates", "0"], "must be positive"),
        (&["queue", "--rates", "20G"], "1 Mbit/s to 10 Gbit/s"),
        (&["queue", "--buffer", "1"], "2 to 100000"),
        (&["queue", "--k", "500"], "below the buffer"),
        (&["queue", "--flows", "0"], "1 to 64"),
        (&["queue", "--variants", "bpf_dctcp"], "algorithm:backend"),
        (
            &["queue", "--variants", "cubic:wred"],
            "use droptail, bpf-step",
        ),
        (&["queue", "--duration", "0"], "exceed the warmup"),
        (&["queue", "--rwnd-clamp", "1"], "0 (no clamp) or 2-16384"),
        (&["xdctcp", "--g", "0"], "g takes (0, 1]"),
        (&["xdctcp", "--ns", "1.5"], "ns takes [0, 1]"),
        (&["xdctcp", "--nl", "-0.5"], "nl takes [0, 1]"),
        (&["xdctcp", "--short-rate", "0"], "out of range"),
        (&["xdctcp", "--short-min", "200000"], "min <= max"),
        (&["xdctcp", "--rounds", "0"], "1 to 20"),
        (&["xdctcp", "--k", "500"], "below the buffer"),
        (&["variants", "--flows", "0"], "1 to 16"),
        (&["variants", "--duration", "1"], "exceed the warmup"),
    ];
    assert_refused(cases);
}

/// A kernel qdisc backend either works or is refused with what works
/// instead: on a kernel without sch_red (this one) the refusal is checked;
/// on one with it, that the run marked and held the queue.
#[test]
fn a_backend_this_kernel_lacks_says_what_works_instead() {
    require_root();
    let _serial = serial();
    let out = tmpdir("nored");
    let o = run_quick_queue(&out, "bpf_dctcp:red", &[]);
    if o.status.success() {
        let r = json(&out.join("100M-bpf_dctcp-red").join("outcome.json"));
        assert!(r["marks"].as_u64().unwrap() > 0, "red never marked: {r}");
        assert!(r["queue"]["mean"].as_f64().unwrap() < 60.0, "{r}");
    } else {
        assert_eq!(o.status.code(), Some(1));
        let e = stderr(&o);
        assert!(
            e.contains("no sch_red") && e.contains("bpf-step") && e.contains("just vm-test"),
            "{e}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

fn lab_objects_of(pid: u32) -> Vec<String> {
    // Lock files name the owner pid; a lab's namespaces share its prefix.
    let mut found = Vec::new();
    if let Ok(d) = std::fs::read_dir(netns_lab::net::prefix::LOCK_DIR) {
        for e in d.flatten() {
            let p = e.path();
            if std::fs::read_to_string(&p).is_ok_and(|s| s.trim() == pid.to_string()) {
                found.push(format!("lock {}", e.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// Ctrl-C in the middle of a run, the lab up: the experiment says it was
/// interrupted and leaves no lock, namespace, algorithm, pin or helper.
fn interrupt_mid_run(args: &[&str]) {
    let out = tmpdir("sigint");
    let mut all = args.to_vec();
    all.extend(["--out", out.to_str().unwrap()]);
    let child = spawn_lab(&all);
    let pid = child.id();
    // Wait until its lab is up: a lock file with its pid, and namespaces
    // under that lock's prefix.
    let prefixes = || -> Vec<String> {
        lab_objects_of(pid)
            .iter()
            .map(|h| h.trim_start_matches("lock ").to_string())
            .collect()
    };
    let t = Instant::now();
    while !prefixes().iter().any(|p| namespaces_with(p) > 0) {
        if t.elapsed() > Duration::from_secs(30) {
            let held = lab_objects_of(pid);
            // Not left running into the next test.
            unsafe { libc::kill(pid as i32, libc::SIGINT) };
            let _ = child.wait_with_output();
            panic!("lab {args:?} never came up: {held:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    let prefixes = prefixes();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success(), "lab {args:?} finished anyway");
    assert!(
        stderr(&o).contains("interrupted"),
        "{args:?}: {}",
        stderr(&o)
    );
    assert!(
        lab_objects_of(pid).is_empty(),
        "{args:?}: locks left: {:?}",
        lab_objects_of(pid)
    );
    for p in &prefixes {
        assert_eq!(namespaces_with(p), 0, "{args:?}: namespaces of {p} left");
        assert!(
            !dctcp_utils::preflight::registered_congestion_controls().contains(p),
            "{args:?}: algorithm {p} left registered"
        );
        assert!(
            !Path::new(dctcp_utils::bpffs::ROOT).join(p).exists(),
            "{args:?}: pins of {p} left"
        );
    }
    for helper in ["rpcgen", "delayline"] {
        wait_until_gone(helper, 5, &format!("{helper} after {args:?}"));
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn ctrl_c_mid_experiment_leaves_nothing() {
    require_root();
    let _serial = serial();
    interrupt_mid_run(&[
        "queue",
        "--duration",
        "20",
        "--rates",
        "100M",
        "--variants",
        "bpf_dctcp:bpf-step",
    ]);
}

/// The same for every other experiment, each in its first run.
#[test]
fn ctrl_c_leaves_nothing_in_any_experiment() {
    require_root();
    let _serial = serial();
    for args in [
        &["ksweep", "--pairs", "100M@1ms", "--duration", "20"][..],
        &["sawtooth", "--quick", "--duration", "20"],
        &["convergence", "--quick", "--join", "20s"],
        &["xdctcp", "--quick", "--duration", "20"],
        &["variants", "--quick", "--duration", "20"],
        &["incast", "--quick", "--rounds", "100000"],
        &["rpc", "--quick", "--duration", "20"],
        &["coexist", "--quick", "--duration", "20"],
    ] {
        interrupt_mid_run(args);
    }
    // Prague's ECT(1) program on the senders goes with the lab too.
    let scalable = match loader::algo::Algo::Prague.require_kernel() {
        Ok(()) => "bpf_prague",
        Err(_) => "bpf_dctcp",
    };
    interrupt_mid_run(&["l4s", "--quick", "--duration", "20", "--mixes", "1:1", "--scalable", scalable]);
}

#[test]
fn two_labs_at_once_do_not_interfere() {
    require_root();
    let _serial = serial();
    steal_capped(two_labs_at_once_do_not_interfere_once);
}

fn two_labs_at_once_do_not_interfere_once() {
    let (a, b) = (tmpdir("twin-a"), tmpdir("twin-b"));
    let htb_before = htb_hysteresis();
    let spawn = |dir: &Path| {
        spawn_lab(&[
            "queue",
            "--quick",
            "--rates",
            "100M",
            "--variants",
            "bpf_dctcp:bpf-step",
            "--out",
            dir.to_str().unwrap(),
        ])
    };
    let (ca, cb) = (spawn(&a), spawn(&b));
    for (c, dir) in [(ca, &a), (cb, &b)] {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let r = outcome(dir, "100M-bpf_dctcp-bpf-step");
        // Each lab's bottleneck saw only its own two flows, at its own rate.
        assert_eq!(r["rx"].as_array().unwrap().len(), 2, "{}", r["rx"]);
        assert_drop_free(&r);
        let steal = r["steal_share"].as_f64().unwrap();
        assert!(
            r["utilization"].as_f64().unwrap() > busy_floor(0.8, steal),
            "{r}"
        );
        // The queue level is not asserted here: two labs share two CPUs, which
        // is what this test is about, and what it measures is isolation.
        std::fs::remove_dir_all(dir).unwrap();
    }
    // Both held htb's hysteresis mode; the last one out put it back.
    assert_eq!(htb_hysteresis(), htb_before);
    assert!(!Path::new(netns_lab::net::prefix::HTB_STATE).exists());
}

#[test]
fn a_64_sender_star_builds_and_tears_down() {
    require_root();
    let _serial = serial();
    let t = Instant::now();
    let star = Star::build(&StarSpec::senders(64)).unwrap();
    let up = t.elapsed();
    let prefix = star.prefix.as_str().to_string();
    assert_eq!(namespaces_with(&prefix), 66);
    // Every sender reaches the receiver through the switch.
    let last = &star.senders[63];
    last.ns
        .run(|| {
            let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
            s.send_to(b"x", (netns_lab::net::topology::RECEIVER_ADDR, 9))
                .unwrap();
        })
        .unwrap();
    let t = Instant::now();
    drop(star);
    let down = t.elapsed();
    assert_eq!(namespaces_with(&prefix), 0);
    eprintln!(
        "64 senders: set up in {:.2} s, torn down in {:.2} s",
        up.as_secs_f64(),
        down.as_secs_f64()
    );
}

/// Every host of a lab asks for ECN and keeps it when a SYN is lost: the
/// kernel's `tcp_ecn_fallback` would retry without it, and a bpf_dctcp
/// sender without ECT loses all it sends to a marker whose queue sits above
/// K (docs/lab/README.md). Read back in each namespace.
#[test]
fn every_lab_host_negotiates_ecn_without_the_syn_fallback() {
    require_root();
    let _serial = serial();
    let star = Star::build(&StarSpec::senders(3)).unwrap();
    star.ecn_everywhere().unwrap();
    let read = |ns: &netns_lab::net::netns::Netns, key: &str| {
        let path = format!("/proc/sys/net/ipv4/{key}");
        ns.run(move || std::fs::read_to_string(path).unwrap().trim().to_string())
            .unwrap()
    };
    for host in star.senders.iter().chain([&star.receiver]) {
        assert_eq!(read(&host.ns, "tcp_ecn"), "1", "{}", host.ns.name());
        assert_eq!(
            read(&host.ns, "tcp_ecn_fallback"),
            "0",
            "{}",
            host.ns.name()
        );
    }
}

/// A lab of kernel algorithms alone on a machine fresh from boot, where
/// nothing has mounted bpffs yet: the switch mounts it to pin its live maps
/// (it failed with "creating /sys/fs/bpf/dctcp-bpf-lab/...: No such file or
/// directory" on such a machine). Run in a mount namespace of its own, with
/// bpffs unmounted there only.
#[test]
fn a_lab_runs_where_bpffs_is_not_mounted_yet() {
    require_root();
    let _serial = serial();
    let out = tmpdir("nobpffs");
    let script = format!(
        "while mountpoint -q /sys/fs/bpf; do umount -l /sys/fs/bpf || exit 3; done; \
         exec {} queue --quick --rates 100M --variants cubic:bpf-step --out {}",
        env!("CARGO_BIN_EXE_lab"),
        out.display()
    );
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("running unshare (util-linux)");
    assert!(o.status.success(), "{}", stderr(&o));
    let r = outcome(&out, "100M-cubic-bpf-step");
    assert!(r["marks"].as_u64().unwrap() > 0, "{r}");
}

/// `lab xdctcp --quick` end to end: real short and long flows, every result
/// file, the seed's claim beside the figures.
#[test]
fn quick_xdctcp_finishes_short_flows_sooner_at_the_long_flows_rate() {
    require_root();
    let _serial = serial();
    steal_capped(quick_xdctcp_finishes_short_flows_sooner_at_the_long_flows_rate_once);
}

fn quick_xdctcp_finishes_short_flows_sooner_at_the_long_flows_rate_once() {
    let before = namespaces_with("dl");

    let out = tmpdir("xdctcp");
    let o = lab(&[
        "xdctcp",
        "--quick",
        "--grid",
        "none",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = json(&out.join("head_to_head.json"));
    let runs = runs.as_array().unwrap();
    // The seed's figure beside the one measured: the change of the mean
    // short-flow delay from DCTCP's to xDCTCP's, and both means.
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let mean_ms = |label: &str| {
        runs.iter()
            .find(|r| r["label"] == label)
            .map(|r| r["fct"]["fct_us"]["mean"].as_f64().unwrap() / 1e3)
            .unwrap()
    };
    let (x, d) = (mean_ms("xDCTCP"), mean_ms("DCTCP"));
    let row = row_numbers(&summary, "| short-flow mean delay, xDCTCP vs DCTCP |");
    assert_near(row[1], (x - d) / d * 100.0, 0.011, "xDCTCP's change");
    assert_near(row[2], x, 0.011, "xDCTCP's mean (ms)");
    assert_near(row[3], d, 0.011, "DCTCP's mean (ms)");
    // The finding: xDCTCP finishes short flows sooner at the same long-flow
    // throughput. Ten quick runs on the lab's own CPU (2026-12-05,
    // tools/spread, 0-0.3 % steal): median short-flow completion 0.63-0.71
    // of DCTCP's, the mean (the seed's figure: 0.934) 0.65-0.69, long flows
    // 0.999-1.000 of DCTCP's. Unpinned (2026-11-24/25), where a burst of the
    // kernel issue moved a mean, the median read 0.60-0.69 and the long
    // flows once 6.6 % apart. Held to 0.80 (median and mean) and 5 %.
    let p50 = |label: &str| {
        runs.iter()
            .find(|r| r["label"] == label)
            .map(|r| r["fct"]["fct_us"]["p50"].as_f64().unwrap())
            .unwrap()
    };
    // The bound gives way only to what the hypervisor took from xDCTCP's
    // own run (`stolen_ceiling`).
    let (px, pd) = (p50("xDCTCP"), p50("DCTCP"));
    let steal_x = runs
        .iter()
        .find(|r| r["label"] == "xDCTCP")
        .map(|r| r["steal_share"].as_f64().unwrap())
        .unwrap();
    assert!(
        px <= stolen_ceiling(0.80 * pd, steal_x),
        "xDCTCP's median {px} us against DCTCP's {pd} us ({:.1} % of its CPU stolen)",
        steal_x * 100.0
    );
    assert!(
        x <= stolen_ceiling(0.80 * d, steal_x),
        "xDCTCP's mean {x} ms against DCTCP's {d} ms ({:.1} % of its CPU stolen)",
        steal_x * 100.0
    );
    // Each run with its own steal (docs/testing.md, "A stolen CPU").
    let long = |label: &str| {
        runs.iter()
            .find(|r| r["label"] == label)
            .map(|r| {
                let f = |k: &str| r[k].as_f64().unwrap();
                (f("long_mbps"), f("steal_share"))
            })
            .unwrap()
    };
    let ((lx, sx), (ld, sd)) = (long("xDCTCP"), long("DCTCP"));
    figures(&[
        ("median_fct_ratio", px / pd),
        ("mean_fct_ratio", x / d),
        ("long_ratio", lx / ld),
        ("steal_x", sx),
        ("steal_d", sd),
    ]);
    assert!(
        ratio_band(0.95, 1.05, sx, sd).contains(&(lx / ld)),
        "long flows {lx} against {ld} Mbit/s (steal {sx} / {sd})"
    );
    assert_eq!(runs.len(), 2);
    for r in runs {
        let (started, done) = (
            r["fct"]["started"].as_u64().unwrap(),
            r["fct"]["completed"].as_u64().unwrap(),
        );
        // 3 s of arrivals at 40/s: about 120, every one completed.
        assert!(started > 60 && done == started, "{r}");
        // A 10-100 KB transfer at 100 Mbit/s takes at least 0.8 ms.
        assert!(r["fct"]["fct_us"]["min"].as_f64().unwrap() > 800.0, "{r}");
        assert!(r["long_mbps"].as_f64().unwrap() > 50.0, "{r}");
    }
    assert_results(&out, &["fct_cdf.png", "r1-dctcp/short_flows.csv", "r1-xdctcp/outcome.json"]);
    let csv = std::fs::read_to_string(out.join("r1-xdctcp/short_flows.csv")).unwrap();
    assert_eq!(
        csv.lines().count() as u64 - 1,
        runs[1]["fct"]["started"].as_u64().unwrap()
    );
    std::fs::remove_dir_all(&out).unwrap();
    assert_eq!(namespaces_with("dl"), before, "namespaces left behind");
}

/// `lab variants --quick` end to end: each of seed 002's modifications
/// against DCTCP in the same run, every result file.
#[test]
fn quick_variants_lab_shows_each_modifications_effect() {
    require_root();
    let _serial = serial();
    steal_capped(quick_variants_lab_shows_each_modifications_effect_once);
}

fn quick_variants_lab_shows_each_modifications_effect_once() {
    let before = namespaces_with("dl");
    let out = tmpdir("variants");
    let o = lab(&[
        "variants",
        "--quick",
        "--duration",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = json(&out.join("runs.json"));
    let labels: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "DCTCP",
            "per-ACK alpha",
            "progressive cut",
            "growth in CWR",
            "alpha 1/2^20",
            "per-ACK, 1/2^20",
            "all four"
        ]
    );
    // Each modification's effect against DCTCP in the same run, from ten
    // quick runs on the lab's own CPU (2026-12-05, tools/spread; six
    // unpinned ones of 2026-11-25 in brackets):
    // - per-ACK alpha at 10 bits is unfair or trapped (below): Jain
    //   0.59-0.63 in nine, trapped in one (0.59-0.71), where DCTCP has
    //   0.998-1.000 (0.975-1.000) and per-ACK at 1/2^20 0.996-1.000
    //   (0.963-1.000);
    // - growth in CWR, and all four, hold alpha higher (more marks: the
    //   window keeps growing through CWR): 1.62-1.66 and 1.73-1.77 times
    //   DCTCP's (1.49-1.74 and 1.58-2.26);
    // - alpha at 1/2^20 alone behaves as DCTCP at this marking level (the
    //   seed's effect needs very few marks): alpha within 0.003 of it
    //   (0.016).
    // The progressive cut's effect (cwnd settles sooner after slow start)
    // is too small against the spread of a 3 s run to assert here.
    let by = |label: &str| {
        runs.as_array()
            .unwrap()
            .iter()
            .find(|r| r["label"] == label)
            .unwrap()
    };
    let jain = |label: &str| by(label)["jain"].as_f64().unwrap();
    let alpha = |label: &str| by(label)["alpha_late"].as_f64().unwrap();
    figures(&[
        ("dctcp_jain", jain("DCTCP")),
        ("per_ack_jain", jain("per-ACK alpha")),
        ("per_ack_alpha", alpha("per-ACK alpha")),
        ("per_ack_fine_jain", jain("per-ACK, 1/2^20")),
        ("cwr_growth_alpha_x", alpha("growth in CWR") / alpha("DCTCP")),
        ("all_four_alpha_x", alpha("all four") / alpha("DCTCP")),
        ("fine_alpha_diff", (alpha("alpha 1/2^20") - alpha("DCTCP")).abs()),
    ]);
    assert!(jain("DCTCP") >= 0.95, "{}", by("DCTCP"));
    // Per-ACK alpha at 10 bits either falls into the trap (alpha zeroed,
    // below) or shares unfairly; six runs were unfair (Jain 0.59-0.71), and
    // a later one (2026-11-25) was trapped in both flows and fair (alpha
    // 0.003, Jain 0.9997). At 1/2^20 it does neither. Each outcome alone
    // depends on the run; one of the two on every run is the finding.
    let trapped = alpha("per-ACK alpha") < 0.01;
    assert!(
        trapped || jain("per-ACK alpha") <= 0.80,
        "per-ACK alpha at 10 bits neither trapped nor unfair: {}",
        by("per-ACK alpha")
    );
    assert!(jain("per-ACK, 1/2^20") >= 0.95, "{}", by("per-ACK, 1/2^20"));
    for label in ["growth in CWR", "all four"] {
        assert!(
            alpha(label) >= 1.4 * alpha("DCTCP"),
            "{label}: alpha {} against DCTCP's {}",
            alpha(label),
            alpha("DCTCP")
        );
    }
    assert!(
        (alpha("alpha 1/2^20") - alpha("DCTCP")).abs() <= 0.03,
        "alpha 1/2^20: {} against DCTCP's {}",
        alpha("alpha 1/2^20"),
        alpha("DCTCP")
    );
    for r in runs.as_array().unwrap() {
        // The link stays busy (a short CPU took a quick queue run to 90.4 %
        // in CI, 2026-11-28: the 95 % target is the summary's).
        let floor = busy_floor(0.8, r["steal_share"].as_f64().unwrap());
        assert!(r["utilization"].as_f64().unwrap() > floor, "{r}");
        // Per-ACK alpha at 10 bits falls, in some runs, into the trap the
        // README describes (alpha g rounds to 0 below 0.25, and the
        // kernel's rule then zeroes alpha: 0.003-0.004 in 2 of 7 quick
        // runs, 0.21-0.32 in the others). At 1/2^20 it never does, and
        // every other contender holds alpha up with the marks.
        if r["label"] != "per-ACK alpha" {
            assert!(r["alpha_late"].as_f64().unwrap() > 0.02, "{r}");
        }
    }
    assert_results(
        &out,
        &[
            "cwnd.png",
            "alpha.png",
            "queue_cdf.png",
            "summary.md",
            "r1-all_four/cc_trace.csv.gz",
        ],
    );
    std::fs::remove_dir_all(&out).unwrap();
    assert_eq!(namespaces_with("dl"), before, "namespaces left behind");
}

/// `lab bench` at its smallest, end to end: every section measured, the JSON
/// report complete, bpf_stats switched off again, nothing left behind; and
/// its refusals, before anything is built.
#[test]
fn bench_measures_every_section_and_leaves_nothing() {
    require_root();
    let _serial = serial();
    let before = namespaces_with("dl");
    for (args, expect) in [
        (&["bench", "--rounds", "0"][..], "1 to 500"),
        (&["bench", "--mib", "0"], "1 to 65536"),
        (
            &["bench", "--baselines", "nosuch"],
            "not available in this kernel",
        ),
        (&["bench", "--switch-secs", "0.5"], "0 (skip) or 1 to 60"),
        (&["bench", "--scale", "0"], "1 to"),
        (&["bench", "--delays", "0ms"], "must be positive"),
        (&["bench", "--delay-secs", "1.5"], "exceed the 2 s warmup"),
    ] {
        let o = lab(args);
        assert_eq!(o.status.code(), Some(2), "lab {args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(expect), "lab {args:?}: {}", stderr(&o));
    }
    // Without root: told so, exit 4.
    let dir = std::env::temp_dir().join(format!("lab-nobody-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("lab");
    std::fs::copy(env!("CARGO_BIN_EXE_lab"), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&bin)
        .args(["bench", "--quick"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("needs root"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();

    let report = tmpdir("bench").with_extension("json");
    let o = lab(&[
        "bench",
        "--rounds",
        "1",
        "--mib",
        "32",
        "--switch-secs",
        "1",
        "--scale",
        "1,4",
        "--delay-rates",
        "100M",
        "--delays",
        "1ms",
        "--delay-secs",
        "4",
        "--out",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("CPU per GB, bpf_dctcp / reno"), "{table}");
    let r = json(&report);
    let transfers = r["algorithms"]["transfers"].as_array().unwrap();
    let names: Vec<&str> = transfers
        .iter()
        .map(|t| t["contender"].as_str().unwrap())
        .collect();
    // bpf_prague beside them where the kernel runs it (6.10+).
    let prague = loader::algo::Algo::Prague.require_kernel().is_ok();
    let mut want = vec![
        "reno",
        "cubic",
        "bpf_dctcp",
        "bpf_dctcp traced per window",
        "bpf_dctcp traced per ACK",
    ];
    if prague {
        want.push("bpf_prague");
    }
    assert_eq!(names, want);
    for t in transfers {
        assert!(t["gbps"].as_f64().unwrap() > 0.1, "{t}");
        assert!(t["cpu_s_per_gb"].as_f64().unwrap() > 0.0, "{t}");
    }
    // bpf_dctcp / reno and / cubic, traced / untraced twice, bpf_prague /
    // bpf_dctcp: CPU and throughput each.
    let ratios = r["algorithms"]["ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), if prague { 10 } else { 8 });
    if prague {
        assert!(ratios.iter().any(|x| x.to_string().contains("CPU per GB, bpf_prague / bpf_dctcp")));
    }
    let calls = |section: &Value, program: &str| {
        section
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["program"].as_str().unwrap().starts_with(program))
            .map(|p| (p["ns"].as_f64().unwrap(), p["calls"].as_u64().unwrap()))
    };
    let (ns, n) = calls(&r["algorithms"]["per_call"], "dctcp_in_ack").expect("in_ack_event");
    assert!(ns > 0.0 && n > 1000, "{ns} ns x {n}");
    let (ns, n) = calls(&r["switch"]["per_packet"], "bottleneck_egr").expect("marker");
    assert!(ns > 0.0 && n > 1000, "{ns} ns x {n}");
    // The floors: the Reno fallback per call, the empty program per packet.
    // The floor: the Reno fallback's cong_avoid does the kfunc work
    // bpf_dctcp's own cong_avoid does, so it costs about the same per call
    // (2026-11-25, four runs: 80-88 against 76-83 ns; 106 on 69 calls in a
    // suite run; 150 against 75 in a fresh clone's suite, 2026-11-26). How
    // often it runs depends on how many ACKs find the flow cwnd-limited
    // (271-313 calls per 32 MiB alone, 69 in that suite run), so its count
    // is not asserted, and a few dozen cold calls can cost twice as much:
    // within a factor of 3 it is the same work, not an empty program (about
    // 10 ns) or a whole ACK (hundreds).
    let (ns, floor_calls) =
        calls(&r["algorithms"]["floor_per_call"], "dctcp_reno_cong").expect("floor");
    let (own, _) = calls(&r["algorithms"]["per_call"], "dctcp_cong_avoi").expect("cong_avoid");
    assert!(
        (1.0 / 3.0..3.0).contains(&(ns / own)),
        "floor {ns} ns x {floor_calls} calls against bpf_dctcp's cong_avoid {own} ns"
    );
    assert!(calls(&r["algorithms"]["per_call_unguarded"], "dctcp_in_ack").is_some());
    // bpf_prague's own programs, timed alike where the kernel runs it: its
    // cong_control on every ACK (paced, its segments are 1 ms of its rate:
    // 160 ACKs for 32 MiB here, 2026-12-02).
    if prague {
        let (ns, n) = calls(&r["algorithms"]["prague_per_call"], "prague_cong_con")
            .expect("prague's cong_control");
        assert!(ns > 0.0 && n > 20, "{ns} ns x {n}");
    }
    let median = |method: &str, what: &str| {
        r["switch"][method]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["what"] == what)
            .unwrap_or_else(|| panic!("{what} not measured ({method})"))["median"]
            .as_f64()
            .unwrap()
    };
    let (floor, marker, probe) = (
        "floor: empty tcx program",
        "marker, no probe",
        "marker + probe, every arrival",
    );
    // In isolation the probe taking every arrival does much more than the
    // marker alone (2026-11-25: 93 against 39 ns per run; the empty
    // program's 34 is reported, 5 ns under the marker's being within a
    // loaded host's noise).
    let (f, m, p) = (
        median("isolated", floor),
        median("isolated", marker),
        median("isolated", probe),
    );
    assert!(m + 20.0 < p, "isolated: floor {f}, marker {m}, probe {p}");
    // Sampling one arrival in 16 adds a small part of what taking every
    // arrival adds: the per-arrival work is a per-CPU countdown. Measured
    // 2026-11-25 over 8 rounds: 4-7 ns against 37-41 (a tenth to a sixth);
    // with a 64-bit division per arrival it was 20 against 41 (a half),
    // which the bound of a third still fails.
    let s = median("isolated", "marker + probe, 1 arrival in 16");
    assert!(
        s - m < (p - m) / 3.0,
        "isolated: 1 in 16 {s}, marker {m}, every arrival {p}"
    );
    // bpf-dualpi2 beside the step (issue 55's goal: within 50 ns of it,
    // judged in the bench's table): more than the empty program does.
    let d = median("isolated", "bpf-dualpi2, no probe");
    assert!(d > f, "isolated: floor {f}, bpf-dualpi2 {d}");
    assert!(median("egress", "bpf-dualpi2, no probe") > 0.0);
    assert!(table.contains("bpf-dualpi2, ns per packet (isolated)"), "{table}");
    // Every egress setup the bench ran measured its program's cost.
    for e in r["switch"]["egress"].as_array().unwrap() {
        assert!(e["median"].as_f64().unwrap() > 0.0, "not measured: {e}");
    }
    // `lab --pcap`'s capture beside the marker: measured per packet, and
    // its copies take the lab's one CPU from the path at the top rate
    // (2026-12-05: 0.518-0.634 of the marker's goodput over 5 rounds; the
    // medians of ten runs 0.43-0.61); a capture that took nothing would
    // leave it near 1.
    assert!(median("egress", "marker, no probe, with --pcap") > 0.0);
    let captured = r["switch"]["capture_ratio"]["median"].as_f64().unwrap();
    assert!(captured < 0.9, "goodput with a capture over without: {captured}");
    // perf's samples, in situ: the probe taking every arrival costs more
    // than the empty program (2026-11-25: 240 against 64 ns per packet).
    let (f, p) = (median("sampled", floor), median("sampled", probe));
    assert!(f > 0.0 && p > f, "perf: floor {f}, probe {p}");
    for goal in [
        "marker, ns per packet (isolated)",
        "dctcp_in_ack_ev, ns per call",
    ] {
        assert!(table.contains(goal), "{goal} not in\n{table}");
    }
    // The goodput behind the marker's ratio: a transfer with the marker and
    // one without, each moving data.
    let runs = r["switch"]["runs"].as_array().unwrap();
    for marker in [true, false] {
        assert!(
            runs.iter().any(|run| run[0] == marker && run[2].as_f64().unwrap() > 0.0),
            "no goodput with marker {marker}: {runs:?}"
        );
    }
    // A star of 4 senders takes longer to build than one of 1 (3 more
    // namespaces, veth pairs and routes): 0.10-0.12 s against 0.047-0.051
    // in ten runs (2026-12-05, tools/spread), at least twice; held to 1.5
    // times.
    let setup = |n: u64| {
        r["scale"].as_array().unwrap().iter().find(|s| s["senders"] == n).unwrap()["setup_s"]
            .as_f64()
            .unwrap()
    };
    figures(&[
        ("setup_1_s", setup(1)),
        ("setup_4_s", setup(4)),
        ("capture_ratio", captured),
        ("perf_floor_ns", f),
        ("perf_probe_ns", p),
    ]);
    assert!(setup(4) > 1.5 * setup(1), "setup: 4 senders {} s, 1 sender {} s", setup(4), setup(1));
    // The delay section: 100 Mbit/s without a delay, then at 1 ms through
    // the element, which carries the ACK path whole and in order and
    // costs the flows no goodput (ratio 0.98-1.00 measured).
    let delay = r["delay"].as_array().unwrap();
    assert_eq!(delay.len(), 2, "{delay:?}");
    assert!(delay[0]["rtt"].is_null() && delay[0]["measured"]["element"].is_null());
    let e = &delay[1]["measured"]["element"];
    assert!(e["released"].as_u64().unwrap() > 1000, "{e}");
    assert_eq!(e["dropped_full"], 0, "{e}");
    assert_eq!(e["reordered"], 0, "{e}");
    let ratio =
        delay[1]["goodput_bps"].as_f64().unwrap() / delay[0]["goodput_bps"].as_f64().unwrap();
    assert!(ratio > 0.9, "goodput with 1 ms / without: {ratio}");
    assert!(table.contains("ratio"), "{table}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
            .unwrap()
            .trim(),
        "0"
    );
    std::fs::remove_file(&report).unwrap();
    assert_eq!(namespaces_with("dl"), before, "namespaces left behind");
}

/// `lab incast --quick` end to end, then 256 workers (a namespace each)
/// answering one aggregator: every run measured, the paper beside the
/// figures, nothing left behind.
#[test]
fn incast_runs_every_point_and_256_workers_come_and_go() {
    require_root();
    let _serial = serial();
    judged_twice(incast_runs_every_point_and_256_workers_come_and_go_once);
}

fn incast_runs_every_point_and_256_workers_come_and_go_once() {
    let before = namespaces_with("dl");
    let o = lab(&["incast", "--rounds", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("2 to 100000"), "{}", stderr(&o));
    let o = lab(&["incast", "--workers", "300"]);
    assert!(stderr(&o).contains("1 to 256"), "{}", stderr(&o));

    let out = tmpdir("incast");
    let o = lab(&["incast", "--quick", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = json(&out.join("runs.json"));
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 9, "3 worker counts x 3 algorithms");
    for r in runs {
        let qct = &r["qct_ms"];
        // 20 rounds, the first a warm-up; none faster than the link allows.
        assert_eq!(qct["n"], 19, "{r}");
        assert!(
            qct["p50"].as_f64().unwrap() >= 0.95 * r["ideal_ms"].as_f64().unwrap(),
            "{r}"
        );
    }
    // Each algorithm's onsets as runs.json has them, beside the paper's.
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let largest = runs
        .iter()
        .map(|r| r["workers"].as_u64().unwrap())
        .max()
        .unwrap();
    for (a, paper) in [("bpf_dctcp", 35), ("cubic", 10)] {
        let mine: Vec<&Value> = runs.iter().filter(|r| r["algorithm"] == a).collect();
        let onset = |share: f64| {
            mine.iter()
                .filter(|r| r["slow_round_fraction"].as_f64().unwrap() > share)
                .map(|r| r["workers"].as_u64().unwrap())
                .min()
                .map_or(format!("none up to {largest}"), |n| n.to_string())
        };
        let last = mine
            .iter()
            .find(|r| r["workers"] == largest)
            .map(|r| r["slow_round_fraction"].as_f64().unwrap() * 100.0)
            .unwrap();
        let row = format!(
            "| {a} | about {paper} | {} | {} | {last:.1}% |",
            onset(0.01),
            onset(0.05)
        );
        assert!(summary.contains(&row), "{row} not in\n{summary}");
    }
    // The finding at the largest count (16 in --quick): DCTCP keeps the
    // queue short, so it loses far less than cubic. Six quick runs
    // (2026-11-25): drops 0-248 against 844-1332 (ratio at most 0.20);
    // 13 pinned runs (2026-12-05): 0-124 against 349-778 (at most 0.24).
    // A fresh clone's suite that day read 125 against 194 (0.64) once:
    // judged twice, as the other comparisons on real traffic. Held to 0.35
    // (a switch that marks only at 99 of the 100 packets' buffer read 0.48,
    // then 0.15, 2026-12-05: marks at the buffer's end still spare drops).
    // Rounds slower than ideal + RTO_min read 0-5 % for bpf_dctcp against
    // 21-37 % for cubic there, but a seventh (a fresh clone's suite,
    // 2026-11-26) had cubic lose 1,183 packets with 1 slow round of 19
    // (5 %): whether a loss costs an RTO is chance over 19 rounds, so the
    // stretched rounds are reported here and the onset they define is
    // asserted on 100 rounds per point in the slow tier
    // (findings.rs, `just test-slow`).
    let at_largest = |a: &str| {
        runs.iter()
            .find(|r| r["algorithm"] == a && r["workers"] == largest)
            .unwrap()
    };
    let (d, c) = (at_largest("bpf_dctcp"), at_largest("cubic"));
    let drops = |r: &Value| r["drops"].as_f64().unwrap();
    figures(&[
        ("dctcp_drops", drops(d)),
        ("cubic_drops", drops(c)),
        ("drops_ratio", drops(d) / drops(c)),
    ]);
    assert!(
        drops(d) <= 0.35 * drops(c),
        "drops at N = {largest}: bpf_dctcp {} against cubic {}",
        drops(d),
        drops(c)
    );
    assert_results(&out, &["qct.png", "timeouts.png", "runs.csv"]);
    std::fs::remove_dir_all(&out).unwrap();

    let out = tmpdir("incast256");
    let o = lab(&[
        "incast",
        "--workers",
        "256",
        "--rounds",
        "3",
        "--algorithms",
        "cubic",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = json(&out.join("runs.json"));
    // All 256 workers answered in each of the 3 rounds (the client's count).
    assert_eq!(runs[0]["responses"], 256 * 3, "{}", runs[0]);
    assert_eq!(runs[0]["qct_ms"]["n"], 2);
    std::fs::remove_dir_all(&out).unwrap();
    assert_eq!(namespaces_with("dl"), before, "namespaces left behind");
}

/// The incast onset where the lab's two differ most (`findings.rs` has
/// the whole sweep, 8-96 workers, in the slow tier): at 16 workers, 200
/// rounds each, cubic's rounds stretch past ideal + RTO_min (its onset,
/// more than 5 %, comes at 16 or before; the paper's about 10) and
/// bpf_dctcp's at most 2 % of them (its onset at 32 or later; the
/// paper's about 35).
#[test]
fn at_16_workers_cubic_meets_incast_and_bpf_dctcp_does_not() {
    require_root();
    let _serial = serial();
    judged_twice(at_16_workers_cubic_meets_incast_and_bpf_dctcp_does_not_once);
}

fn at_16_workers_cubic_meets_incast_and_bpf_dctcp_does_not_once() {
    let before = namespaces_with("dl");
    let out = tmpdir("incast-onset");
    let o = lab(&[
        "incast",
        "--workers",
        "16",
        "--algorithms",
        "bpf_dctcp,cubic",
        "--rounds",
        "200",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = json(&out.join("runs.json"));
    let stretched = |a: &str| {
        runs.as_array()
            .unwrap()
            .iter()
            .find(|r| r["algorithm"] == a)
            .map(|r| r["slow_round_fraction"].as_f64().unwrap())
            .unwrap()
    };
    let (d, c) = (stretched("bpf_dctcp"), stretched("cubic"));
    figures(&[("dctcp_stretched", d), ("cubic_stretched", c)]);
    // Ten runs of 100 rounds (2026-12-05, tools/spread): cubic 7.1-13.1 %,
    // bpf_dctcp 0 in seven, one round in three; with the switch marking
    // only at 99 of its 100 packets bpf_dctcp read 7.1 %, then 2.0 %:
    // hence 200 rounds. Eleven runs of 200: cubic 4.0-15.6 % (under the
    // onset's 5 % once), bpf_dctcp 0-1.5 % (at most 3 rounds); with the
    // marker never marking bpf_dctcp read 10.6 %, then 6.5 %.
    assert!(c > 0.03, "cubic stretched {:.1} % of its rounds at 16 workers", c * 100.0);
    assert!(d <= 0.02, "bpf_dctcp stretched {:.1} % of its rounds at 16 workers", d * 100.0);
    std::fs::remove_dir_all(&out).unwrap();
    assert_eq!(namespaces_with("dl"), before, "namespaces left behind");
}

/// `lab rpc` end to end at 100 Mbit/s, 8 s per algorithm: both algorithms,
/// both RPC sizes, every counter; bad input refused before anything is
/// built. Not at the default 1 Gbit/s: on the one CPU the test keeps its
/// lab on (`serial`), the CPU would be the bottleneck before the link.
#[test]
fn rpc_lab_reports_both_sizes_for_both_algorithms() {
    require_root();
    let _serial = serial();
    judged_twice(rpc_lab_reports_both_sizes_for_both_algorithms_once);
}

fn rpc_lab_reports_both_sizes_for_both_algorithms_once() {
    let before = namespaces_with("dl");
    for (args, expect) in [
        (&["rpc", "--load", "0"][..], "(0, 1.5]"),
        (&["rpc", "--senders", "0"], "1 to 16"),
        (&["rpc", "--mix", "0:1"], "1 to 1073741824"),
        (&["rpc", "--connections", "0"], "1 to 64"),
    ] {
        let o = lab(args);
        assert_eq!(o.status.code(), Some(2), "lab {args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(expect), "lab {args:?}: {}", stderr(&o));
    }
    let out = tmpdir("rpc");
    let o = lab(&[
        "rpc",
        "--quick",
        "--rate",
        "100M",
        "--duration",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = json(&out.join("runs.json"));
    let runs = runs.as_array().unwrap();
    let rate = json(&out.join("config.json"))["rate_bps"].as_f64().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["completed"], r["sent"], "{r}");
        let sizes = r["sizes"].as_array().unwrap();
        assert_eq!(sizes.len(), 2);
        // Each share is the size's RPCs times its bytes over the bytes
        // rpcgen counted on the wire: they add up only if every response
        // carried the bytes asked for.
        let shares: f64 = sizes
            .iter()
            .map(|s| s["goodput_share"].as_f64().unwrap())
            .sum();
        assert!((shares - 1.0).abs() < 1e-6, "{r}");
        // No RPC completes faster than the path allows: a round trip (as
        // probed before the run) plus the response's serialization at the
        // link rate.
        let rtt_us = r["rtt"]["probed_us"][0][1].as_f64().unwrap();
        for s in sizes {
            assert!(s["count"].as_u64().unwrap() > 10, "{s}");
            let bytes = s["bytes"].as_f64().unwrap();
            let floor_us = rtt_us + bytes * 8.0 / rate * 1e6;
            let p50 = s["p50_us"].as_f64().unwrap();
            assert!(
                p50 >= 0.9 * floor_us,
                "p50 {p50} us under the path's {floor_us} us: {s}"
            );
        }
        // A small RPC's latency is mostly the round trip, a large one's
        // mostly transfer: per RPC, the large size moves data faster.
        let mbps = |i: usize| sizes[i]["rpc_mbps"].as_f64().unwrap();
        let (small, large) = if sizes[0]["bytes"].as_u64() < sizes[1]["bytes"].as_u64() {
            (mbps(0), mbps(1))
        } else {
            (mbps(1), mbps(0))
        };
        assert!(large > small, "{r}");
        assert!(r["sender_cpu_s_per_gb"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["receiver_cpu_s_per_gb"].as_f64().unwrap() > 0.0, "{r}");
    }
    // The finding (seed 004): DCTCP's short queue gives small RPCs a far
    // shorter wait than cubic's full buffer, and shares more evenly. Eleven
    // runs on the lab's own CPU (2026-11-28, 57 RPCs of each size per
    // algorithm, no guard repair), bpf_dctcp against cubic in the same run:
    // 10 KB p50 0.39-0.62 of cubic's, p99 0.16-0.27 of it (the slowest one
    // or two of 57: cubic's waited out its 425-packet buffer, about 50 ms),
    // Jain's index 0.925-0.949 against 0.670-0.693, drops 0 against 0-126.
    let of = |a: &str| runs.iter().find(|r| r["algorithm"] == a).unwrap();
    let (d, c) = (of("bpf_dctcp"), of("cubic"));
    let size = |r: &Value, bytes: u64, k: &str| {
        r["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["bytes"] == bytes)
            .map(|s| s[k].as_f64().unwrap())
            .unwrap()
    };
    let small = |r: &Value, k: &str| size(r, 10_000, k);
    let num = |r: &Value, k: &str| r[k].as_f64().unwrap();
    figures(&[
        ("small_p50_ratio", small(d, "p50_us") / small(c, "p50_us")),
        ("small_p99_ratio", small(d, "p99_us") / small(c, "p99_us")),
        ("large_p50_ratio", size(d, 1_000_000, "p50_us") / size(c, 1_000_000, "p50_us")),
        ("large_p99_ratio", size(d, 1_000_000, "p99_us") / size(c, 1_000_000, "p99_us")),
        ("dctcp_jain", num(d, "jain")),
        ("cubic_jain", num(c, "jain")),
        ("cubic_drops", num(c, "drops")),
    ]);
    for (k, bound) in [("p50_us", 0.8), ("p99_us", 0.5)] {
        assert!(
            small(d, k) <= bound * small(c, k),
            "10 KB {k}: bpf_dctcp {} against cubic {}",
            small(d, k),
            small(c, k)
        );
    }
    // The 1 MB RPCs: DCTCP's tail somewhat above cubic's, as seed 004 found
    // (its Fig. 6), its median level. Ten pinned runs (2026-12-05,
    // tools/spread): p99 0.99-1.28 of cubic's, p50 0.96-1.04; 10 KB p50
    // 0.37-0.63, p99 0.18-0.33, Jain 0.915-0.948 against 0.673-0.692.
    let large = |k: &str| size(d, 1_000_000, k) / size(c, 1_000_000, k);
    assert!(
        (0.85..=1.6).contains(&large("p99_us")) && (0.85..=1.2).contains(&large("p50_us")),
        "1 MB p99 {:.2}, p50 {:.2} of cubic's",
        large("p99_us"),
        large("p50_us")
    );
    assert!(
        num(d, "jain") >= num(c, "jain") + 0.15,
        "Jain: bpf_dctcp {} against cubic {}",
        num(d, "jain"),
        num(c, "jain")
    );
    // DCTCP's marks keep its queue off the buffer's end; cubic's drops
    // (0 in three runs of eleven at this load) are reported, not bounded.
    assert_eq!(num(d, "drops"), 0.0, "bpf_dctcp dropped: {d}");
    // Each size's row of the summary is the run's own percentiles.
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for r in runs {
        for x in r["sizes"].as_array().unwrap() {
            let ms = |k: &str| x[k].as_f64().unwrap() / 1e3;
            let row = format!(
                "| {} | {} | {} | {:.2} | {:.2} | {:.2} |",
                x["bytes"],
                r["algorithm"].as_str().unwrap(),
                x["count"],
                ms("p50_us"),
                ms("p99_us"),
                ms("p999_us")
            );
            assert!(summary.contains(&row), "{row} not in\n{summary}");
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
    assert_eq!(namespaces_with("dl"), before, "namespaces left behind");
}

fn rpcgen_processes() -> usize {
    processes("rpcgen")
}

/// A lab killed outright (SIGKILL, no teardown) leaves no rpcgen behind:
/// the workers die with it, and `lab cleanup` removes its namespaces.
#[test]
fn a_killed_incast_takes_its_workers_along() {
    require_root();
    let _serial = serial();
    let before = namespaces_with("dl");
    let out = tmpdir("incast-kill");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args([
            "incast",
            "--workers",
            "8",
            "--rounds",
            "100000",
            "--algorithms",
            "cubic",
        ])
        .args(["--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while rpcgen_processes() < 9 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "workers and aggregator never all ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until_gone("rpcgen", 5, "rpcgen outlived a killed lab");
    let o = lab(&["cleanup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(namespaces_with("dl"), before, "cleanup left namespaces");
    let _ = std::fs::remove_dir_all(&out);
}

fn htb_hysteresis() -> String {
    std::fs::read_to_string("/sys/module/sch_htb/parameters/htb_hysteresis")
        .expect("this kernel's htb has the hysteresis parameter")
        .trim()
        .to_string()
}

/// `lab queue` of one bpf_dctcp run at `rate` into `out`, then `extra`.
fn one_dctcp_run<'a>(rate: &'a str, out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "queue",
        "--rates",
        rate,
        "--variants",
        "bpf_dctcp:bpf-step",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn htb_hysteresis_is_held_for_the_run_and_put_back_even_after_a_kill() {
    require_root();
    let _serial = serial();
    let state = Path::new(netns_lab::net::prefix::HTB_STATE);
    let original = htb_hysteresis();
    assert!(!state.exists(), "a lab already holds htb hysteresis");

    // A finished run: on during it (its outcome says so), put back after.
    let out = tmpdir("htb");
    let o = lab(&one_dctcp_run("1G", &out, &["--quick", "--no-trace"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let r = outcome(&out, "1G-bpf_dctcp-bpf-step");
    assert_eq!(r["htb_hysteresis"], true, "{r}");
    let softirq = r["softirq_share"].as_f64().unwrap();
    // A 1 Gbit/s run is softirq work for its host: a share read as 0 is a
    // broken reading. (Its upper end, 1, a share cannot pass.)
    assert!(softirq > 0.0, "softirq share {softirq}");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("htb hysteresis: on"), "{summary}");
    assert_eq!(htb_hysteresis(), original);
    assert!(!state.exists());
    let _ = std::fs::remove_dir_all(&out);

    // Asked to, the lab leaves htb alone.
    let out = tmpdir("htb-off");
    let o = lab(&one_dctcp_run(
        "100M",
        &out,
        &["--duration", "2", "--no-htb-hysteresis"],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let r = outcome(&out, "100M-bpf_dctcp-bpf-step");
    assert_eq!(r["htb_hysteresis"], original != "0", "{r}");
    let _ = std::fs::remove_dir_all(&out);

    // A killed run leaves it on; `lab cleanup` puts it back.
    let out = tmpdir("htb-kill");
    let mut child = spawn_lab(&one_dctcp_run("1G", &out, &["--duration", "20"]));
    let pid = child.id();
    let t = Instant::now();
    while lab_objects_of(pid).is_empty() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!lab_objects_of(pid).is_empty(), "lab never came up");
    assert_eq!(htb_hysteresis(), "1");
    let holders = std::fs::read_to_string(state).unwrap();
    assert!(
        holders.lines().skip(1).any(|l| l == pid.to_string()),
        "{holders}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(htb_hysteresis(), "1", "nobody restored it yet");
    let o = lab(&["cleanup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("htb hysteresis"), "{said}");
    assert_eq!(htb_hysteresis(), original);
    assert!(!state.exists());
    assert!(lab_objects_of(pid).is_empty());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_shaped_sender_link_paces_its_packets_into_the_switch() {
    require_root();
    let _serial = serial();
    let out = tmpdir("access");
    // One cubic flow through a 30 Mbit/s sender link into a 100 Mbit/s
    // bottleneck: the sender's link is the bottleneck, and its packets
    // reach the switch spaced at its rate, so the switch holds no queue.
    let o = lab(&[
        "queue",
        "--rates",
        "100M",
        "--access-rate",
        "30M",
        "--flows",
        "1",
        "--variants",
        "cubic:droptail",
        "--duration",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = outcome(&out, "100M-cubic-droptail");
    let goodput = r["goodput_bps"][0].as_f64().unwrap() / 1e6;
    assert!(
        (25.0..=30.0).contains(&goodput),
        "goodput {goodput} Mbit/s through a 30 Mbit/s link"
    );
    let p95 = r["queue"]["p95"].as_f64().unwrap();
    assert!(
        p95 <= 2.0,
        "switch queue p95 {p95}: packets arrived in bursts"
    );
    let config = std::fs::read_to_string(out.join("config.json")).unwrap();
    assert!(config.contains("\"access_rate_bps\": 30000000"), "{config}");
    let _ = std::fs::remove_dir_all(&out);

    // Out of range: refused before anything is built.
    let o = lab(&["queue", "--access-rate", "5k", "--rates", "100M"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--access-rate"), "{}", stderr(&o));
}

/// `judged_twice` repeats a failed judgement once, and only once, and
/// says so: a finding that fails twice fails its test.
#[test]
fn a_judgement_is_repeated_once_and_a_second_failure_stands() {
    let calls = std::cell::Cell::new(0);
    let mut said = Vec::new();
    judged_twice_to(&mut said, || {
        calls.set(calls.get() + 1);
        assert!(calls.get() > 1, "first run {} fails", calls.get());
    });
    assert_eq!(calls.get(), 2);
    assert_eq!(
        String::from_utf8(said).unwrap(),
        "RETRY a_judgement_is_repeated_once_and_a_second_failure_stands: first run 1 fails\n"
    );
    calls.set(0);
    let twice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        judged_twice_to(&mut Vec::new(), || {
            calls.set(calls.get() + 1);
            panic!("broken");
        })
    }));
    assert!(twice.is_err());
    assert_eq!(calls.get(), 2);
}

/// `steal_capped` repeats a run only when the hypervisor took more of its
/// CPU than the cap, and only once; a bound under the cap gives way to
/// steal, over it judges nothing.
#[test]
fn only_a_run_over_the_steal_cap_is_repeated_and_only_once() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let calls = std::cell::Cell::new(0);
    let message = |r: std::thread::Result<()>| {
        let e = r.unwrap_err();
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    };
    // Over the cap once: repeated, judged on the second run, and said.
    let mut said = Vec::new();
    steal_capped_to(&mut said, || {
        calls.set(calls.get() + 1);
        let steal = if calls.get() == 1 { 0.3 } else { 0.05 };
        assert!(busy_floor(0.8, steal) > 0.7);
    });
    assert_eq!(calls.get(), 2);
    let said = String::from_utf8(said).unwrap();
    assert!(said.starts_with("RETRY only_a_run_over_the_steal_cap_is_repeated_and_only_once: STEAL"), "{said}");
    // Over it twice: fails naming the steal.
    calls.set(0);
    let twice = catch_unwind(AssertUnwindSafe(|| {
        steal_capped_to(&mut Vec::new(), || {
            calls.set(calls.get() + 1);
            ratio_band(0.9, 1.1, 0.02, 0.4);
        })
    }));
    assert_eq!(calls.get(), 2);
    let m = message(twice);
    assert!(m.starts_with("STEAL") && m.contains("40.0 %") && m.contains("25 % cap"), "{m}");
    // Any other failure stands at once.
    calls.set(0);
    let broken = catch_unwind(AssertUnwindSafe(|| {
        steal_capped_to(&mut Vec::new(), || {
            calls.set(calls.get() + 1);
            panic!("a broken finding");
        })
    }));
    assert_eq!(calls.get(), 1);
    assert_eq!(message(broken), "a broken finding");
    // Up to the cap the bound gives way by the steal, no further.
    assert!((busy_floor(0.8, 0.25) - 0.6).abs() < 1e-12);
    assert_eq!(ratio_band(0.9, 1.1, 0.0, 0.0), 0.9..=1.1);
}
