//! `loader serve` for real: the binary serving an attached instance with a
//! live DCTCP flow between two namespaces, scraped over HTTP, through a
//! detach under it; and its refusals of a bad address, a taken port and a
//! malformed [metrics] table.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

const MB: u64 = 1 << 20;

/// A running `loader serve`, killed (SIGTERM, as systemd and the kubelet
/// stop it) when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Serve {
    fn start() -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_loader"))
            .args(["serve", "--metrics", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "serving http://127.0.0.1:PORT/metrics (health: /healthz)"
        let addr = line
            .strip_prefix("serving http://")
            .and_then(|r| r.split('/').next())
            .unwrap_or_else(|| panic!("first line: {line:?}"))
            .parse()
            .unwrap();
        Serve { child, addr }
    }

    /// (status, body) of `method path`.
    fn request(&self, method: &str, path: &str) -> (u16, String) {
        http(self.addr, method, path).unwrap_or_else(|| panic!("{method} {path}: no answer"))
    }

    fn stop(mut self) -> Option<i32> {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status.code()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of the sample `series` (name and labels as written).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split(' ').next()?.parse().ok())
}

#[test]
fn serve_counts_a_live_flow_and_keeps_serving_through_a_detach() {
    require_root();
    let a = Attached::new("t_met", &[]);
    let serve = Serve::start();
    let (code, body) = serve.request("GET", "/healthz");
    assert_eq!((code, body.as_str()), (200, "ok\n"));
    assert_eq!(serve.request("POST", "/metrics").0, 405);
    assert_eq!(serve.request("GET", "/").0, 404);

    let pair = Pair::new();
    let t = Transfer::start(&pair, "t_met", Some("t_met"), 32 * MB, 8 * MB);
    t.wait_paused();
    let (code, m) = serve.request("GET", "/metrics?x=1");
    assert_eq!(code, 200, "{m}");
    assert!(!m.contains(".."), "HELP ends in one full stop: {m}");
    let l = r#"{algorithm="dctcp",name="t_met"}"#;
    let v = |name: &str| {
        sample(&m, &format!("dctcp_bpf_{name}{l}")).unwrap_or_else(|| panic!("{name}:\n{m}"))
    };
    // Both ends of the connection were initialised with t_met and are
    // established, each with an alpha.
    assert!(v("flows_started_total") >= 2.0, "{m}");
    assert!(v("sockets") >= 2.0, "{m}");
    assert_eq!(v("alpha_count"), 2.0, "{m}");
    assert!(v("alpha_updates_total") > 0.0, "{m}");
    assert_eq!(v("registered"), 1.0);
    // No switch marks on a bare veth pair: nothing echoed, no reduction.
    assert_eq!(v("ce_echoed_ratio"), 0.0, "{m}");
    assert_eq!(v("guard_ssthresh_repairs_total"), 0.0, "{m}");
    assert!(m.contains("# HELP dctcp_bpf_window_reductions "), "{m}");

    // Detached under the server: the instance leaves the scrape, the
    // server stays.
    drop(a);
    let (code, m) = serve.request("GET", "/metrics");
    assert_eq!(code, 200, "{m}");
    assert!(!m.contains(r#"name="t_met""#), "{m}");
    assert_eq!(serve.request("GET", "/healthz").0, 200);
    t.resume();
    let (client, server) = t.finish();
    assert_eq!(server.bytes, 40 * MB);
    assert_eq!(client.ca_at_end, "t_met");
    assert_eq!(serve.stop(), Some(0), "SIGTERM ends it cleanly");
}

/// Sums `loader flows --json`'s delivered and CE-echoed packets over the
/// established flows of `name` (as the scrape must), once two reads 300 ms
/// apart agree: the paused transfers' last segments have been acknowledged.
fn settled_flows_of(name: &str) -> (Vec<serde_json::Value>, u64, u64) {
    let read = || {
        let flows: Vec<_> = flows_of(name)
            .into_iter()
            .filter(|f| f["tcp_state"] == "ESTAB" && f["fallback"] == false)
            .collect();
        let sum = |k: &str| flows.iter().map(|f| f[k].as_u64().unwrap()).sum::<u64>();
        let (d, ce) = (sum("delivered"), sum("delivered_ce"));
        (flows, d, ce)
    };
    let mut last = read();
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(300));
        let now = read();
        if (now.1, now.2) == (last.1, last.2) {
            return now;
        }
        last = now;
    }
    panic!(
        "{name}'s flows still delivering after 30 s: {:?}",
        (last.1, last.2)
    );
}

