//! `--rtt` end to end on this kernel: the delay element gives every flow
//! the round trip it was asked for, each sender its own, refuses bad values
//! before anything is built, and goes with its lab on Ctrl-C and SIGKILL.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::{
    judged_twice,
    assert_refused, busy_floor, lab, namespaces_with, outcome, processes, quick_queue,
    require_root, serial, stderr, tmpdir, wait_until_gone,
};

/// Lab namespaces (all of them: these tests run one at a time).
fn lab_namespaces() -> usize {
    namespaces_with("dl")
}

fn delaylines() -> usize {
    processes("delayline")
}

/// A quick bpf_dctcp run at 100 Mbit/s with `rtt`; its outcome.
fn dctcp_at(tag: &str, rtt: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--rtt", rtt];
    args.extend_from_slice(extra);
    let out = quick_queue(tag, "bpf_dctcp:bpf-step", &args);
    let v = outcome(&out, "100M-bpf_dctcp-bpf-step");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    eprintln!(
        "{}",
        summary.lines().take(10).collect::<Vec<_>>().join("\n")
    );
    let _ = std::fs::remove_dir_all(&out);
    v
}

/// Each flow's min RTT (tcp_info) by sender.
fn min_rtts(r: &Value) -> Vec<(u64, f64)> {
    r["rtt"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["sender"].as_u64().unwrap(),
                f["min_rtt_us"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The element carried the whole run's ACK path without losing or
/// reordering a frame, on time at the median. (The p99 goal, 50 us, is
/// `just bench`'s: it depends on the host's load.)
fn assert_element_clean(r: &Value) {
    let e = &r["rtt"]["element"];
    assert!(e["received"].as_u64().unwrap() > 1000, "{e}");
    assert_eq!(e["dropped_full"], 0, "{e}");
    assert_eq!(e["dropped_oversize"], 0, "{e}");
    assert_eq!(e["reordered"], 0, "{e}");
    // Measured 0.3-1.2 us on this kernel; sleeping without the spin gives
    // the guest's timer floor, about 25 us.
    let p50 = e["lateness"]["p50_ns"].as_u64().unwrap();
    assert!(p50 <= 15_000, "holding error p50 {p50} ns: {e}");
}

#[test]
fn with_rtt_8ms_every_flow_sees_8ms() {
    require_root();
    let _serial = serial();
    judged_twice(with_rtt_8ms_every_flow_sees_8ms_once);
}

fn with_rtt_8ms_every_flow_sees_8ms_once() {
    let r = dctcp_at("8ms", "8ms", &["--delay-backend", "element"]);
    // The element adds 8 ms less the path's own round trip, measured idle
    // before the run (26-27 us); under load the path's own is 11-38 us, so
    // flows measured 7989-8002 us (8 more runs, 2026-11-27: 7991-8015). Below 1 % short, the lab held less
    // than it was asked; over 10 % long, it held too much or twice.
    let rtts = min_rtts(&r);
    eprintln!("min RTTs (sender, us): {rtts:?}");
    for (sender, us) in rtts {
        assert!(
            (7920.0..=8800.0).contains(&us),
            "sender {sender}: min RTT {us} us with --rtt 8ms"
        );
    }
    assert_element_clean(&r);
    // 8 ms at 100 Mbit/s is 66 packets in flight: DCTCP still fills the
    // link with K = 20 > C x RTT / 7 = 9.5 (99.8-99.9 % in three runs on
    // 2026-11-28), unless the host stalls the element: a run whose element
    // was late by 2.65 ms at p99 (80-160 us in the others) and 10.7 ms at
    // most released ACKs in bursts, and the queue ran empty 10 % of the
    // time (87.8 %). The 95 % target is the summary's.
    let steal = r["steal_share"].as_f64().unwrap();
    assert!(
        r["utilization"].as_f64().unwrap() > busy_floor(0.8, steal),
        "{} with {steal} of the CPU stolen",
        r["utilization"]
    );
}

/// Bursty arrivals (`--slot`): the element releases the ACKs only as a
/// slot opens, every 4 ms, and the senders answer each slot's ACKs with a
/// burst. A step at K = 20 then keeps the link busy only while a burst
/// drains: 4 ms at 100 Mbit/s is 33 packets, and the step holds the queue
/// near K, so about K / 33 of each slot (60 %) is sent; without slots the
/// same run fills the link (99.9 %, the test above).
#[test]
fn slotted_acks_arrive_in_bursts_and_a_shallow_step_loses_the_gaps() {
    require_root();
    let _serial = serial();
    judged_twice(slotted_once);
}

fn slotted_once() {
    let r = dctcp_at(
        "slot",
        "8ms",
        &["--delay-backend", "element", "--slot", "4ms:64"],
    );
    let e = &r["rtt"]["element"];
    let util = r["utilization"].as_f64().unwrap();
    let queue = r["queue"]["mean"].as_f64().unwrap();
    eprintln!("utilization {util}, queue mean {queue}, element {e}");
    // The element's own accounting: every frame out in arrival order, at
    // most the slot's 64 of a FIFO's per slot, and slots used all along
    // (12 s of 4 ms slots, two FIFOs: 1113-1291 in ten runs, 2026-12-04).
    assert_eq!(e["released"], e["received"], "{e}");
    assert_eq!(e["reordered"], 0, "{e}");
    assert!(e["most_in_a_slot"].as_u64().unwrap() <= 64, "{e}");
    assert!(e["slots_used"].as_u64().unwrap() > 500, "{e}");
    // Ten pinned runs (2026-12-04): utilization 52.5-58.6 %, queue mean
    // 7.4-8.5 packets (16.4 without slots). Over 70 %, the ACKs were not
    // bunched (or the senders paced them out); under 40 %, the element
    // held them past their slot.
    assert!((0.40..=0.70).contains(&util), "utilization {util} with 4 ms slots");
    assert!(queue < 12.0, "queue mean {queue}: the gaps between bursts should empty it");
}

#[test]
fn two_senders_at_different_rtts_each_see_their_own() {
    require_root();
    let _serial = serial();
    let r = dctcp_at("2rtt", "1ms,8ms", &[]);
    let rtts = min_rtts(&r);
    assert_eq!(rtts.len(), 2);
    eprintln!("min RTTs (sender, us): {rtts:?}");
    for (sender, us) in rtts {
        let want = if sender == 0 { 1000.0 } else { 8000.0 };
        // As at 8 ms (above): at most 80 us short, where the element
        // missing leaves the path's own 30 us; 1 % of 1 ms (10 us) is less
        // than the path's own round trip moves under load. 8 runs
        // (2026-11-27): sender 0 read 1023-1061 us, sender 1 8003-8129.
        assert!(
            us >= want - 80.0 && us <= want * 1.1,
            "sender {sender}: min RTT {us} us, configured {want}"
        );
    }
    assert_element_clean(&r);
}

#[test]
fn bad_rtt_values_exit_2_before_anything_is_built() {
    require_root();
    let _serial = serial();
    let cases: &[(&[&str], &str)] = &[
        (&["queue", "--rtt", "0"], "no unit"),
        (&["queue", "--rtt", "0ms"], "must be positive"),
        (&["queue", "--rtt=-1ms"], "must be positive"),
        (
            &["queue", "--rtt", "soon"],
            "unit `soon` is not ns, us, ms or s",
        ),
        (&["queue", "--rtt", "8 parsecs"], "is not ns, us, ms or s"),
        (&["queue", "--rtt", "2s"], "limit of 1s"),
        (
            &["queue", "--rtt", "1ms,2ms,3ms"],
            "3 round trips for 2 senders",
        ),
        (
            &["variants", "--rtt", "1ms,2ms,3ms"],
            "3 round trips for 2 senders",
        ),
        // Two long flows and the short flows' sender.
        (
            &["xdctcp", "--rtt", "1ms,2ms"],
            "2 round trips for 3 senders",
        ),
        (&["queue", "--delay-backend", "teleport"], "invalid value"),
    ];
    assert_refused(cases);
    assert_eq!(delaylines(), 0, "a refused run started a delay element");
}

/// Waits until a lab's delay element runs.
fn wait_for_element(what: &str) {
    let t = Instant::now();
    while delaylines() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{what}: no delay element came up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a lab registers and pins in the kernel: its bpf_dctcp instance (a
/// registered congestion control and its bpffs directory) and its switch's
/// live pins, counted by the lab prefix they are named after.
fn lab_kernel_objects() -> usize {
    let dl = |dir: &str| {
        std::fs::read_dir(dir).map_or(0, |d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("dl"))
                .count()
        })
    };
    let registered = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap()
        .split_whitespace()
        .filter(|n| n.starts_with("dl"))
        .count();
    registered + dl(dctcp_utils::bpffs::ROOT) + dl(dctcp_utils::bpffs::LAB_ROOT)
}

/// BPF programs of this project's algorithms loaded now.
fn algorithm_programs() -> usize {
    let o = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| {
            [" name dctcp_", " name xdctcp_", " name kdctcp_"]
                .iter()
                .any(|n| l.contains(n))
        })
        .count()
}

fn spawn_long_lab(out: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_lab"))
        .args([
            "queue",
            "--duration",
            "30",
            "--rates",
            "100M",
            "--variants",
            "bpf_dctcp:bpf-step",
            "--rtt",
            "2ms",
            "--delay-backend",
            "element",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn ctrl_c_and_sigkill_take_the_delay_element_along() {
    require_root();
    let _serial = serial();
    let before = lab_namespaces();
    let objects = lab_kernel_objects();
    let programs = algorithm_programs();

    // Ctrl-C: the lab tears everything down itself.
    let out = tmpdir("sigint");
    let child = spawn_long_lab(&out);
    wait_for_element("Ctrl-C");
    std::thread::sleep(Duration::from_secs(1));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
    assert_eq!(delaylines(), 0, "the delay element outlived Ctrl-C");
    assert_eq!(lab_namespaces(), before, "Ctrl-C left namespaces");
    assert_eq!(
        lab_kernel_objects(),
        objects,
        "Ctrl-C left an instance or pins"
    );

    // SIGKILL: no teardown; the element dies with its parent and `lab
    // cleanup` removes the namespaces.
    let mut child = spawn_long_lab(&out);
    wait_for_element("SIGKILL");
    // Killed once its switch is pinned too: the algorithm's instance
    // (registered with its fallback, pinned) and the switch's pins.
    let t = Instant::now();
    while lab_kernel_objects() < objects + 4 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the lab never pinned its switch"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until_gone("delayline", 5, "the delay element outlived a killed lab");
    // They outlive the kill (bpffs holds them); `lab cleanup` removes them.
    assert_eq!(
        lab_kernel_objects(),
        objects + 4,
        "a killed lab leaves its algorithm (and fallback) registered, its \
         instance pinned and its switch's pins"
    );
    let o = lab(&["cleanup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(lab_namespaces(), before, "cleanup left namespaces");
    assert_eq!(
        lab_kernel_objects(),
        objects,
        "cleanup left an instance or pins"
    );
    // The killed lab's sockets would hold bpf_dctcp's programs for minutes
    // (orphaned, retransmitting); cleanup destroys them, so the programs go
    // once the kernel's grace periods have run.
    let t = Instant::now();
    while algorithm_programs() > programs {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "bpf_dctcp's programs outlived cleanup by 20 s: its sockets live on"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "programs freed {:.1} s after cleanup",
        t.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `lab cleanup` (without --all) removes only what dead labs left: a lab
/// that is running keeps its namespaces and its delay element, and still
/// finishes its run cleanly after it.
#[test]
fn cleanup_leaves_a_running_lab_alone() {
    require_root();
    let _serial = serial();
    let before = lab_namespaces();
    let out = tmpdir("cleanup-running");
    let child = spawn_long_lab(&out);
    wait_for_element("a running lab");
    std::thread::sleep(Duration::from_secs(1));
    let running = lab_namespaces();
    assert!(running > before, "the lab built no namespaces");
    let objects = lab_kernel_objects();
    let o = lab(&["cleanup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        lab_namespaces(),
        running,
        "cleanup took a running lab's namespaces"
    );
    assert_eq!(
        lab_kernel_objects(),
        objects,
        "cleanup took a running lab's algorithm or pins"
    );
    assert_eq!(
        delaylines(),
        1,
        "cleanup took a running lab's delay element"
    );
    std::thread::sleep(Duration::from_secs(1));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("No such"),
        "the lab lost something under it: {}",
        stderr(&o)
    );
    assert_eq!(lab_namespaces(), before, "the lab left namespaces");
    assert_eq!(delaylines(), 0);
    let _ = std::fs::remove_dir_all(&out);
}

/// `lab doctor` says which delay backend this kernel gets: the element
/// wherever AF_PACKET and tc mirred are (every kernel the lab runs on), and
/// netem only where sch_netem loads; this kernel has none.
#[test]
fn doctor_names_the_delay_backend_this_kernel_gets() {
    require_root();
    let _serial = serial();
    let o = lab(&["doctor", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let checks: Value = serde_json::from_slice(&o.stdout).unwrap();
    let find = |name: &str| {
        checks
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["feature"] == name)
            .unwrap_or_else(|| panic!("no {name} check in {checks}"))
            .clone()
    };
    assert_eq!(find("delay element")["available"], true);
    let netem = find("netem");
    let has_netem = std::path::Path::new("/sys/module/sch_netem").exists();
    assert_eq!(netem["available"], has_netem, "{netem}");
    if !has_netem {
        assert!(
            netem["note"].as_str().unwrap().contains("delay element"),
            "{netem}"
        );
    }
}
