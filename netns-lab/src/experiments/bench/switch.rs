//! The switch's cost: the bottleneck's top goodput with and without the
//! BPF marker, and the marker's ns per packet against its floors.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use tc_qdisc::{Backend, Bottleneck, BpfSwitch};

use crate::measure::profile::{self, Profile};
use crate::net::topology::{Star, StarSpec};
use crate::traffic::bulk::{run_bulk, FlowSpec};

use super::bpf_stats::{max_prog_id, per_call, prog_stats, progs_since, BpfStats, PerCall};
use super::ratio::{ratio, Ratio};
use super::BenchConfig;

/// The egress programs (names as the kernel truncates them, 15 characters).
const EGRESS_PROGRAMS: [&str; 3] = ["bottleneck_egre", "floor_egress", "queue_read_egre"];

/// The bench's capture files' bound: past it the capture still takes every
/// packet from the kernel, only writing stops.
const CAPTURE_LIMIT: u64 = 50_000_000;

/// The egress setups the goals compare.
pub(super) const EGRESS_FLOOR: &str = "floor: empty tcx program";
pub(super) const EGRESS_QUEUE_READ: &str = "floor + reading the qdisc's length";
pub(super) const EGRESS_MARKER: &str = "marker, no probe";
pub(super) const EGRESS_PROBE: &str = "marker + probe, every arrival";
pub(super) const EGRESS_DUALPI2: &str = "bpf-dualpi2, no probe";
pub(super) const EGRESS_MARKER_CAPTURE: &str = "marker, no probe, with --pcap";

#[derive(Clone, Debug, Default, Serialize)]
pub struct SwitchReport {
    /// Receiver goodput per run: (with marker, round, Gbit/s).
    pub runs: Vec<(bool, usize, f64)>,
    pub ratio: Option<Ratio>,
    /// Receiver goodput with the marker and `lab --pcap`'s capture at the
    /// bottleneck, over the marker's alone, paired per round.
    pub capture_ratio: Option<Ratio>,
    /// Every switch program's cost in the last round of each egress setup.
    pub per_packet: Vec<PerCall>,
    /// The egress program's ns per packet over the rounds, each setup.
    pub egress: Vec<Ratio>,
    /// The same, each run in isolation (BPF_PROG_TEST_RUN), ns per run.
    pub isolated: Vec<Ratio>,
    /// The same from perf's samples (`perf record -a`), ns per packet.
    pub sampled: Vec<Ratio>,
}

/// What runs on the bottleneck's tcx egress.
#[derive(Clone, Copy, PartialEq)]
enum Egress {
    Nothing,
    /// A floor program.
    Floor(tc_qdisc::Floor),
    /// The switch, its probe taking one arrival in `sample` (0: none).
    Switch {
        sample: u32,
    },
}

