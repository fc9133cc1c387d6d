//! `rpcgen` on its own, in a namespace of its own: exact byte and request
//! counts on both sides, latency against a known service time, clean
//! shutdown, and bad input refused.

mod common;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{require_root, serial};
use netns_lab::{Netns, Prefix};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rpcgen");

struct Lab {
    ns: Netns,
    _prefix: Prefix,
}

impl Lab {
    fn new() -> Lab {
        let p = Prefix::unique().unwrap();
        let ns = Netns::create(&p.ns("rpc")).unwrap();
        Lab { ns, _prefix: p }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net={}", self.ns.path().display()))
            .arg(BIN)
            .args(args);
        c
    }

    fn workers(&self, ports: &[u16], extra: &[&str]) -> Workers {
        let w: Vec<Child> = ports
            .iter()
            .map(|p| {
                let listen = format!("127.0.0.1:{p}");
                let mut args = vec!["worker", "--listen", &listen];
                args.extend_from_slice(extra);
                self.cmd(&args)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        Workers(w)
    }

    fn client(&self, args: &[&str]) -> Output {
        let mut all = vec!["client"];
        all.extend_from_slice(args);
        self.cmd(&all).output().unwrap()
    }
}

fn report(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// rpcgen workers, killed when dropped: a test that fails before `stop`
/// leaves none behind (they would keep the deleted namespace alive).
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.0 {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// SIGTERM each worker; each must exit 0 within a second and say what it served.
fn stop(mut workers: Workers) -> Vec<Value> {
    use std::io::Read;
    workers
        .0
        .iter_mut()
        .map(|w| {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
            let t = Instant::now();
            let mut out = Vec::new();
            w.stdout.take().unwrap().read_to_end(&mut out).unwrap();
            let status = w.wait().unwrap();
            assert!(
                t.elapsed() < Duration::from_secs(1),
                "worker took {:?} to stop",
                t.elapsed()
            );
            assert!(status.success(), "worker exited with {status}");
            serde_json::from_slice(&out).unwrap()
        })
        .collect()
}

fn sum(v: &[Value], key: &str) -> u64 {
    v.iter().map(|w| w[key].as_u64().unwrap()).sum()
}

#[test]
fn every_request_and_byte_is_counted_once_on_both_sides() {
    require_root();
    let _serial = serial();
    let lab = Lab::new();
    let workers = lab.workers(&[7000, 7001, 7002], &[]);
    let to = "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002";

    // Incast: 50 rounds, one 10 KB response from each of the 3 workers.
    let r = report(&lab.client(&[
        "--connect",
        to,
        "--resp",
        "10000",
        "--req",
        "100",
        "--rounds",
        "50",
    ]));
    assert_eq!(
        (
            r["sent"].as_u64(),
            r["completed"].as_u64(),
            r["failed"].as_u64()
        ),
        (Some(150), Some(150), Some(0))
    );
    assert_eq!(r["response_bytes"], 1_500_000);
    assert_eq!(r["request_bytes"], 15_000);
    assert_eq!(r["round_us"].as_array().unwrap().len(), 50);
    assert_eq!(r["latency_us"]["10000"]["count"], 150);

    // Open loop: Poisson at 200/s for 2 s over a 10 KB / 1 MB mix.
    let r2 = report(&lab.client(&[
        "--connect",
        to,
        "--resp",
        "10000:0.9,1000000:0.1",
        "--rate",
        "200",
        "--duration",
        "2",
    ]));
    let sent = r2["sent"].as_u64().unwrap();
    // 400 expected, Poisson sd 20.
    assert!((320..=480).contains(&sent), "{sent}");
    assert_eq!(r2["completed"].as_u64(), Some(sent));
    let (small, big) = (
        r2["latency_us"]["10000"]["count"].as_u64().unwrap(),
        r2["latency_us"]["1000000"]["count"].as_u64().unwrap(),
    );
    assert_eq!(small + big, sent);
    assert!(
        (big as f64 / sent as f64 - 0.1).abs() < 0.05,
        "{big} of {sent} were 1 MB"
    );
    assert_eq!(
        r2["response_bytes"].as_u64(),
        Some(small * 10_000 + big * 1_000_000)
    );

    // The workers served exactly that, no request lost or answered twice.
    let served = stop(workers);
    assert_eq!(sum(&served, "requests"), 150 + sent);
    assert_eq!(
        sum(&served, "response_bytes"),
        1_500_000 + small * 10_000 + big * 1_000_000
    );
    assert_eq!(sum(&served, "request_bytes"), 15_000);
}

#[test]
fn latency_follows_a_known_service_time() {
    require_root();
    let _serial = serial();
    let lab = Lab::new();
    let workers = lab.workers(&[7100, 7101], &["--delay-ms", "20"]);
    let r = report(&lab.client(&[
        "--connect",
        "127.0.0.1:7100,127.0.0.1:7101",
        "--resp",
        "1000",
        "--rounds",
        "20",
    ]));
    let l = &r["latency_us"]["1000"];
    let (p50, max) = (l["p50"].as_u64().unwrap(), l["max"].as_u64().unwrap());
    // 20 ms of service time plus a loopback round trip: never less, and at
    // the median well short of 30 ms (a stall of the machine moves single
    // requests, not the median).
    assert!((20_000..30_000).contains(&p50), "p50 {p50} us");
    assert!(max >= 20_000, "max {max} us");
    // Both workers answer in parallel: a round is one service time, never
    // less, and at the median under two (what answering in turn would take).
    let mut rounds: Vec<u64> = r["round_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    rounds.sort_unstable();
    assert!(rounds[0] >= 20_000, "{rounds:?}");
    assert!(rounds[rounds.len() / 2] < 40_000, "{rounds:?}");
    stop(workers);
}

#[test]
fn bad_input_is_refused_with_the_valid_range() {
    require_root();
    let lab = Lab::new();
    let to = "127.0.0.1:7200";
    for (args, expect) in [
        (
            &["--connect", to, "--resp", "0", "--rounds", "1"][..],
            "1 to 1073741824",
        ),
        (
            &["--connect", to, "--resp", "10:x", "--rounds", "1"],
            "a weight is a number",
        ),
        (
            &["--connect", to, "--resp", "10", "--rounds", "0"],
            "--rounds 0",
        ),
        (
            &[
                "--connect",
                to,
                "--resp",
                "10",
                "--rate",
                "0",
                "--duration",
                "1",
            ],
            "--rate 0",
        ),
        (
            &[
                "--connect",
                to,
                "--resp",
                "10",
                "--rate",
                "5",
                "--duration",
                "0",
            ],
            "--duration",
        ),
        (
            &[
                "--connect",
                to,
                "--resp",
                "10",
                "--rate",
                "5",
                "--duration",
                "1",
                "--connections",
                "0",
            ],
            "--connections 0",
        ),
        (
            &["--connect", to, "--resp", "10"],
            "--rounds N (incast) or --rate R",
        ),
        (
            &["--connect", "nowhere", "--resp", "10", "--rounds", "1"],
            "invalid socket address",
        ),
    ] {
        let o = lab.client(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(expect),
            "{args:?}: expected `{expect}` in {err}"
        );
    }
    let o = lab
        .cmd(&["worker", "--listen", to, "--delay-ms", "-1"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Nobody listening: a clear failure, exit 1.
    let o = lab.client(&["--connect", to, "--resp", "10", "--rounds", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("connecting to worker 127.0.0.1:7200"));
}
