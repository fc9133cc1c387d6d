//! `loader trace` as users run it: the real binary against an attached
//! algorithm carrying a real transfer between two namespaces.

mod common;

use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

const MB: u64 = 1 << 20;

/// The tests attach algorithms: serialized, so "nothing attached" is true.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn loader_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_loader"))
}

/// A running `loader trace`, started with `args`, whose stderr a thread
/// reads: `start` returns once the tracer says tracing is on, so traffic
/// begins after it on any machine (a fixed sleep was too short under the
/// VM tier's emulation, and the flows' `start` events were missed).
struct Tracer {
    child: std::process::Child,
    err: std::thread::JoinHandle<String>,
}

impl Tracer {
    fn start(args: &[&str]) -> Tracer {
        use std::io::BufRead;
        let mut child = loader_bin()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (on, tracing) = std::sync::mpsc::channel();
        let err = std::thread::spawn(move || {
            let mut all = String::new();
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line.starts_with("tracing ") {
                    let _ = on.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let mut t = Tracer { child, err };
        if tracing
            .recv_timeout(std::time::Duration::from_secs(60))
            .is_err()
        {
            let _ = t.child.kill();
            panic!("the tracer never began: {}", t.finish_output().1);
        }
        t
    }

    /// Its stdout, taken to read while it runs.
    fn stdout(&mut self) -> std::process::ChildStdout {
        self.child.stdout.take().unwrap()
    }

    /// Ctrl-C, as a user ends a trace; then its exit status, stdout and
    /// stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String, String) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        self.finish_output()
    }

    /// Waits up to `secs` for it to exit by itself (reading its stdout
    /// meanwhile, if still piped: a full pipe would block it).
    fn wait_exit(mut self, secs: u64) -> (std::process::ExitStatus, String, String) {
        let reader = self.child.stdout.take().map(|mut o| {
            std::thread::spawn(move || {
                let mut v = String::new();
                let _ = std::io::Read::read_to_string(&mut o, &mut v);
                v
            })
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while self.child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the tracer still ran after {secs} s");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let (status, _, err) = self.finish_output();
        (
            status,
            reader.map_or_else(String::new, |r| r.join().unwrap()),
            err,
        )
    }

    /// Waits for it to exit by itself.
    fn finish_output(&mut self) -> (std::process::ExitStatus, String, String) {
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            std::io::Read::read_to_string(&mut o, &mut out).unwrap();
        }
        let status = self.child.wait().unwrap();
        let err = std::mem::replace(&mut self.err, std::thread::spawn(String::new));
        (status, out, err.join().unwrap())
    }
}

#[test]
fn trace_streams_every_event_of_a_transfer() {
    require_root();
    let _serial = serial();
    let _a = Attached::new("t_trace", &[]);
    let pair = Pair::new();
    let tracer = Tracer::start(&["trace", "--algo", "t_trace", "--per-ack"]);
    let t = Transfer::start(&pair, "t_trace", Some("t_trace"), 32 * MB, 32 * MB);
    t.resume();
    let (client, _) = t.finish();
    assert_eq!(client.bytes, 64 * MB);
    let (status, stdout, err) = tracer.stop();
    assert!(status.success(), "{err}");

    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The summary accounts for every event: seen + dropped = produced.
    let line = err.lines().find(|l| l.contains("events seen")).unwrap();
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    eprintln!("{line}");
    let (seen, dropped, produced) = (nums[0], nums[1], nums[2]);
    assert_eq!(seen + dropped, produced, "{line}");
    assert_eq!(events.len() as u64, seen, "{line}");
    let kind = |k: &str| events.iter().filter(|e| e["event"] == k).count();
    let mut kinds = std::collections::BTreeMap::new();
    for e in &events {
        *kinds.entry(e["event"].as_str().unwrap_or("?")).or_insert(0) += 1;
    }
    let line = format!("{line}; events by kind {kinds:?}");
    // Both ends of the connection start and end, and report on ACKs.
    assert_eq!(kind("start"), 2, "{line}");
    assert_eq!(kind("end"), 2, "{line}");
    assert!(kind("ack") > 100 && kind("window") > 10, "{line}");
    for e in &events {
        assert!(e["local"].as_str().unwrap().contains("198.18."), "{e}");
        assert!(e["cwnd"].as_u64().unwrap() > 0, "{e}");
    }
    // Timestamps are monotonic per CPU-drained batch and overall close.
    let ts: Vec<u64> = events
        .iter()
        .map(|e| e["ts_ns"].as_u64().unwrap())
        .collect();
    let span = ts.iter().max().unwrap() - ts.iter().min().unwrap();
    assert!(span < 10_000_000_000, "events span {span} ns");

    // Tracing is off again: a transfer now produces nothing.
    let before = Attached::listed(&_a)["events"].as_u64().unwrap();
    let t = Transfer::start(&pair, "t_trace", Some("t_trace"), 4 * MB, 4 * MB);
    t.resume();
    t.finish();
    assert_eq!(Attached::listed(&_a)["events"].as_u64().unwrap(), before);
}

/// What users script with: CSV into a file (-o), one side of the flow
/// (--flow dport=), per-ACK records sampled (--ack-every); every row
/// parses, names the filtered side, and the file holds every event seen.
#[test]
fn trace_writes_one_sides_sampled_acks_as_csv_to_a_file() {
    require_root();
    let _serial = serial();
    let _a = Attached::new("t_tcsv", &[]);
    let pair = Pair::new();
    let file = std::env::temp_dir().join(format!("t_tcsv-{}.csv", std::process::id()));
    let flow = format!("dport={PORT}");
    let tracer = Tracer::start(&[
        "trace",
        "--algo",
        "t_tcsv",
        "--per-ack",
        "--ack-every",
        "4",
        "--format",
        "csv",
        "--flow",
        &flow,
        "-o",
        file.to_str().unwrap(),
    ]);
    // 48 MB: 15-27 ACK rows in 12 runs at 16 MB, and once (a busy fast
    // tier, 2026-12-02) 10 or fewer.
    let t = Transfer::start(&pair, "t_tcsv", Some("t_tcsv"), 48 * MB, 48 * MB);
    t.resume();
    t.finish();
    let (status, stdout, err) = tracer.stop();
    assert!(status.success(), "{err}");
    assert!(stdout.is_empty(), "-o still wrote to stdout");
    let text = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&header[..5], ["ts_ns", "event", "netns", "local", "remote"]);
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (event, remote) = (col("event"), col("remote"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == header.len()), "ragged rows");
    // Only the client's side: its peer is the server's port.
    for r in &rows {
        assert!(r[remote].ends_with(&format!(":{PORT}")), "{r:?}");
    }
    // ACK rows of that side too (cwnd on the ACKs that reach cong_avoid,
    // one in four of them).
    let ack_rows = rows.iter().filter(|r| r[event] == "ack").count();
    eprintln!("{ack_rows} ACK rows of {}", rows.len());
    assert!(ack_rows > 10, "too few ACK rows: {ack_rows} of {}", rows.len());
    // One ACK in four, exactly: the socket's ACK count steps by 4 from row
    // to row (the ring refused nothing, see below).
    let (local, acks) = (col("local"), col("acks"));
    let mut last: std::collections::HashMap<&str, u64> = Default::default();
    for r in rows.iter().filter(|r| r[event] == "ack") {
        let n: u64 = r[acks].parse().unwrap();
        assert_eq!(n % 4, 0, "{r:?}");
        if let Some(prev) = last.insert(r[local], n) {
            assert_eq!(n - prev, 4, "sampling skipped or repeated ACKs: {r:?}");
        }
    }
    // Every event the filter let through is in the file, and fewer than
    // were seen (the server's side went).
    let line = err.lines().find(|l| l.contains("events seen")).unwrap();
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let (seen, dropped, written) = (nums[0], nums[1], nums[3]);
    assert_eq!(dropped, 0, "{line}");
    assert_eq!(rows.len() as u64, written, "{line}");
    assert!(written < seen, "{line}");
}

/// A reader that goes away (`loader trace | head -1`) ends the trace:
/// the tracer exits on its own and tracing is off again.
#[test]
fn trace_ends_when_its_reader_goes_away() {
    use std::io::BufRead;
    require_root();
    let _serial = serial();
    let a = Attached::new("t_tpipe", &[]);
    let pair = Pair::new();
    let mut tracer = Tracer::start(&["trace", "--algo", "t_tpipe", "--per-ack"]);
    let stdout = tracer.stdout();
    let t = Transfer::start(&pair, "t_tpipe", Some("t_tpipe"), 8 * MB, 8 * MB);
    t.resume();
    let mut first = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("\"event\""), "{first}");
    // The reader is gone now (dropped); more events make the next write fail.
    t.finish();
    let t = Transfer::start(&pair, "t_tpipe", Some("t_tpipe"), 8 * MB, 8 * MB);
    t.resume();
    t.finish();
    let (status, _, err) = tracer.wait_exit(10);
    assert!(status.success(), "{status}: {err}");
    let before = a.listed()["events"].as_u64().unwrap();
    let t = Transfer::start(&pair, "t_tpipe", Some("t_tpipe"), 4 * MB, 4 * MB);
    t.resume();
    t.finish();
    assert_eq!(
        a.listed()["events"].as_u64().unwrap(),
        before,
        "tracing still on"
    );
}

/// An algorithm detached under its tracer (a lab's, when the lab ends)
/// ends the trace: the tracer drains what was produced, accounts for every
/// event and exits 0 on its own.
#[test]
fn trace_ends_when_its_algorithm_is_detached() {
    require_root();
    let _serial = serial();
    let a = Attached::new("t_tdet", &[]);
    let pair = Pair::new();
    let tracer = Tracer::start(&["trace", "--algo", "t_tdet"]);
    let t = Transfer::start(&pair, "t_tdet", Some("t_tdet"), 4 * MB, 4 * MB);
    t.finish();
    loader_ok(&["detach", "t_tdet"]);
    std::mem::forget(a);
    let (status, stdout, err) = tracer.wait_exit(10);
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("t_tdet was detached"), "{err}");
    // Every event produced was seen: the counts came from the map the
    // tracer opened, not from the pin the detach removed.
    let line = err.lines().find(|l| l.contains("events seen")).expect(&err);
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(n[0] > 0 && n[0] + n[1] == n[2], "{line}");
    assert_eq!(stdout.lines().count() as u64, n[0], "{line}");
}