/// Two cubic flows for `secs` through a star whose bottleneck is
/// `bottleneck`, with `egress` on it, and `lab --pcap`'s capture at the
/// bottleneck with `capture`. Returns the receiver's goodput after slow
/// start and the programs' cost per call (while bpf_stats are on).
fn through_switch(
    bottleneck: &Bottleneck,
    egress: Egress,
    capture: bool,
    secs: f64,
    profile: bool,
    stop: &Arc<AtomicBool>,
) -> Result<(f64, Vec<PerCall>, Option<f64>)> {
    let star = Star::build(&StarSpec::senders(2))?;
    star.ecn_everywhere()?;
    bottleneck.install(star.switch.name(), &star.bottleneck_if)?;
    let before = max_prog_id();
    let floor = match egress {
        Egress::Floor(kind) => Some(tc_qdisc::MarkerFloor::attach(
            kind,
            &star.switch.path(),
            &star.bottleneck_if,
        )?),
        _ => None,
    };
    let switch = match egress {
        Egress::Switch { sample } => Some(BpfSwitch::start(
            None,
            bottleneck
                .backend
                .marker_config(bottleneck.buffer_pkts, sample),
            bottleneck.rate_bps,
            false,
            &star.switch.path(),
            &star.bottleneck_if,
            &star.receiver.ns.path(),
            &star.receiver.ifname,
        )?),
        _ => None,
    };
    let ids = progs_since(before, "");
    // Written to a folder of its own and gone with it: only its cost counts.
    let pcap_dir = std::env::temp_dir().join(format!("lab-bench-pcap-{}", std::process::id()));
    let capture = capture
        .then(|| crate::capture::Capture::open(&star, crate::capture::Points::Bottleneck, CAPTURE_LIMIT, &pcap_dir))
        .transpose()?;
    let s0 = prog_stats(&ids);
    let flows: Vec<FlowSpec> = (0..2)
        .map(|sender| FlowSpec::long(sender, "cubic"))
        .collect();
    let iv = Duration::from_millis(100);
    let counted = |c: tc_qdisc::qdisc_stats::QdiscCounters| c.sent_packets + c.drops;
    let q0 = tc_qdisc::qdisc_stats::read(star.switch.name(), &star.bottleneck_if)?;
    let perf = profile.then(Profile::start).transpose()?;
    let results = run_bulk(
        &star,
        &flows,
        None,
        Duration::from_secs_f64(secs),
        iv,
        stop,
        |_| Ok(()),
    )?;
    let cost = per_call(&s0, &prog_stats(&ids));
    let perf_ns = match perf {
        Some(p) => {
            let packets = counted(tc_qdisc::qdisc_stats::read(
                star.switch.name(),
                &star.bottleneck_if,
            )?) - counted(q0);
            let cpu_s = p
                .finish()?
                .cpu_s(|f| profile::bpf_program(f, &EGRESS_PROGRAMS));
            Some(cpu_s * 1e9 / packets.max(1) as f64)
        }
        None => None,
    };
    drop(capture);
    let _ = std::fs::remove_dir_all(&pcap_dir);
    drop(switch);
    drop(floor);
    // Goodput after the first half second (slow start).
    let skip = 5;
    let bits: f64 = results
        .iter()
        .map(|f| f.series.iter().skip(skip).sum::<u64>() as f64 * 8.0)
        .sum();
    let n = results
        .iter()
        .map(|f| f.series.len())
        .max()
        .unwrap_or(0)
        .saturating_sub(skip);
    Ok((
        bits / (n.max(1) as f64 * iv.as_secs_f64()) / 1e9,
        cost,
        perf_ns,
    ))
}

