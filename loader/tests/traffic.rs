//! Real TCP between two namespaces over veth with the BPF algorithm on both
//! ends: what the sockets used, what `loader flows` showed, what went on the
//! wire.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;

const MB: u64 = 1 << 20;

#[test]
fn bulk_transfer_runs_bpf_dctcp_on_both_ends() {
    require_root();
    let a = Attached::new("t_bulk", &[]);
    let pair = Pair::new();
    let stop = Arc::new(AtomicBool::new(false));
    let capture = count_ecn_marks(&pair.server, &pair.server_if, PORT, stop.clone());

    let t = Transfer::start(&pair, "t_bulk", Some("t_bulk"), 64 * MB, 64 * MB);
    t.wait_paused();
    let flows = flows_of("t_bulk");
    let live = a.listed();
    // The human table shows the same two sockets; --all adds sockets of
    // other algorithms (a loopback connection of the default, here), which
    // the default view leaves out.
    let human = loader_ok(&["flows"]);
    assert!(
        human.contains(&format!("{SERVER_ADDR}:{PORT}")) && human.contains("t_bulk"),
        "{human}"
    );
    let lo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let lo_port = lo.local_addr().unwrap().port();
    let _lo_client = std::net::TcpStream::connect(("127.0.0.1", lo_port)).unwrap();
    let _lo_server = lo.accept().unwrap();
    let on_lo = |args: &[&str]| -> usize {
        let all: serde_json::Value = serde_json::from_str(&loader_ok(args)).unwrap();
        all.as_array()
            .unwrap()
            .iter()
            .filter(|f| f["local"] == format!("127.0.0.1:{lo_port}").as_str())
            .count()
    };
    assert!(
        on_lo(&["flows", "--all", "--json"]) >= 1,
        "--all misses the loopback socket"
    );
    assert_eq!(
        on_lo(&["flows", "--json"]),
        0,
        "the default view shows another algorithm's socket"
    );
    t.resume();
    let (client, server) = t.finish();
    stop.store(true, Ordering::Relaxed);
    let (data, ect) = capture.join().unwrap().unwrap();
    eprintln!("captured {data} data segments, {ect} with ECT");

    assert_eq!(client.bytes, 128 * MB);
    assert_eq!(server.bytes, 128 * MB, "receiver got every byte");
    for end in [&client, &server] {
        assert_eq!(end.ca_at_start, "t_bulk");
        assert_eq!(end.ca_at_end, "t_bulk");
    }

    // Both sockets were visible, in their namespaces, mid-transfer.
    assert_eq!(flows.len(), 2, "loader flows while running: {flows:#?}");
    let sender = flows
        .iter()
        .find(|f| {
            f["local"]
                == format!(
                    "{CLIENT_ADDR}:{}",
                    f["local"].as_str().unwrap().rsplit(':').next().unwrap()
                )
                .as_str()
        })
        .expect("client socket");
    assert_eq!(sender["netns"], pair.client.name());
    assert_eq!(sender["remote"], format!("{SERVER_ADDR}:{PORT}"));
    assert_eq!(sender["fallback"], false);
    assert_eq!(sender["ecn"], true);
    // RFC 3168's feedback: the pair's namespaces ask for classic ECN.
    assert_eq!(sender["ecn_mode"], "rfc3168");
    assert!(sender["cwnd"].as_u64().unwrap() >= 2);
    assert!(sender["bytes_acked"].as_u64().unwrap() >= 32 * MB);
    // No switch marks here: alpha decays from 1.0 once a window completes,
    // which only our in_ack_event can have done.
    let alpha = sender["alpha"].as_u64().expect("alpha shown");
    assert!(alpha < 1 << 20, "alpha (1/2^20) never updated: {sender}");
    assert!(sender["ab_tot"].is_u64() && sender["ce_state"].is_u64());
    assert!(flows.iter().any(|f| f["netns"] == pair.server.name()));

    // DCTCP's data segments carry ECT on the wire.
    assert!(data >= 20, "captured only {data} data segments");
    assert!(
        ect * 100 >= data * 99,
        "{ect} of {data} data segments carried ECT"
    );

    assert_eq!(live["sockets"], 2, "both ends counted while open: {live}");
    let listed = a.listed();
    assert!(listed["inits"].as_u64().unwrap() >= 2, "{listed}");
    assert!(listed["alpha_updates"].as_u64().unwrap() > 0, "{listed}");
    assert_eq!(listed["fallbacks"], 0);
    // Closed sockets leave the count through .release.
    assert!(
        (0..50).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(40));
            a.listed()["sockets"] == 0
        }),
        "sockets still counted after close: {}",
        a.listed()
    );
}