#[test]
fn trace_refuses_bad_input_clearly() {
    require_root();
    let _serial = serial();
    // Without --algo it traces the one attached algorithm, and says so when
    // there is none (this suite attaches only t_ names, detached after).
    let attached = loader_ok(&["list", "--json"]);
    if attached.trim() == "[]" {
        let out = loader(&["trace"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("no algorithm is attached"),
            "{}",
            stderr(&out)
        );
    }
    for (args, says) in [
        (
            vec!["trace", "--algo", "t_nosuch"],
            "no algorithm named `t_nosuch`",
        ),
        (
            vec!["trace", "--algo", "t_x", "--flow", "dport"],
            "not key=value",
        ),
        (
            vec!["trace", "--algo", "t_x", "--flow", "proto=udp"],
            "unknown key `proto`",
        ),
        (
            vec!["trace", "--algo", "t_x", "--ack-every", "0"],
            "ack-every",
        ),
        (
            vec!["trace", "--algo", "t_x", "--format", "xml"],
            "invalid value 'xml'",
        ),
    ] {
        let out = loader(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    // A second tracer of the same algorithm is refused while one runs.
    let _a = Attached::new("t_trace2", &[]);
    let mut first = Tracer::start(&["trace", "--algo", "t_trace2", "--duration", "3"]);
    let second = loader(&["trace", "--algo", "t_trace2", "--duration", "1"]);
    assert_eq!(second.status.code(), Some(1), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("already being traced"),
        "{}",
        stderr(&second)
    );
    assert!(first.finish_output().0.success());
}

/// With nobody draining, the ring fills and the programs count what it
/// refused; a tracer that takes over discards the stale ring and accounts
/// only for its own events.
#[test]
fn a_full_ring_counts_its_drops_and_take_over_starts_clean() {
    require_root();
    let _serial = serial();
    let a = Attached::new("t_full", &[]);
    let pair = Pair::new();
    pair.offloads_off();
    // Switch per-ACK tracing on behind loader's back, as a killed tracer
    // would leave it: flags = window | ack, ack_every = 1.
    let pin = "/sys/fs/bpf/dctcp-bpf/t_full/trace";
    let st = Command::new("bpftool")
        .args(["map", "update", "pinned", pin, "key", "0", "0", "0", "0"])
        .args(["value", "3", "0", "0", "0", "1", "0", "0", "0"])
        .status()
        .unwrap();
    assert!(st.success(), "bpftool map update {pin}");
    let t = Transfer::start(&pair, "t_full", Some("t_full"), 512 * MB, 512 * MB);
    t.resume();
    t.finish();
    let l = a.listed();
    let (events, dropped) = (
        l["events"].as_u64().unwrap(),
        l["events_dropped"].as_u64().unwrap(),
    );
    eprintln!("undrained: {events} produced, {dropped} dropped");
    // 8 MiB holds 80,659 events of 104 bytes (plus an 8-byte header each).
    assert!(dropped > 0 && events > dropped, "{l}");
    assert!(events - dropped <= (8 << 20) / 112, "{l}");

    // A plain tracer refuses: tracing is on. --take-over starts from a
    // quiet, emptied ring.
    let refused = loader(&["trace", "--algo", "t_full", "--duration", "1"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let out = loader(&[
        "trace",
        "--algo",
        "t_full",
        "--duration",
        "1",
        "--take-over",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        0,
        "stale events were written"
    );
    assert!(
        stderr(&out).contains("0 events seen, 0 dropped (ring full), 0 produced"),
        "{}",
        stderr(&out)
    );
    assert_eq!(a.listed()["events"].as_u64().unwrap(), events);
}