/// Through a marking switch, two instances' flows side by side: each
/// instance's alpha count and CE ratio are its own flows' alone (a socket
/// list holds only sockets of ours, so the other instance's flows are what
/// a wrong filter would add), and the pinned switch's counters are the
/// switch's.
#[test]
fn serve_reads_its_own_flows_marks_and_the_switch_beside_another_flow() {
    use netns_lab::net::topology::{Star, StarSpec, RECEIVER_ADDR};
    use tc_qdisc::{Bottleneck, BpfSwitch};
    require_root();
    let a = Attached::new("t_mce", &[]);
    let b2 = Attached::new("t_mce2", &[]);
    let star = Star::build(&StarSpec::senders(2)).unwrap();
    star.ecn_everywhere().unwrap();
    // 50 Mbit/s, K = 5: two bulk flows queue past K and are marked.
    let b = Bottleneck::step(50_000_000, 100, 5);
    b.install(star.switch.name(), &star.bottleneck_if).unwrap();
    let pins = Path::new(dctcp_utils::bpffs::LAB_ROOT).join(star.prefix.as_str());
    let sw = BpfSwitch::start(
        Some(&pins),
        b.backend.marker_config(b.buffer_pkts, 1),
        b.rate_bps,
        false,
        &star.switch.path(),
        &star.bottleneck_if,
        &star.receiver.ns.path(),
        &star.receiver.ifname,
    )
    .unwrap();
    let serve = Serve::start();
    let to = |port| SocketAddr::from((RECEIVER_ADDR, port));
    let rx = &star.receiver.ns;
    let ours = Transfer::between(
        &star.senders[0].ns,
        rx,
        to(5301),
        "t_mce",
        Some("t_mce"),
        8 * MB,
        MB,
    );
    let other = Transfer::between(
        &star.senders[1].ns,
        rx,
        to(5302),
        "t_mce2",
        Some("t_mce2"),
        8 * MB,
        MB,
    );
    ours.wait_paused();
    other.wait_paused();
    let mine: Vec<_> = ["t_mce", "t_mce2"].map(settled_flows_of).into();

    let (code, m) = serve.request("GET", "/metrics");
    assert_eq!(code, 200, "{m}");
    let v = |series: &str| sample(&m, series).unwrap_or_else(|| panic!("{series}:\n{m}"));
    for (name, (flows, delivered, ce)) in ["t_mce", "t_mce2"].iter().zip(&mine) {
        assert_eq!(flows.len(), 2, "both ends established: {flows:#?}");
        assert!(
            *ce > 0 && delivered > ce,
            "{name}: delivered {delivered}, CE-echoed {ce}"
        );
        let l = format!(r#"{{algorithm="dctcp",name="{name}"}}"#);
        let ratio = v(&format!("dctcp_bpf_ce_echoed_ratio{l}"));
        let want = *ce as f64 / *delivered as f64;
        assert!(
            (ratio - want).abs() < 1e-9,
            "{name}: ratio {ratio}, its flows' {want}"
        );
        assert_eq!(v(&format!("dctcp_bpf_alpha_count{l}")), 2.0, "{m}");
        eprintln!("{name}: {ce} of {delivered} echoed ({ratio:.4})");
    }
    let l = format!(r#"{{switch="{}"}}"#, star.prefix.as_str());
    let now = tc_qdisc::pins::read(&pins).unwrap().stats;
    for (name, want) in [
        ("packets_total", now.pkts),
        ("bytes_total", now.bytes),
        ("marked_total", now.marked),
        ("dropped_total", now.dropped),
    ] {
        assert_eq!(
            v(&format!("dctcp_bpf_switch_{name}{l}")),
            want as f64,
            "{name}"
        );
    }
    assert!(now.marked > 0 && now.pkts > now.marked, "{now:?}");
    eprintln!("switch: {} of {} marked", now.marked, now.pkts);

    let ((_, ours), (_, other)) = (ours.finish(), other.finish());
    assert_eq!((ours.bytes, other.bytes), (9 * MB, 9 * MB));
    assert_eq!(serve.stop(), Some(0));
    drop((sw, a, b2));
}

#[test]
fn serve_refuses_a_bad_address_a_taken_port_and_a_bad_table() {
    require_root();
    let out = loader(&["serve", "--metrics", "localhost"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = loader(&["serve", "--metrics", &addr]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("cannot listen on {addr}"))
            && stderr(&out).contains("pick another with --metrics"),
        "{}",
        stderr(&out)
    );

    let dir = std::env::temp_dir().join(format!("dctcp-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("attach.toml");
    for (table, says) in [
        (
            "[metrics]\nlisten = \"9842\"\n",
            "is not an address and port",
        ),
        ("[metrics]\nport = 9842\n", "unknown field `port`"),
    ] {
        std::fs::write(&file, format!("[[attach]]\nalgo = \"dctcp\"\n{table}")).unwrap();
        let out = loader(&["serve", "--config", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{table}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{table}: {}", stderr(&out));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// (status, body) of `method path` at `addr`; None when nothing answers.
fn http(addr: SocketAddr, method: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(s, "{method} {path} HTTP/1.0\r\nHost: test\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split(' ').nth(1)?.parse().ok()?;
    Some((status, out.split_once("\r\n\r\n")?.1.to_string()))
}

/// A GET over loopback inside `ns`: (status, body).
fn get_in(ns: &netns_lab::Netns, port: u16, path: &str) -> Option<(u16, String)> {
    let path = path.to_string();
    ns.run(move || http(SocketAddr::from(([127, 0, 0, 1], port)), "GET", &path))
        .unwrap()
}

/// The query string's encoding of `s` (RFC 3986 unreserved kept).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A PromQL instant query's single value; None when it selects nothing.
fn promql(ns: &netns_lab::Netns, expr: &str) -> Option<f64> {
    let (code, body) = get_in(ns, 9090, &format!("/api/v1/query?query={}", encode(expr)))?;
    assert_eq!(code, 200, "{expr}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let r = &v["data"]["result"];
    assert!(r.as_array().is_some_and(|a| a.len() <= 1), "{expr}: {body}");
    r[0]["value"][1].as_str()?.parse().ok()
}

/// Polls `expr` for up to `secs` until `ok` holds of its value.
fn wait_promql(ns: &netns_lab::Netns, expr: &str, secs: u64, ok: impl Fn(f64) -> bool) -> f64 {
    let until = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let v = promql(ns, expr);
        if let Some(v) = v.filter(|v| ok(*v)) {
            return v;
        }
        assert!(
            std::time::Instant::now() < until,
            "{expr}: {v:?} after {secs} s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn prometheus_scrapes_a_flow_and_keeps_scraping_through_a_detach() {
    require_root();
    let prometheus = std::path::Path::new("/usr/bin/prometheus");
    assert!(
        prometheus.exists(),
        "prometheus is not installed: setup.sh installs it (Debian's prometheus)"
    );
    let a = Attached::new("t_prom", &[]);
    let prefix = netns_lab::Prefix::unique().unwrap();
    let ns = netns_lab::Netns::create(&prefix.ns("pm")).unwrap();
    let dir = std::env::temp_dir().join(format!("dctcp-prom-{}", prefix.as_str()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("prometheus.yml"),
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n\
         scrape_configs:\n  - job_name: dctcp\n    static_configs:\n      - targets: ['127.0.0.1:9842']\n",
    )
    .unwrap();
    // Both in the lab namespace, on its own loopback; nsenter, so the
    // server still sees bpffs.
    let mut serve = ns
        .command(Path::new(env!("CARGO_BIN_EXE_loader")))
        .args(["serve", "--metrics", "127.0.0.1:9842"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut prom = ns
        .command(prometheus)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .args(["--web.listen-address=127.0.0.1:9090", "--log.level=warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let finish = |serve: &mut Child, prom: &mut Child| {
        for c in [serve, prom] {
            let _ = c.kill();
            let _ = c.wait();
        }
    };

    wait_promql(&ns, r#"up{job="dctcp"}"#, 30, |v| v == 1.0);
    let pair = Pair::new();
    let t = Transfer::start(&pair, "t_prom", Some("t_prom"), 32 * MB, 8 * MB);
    t.wait_paused();
    // alpha's histogram moved: from no flow to both ends of the connection.
    let count = r#"dctcp_bpf_alpha_count{name="t_prom"}"#;
    wait_promql(&ns, &format!("max_over_time({count}[5m])"), 20, |v| {
        v >= 2.0
    });
    assert_eq!(
        promql(&ns, &format!("min_over_time({count}[5m])")),
        Some(0.0)
    );
    // And the counters rose.
    let started = r#"dctcp_bpf_flows_started_total{name="t_prom"}"#;
    let rose = promql(
        &ns,
        &format!("max_over_time({started}[5m]) - min_over_time({started}[5m])"),
    );
    assert!(
        rose.is_some_and(|r| r >= 2.0),
        "flows started rose by {rose:?}"
    );
    let updates = promql(
        &ns,
        r#"max_over_time(dctcp_bpf_alpha_updates_total{name="t_prom"}[5m])"#,
    );
    assert!(updates.is_some_and(|u| u > 0.0), "{updates:?}");

    // Detached mid-scrape: the series go stale, the target stays up.
    drop(a);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        promql(&ns, r#"dctcp_bpf_sockets{name="t_prom"}"#),
        None,
        "a detached instance's series are stale"
    );
    assert_eq!(
        promql(&ns, r#"min_over_time(up{job="dctcp"}[4s])"#),
        Some(1.0)
    );
    assert_eq!(
        promql(&ns, r#"count_over_time(up{job="dctcp"}[4s])"#).map(|n| n >= 3.0),
        Some(true),
        "scrapes went on"
    );
    t.resume();
    let (_, server) = t.finish();
    assert_eq!(server.bytes, 40 * MB);
    finish(&mut serve, &mut prom);
    drop(ns);
    std::fs::remove_dir_all(&dir).unwrap();
}