#[test]
fn without_ecn_the_flow_falls_back_to_reno_and_stops_sending_ect() {
    require_root();
    let a = Attached::new("t_fb", &[]);
    let pair = Pair::new();
    // A receiver that will not negotiate ECN.
    pair.server.sysctl("net.ipv4.tcp_ecn", "0").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let capture = count_ecn_marks(&pair.server, &pair.server_if, PORT, stop.clone());

    let t = Transfer::start(&pair, "t_fb", None, 16 * MB, 16 * MB);
    t.wait_paused();
    let flows = flows_of(&a.fallback());
    let listed = a.listed();
    let (client, server) = t.finish();
    stop.store(true, Ordering::Relaxed);
    let (data, ect) = capture.join().unwrap().unwrap();
    eprintln!("captured {data} data segments, {ect} with ECT");

    assert_eq!(server.bytes, 32 * MB);
    assert_eq!(
        client.ca_at_start, "t_fb_reno",
        "the client moved to the fallback"
    );
    assert_eq!(flows.len(), 1, "{flows:#?}");
    assert_eq!(flows[0]["fallback"], true);
    assert_eq!(flows[0]["ecn"], false);
    assert_eq!(flows[0]["ecn_mode"], "off");
    assert!(flows[0]["alpha"].is_null());
    assert_eq!(listed["fallbacks"], 1);
    assert_eq!(
        listed["fallback_sockets"], 1,
        "one live fallback socket mid-transfer"
    );
    assert_eq!(listed["sockets"], 0);
    // The switch to a non-ECN algorithm cleared ECT from the socket: a
    // marking switch must drop these packets, not mark them.
    assert!(data >= 20, "captured only {data} data segments");
    assert_eq!(
        ect, 0,
        "{ect} of {data} data segments still carried ECT after fallback"
    );
}

/// Issue 37's flow with no `init`: when the kernel refuses the switch to
/// `<name>_reno` (here: unregistered, by unpinning its link), the socket
/// stays on DCTCP's ops with no DCTCP state. Left there it would send ECT
/// (the kernel sets it after `.init` for an algorithm that needs ECN) to a
/// receiver that never echoes CE: a flow a marking switch marks and nothing
/// slows. It must go to the kernel's own Reno instead, without ECT, and
/// the refusal must be counted.
#[test]
fn a_refused_fallback_lands_on_the_kernels_reno_and_is_counted() {
    require_root();
    let a = Attached::new("t_fbr", &[]);
    // Unregister the fallback the way it is held: unpin its link, or (map
    // mode, before 6.4) delete its struct_ops map's one element.
    let dir = dctcp_utils::bpffs::InstanceDir::new(&a.name);
    if dir.fallback_link().exists() {
        std::fs::remove_file(dir.fallback_link()).unwrap();
    } else {
        use libbpf_rs::MapCore as _;
        libbpf_rs::MapHandle::from_pinned_path(dir.fallback_ops())
            .unwrap()
            .delete(&0u32.to_ne_bytes())
            .unwrap();
    }
    assert!(
        (0..50).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            !registered(&a.fallback())
        }),
        "{} still registered after its link was unpinned",
        a.fallback()
    );
    let pair = Pair::new();
    pair.server.sysctl("net.ipv4.tcp_ecn", "0").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let capture = count_ecn_marks(&pair.server, &pair.server_if, PORT, stop.clone());

    let t = Transfer::start(&pair, "t_fbr", None, 16 * MB, 16 * MB);
    t.wait_paused();
    let listed = a.listed();
    let (client, server) = t.finish();
    stop.store(true, Ordering::Relaxed);
    let (data, ect) = capture.join().unwrap().unwrap();
    eprintln!(
        "captured {data} data segments, {ect} with ECT; client ran {}",
        client.ca_at_start
    );

    assert_eq!(server.bytes, 32 * MB);
    assert_eq!(
        client.ca_at_start, "reno",
        "the client moved to the kernel's Reno"
    );
    assert_eq!(listed["fallback_refused"], 1, "{listed}");
    assert_eq!(listed["fallbacks"], 0, "{listed}");
    let text = loader_ok(&["list"]);
    assert!(
        text.contains("1 flows without ECN were refused t_fbr_reno"),
        "{text}"
    );
    assert!(data >= 20, "captured only {data} data segments");
    assert_eq!(ect, 0, "{ect} of {data} data segments carried ECT");
    // Detach finds the fallback already gone and still removes everything.
    loader_ok(&["detach", "t_fbr"]);
    std::mem::forget(a);
    assert!(!dir.path.exists(), "{} left behind", dir.path.display());
}

