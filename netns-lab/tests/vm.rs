//! The stock-kernel tier: the kernel qdisc backends (red, fq_codel), netem
//! delay and the kernel's own dctcp beside bpf_dctcp. These need a kernel
//! with sch_red, fq_codel, sch_netem and tcp_dctcp: `just vm-test` runs them
//! (`--include-ignored`) inside Debian's 6.12 under QEMU with
//! DCTCP_BPF_VM=1, where a missing feature fails the test. The tests named
//! `before_tcx_*` and `red_step_backend_holds_dctcp_at_k` run in Debian 12's
//! 6.1 as well, the lab without tcx: probe on tracepoints, receiver counter
//! and faults on clsact, the kernel's red marking. Elsewhere they are
//! ignored, and cargo counts them so; run by hand outside the VM, each fails
//! saying where it belongs.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod common;

use common::kernel;

const RATE: &str = "20M";

/// Fails a test run outside the VM: this tier's figures are the stock
/// kernel's, and no test of it may pass without having run there.
fn require_vm() {
    assert!(
        std::env::var_os("DCTCP_BPF_VM").is_some(),
        "a stock-kernel VM test outside the VM (DCTCP_BPF_VM unset): `just vm-test` runs it"
    );
}

/// Fails a `before_tcx_*` test on a kernel with tcx, where it would test
/// the tcx path the host tier already covers.
fn require_kernel_without_tcx() {
    require_vm();
    assert!(
        kernel() < (6, 6),
        "a test of the lab without tcx on {:?}: `just vm-test 6.1` runs it",
        kernel()
    );
}

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(args)
        .output()
        .expect("running lab")
}