pub(super) fn run(cfg: &BenchConfig, stop: &Arc<AtomicBool>) -> Result<SwitchReport> {
    let mut report = SwitchReport::default();
    let mut ratios = Vec::new();
    // The top rate htb is given; probe mode marks nothing, so TCP behaves
    // alike with and without the program and only its cost differs.
    let top = Bottleneck {
        rate_bps: tc_qdisc::bottleneck::RATE_MAX,
        buffer_pkts: 425,
        backend: Backend::Droptail,
    };
    let mut captured = Vec::new();
    for round in 1..=cfg.rounds {
        let mut trio = [0.0; 3];
        let runs = [
            (Egress::Nothing, false, "without the marker"),
            (Egress::Switch { sample: 1 }, false, "with the marker"),
            (Egress::Switch { sample: 1 }, true, "with the marker and a capture"),
        ];
        for (i, (egress, capture, what)) in runs.into_iter().enumerate() {
            let (gbps, _, _) = through_switch(&top, egress, capture, cfg.switch_secs, false, stop)?;
            eprintln!("  round {round}/{}: bottleneck {what}: {gbps:.2} Gbit/s", cfg.rounds);
            if !capture {
                report.runs.push((egress != Egress::Nothing, round, gbps));
            }
            trio[i] = gbps;
        }
        ratios.push(trio[1] / trio[0]);
        captured.push(trio[2] / trio[1]);
    }
    report.ratio = Some(ratio(
        "bottleneck goodput, with / without the marker".into(),
        &mut ratios,
    ));
    report.capture_ratio = Some(ratio(
        "bottleneck goodput, marker with / without --pcap".into(),
        &mut captured,
    ));
    // Per packet, as labs run it (bpf-step K = 20 at 1 Gbit/s), against
    // the floor, alternating every round: the marker with its probe taking
    // every arrival into the ring, one in 16, none.
    // DualPI2 (its defaults) beside them: the step's cost plus reading the
    // L leaf, the draws and the coupling.
    let _stats = BpfStats::on()?;
    let step = Bottleneck::step(1_000_000_000, 425, 20);
    let dualpi2 = Bottleneck {
        backend: Backend::BpfDualpi2(Default::default()),
        ..step.clone()
    };
    let setups = [
        (Egress::Floor(tc_qdisc::Floor::Empty), false, &step, EGRESS_FLOOR),
        (Egress::Floor(tc_qdisc::Floor::QueueRead), false, &step, EGRESS_QUEUE_READ),
        (Egress::Switch { sample: 0 }, false, &step, EGRESS_MARKER),
        (Egress::Switch { sample: 16 }, false, &step, "marker + probe, 1 arrival in 16"),
        (Egress::Switch { sample: 1 }, false, &step, EGRESS_PROBE),
        (Egress::Switch { sample: 0 }, false, &dualpi2, EGRESS_DUALPI2),
        (Egress::Switch { sample: 0 }, true, &step, EGRESS_MARKER_CAPTURE),
    ];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
    for round in 1..=cfg.rounds {
        for (i, (egress, capture, bottleneck, what)) in setups.iter().enumerate() {
            let (_, cost, _) = through_switch(bottleneck, *egress, *capture, cfg.switch_secs, false, stop)?;
            let on_egress = cost
                .iter()
                .find(|p| EGRESS_PROGRAMS.iter().any(|e| p.program.starts_with(e)))
                .context("no egress program ran")?;
            eprintln!(
                "  round {round}/{}: {what}: {:.1} ns per packet",
                cfg.rounds, on_egress.ns
            );
            ns[i].push(on_egress.ns);
            if round == cfg.rounds {
                for mut p in cost {
                    p.program = format!("{} ({what})", p.program);
                    report.per_packet.push(p);
                }
            }
        }
    }
    for ((_, _, _, what), v) in setups.iter().zip(&mut ns) {
        report.egress.push(ratio(what.to_string(), v));
    }
    drop(_stats);
    // The same in situ by perf's sampling, with no clock reads in the
    // programs (bpf_stats off).
    if cfg.perf {
        let mut ns: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
        for round in 1..=cfg.rounds {
            for (i, (egress, capture, bottleneck, what)) in setups.iter().enumerate() {
                let (_, _, perf_ns) =
                    through_switch(bottleneck, *egress, *capture, cfg.switch_secs, true, stop)?;
                let v = perf_ns.context("perf measured nothing")?;
                eprintln!(
                    "  round {round}/{}: {what}: {v:.1} ns per packet (perf)",
                    cfg.rounds
                );
                ns[i].push(v);
            }
        }
        for ((_, _, _, what), v) in setups.iter().zip(&mut ns) {
            report.sampled.push(ratio(what.to_string(), v));
        }
    }
    // The same programs in isolation (BPF_PROG_TEST_RUN, 100,000 runs each,
    // on the pass path), without bpf_stats' clock reads in every call.
    // (A test run's queue is the loopback's, hot in this CPU's cache: the
    // queue-reading floor would say nothing there.)
    let markers: Vec<(u32, &Bottleneck, &str)> = setups
        .iter()
        .filter_map(|&(egress, capture, bottleneck, what)| match egress {
            // A test run passes no interface: a capture changes nothing.
            Egress::Switch { sample } if !capture => Some((sample, bottleneck, what)),
            _ => None,
        })
        .collect();
    let mut floor = Vec::new();
    let mut isolated: Vec<Vec<f64>> = vec![Vec::new(); markers.len()];
    for _ in 0..cfg.rounds {
        for (i, &(sample, bottleneck, _)) in markers.iter().enumerate() {
            let config = bottleneck
                .backend
                .marker_config(bottleneck.buffer_pkts, sample);
            let (f, m) = tc_qdisc::marker::isolated_ns(config, bottleneck.rate_bps, 100_000)?;
            floor.push(f);
            isolated[i].push(m);
        }
    }
    report
        .isolated
        .push(ratio(EGRESS_FLOOR.to_string(), &mut floor));
    for ((_, _, what), v) in markers.iter().zip(&mut isolated) {
        report.isolated.push(ratio(what.to_string(), v));
    }
    Ok(report)
}