#[test]
fn detach_while_a_flow_runs_lets_it_complete() {
    require_root();
    let a = Attached::new("t_det", &[]);
    let pair = Pair::new();
    let t = Transfer::start(&pair, "t_det", Some("t_det"), 32 * MB, 64 * MB);
    t.wait_paused();
    assert_eq!(flows_of("t_det").len(), 2);
    loader_ok(&["detach", "t_det"]);
    std::mem::forget(a);
    assert!(!registered("t_det"));
    let (client, server) = t.finish();
    assert_eq!(server.bytes, 96 * MB, "the flow completed after detach");
    // The sockets kept the algorithm they had; only new sockets lose it.
    assert_eq!(client.ca_at_end, "t_det");
}

/// Issue 20: what an operator does to a live algorithm, done while eight
/// of its connections are mid-transfer (each has sent its first 4 MB and
/// waits to send the rest): every tunable changed (`loader set`), a second
/// instance attached under another name and detached again, then the
/// instance itself detached. Then the flows send their second half: every
/// flow completes, every byte arrives, and each socket keeps the algorithm
/// it started with. (Done while paused, not while bytes move: a fast
/// machine finishes the transfers before the loader's commands do, a slow
/// one does not, and the test must not depend on which.)
#[test]
fn eight_flows_survive_set_a_second_attach_and_detach() {
    require_root();
    const FLOWS: u16 = 8;
    const SECOND: u64 = 64 * MB;
    let a = Attached::new("t_load", &[]);
    let pair = Pair::new();
    let transfers: Vec<Transfer> = (0..FLOWS)
        .map(|i| {
            Transfer::start_on(
                &pair,
                PORT + 1 + i,
                "t_load",
                Some("t_load"),
                4 * MB,
                SECOND,
            )
        })
        .collect();
    for t in &transfers {
        t.wait_paused();
    }
    // Each end is listed once its socket has the algorithm; the last
    // accept can trail the senders' pause (Debian 6.1's VM, 2026-12-05: 15
    // of 16 at the first look), so look again for up to 5 s.
    let both_ends = 2 * usize::from(FLOWS);
    let mut seen = flows_of("t_load").len();
    for _ in 0..50 {
        if seen >= both_ends {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        seen = flows_of("t_load").len();
    }
    assert_eq!(seen, both_ends, "both ends of each flow");
    let out = loader_ok(&["set", "t_load", "shift_g=6", "alpha_on_init=512", "guard=1"]);
    assert!(out.contains("shift_g=6"), "{out}");
    let b = Attached::new("t_load2", &["--param", "shift_g=3"]);
    assert!(registered("t_load2"));
    loader_ok(&["set", "t_load", "shift_g=4", "alpha_on_init=1024"]);
    loader_ok(&["detach", "t_load2"]);
    std::mem::forget(b);
    assert_eq!(
        flows_of("t_load").len(),
        both_ends,
        "a flow lost its algorithm"
    );
    loader_ok(&["detach", "t_load"]);
    std::mem::forget(a);
    assert!(!registered("t_load") && !registered("t_load2"));
    for t in transfers {
        let (client, server) = t.finish();
        assert_eq!(server.bytes, 4 * MB + SECOND, "a flow lost bytes");
        assert_eq!(
            (client.ca_at_end.as_str(), server.ca_at_end.as_str()),
            ("t_load", "t_load")
        );
    }
}

#[test]
fn parameters_set_live_reach_new_flows() {
    require_root();
    let _a = Attached::new("t_live", &["--param", "alpha_on_init=1024"]);
    loader_ok(&["set", "t_live", "alpha_on_init=600"]);
    let pair = Pair::new();
    // Pause before any data: no window has ended, so the sender's alpha is
    // still the alpha_on_init its init read.
    let t = Transfer::start(&pair, "t_live", Some("t_live"), 0, 4 * MB);
    t.wait_paused();
    let flows = flows_of("t_live");
    let (_, server) = t.finish();
    assert_eq!(server.bytes, 4 * MB);
    let sender = flows
        .iter()
        .find(|f| f["netns"] == pair.client.name())
        .expect("client socket");
    // Flows report alpha in 1/2^20; alpha_on_init is in 1/1024.
    assert_eq!(sender["alpha"], 600 << 10, "{sender}");
}

/// `loader attach --algo prague` in a namespace of its own puts the ECT(1)
/// program on that namespace's interfaces that are up (loopback aside): every data
/// segment of a prague flow then arrives ECT(1); `loader detach` leaves no
/// program on the interface and no pin.
#[test]
fn prague_sends_ect1_from_the_namespace_it_was_attached_in_and_detach_removes_it() {
    require_root();
    if !kernel_at_least(6, 10) {
        eprintln!("SKIP: prague needs Linux 6.10");
        return;
    }
    let pair = Pair::new();
    let loader_in = |args: &[&str]| {
        pair.client
            .command(std::path::Path::new(env!("CARGO_BIN_EXE_loader")))
            .args(args)
            .output()
            .unwrap()
    };
    // A veth pair left down beside the client's interface: only interfaces
    // that are up get the program.
    let down = pair
        .client
        .command(std::path::Path::new("ip"))
        .args(["link", "add", "t_down0", "type", "veth", "peer", "name", "t_down1"])
        .status()
        .unwrap();
    assert!(down.success());
    let out = loader_in(&["attach", "--algo", "prague", "--name", "t_pr"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let tcx = |ns: &netns_lab::Netns, dev: &str| -> String {
        let o = ns
            .command(std::path::Path::new("bpftool"))
            .args(["net", "show", "dev", dev])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    assert!(tcx(&pair.client, &pair.client_if).contains("prague_ect1"));
    assert!(!tcx(&pair.client, "t_down0").contains("prague_ect1"));
    assert!(!tcx(&pair.server, &pair.server_if).contains("prague_ect1"));

    let stop = Arc::new(AtomicBool::new(false));
    let capture = count_codepoints(&pair.server, &pair.server_if, PORT, stop.clone());
    let t = Transfer::start(&pair, "t_pr", Some("t_pr"), 8 * MB, 8 * MB);
    t.wait_paused();
    // `loader flows` shows Prague's window, mode, codepoint and pacing.
    let flows = flows_of("t_pr");
    assert_eq!(flows.len(), 2, "{flows:#?}");
    for f in &flows {
        assert_eq!(f["ect"], "ECT(1)", "{f}");
        assert!(["window", "rate"].contains(&f["mode"].as_str().unwrap()), "{f}");
        assert!(f["frac_cwnd"].as_f64().unwrap() > 0.0, "{f}");
    }
    assert!(
        flows.iter().any(|f| f["pacing_rate_bps"].as_u64().unwrap() > 0),
        "no pacing: {flows:#?}"
    );
    t.resume();
    let (client, server) = t.finish();
    stop.store(true, Ordering::Relaxed);
    let [not_ect, ect1, ect0, ce] = capture.join().unwrap().unwrap();
    eprintln!("data segments: {ect1} ECT(1), {ect0} ECT(0), {not_ect} Not-ECT, {ce} CE");
    assert_eq!((client.bytes, server.bytes), (16 * MB, 16 * MB));
    assert_eq!((client.ca_at_end.as_str(), server.ca_at_end.as_str()), ("t_pr", "t_pr"));
    // The client's data (to PORT): all of it ECT(1), nothing left ECT(0).
    assert!(ect1 >= 20, "{ect1} ECT(1) data segments");
    assert_eq!((not_ect, ect0, ce), (0, 0, 0));
    // The program counted at least what arrived (GRO may merge segments
    // the capture then sees as one).
    let listed: serde_json::Value = serde_json::from_str(&loader_ok(&["list", "--json"])).unwrap();
    let mine = listed.as_array().unwrap().iter().find(|i| i["name"] == "t_pr").unwrap();
    assert!(mine["ect1_packets"].as_u64().unwrap() >= ect1, "{mine}");

    // Detach takes the program off even while another process holds its
    // link open (as bpftool or a dashboard may): it detaches the link
    // itself, not only its pin.
    let pins = std::path::Path::new("/sys/fs/bpf/dctcp-bpf/t_pr");
    let link_pin = std::fs::read_dir(pins)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("ect1_link_"))
        .expect("the ECT(1) link's pin");
    let held = libbpf_rs::Link::open(&link_pin).unwrap();
    let out = loader_in(&["detach", "t_pr"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!tcx(&pair.client, &pair.client_if).contains("prague"));
    assert!(!pins.exists());
    drop(held);

    // Named with --ect1-dev, the program goes on that interface alone,
    // up or not.
    let out = loader_in(&["attach", "--algo", "prague", "--name", "t_pr", "--ect1-dev", "t_down0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(tcx(&pair.client, "t_down0").contains("prague_ect1"));
    assert!(!tcx(&pair.client, &pair.client_if).contains("prague_ect1"));
    let out = loader_in(&["detach", "t_pr"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!tcx(&pair.client, "t_down0").contains("prague"));
}

/// A bad --ect1-dev or Prague parameter is refused before anything loads.
#[test]
fn prague_refuses_bad_devices_and_parameters_before_loading() {
    require_root();
    for args in [
        &["--ect1-dev", "no_such_dev0"][..],
        &["--param", "mode=fast"],
        &["--param", "rtt_target_us=50"],
        &["--param", "shift_g=4"],
    ] {
        let mut all = vec!["attach", "--algo", "prague", "--name", "t_prbad"];
        all.extend_from_slice(args);
        let out = loader(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(!registered("t_prbad"), "{args:?}");
        assert!(!std::path::Path::new("/sys/fs/bpf/dctcp-bpf/t_prbad").exists());
    }
    let out = loader(&["attach", "--algo", "dctcp", "--name", "t_prbad", "--ect1-dev", "lo"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("prague only"), "{}", stderr(&out));
}