fn outcome(dir: &Path, run: &str) -> Value {
    let p = dir.join(run).join("outcome.json");
    serde_json::from_str(
        &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

/// Runs `lab queue --quick` with `variants` and extra args, returning its
/// results directory (under target/, which the VM shares with the host).
/// 20 Mbit/s: under QEMU's software emulation three forwarding hops with
/// offloads off cannot carry 100 Mbit/s, and a starved sender is not what
/// these tests measure; K and the buffer are in packets, so DCTCP's queue is
/// the same at any rate.
fn queue(tag: &str, variants: &str, extra: &[&str]) -> std::path::PathBuf {
    require_vm();
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/vm-results")
        .join(tag);
    let _ = std::fs::remove_dir_all(&out);
    let mut args = vec![
        "queue",
        "--quick",
        "--rates",
        RATE,
        "--variants",
        variants,
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = lab(&args);
    eprintln!("{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "lab {args:?} failed");
    out
}

/// DCTCP held near K, with margins TCG's noise cannot cross. The exact
/// targets (mean over time within K +/- 3, p95 <= K + N + 5, utilization at
/// least 95 %) are the summary's checks and `just bench`'s, not pass/fail
/// here: one fresh clone measured 94.8 % under TCG against 97.0-99.8 % in
/// the others, and fq_codel sits at the band's floor by design (theory
/// K - A/2, about 17.7; measured 17.4-17.7 in 7 runs; four tier runs on
/// 2026-11-27: red 20.2-20.4 for both DCTCPs, fq_codel 18.2-19.0, p95 at
/// most 24, utilization 98.8-99.8 %, never empty, the two DCTCPs' means
/// 0.01-0.12 apart against the 3 allowed). What is asserted
/// fails when marking breaks: a queue not held near K (TCP's sawtooth
/// here reads over 100), a queue that runs empty (utilization under 85 %).
fn check_dctcp(r: &Value, what: &str) {
    let t = &r["queue_over_time"];
    let (mean, p95) = (t["mean"].as_f64().unwrap(), t["p95"].as_f64().unwrap());
    assert!(
        (15.0..=25.0).contains(&mean),
        "{what}: mean queue over time {mean}, K = 20 (band K +/- 5)"
    );
    assert!(
        p95 <= 30.0,
        "{what}: p95 queue over time {p95}, K + N + 8 = 30"
    );
    assert_eq!(r["drops"], 0, "{what} dropped");
    let util = r["utilization"].as_f64().unwrap();
    assert!(util >= 0.85, "{what}: utilization {:.1}%", util * 100.0);
    let empty = r["queue_empty_fraction"].as_f64().unwrap();
    assert!(
        empty < 0.10,
        "{what}: queue empty at {:.1}% of arrivals",
        empty * 100.0
    );
    let p = &r["probe_check"];
    eprintln!(
        "{what}: queue over time mean {} p5-p95 {}-{}, empty {}; per arrival {}; utilization {}; departures {} of {} sent",
        t["mean"],
        t["p5"],
        t["p95"],
        r["queue_over_time_empty_fraction"],
        r["queue"]["mean"],
        r["utilization"],
        p["probe_departed"],
        p["qdisc_sent"]
    );
    assert!(p["marks"].as_u64().unwrap() > 0, "{what}: no marks");
    // The qdisc's own mark counter against the CE the receiver saw.
    assert_eq!(p["marks"], p["receiver_ce"], "{what}: {p}");
    // The qdisc also counts what it queued before the probe was attached
    // (neighbour discovery): a few packets at most.
    let (pe, qa) = (
        p["probe_enqueued"].as_u64().unwrap(),
        p["qdisc_accounted"].as_u64().unwrap(),
    );
    assert!(qa >= pe && qa - pe <= 5, "{what}: {p}");
    departures_agree(r, what);
}

/// The window's departures counted from the arrivals (the utilization's
/// count) and by the dequeue tracepoint, which misses nothing here: the same
/// but for a queue length read while another CPU enqueued (equal in all
/// 28 windows of 2026-11-29: 11 on 6.12, 10 on 6.1, 7 earlier that day
/// on both; cubic's 0-24 drops included; docs/testing.md).
fn departures_agree(r: &Value, what: &str) {
    let p = &r["probe_check"];
    let w = &p["window_departed"];
    let (ba, bt) = (
        w["by_arrivals"].as_u64().unwrap(),
        w["by_tracepoint"].as_u64().unwrap(),
    );
    assert!(ba.abs_diff(bt) <= 3, "{what}: {p}");
}

#[test]
#[ignore = "stock-kernel VM only: just vm-test"]
fn red_step_backend_holds_dctcp_at_k() {
    let out = queue("red", "bpf_dctcp:red,cubic:droptail", &[]);
    check_dctcp(&outcome(&out, "20M-bpf_dctcp-red"), "bpf_dctcp on red");
    let cubic = outcome(&out, "20M-cubic-droptail");
    assert!(cubic["queue"]["mean"].as_f64().unwrap() > 100.0);
    departures_agree(&cubic, "cubic on droptail");
}

#[test]
#[ignore = "stock-kernel VM only: just vm-test"]
fn fq_codel_ce_threshold_backend_holds_dctcp_near_k() {
    let out = queue("fqc", "bpf_dctcp:fq_codel", &[]);
    check_dctcp(
        &outcome(&out, "20M-bpf_dctcp-fq_codel"),
        "bpf_dctcp on fq_codel",
    );
}

#[test]
#[ignore = "stock-kernel VM only: just vm-test"]
fn bpf_dctcp_agrees_with_the_kernels_dctcp() {
    common::judged_twice(dctcp_pair_once);
}

fn dctcp_pair_once() {
    let out = queue("diff", "bpf_dctcp:red,dctcp:red", &[]);
    let (ours, theirs) = (
        outcome(&out, "20M-bpf_dctcp-red"),
        outcome(&out, "20M-dctcp-red"),
    );
    check_dctcp(&ours, "bpf_dctcp");
    check_dctcp(&theirs, "kernel dctcp");
    // Both keep the link busy alike: the share of the window its queue
    // stood empty, where a window too small or a cut too deep would show.
    // Not their goodput: under TCG it is what the emulator's CPU let the
    // link send beside a busy queue (a CI run read 85 % for one of them,
    // never empty, the other 94 %).
    let empty = |r: &Value| r["queue_over_time_empty_fraction"].as_f64().unwrap();
    let (ea, eb) = (empty(&ours), empty(&theirs));
    assert!(
        (ea - eb).abs() <= 0.05,
        "queue empty bpf_dctcp {ea} vs dctcp {eb}"
    );
    let (qa, qb) = (
        ours["queue_over_time"]["mean"].as_f64().unwrap(),
        theirs["queue_over_time"]["mean"].as_f64().unwrap(),
    );
    assert!(
        (qa - qb).abs() <= 3.0,
        "mean queue bpf_dctcp {qa} vs dctcp {qb}"
    );
    // The summary has a row of each (a cell of its own: `dctcp@red` alone
    // is also the end of `bpf_dctcp@red`).
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for v in ["bpf_dctcp@red", "dctcp@red"] {
        assert!(
            summary.lines().any(|l| l.split('|').any(|c| c.trim() == v)),
            "no {v} row in\n{summary}"
        );
    }
}

/// `--rtt` on a kernel with netem, both backends (netem on the switch's
/// sender ports, and the lab's delay element, which this kernel could do
/// without): each sender's round trip, probed on an idle path before the
/// run, is its own: at least what was configured less the path's own
/// round trip (which the lab subtracted), at most 1 ms + 10 % above it, and no
/// flow ever measures less than it asked for. (The flows' min RTT is
/// not bounded above here: at 20 Mbit/s every data packet spends 600 us on
/// the wire and DCTCP holds 10 ms of queue, so it read 4.3 ms with 2 ms of
/// delay under TCG; the host's tests bound it.)
#[test]
#[ignore = "stock-kernel VM only: just vm-test"]
fn both_delay_backends_give_each_sender_its_round_trip() {
    // Judged twice: a fresh clone's 6.12 tier (2026-12-05) read the
    // element's sender 1 at a min RTT of 9829 us against 10 ms once, the
    // probe's path base read high under TCG (below).
    common::judged_twice(both_delay_backends_once);
}

fn both_delay_backends_once() {
    for backend in ["netem", "element"] {
        let out = queue(
            &format!("rtt-{backend}"),
            "bpf_dctcp:bpf-step",
            &["--rtt", "2ms,10ms", "--delay-backend", backend],
        );
        let r = outcome(&out, "20M-bpf_dctcp-bpf-step");
        eprintln!("{backend}: {}", r["rtt"]);
        let rtt = &r["rtt"];
        // The delay is the backend's: the element carried the ACK path, or
        // no element ran (netem held the packets).
        match backend {
            "element" => assert!(rtt["element"]["released"].as_u64().unwrap() > 100, "{rtt}"),
            _ => assert!(rtt["element"].is_null(), "{rtt}"),
        }
        let configured = |sender: u64| if sender == 0 { 2000.0 } else { 10_000.0 };
        let probed = rtt["probed_us"].as_array().unwrap();
        assert_eq!(probed.len(), 2, "{rtt}");
        for p in probed {
            let (sender, got) = (p[0].as_u64().unwrap(), p[1].as_f64().unwrap());
            let want = configured(sender);
            // The lab adds `want - base` to the path's own round trip
            // (`base`, measured once on the idle path), so a probe reads
            // `want - base + base_now`: never below `want - base`, however
            // the path wanders. Under TCG it wanders by a third of itself
            // (element: base 299-346 us; the 2 ms sender probed 1886-2019
            // us in three runs, 1977-2109 in four earlier ones), which a
            // bound of 5 % below `want` crossed once (1886 us).
            //
            // Above `want`, the probe reads how much slower TCG's path is
            // now than when `base` was taken, and, through the element,
            // how late TCG's timers fire, which grows with the hold. Over
            // 10 runs of this test in the 6.12 VM here (2026-11-27, both
            // backends, 20 probes per sender) sender 0 read 90 us below
            // `want` to 142 above, sender 1 113 to 525 above; two fresh
            // clones' suites read sender 0 at most 168 above, sender 1 (the
            // element) 881 above, and a CI run's netem sender 0 2393 us
            // (393 above; it failed the bound of 15 % there was then). The
            // bound allows 1 ms plus 10 % of `want`: 1.2 ms for sender 0,
            // 2 ms for sender 1, over twice the worst of each. What the test
            // names still fails it: a delay added twice puts sender 0 at
            // 3.9 ms, the senders' delays swapped puts it at 10 ms, none
            // leaves it at the base.
            let base = rtt["path_base_us"].as_f64().unwrap();
            assert!(
                got >= want - base && got <= want * 1.1 + 1000.0,
                "{backend}: sender {sender} probed {got} us, configured {want} (path base {base} us)"
            );
        }
        // A flow's min RTT is `want - base` plus the path now plus a data
        // segment's 600 us on the 20 Mbit/s wire: it falls under `want` only
        // if `base` read over 600 us (10 runs: base 43-268 us, min RTT
        // 155-2567 us above 99 % of `want` for sender 0, 198-4144 for 1).
        for f in rtt["flows"].as_array().unwrap() {
            let sender = f["sender"].as_u64().unwrap();
            let got = f["min_rtt_us"].as_f64().unwrap();
            assert!(
                got >= configured(sender) * 0.99,
                "{backend}: sender {sender} min RTT {got} us, below {}",
                configured(sender)
            );
        }
        assert_eq!(r["drops"], 0);
    }
}

/// xDCTCP carries traffic on the stock kernel too (`lab xdctcp` end to end
/// at the VM's rate), and the seed 002 variant passes its verifier with all
/// four switches on. (`lab variants` runs seven contenders: minutes under
/// TCG for what the host tier already shows.)
#[test]
#[ignore = "stock-kernel VM only: just vm-test"]
fn xdctcp_and_kdctcp_run_on_the_stock_kernel() {
    require_vm();
    let params = [
        "per_ack_alpha=1",
        "progressive=1",
        "cwr_growth=1",
        "fine_alpha=1",
    ];
    let kd = netns_lab::traffic::cc::LabCc::attach(
        loader::algo::Algo::Kdctcp,
        params.iter().map(|a| a.parse().unwrap()).collect(),
    )
    .expect("bpf_kdctcp loads on 6.12");
    assert!(
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
            .unwrap()
            .contains(&kd.name)
    );
    drop(kd);

    let x = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/vm-results/xdctcp");
    let _ = std::fs::remove_dir_all(&x);
    let o = lab(&[
        "xdctcp",
        "--quick",
        "--grid",
        "none",
        "--rate",
        RATE,
        "--short-rate",
        "10",
        "--out",
        x.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs: Value =
        serde_json::from_str(&std::fs::read_to_string(x.join("head_to_head.json")).unwrap())
            .unwrap();
    for r in runs.as_array().unwrap() {
        let f = &r["fct"];
        assert!(f["started"].as_u64().unwrap() > 10, "{r}");
        assert_eq!(f["completed"], f["started"], "{r}");
        eprintln!(
            "{}: {} short flows, FCT mean {:.1} ms, median {:.1} ms",
            r["label"],
            f["completed"],
            f["fct_us"]["mean"].as_f64().unwrap() / 1e3,
            f["fct_us"]["p50"].as_f64().unwrap() / 1e3
        );
    }
}

/// `lab convergence --quick` at 20 Mbit/s (3 senders, a change every 5 s):
/// the kernel's dctcp on red shares the link as bpf_dctcp does, evenly and
/// steadily beside cubic on drop-tail, and loses no data. Bounds from five
/// VM runs; each assertion names their spread.
#[test]
#[ignore = "stock-kernel VM only: just vm-test"]
fn kernel_dctcp_converges_like_bpf_dctcp_on_red() {
    require_vm();
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/vm-results/convergence");
    let _ = std::fs::remove_dir_all(&out);
    let o = lab(&[
        "convergence",
        "--quick",
        "--rates",
        RATE,
        "--variants",
        "dctcp:red,bpf_dctcp:red,cubic:droptail",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("runs.json")).unwrap()).unwrap();
    let by = |v: &str| {
        runs.as_array()
            .unwrap()
            .iter()
            .find(|r| r["variant"] == v)
            .unwrap_or_else(|| panic!("no {v} run"))
    };
    let shared = |r: &Value| -> Vec<(f64, f64)> {
        r["phases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["flows"].as_u64().unwrap() >= 2)
            .map(|p| (p["jain"].as_f64().unwrap(), p["cov"].as_f64().unwrap()))
            .collect()
    };
    let min_jain = |r: &Value| shared(r).iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let mean_cov = |r: &Value| {
        let c = shared(r);
        c.iter().map(|p| p.1).sum::<f64>() / c.len() as f64
    };
    let cubic = by("cubic@droptail");
    for v in ["dctcp@red", "bpf_dctcp@red"] {
        let r = by(v);
        eprintln!(
            "{v}: min Jain {:.3}, mean CoV {:.3}; cubic {:.3}, {:.3}",
            min_jain(r),
            mean_cov(r),
            min_jain(cubic),
            mean_cov(cubic)
        );
        // Seven runs: min Jain 0.950-0.983 (dctcp) and 0.962-0.997
        // (bpf_dctcp) against cubic's 0.549-0.772; mean CoV 0.088-0.133
        // against cubic's 0.507-0.656. Four more on 2026-11-27 (a fresh
        // clone's suite and three tier runs): 0.968-0.999 and 0.945-0.994,
        // CoV 0.094-0.144. A fresh clone on 2026-11-29: dctcp 0.918 (three
        // flows), bpf_dctcp 0.982, and cubic 0.911: cubic's mean rates over
        // a phase's 2.5 s second half are sometimes as even as DCTCP's, so
        // Jain against cubic is no finding (it was asserted 0.10 above
        // cubic's, and failed there). What the paper finds (Fig. 16) is the
        // variation, asserted below: CoV 0.131 against cubic's 0.671 then.
        assert!(min_jain(r) >= 0.90, "{v}: min Jain {}", min_jain(r));
        assert!(
            mean_cov(r) <= 0.5 * mean_cov(cubic),
            "{v}: CoV {} against cubic's {}",
            mean_cov(r),
            mean_cov(cubic)
        );
        // Queue per phase 20.1-20.7 (K = 20); no data lost in any run.
        assert_eq!(r["drops"], 0, "{v} lost data");
        for p in r["phases"].as_array().unwrap() {
            let q = p["queue_mean"].as_f64().unwrap();
            assert!((15.0..=25.0).contains(&q), "{v}: queue {q} in {p}");
        }
    }
    // The two DCTCPs vary alike (CoV 0.003-0.045 apart in seven runs,
    // 0.003-0.035 in four more on 2026-11-27).
    let (a, b) = (mean_cov(by("dctcp@red")), mean_cov(by("bpf_dctcp@red")));
    assert!((a - b).abs() <= 0.08, "CoV dctcp {a} against bpf_dctcp {b}");
}

/// Without tcx, faults ride clsact (cls_bpf filters) ahead of the
/// receiver's counter, as they ride tcx on newer kernels: one run with
/// random loss on both paths and reordering, one with every ECN field
/// bleached. Each fault's counters against what the qdisc, the receiver
/// and the senders saw. Figures of five 6.1 runs are in docs/notes/2026-11-24-stock-kernel-tier-record.md.
#[test]
#[ignore = "stock-kernel VM only: just vm-test 6.1"]
fn before_tcx_faults_ride_clsact_ahead_of_the_receivers_counter() {
    require_kernel_without_tcx();
    let out = queue(
        "faults-clsact",
        "bpf_dctcp:red",
        &["--loss", "0.01", "--ack-loss", "0.05", "--reorder", "0.01"],
    );
    let r = outcome(&out, "20M-bpf_dctcp-red");
    let (d, a) = (&r["faults"]["data"], &r["faults"]["acks"]);
    eprintln!("faults: {}", r["faults"]);
    let n = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"));
    // Binomial draws, within 5 standard deviations.
    let drawn = |hits: u64, of: u64, p: f64| {
        let (mean, sd) = (of as f64 * p, (of as f64 * p * (1.0 - p)).sqrt());
        of > 1000 && (hits as f64 - mean).abs() <= 5.0 * sd
    };
    assert!(
        drawn(n(&d["dropped"]), n(&d["seen"]), 0.01),
        "data loss: {d}"
    );
    assert!(
        drawn(n(&a["dropped"]), n(&a["seen"]), 0.05),
        "ACK loss: {a}"
    );
    assert!(
        drawn(n(&d["reordered"]), n(&d["seen"]), 0.01),
        "reordering: {d}"
    );
    assert_eq!(d["reordered"], d["returned"], "detoured segments lost: {d}");
    assert_eq!(n(&d["detour_failed"]), 0, "{d}");
    // Before the faults the counter would count about 70 data segments more.
    common::faults::assert_receiver_counts_what_the_faults_let_through(&r, "clsact");
    assert!(r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["info"]["total_retrans"].as_u64().unwrap() > 0));

    let out = queue(
        "bleach-clsact",
        "bpf_dctcp:red",
        &["--ecn-bleach", "1", "--buffer", "150", "--rwnd-clamp", "0"],
    );
    let r = outcome(&out, "20M-bpf_dctcp-red");
    let (d, p) = (&r["faults"]["data"], &r["probe_check"]);
    eprintln!("bleach: {d}; {p}");
    // red marks at enqueue; what its queue then drops at the limit was
    // marked too, and never reaches the fault. Equal in five runs of six;
    // in the sixth one drop more than marks (a Not-ECT close, which red
    // drops where it would mark).
    let (marks, reached) = (n(&p["marks"]), n(&d["ce_bleached"]) + n(&p["qdisc_drops"]));
    assert!(marks > 1000, "{p}");
    assert!(marks.abs_diff(reached) <= 3, "{d} {p}");
    assert_eq!(n(&p["receiver_ce"]), 0, "CE reached the receiver: {p}");
    let q = r["queue_over_time"]["mean"].as_f64().unwrap();
    assert!(q > 60.0, "without marks the buffer fills (150), mean {q}");
}

/// Without tcx the BPF markers cannot run: a run asking for one is refused
/// (exit 2) before anything is built, naming the kernel it needs and what
/// marks here instead.
#[test]
#[ignore = "stock-kernel VM only: just vm-test 6.1"]
fn before_tcx_the_bpf_markers_are_refused_naming_6_6() {
    require_kernel_without_tcx();
    for backend in ["bpf-step", "bpf-red"] {
        let v = format!("bpf_dctcp:{backend}");
        let o = lab(&[
            "queue",
            "--quick",
            "--variants",
            &v,
            "--out",
            "/tmp/refused",
        ]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{backend}: {e}");
        assert!(e.contains("Linux 6.6 or later") && e.contains("red"), "{e}");
        assert!(
            !Path::new("/tmp/refused").exists(),
            "{backend}: a results folder was made"
        );
    }
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        netns.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&netns.stdout)
    );
}

/// `lab bench`'s call timer (fentry and fexit: this kernel has ftrace, the
/// host's has not) against what the kernel counts itself. On a BPF program
/// it sees every call kernel.bpf_stats_enabled counts and times less than
/// bpf_stats does: the struct_ops trampoline's two clock reads hold the
/// program's fentry trampoline, the timer's programs and the body between
/// the timer's two (674-895 against 1,749-1,864 ns under TCG in three
/// runs). On the kernel's
/// dctcp it counts as many in_ack_event calls per byte as bpf_dctcp gets,
/// both called once per ACK (7,316 against 6,910 in 32 MiB in one run).
#[test]
#[ignore = "stock-kernel VM only: just vm-test"]
fn the_call_timer_agrees_with_bpf_stats_and_times_the_kernels_dctcp() {
    use netns_lab::measure::calltime::CallTimer;
    require_vm();
    let last = || {
        libbpf_rs::query::ProgInfoIter::default()
            .map(|p| p.id)
            .max()
            .unwrap_or(0)
    };
    // (id, run_cnt, run_time_ns) of bpf_dctcp's in_ack_event.
    let in_ack_event = |after: u32| {
        libbpf_rs::query::ProgInfoIter::default()
            .find(|p| p.id > after && p.name.to_string_lossy() == "dctcp_in_ack_ev")
            .map(|p| (p.id, p.run_cnt, p.run_time_ns))
            .expect("bpf_dctcp's in_ack_event")
    };
    let before = last();
    let cc = netns_lab::traffic::cc::LabCc::attach(loader::algo::Algo::Dctcp, vec![]).unwrap();
    let pair = netns_lab::experiments::bench::VethPair::new().unwrap();
    pair.transfer(&cc.name, 1 << 20).unwrap();
    pair.transfer("dctcp", 1 << 20).unwrap();

    let (id, _, _) = in_ack_event(before);
    let timer = CallTimer::program(id).unwrap();
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1").unwrap();
    let (_, n0, t0) = in_ack_event(before);
    pair.transfer(&cc.name, 32 << 20).unwrap();
    let (_, n1, t1) = in_ack_event(before);
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0").unwrap();
    let timed = timer.read().unwrap();
    drop(timer);
    let calls = n1 - n0;
    let stats_ns = (t1 - t0) as f64 / calls.max(1) as f64;
    let timed_ns = timed.ns as f64 / timed.calls.max(1) as f64;
    eprintln!(
        "bpf_dctcp in_ack_event: timer {} calls, {timed_ns:.1} ns; bpf_stats {calls} calls, {stats_ns:.1} ns",
        timed.calls
    );
    assert!(calls > 1000, "{calls} calls in 32 MiB");
    // A call a softirq interrupts on its CPU with one of its own is lost
    // to the timer (one entry time per CPU); none is counted twice.
    assert!(
        timed.calls <= calls && timed.calls as f64 >= 0.99 * calls as f64,
        "timer {} calls, bpf_stats {calls}",
        timed.calls
    );
    assert!(
        timed_ns > 0.0 && timed_ns < stats_ns,
        "timer {timed_ns} ns, bpf_stats {stats_ns} ns"
    );

    let kernel = CallTimer::kernel("dctcp_update_alpha").unwrap();
    pair.transfer("dctcp", 32 << 20).unwrap();
    let k = kernel.read().unwrap();
    eprintln!(
        "kernel dctcp_update_alpha: {} calls, {:.1} ns",
        k.calls,
        k.ns as f64 / k.calls.max(1) as f64
    );
    let per_ack = k.calls as f64 / calls as f64;
    assert!(
        (0.7..=1.3).contains(&per_ack),
        "kernel dctcp {} in_ack_event calls against bpf_dctcp's {calls}",
        k.calls
    );
}

/// Issue 37: the strict branches of tests/faults.rs, which this project's
/// 6.18 host seldom reaches (the kernel issue strikes most of its runs, and
/// a struck run is judged more loosely), run where the issue has never
/// struck: every bpf_dctcp outcome must show no guard repair, and the same
/// judge then takes its strict branch. `just vm-test 7.3` (`just
/// test-slow`) runs them; 6.12 skips them, `just test` has no room left.
fn spared(o: &Value, what: &str) {
    assert!(
        !common::struck(o),
        "the kernel issue struck {what} on stock {:?}: guard repairs {}",
        kernel(),
        o["guard_repairs"]
    );
}

const RATE_BPS: f64 = 20e6;

#[test]
#[ignore = "stock-kernel VM only: just vm-test 7.3"]
fn strict_random_loss_halves_once_per_recovery() {
    for p in ["0.001", "0.01"] {
        let dir = queue(
            &format!("strict-loss-{p}"),
            "bpf_dctcp:bpf-step,cubic:bpf-step",
            &["--loss", p],
        );
        let (ours, cubic) = (
            outcome(&dir, "20M-bpf_dctcp-bpf-step"),
            outcome(&dir, "20M-cubic-bpf-step"),
        );
        spared(&ours, "random loss");
        common::faults::judge_random_loss(&ours, &cubic, p.parse().unwrap(), RATE_BPS);
    }
}

#[test]
#[ignore = "stock-kernel VM only: just vm-test 7.3"]
fn strict_ack_loss_stalls_nothing() {
    let dir = queue(
        "strict-ackloss",
        "bpf_dctcp:bpf-step",
        &["--ack-loss", "0.1"],
    );
    let o = outcome(&dir, "20M-bpf_dctcp-bpf-step");
    spared(&o, "ACK loss");
    common::faults::judge_ack_loss(&o, RATE_BPS);
}

#[test]
#[ignore = "stock-kernel VM only: just vm-test 7.3"]
fn strict_reordering_drops_nothing_for_bpf_dctcp() {
    let dir = queue(
        "strict-reorder",
        "bpf_dctcp:bpf-step,cubic:bpf-step",
        &["--reorder", "0.01"],
    );
    let ours = outcome(&dir, "20M-bpf_dctcp-bpf-step");
    spared(&ours, "reordering");
    common::faults::judge_reorder(&ours, &outcome(&dir, "20M-cubic-bpf-step"), RATE_BPS);
}
