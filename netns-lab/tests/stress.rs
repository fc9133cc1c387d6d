//! Stress (issue 20): 64 bpf_dctcp flows through the lab's switch for 60 s
//! while its parameters change every 100 ms and `loader top`, `loader
//! flows` and `loader trace` watch it. No flow but one may stall (the known
//! issue's share), the kernel log may gain no BPF or TCP warning, and
//! nothing may be left behind.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::{figures, namespaces_with, outcome, require_root, serial, tmpdir, workspace_bin};

const FLOWS: usize = 64;
const SECS: u64 = 60;

fn loader(args: &[&str]) -> std::process::Output {
    Command::new(workspace_bin("loader"))
        .args(args)
        .output()
        .expect("running loader")
}

/// The name the running lab attached bpf_dctcp under (its prefix, dl...).
fn lab_instance(timeout: Duration) -> String {
    let t = Instant::now();
    loop {
        let o = loader(&["list", "--json"]);
        if o.status.success() {
            let list: Value = serde_json::from_slice(&o.stdout).unwrap();
            if let Some(n) = list
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|i| i["name"].as_str())
                .find(|n| n.starts_with("dl"))
            {
                return n.to_string();
            }
        }
        assert!(t.elapsed() < timeout, "the lab attached nothing");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `loader list` still shows the instance `name`.
fn listed(name: &str) -> bool {
    let o = loader(&["list", "--json"]);
    let list: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    list.as_array()
        .is_some_and(|l| l.iter().any(|i| i["name"] == name))
}

/// The kernel log's lines so far.
fn kernel_log() -> Vec<String> {
    let o = Command::new("dmesg").output().expect("dmesg");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// What the kernel would say if BPF or TCP went wrong.
fn alarming(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    [
        "bpf",
        "tcp",
        "warning",
        "bug:",
        "oops",
        "rcu",
        "stall",
        "call trace",
    ]
    .iter()
    .any(|w| l.contains(w))
}

/// The longest run of intervals (100 ms) after the warmup in which a flow
/// delivered nothing, per flow.
fn longest_gaps(o: &Value) -> Vec<usize> {
    o["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s: Vec<u64> = f["series"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_u64().unwrap())
                .collect();
            let after = &s[s.len() / 20..s.len().saturating_sub(1)];
            let (mut run, mut worst) = (0, 0);
            for &b in after {
                run = if b == 0 { run + 1 } else { 0 };
                worst = worst.max(run);
            }
            worst
        })
        .collect()
}

#[test]
fn sixty_four_flows_survive_a_minute_of_live_changes_and_watchers() {
    require_root();
    let _serial = serial();
    let log_before = kernel_log().len();
    let out = tmpdir("stress");
    let mut lab = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args([
            "queue",
            "--rates",
            "100M",
            "--variants",
            "bpf_dctcp:bpf-step",
        ])
        .args([
            "--flows",
            &FLOWS.to_string(),
            "--duration",
            &SECS.to_string(),
        ])
        .args(["--no-trace", "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting lab");
    let name = lab_instance(Duration::from_secs(60));

    // Watchers: the live trace, the dashboard on a pseudo-terminal, and
    // `loader flows` polled from a thread.
    let mut trace = Command::new(workspace_bin("loader"))
        .args(["trace", "--algo", &name, "--format", "jsonl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting loader trace");
    let events = Arc::new(AtomicU64::new(0));
    let counted = {
        let (events, stdout) = (events.clone(), trace.stdout.take().unwrap());
        std::thread::spawn(move || {
            for _ in BufReader::new(stdout).lines().map_while(Result::ok) {
                events.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut top: Child = Command::new("script")
        .args(["-qfec"])
        .arg(format!(
            "{} top --interval 200",
            workspace_bin("loader").display()
        ))
        .arg("/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting loader top under script(1)");
    let done = Arc::new(AtomicBool::new(false));
    let polls = {
        let (done, name) = (done.clone(), name.clone());
        std::thread::spawn(move || {
            let (mut polls, mut most) = (0u32, 0usize);
            while !done.load(Ordering::Relaxed) {
                let o = loader(&["flows", "--json"]);
                assert!(o.status.success(), "loader flows failed mid-run");
                let all: Value = serde_json::from_slice(&o.stdout).unwrap();
                let ours = all
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|f| f["algorithm"] == name.as_str())
                    .count();
                most = most.max(ours);
                polls += 1;
                std::thread::sleep(Duration::from_millis(500));
            }
            (polls, most)
        })
    };

    // Every tunable of dctcp, changed every 100 ms until the lab ends; the
    // guard stays on and nothing is injected (on this kernel the guard is
    // what keeps the known issue's bursts out of the queue).
    let mut sets = 0u32;
    let mut refused = Vec::new();
    while lab.try_wait().unwrap().is_none() {
        let g = (sets % 11).to_string();
        let a = ((sets * 97) % 1025).to_string();
        let o = loader(&[
            "set",
            &name,
            &format!("shift_g={g}"),
            &format!("alpha_on_init={a}"),
            "guard=1",
            "inject_ssthresh=0",
        ]);
        // The lab detaches its algorithm once the flows end, and then
        // writes its results for a while: a set refused because the
        // instance is gone ends the loop; any other refusal is a failure.
        if !o.status.success() {
            if !listed(&name) {
                break;
            }
            refused.push(String::from_utf8_lossy(&o.stderr).into_owned());
        }
        sets += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = lab.wait().unwrap();
    let mut lab_err = String::new();
    let _ = std::io::Read::read_to_string(&mut lab.stderr.take().unwrap(), &mut lab_err);
    done.store(true, Ordering::Relaxed);
    let (polls, most) = polls.join().unwrap();
    let _ = top.stdin.take().unwrap().write_all(b"q");
    let top_status = top.wait().unwrap();
    // The trace ends by itself when the lab detaches its algorithm.
    let trace_status = trace.wait().unwrap();
    let mut trace_err = String::new();
    let _ = std::io::Read::read_to_string(&mut trace.stderr.take().unwrap(), &mut trace_err);
    counted.join().unwrap();

    assert!(status.success(), "lab failed: {lab_err}");
    assert!(
        refused.is_empty(),
        "loader set refused mid-run: {refused:?}"
    );
    assert!(sets as u64 >= SECS * 10 / 2, "only {sets} sets in {SECS} s");
    assert!(top_status.success(), "loader top: {top_status}");
    assert!(
        trace_status.success() && trace_err.contains("was detached"),
        "loader trace: {trace_status}: {trace_err}"
    );
    assert!(
        events.load(Ordering::Relaxed) > 1000,
        "the trace saw {} events",
        events.load(Ordering::Relaxed)
    );
    assert!(
        polls >= 20 && most >= FLOWS,
        "loader flows saw at most {most} of {FLOWS} senders in {polls} polls"
    );

    let o = outcome(&out, "100M-bpf_dctcp-bpf-step");
    assert_eq!(o["flows"].as_array().unwrap().len(), FLOWS);
    let mut gaps = longest_gaps(&o);
    gaps.sort_unstable();
    let repairs = |i: usize| o["guard_repairs"][i].as_f64().unwrap_or(0.0);
    figures(&[
        ("longest_silence_ms", (gaps[gaps.len() - 1] * 100) as f64),
        ("second_silence_ms", (gaps[gaps.len() - 2] * 100) as f64),
        ("sets", sets as f64),
        ("guard_ssthresh", repairs(0)),
        ("guard_cwnd", repairs(1)),
    ]);
    eprintln!(
        "{sets} sets, {polls} flows polls, {} trace events; longest silence of a flow {} ms; guard {}; drops {}",
        events.load(Ordering::Relaxed),
        gaps.iter().max().unwrap() * 100,
        o["guard_repairs"],
        o["drops"]
    );
    // A flow whose SYN the start's bursts lost used to be retried without
    // asking for ECN (the kernel's tcp_ecn_fallback), so bpf_dctcp handed it
    // to its Reno fallback, which sends without ECT; with 64 flows the queue
    // never falls to K (mean 120 packets), so the marker dropped all it sent,
    // its handshake's last ACK included, and it stalled for the whole run:
    // 2 of 15 runs of 64 flows (2026-11-26 and 27), 1 and 5 flows, and a
    // run with the flows' ECN recorded had 4, all without it (flows 52 and
    // 61-63, the last to start). The lab now turns that fallback off in its
    // namespaces (Star::ecn_everywhere): every flow runs with ECN.
    let flows = o["flows"].as_array().unwrap();
    let no_ecn: Vec<usize> = (0..FLOWS)
        .filter(|&i| flows[i]["info"]["ecn"] == false)
        .collect();
    assert!(no_ecn.is_empty(), "flows without ECN: {no_ecn:?}");
    // Every flow keeps going through the changes: silent at most 0.5 s.
    // On the lab's own CPU no flow missed one 100 ms interval in ten runs
    // (2026-12-05, tools/spread; 570-592 sets a run, no guard repair);
    // unpinned, 200 ms in six, and one flow was let stall longer amid the
    // known issue's bursts (README), which no longer strikes here.
    assert!(
        gaps[gaps.len() - 1] <= 5,
        "a flow delivered nothing for over half a second (100 ms intervals): {gaps:?}"
    );
    for (i, f) in flows.iter().enumerate() {
        if f["reset_at_close"] == true {
            eprintln!(
                "flow {i} (ECN {}) was still stalled 15 s after the run: {}",
                f["info"]["ecn"], f["series"]
            );
        }
    }

    let new: Vec<String> = kernel_log()
        .into_iter()
        .skip(log_before)
        .filter(|l| alarming(l))
        .collect();
    assert!(new.is_empty(), "the kernel log gained: {new:#?}");
    assert_eq!(namespaces_with("dl"), 0, "namespaces left");
    let _ = std::fs::remove_dir_all(&out);
}
