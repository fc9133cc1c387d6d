//! `lab bench` (`just bench`): what DCTCP in BPF, its tracing and the BPF
//! switch cost, each measured side by side with its baseline in one run,
//! alternating A and B, reported as ratios with their spread.
//!
//! - Algorithms: fixed-size bulk transfers over a veth pair between two
//!   namespaces (offloads off: a packet per segment, an ACK per two), no
//!   bottleneck; CPU of the whole machine (/proc/stat: user, system, irq,
//!   softirq) and of this process (getrusage) per GB moved, throughput; the
//!   per-call cost of every struct_ops program from kernel.bpf_stats_enabled
//!   in one extra transfer (stats cost time themselves, so never in the
//!   compared ones). bpf_dctcp with tracing per window and per ACK too.
//! - Switch: the highest rate the lab's bottleneck (htb at 10 Gbit/s) carries
//!   with and without the BPF marker and queue probe; the marker's cost per
//!   packet from bpf_stats.
//! - Lab scale: set-up and tear-down time and memory of stars of N senders.

use std::io::Read;
use std::net::{Ipv4Addr, Shutdown, SocketAddr};
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use loader::algo::Algo;
use loader::trace::{Detail, Session};
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};
use tc_qdisc::{Backend, Bottleneck, BpfSwitch};

use crate::measure::cpu::Cpu;
use crate::measure::profile::{self, Profile};
use crate::net::netns::Netns;
use crate::net::prefix::Prefix;
use crate::net::topology::{offloads_off, Star, StarSpec};
use crate::net::veth::Veth;
use crate::traffic::bulk::{listen_announced, run_bulk, send_bytes, FlowSpec};
use crate::traffic::cc::LabCc;

const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 251, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 251, 2);
const PORT: u16 = 5301;

#[derive(Clone, Debug, Serialize)]
pub struct BenchConfig {
    pub rounds: usize,
    /// Bytes per bulk transfer.
    pub bytes: u64,
    /// Kernel algorithms to compare bpf_dctcp with (reno, cubic; dctcp where
    /// the kernel has it).
    pub baselines: Vec<String>,
    /// Also bpf_dctcp traced per window and per ACK.
    pub tracing: bool,
    /// Seconds per switch run; 0 skips the switch benchmark.
    pub switch_secs: f64,
    /// Also measure the switch's programs by perf sampling.
    pub perf: bool,
    /// Star sizes to set up and tear down; empty skips.
    pub scale: Vec<usize>,
    /// The delay section; None skips it.
    pub delay: Option<crate::experiments::delay_bench::DelayBenchConfig>,
}

impl BenchConfig {
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(
            (1..=500).contains(&self.rounds),
            "--rounds {}: 1 to 500",
            self.rounds
        );
        anyhow::ensure!(
            (1 << 20..=64 << 30).contains(&self.bytes),
            "--mib {}: 1 to 65536",
            self.bytes >> 20
        );
        anyhow::ensure!(
            self.switch_secs == 0.0 || (1.0..=60.0).contains(&self.switch_secs),
            "--switch-secs {}: 0 (skip) or 1 to 60",
            self.switch_secs
        );
        for &n in &self.scale {
            Star::validate(&StarSpec::senders(n))?;
        }
        if let Some(d) = &self.delay {
            d.validate()?;
        }
        for b in &self.baselines {
            // A modular algorithm is listed once loaded (dctcp on Debian).
            let _ = std::process::Command::new("modprobe")
                .args(["-q", &format!("tcp_{b}")])
                .status();
        }
        let available =
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                .unwrap_or_default();
        for b in &self.baselines {
            anyhow::ensure!(
                available.split_whitespace().any(|a| a == b),
                "baseline `{b}` is not available in this kernel (it has: {}); `dctcp` is compared \
                 in the stock-kernel VM (just bench runs it there)",
                available.trim()
            );
        }
        Ok(())
    }
}

/// One bulk transfer.
#[derive(Clone, Debug, Serialize)]
pub struct Transfer {
    pub contender: String,
    pub round: usize,
    pub gbps: f64,
    pub cpu: Cpu,
    /// Machine CPU seconds per GB (10^9 bytes) moved.
    pub cpu_s_per_gb: f64,
    pub process_cpu_s_per_gb: f64,
    /// Trace events delivered / dropped, for traced contenders.
    pub events: Option<(u64, u64)>,
}

/// Two namespaces joined by a veth pair, offloads off, ECN on.
pub struct Pair {
    client: Netns,
    server: Netns,
    _prefix: Prefix,
}

impl Pair {
    pub fn new() -> Result<Pair> {
        let p = Prefix::unique()?;
        let client = Netns::create(&p.ns("bc"))?;
        let server = Netns::create(&p.ns("bs"))?;
        let v = Veth::create(
            &client,
            &p.ifname("c"),
            &format!("{CLIENT}/24"),
            &server,
            &p.ifname("s"),
            &format!("{SERVER}/24"),
        )?;
        offloads_off(&client, &v.a)?;
        offloads_off(&server, &v.b)?;
        for ns in [&client, &server] {
            ns.sysctl("net.ipv4.tcp_ecn", "1")?;
        }
        Ok(Pair {
            client,
            server,
            _prefix: p,
        })
    }

    /// Sends `bytes` from client to server with `cc` on both ends; returns
    /// the elapsed time from connect to the server's end of stream.
    pub fn transfer(&self, cc: &str, bytes: u64) -> Result<Duration> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let server_cc = cc.to_string();
        let server = self.server.spawn(move || -> Result<u64> {
            pin_to_cpu(1);
            let addr = SocketAddr::from((SERVER, PORT));
            let l = listen_announced(&server_cc, addr, Duration::from_secs(30), None, &ready_tx)?;
            let (mut s, _) = l.accept()?;
            let mut buf = vec![0u8; 1 << 20];
            let mut got = 0u64;
            loop {
                match s.read(&mut buf)? {
                    0 => return Ok(got),
                    n => got += n as u64,
                }
            }
        })?;
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .context("bench server did not start")?
            .map_err(|e| anyhow!("bench server: {e}"))?;
        let client_cc = cc.to_string();
        let start = Instant::now();
        let client = self.client.spawn(move || -> Result<()> {
            pin_to_cpu(0);
            let mut s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
            dctcp_utils::sockopt::set_congestion(s.as_fd(), &client_cc)?;
            s.connect(&SocketAddr::from((SERVER, PORT)).into())?;
            send_bytes(&mut s, bytes)?;
            s.shutdown(Shutdown::Write)?;
            Ok(())
        })?;
        client
            .join()
            .map_err(|_| anyhow!("bench client panicked"))???;
        let got = server
            .join()
            .map_err(|_| anyhow!("bench server panicked"))???;
        let elapsed = start.elapsed();
        anyhow::ensure!(got == bytes, "server received {got} of {bytes} bytes");
        Ok(elapsed)
    }
}

/// Keeps the calling thread on `cpu` (modulo the CPUs there are): sender and
/// receiver on their own CPUs every time, so rounds differ by the algorithm
/// and not by where the scheduler put the two ends.
fn pin_to_cpu(cpu: usize) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays in bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % n, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// What a contender is: a kernel algorithm, or bpf_dctcp traced or not.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tracing {
    Off,
    Window,
    Ack,
}

struct Contender {
    label: String,
    cc: String,
    tracing: Tracing,
}

/// run_time_ns and run_cnt of the programs whose ids are in `ids`.
fn prog_stats(ids: &[u32]) -> Vec<(String, u64, u64)> {
    libbpf_rs::query::ProgInfoIter::default()
        .filter(|p| ids.contains(&p.id))
        .map(|p| {
            (
                p.name.to_string_lossy().into_owned(),
                p.run_time_ns,
                p.run_cnt,
            )
        })
        .collect()
}

fn max_prog_id() -> u32 {
    libbpf_rs::query::ProgInfoIter::default()
        .map(|p| p.id)
        .max()
        .unwrap_or(0)
}

/// Programs loaded since `after` (an earlier max_prog_id()) whose name
/// starts with `prefix`.
fn progs_since(after: u32, prefix: &str) -> Vec<u32> {
    libbpf_rs::query::ProgInfoIter::default()
        .filter(|p| p.id > after && p.name.to_string_lossy().starts_with(prefix))
        .map(|p| p.id)
        .collect()
}

/// kernel.bpf_stats_enabled on while alive; it costs every BPF program two
/// clock reads, so only the runs that measure per-call cost have it.
struct BpfStats;

impl BpfStats {
    fn on() -> Result<BpfStats> {
        std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")
            .context("enabling kernel.bpf_stats_enabled")?;
        Ok(BpfStats)
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0");
    }
}

/// Mean ns per call of each program over a run: (name, ns, calls).
#[derive(Clone, Debug, Serialize)]
pub struct PerCall {
    pub program: String,
    pub ns: f64,
    pub calls: u64,
}

fn per_call(before: &[(String, u64, u64)], after: &[(String, u64, u64)]) -> Vec<PerCall> {
    after
        .iter()
        .filter_map(|(name, t, n)| {
            let (_, t0, n0) = before.iter().find(|b| &b.0 == name)?;
            let calls = n - n0;
            (calls > 0).then(|| PerCall {
                program: name.clone(),
                ns: (t - t0) as f64 / calls as f64,
                calls,
            })
        })
        .collect()
}

#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    pub what: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// 95 % interval of the median: percentile bootstrap over the rounds.
    pub ci: (f64, f64),
}

fn median_of(sorted: &[f64]) -> f64 {
    sorted[sorted.len() / 2]
}

fn ratio(what: String, v: &mut [f64]) -> Ratio {
    v.sort_by(f64::total_cmp);
    Ratio {
        what,
        median: median_of(v),
        min: v[0],
        max: v[v.len() - 1],
        ci: median_interval(v),
    }
}

/// The 2.5th and 97.5th percentiles of the medians of 2,000 resamples
/// (with replacement, seeded: the same rounds give the same interval).
fn median_interval(v: &[f64]) -> (f64, f64) {
    let mut rng = crate::rng::Rng(0x5eed);
    let mut medians: Vec<f64> = (0..2000)
        .map(|_| {
            let mut r: Vec<f64> = (0..v.len())
                .map(|_| v[(rng.next_u64() % v.len() as u64) as usize])
                .collect();
            r.sort_by(f64::total_cmp);
            median_of(&r)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    (medians[50], medians[1949])
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct AlgorithmReport {
    pub transfers: Vec<Transfer>,
    pub ratios: Vec<Ratio>,
    pub per_call: Vec<PerCall>,
    /// bpf_dctcp with `guard=0`.
    pub per_call_unguarded: Vec<PerCall>,
    /// The Reno fallback: the floor a struct_ops program costs here.
    pub floor_per_call: Vec<PerCall>,
    /// Where the kernel has its own dctcp: bpf_dctcp's programs and the
    /// kernel's dctcp functions timed by one method (fentry and fexit, no
    /// bpf_stats), each over one transfer.
    pub timed_alike: Option<TimedAlike>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TimedAlike {
    pub bpf_dctcp: Vec<PerCall>,
    pub kernel_dctcp: Vec<PerCall>,
    /// ms per GB spent in each algorithm's own code, summed over its
    /// operations: (bpf_dctcp, kernel dctcp).
    pub ms_per_gb: (f64, f64),
}

/// The kernel's tcp_dctcp functions, by the operation each fills
/// (net/ipv4/tcp_dctcp.c): cong_avoid is Reno's, as in bpf_dctcp.
const KERNEL_DCTCP: [(&str, &str); 7] = [
    ("init", "dctcp_init"),
    ("in_ack_event", "dctcp_update_alpha"),
    ("cwnd_event", "dctcp_cwnd_event"),
    ("set_state", "dctcp_state"),
    ("ssthresh", "dctcp_ssthresh"),
    ("cong_avoid", "tcp_reno_cong_avoid"),
    ("undo_cwnd", "dctcp_cwnd_undo"),
];

/// Total ms per GB in the timed calls of a transfer of `bytes`.
fn ms_per_gb(calls: &[PerCall], bytes: u64) -> f64 {
    calls.iter().map(|p| p.ns * p.calls as f64).sum::<f64>() / 1e6 / (bytes as f64 / 1e9)
}

/// bpf_dctcp's programs (`ids`) over one transfer, then the kernel's dctcp
/// functions over another, timed alike (crate::measure::calltime). The struct_ops
/// trampoline that calls a BPF program is outside its timed interval; a
/// kernel function is called directly.
fn timed_alike(pair: &Pair, bpf_cc: &str, ids: &[u32], bytes: u64) -> Result<TimedAlike> {
    use crate::measure::calltime::CallTimer;
    let time = |timers: Vec<(String, CallTimer)>, cc: &str| -> Result<Vec<PerCall>> {
        pair.transfer(cc, bytes)?;
        let mut out = Vec::new();
        for (program, t) in &timers {
            let x = t.read()?;
            if x.calls > 0 {
                out.push(PerCall {
                    program: program.clone(),
                    ns: x.ns as f64 / x.calls as f64,
                    calls: x.calls,
                });
            }
        }
        Ok(out)
    };
    // The Reno fallback's programs (dctcp_reno_*) are the floor's, not
    // bpf_dctcp's: a socket of the floor's transfer may still call one.
    let bpf = libbpf_rs::query::ProgInfoIter::default()
        .filter(|p| ids.contains(&p.id) && !p.name.to_string_lossy().starts_with("dctcp_reno_"))
        .map(|p| {
            let name = p.name.to_string_lossy().into_owned();
            Ok((name, CallTimer::program(p.id)?))
        })
        .collect::<Result<Vec<_>>>()?;
    let bpf_dctcp = time(bpf, bpf_cc)?;
    let kernel = KERNEL_DCTCP
        .iter()
        .map(|(op, f)| Ok((format!("{op} ({f})"), CallTimer::kernel(f)?)))
        .collect::<Result<Vec<_>>>()?;
    let kernel_dctcp = time(kernel, "dctcp")?;
    Ok(TimedAlike {
        ms_per_gb: (
            ms_per_gb(&bpf_dctcp, bytes),
            ms_per_gb(&kernel_dctcp, bytes),
        ),
        bpf_dctcp,
        kernel_dctcp,
    })
}

fn algorithms(cfg: &BenchConfig, stop: &Arc<AtomicBool>) -> Result<AlgorithmReport> {
    let before = max_prog_id();
    let dctcp = LabCc::attach(Algo::Dctcp, vec![])?;
    let ids = progs_since(before, "dctcp_");
    let pair = Pair::new()?;
    let mut contenders: Vec<Contender> = cfg
        .baselines
        .iter()
        .map(|b| Contender {
            label: b.clone(),
            cc: b.clone(),
            tracing: Tracing::Off,
        })
        .collect();
    let traced = if cfg.tracing {
        vec![
            (Tracing::Window, "traced per window"),
            (Tracing::Ack, "traced per ACK"),
        ]
    } else {
        vec![]
    };
    for (tracing, what) in std::iter::once((Tracing::Off, "")).chain(traced) {
        contenders.push(Contender {
            label: if what.is_empty() {
                "bpf_dctcp".into()
            } else {
                format!("bpf_dctcp {what}")
            },
            cc: dctcp.name.clone(),
            tracing,
        });
    }
    // A first transfer per contender warms caches and the allocator; not kept.
    for c in &contenders {
        pair.transfer(&c.cc, cfg.bytes.min(64 << 20))?;
    }
    let mut report = AlgorithmReport::default();
    for round in 1..=cfg.rounds {
        for c in &contenders {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                bail!("interrupted");
            }
            let session = match c.tracing {
                Tracing::Off => None,
                Tracing::Window => Some(Session::start(&c.cc, Detail::Window, false)?),
                Tracing::Ack => Some(Session::start(&c.cc, Detail::PerAck { every: 1 }, false)?),
            };
            let cpu0 = Cpu::now()?;
            let elapsed = pair.transfer(&c.cc, cfg.bytes)?;
            let cpu = Cpu::now()?.since(cpu0);
            let events = session
                .map(|s| s.stop().map(|(_, n)| (n.seen, n.dropped)))
                .transpose()?;
            let gb = cfg.bytes as f64 / 1e9;
            let t = Transfer {
                contender: c.label.clone(),
                round,
                gbps: cfg.bytes as f64 * 8.0 / elapsed.as_secs_f64() / 1e9,
                cpu,
                cpu_s_per_gb: cpu.total() / gb,
                process_cpu_s_per_gb: cpu.process / gb,
                events,
            };
            eprintln!(
                "  round {round}/{}: {:<26} {:>6.2} Gbit/s, {:.3} CPU s/GB (process {:.3}){}",
                cfg.rounds,
                t.contender,
                t.gbps,
                t.cpu_s_per_gb,
                t.process_cpu_s_per_gb,
                t.events
                    .map(|(s, d)| format!(", {s} events, {d} dropped"))
                    .unwrap_or_default()
            );
            report.transfers.push(t);
        }
    }
    // Paired per round: bpf_dctcp against each other contender.
    let of = |label: &str, round: usize| {
        report
            .transfers
            .iter()
            .find(|t| t.contender == label && t.round == round)
    };
    for c in contenders.iter().filter(|c| c.label != "bpf_dctcp") {
        // bpf_dctcp over a kernel baseline; a traced run over bpf_dctcp.
        let (a, b) = if c.tracing == Tracing::Off {
            ("bpf_dctcp", c.label.as_str())
        } else {
            (c.label.as_str(), "bpf_dctcp")
        };
        let pairs: Vec<(&Transfer, &Transfer)> = (1..=cfg.rounds)
            .filter_map(|r| Some((of(a, r)?, of(b, r)?)))
            .collect();
        let mut cpu: Vec<f64> = pairs
            .iter()
            .map(|(x, y)| x.cpu_s_per_gb / y.cpu_s_per_gb)
            .collect();
        let mut tput: Vec<f64> = pairs.iter().map(|(x, y)| x.gbps / y.gbps).collect();
        report
            .ratios
            .push(ratio(format!("CPU per GB, {a} / {b}"), &mut cpu));
        report
            .ratios
            .push(ratio(format!("throughput, {a} / {b}"), &mut tput));
    }
    // Per-call cost, with bpf_stats on: bpf_dctcp, bpf_dctcp with its guard
    // off, and the floor: its Reno fallback, whose cong_avoid only calls the
    // kernel's tcp_reno_cong_avoid kfunc.
    {
        let _stats = BpfStats::on()?;
        let fallback = loader::algo::fallback_name(&dctcp.name);
        let measure = |cc: &str| -> Result<Vec<PerCall>> {
            let s0 = prog_stats(&ids);
            pair.transfer(cc, cfg.bytes)?;
            Ok(per_call(&s0, &prog_stats(&ids)))
        };
        report.per_call = measure(&dctcp.name)?;
        let guard = |on: &str| loader::params::Assignment {
            key: "guard".into(),
            value: on.into(),
        };
        loader::instance::set(&dctcp.name, &[guard("0")])?;
        report.per_call_unguarded = measure(&dctcp.name)?;
        loader::instance::set(&dctcp.name, &[guard("1")])?;
        report.floor_per_call = measure(&fallback)?;
    }
    if cfg.baselines.iter().any(|b| b == "dctcp") {
        report.timed_alike = Some(timed_alike(&pair, &dctcp.name, &ids, cfg.bytes)?);
    }
    Ok(report)
}

/// The egress programs (names as the kernel truncates them, 15 characters).
const EGRESS_PROGRAMS: [&str; 3] = ["bottleneck_egre", "floor_egress", "queue_read_egre"];

/// The egress setups the goals compare.
const EGRESS_FLOOR: &str = "floor: empty tcx program";
const EGRESS_QUEUE_READ: &str = "floor + reading the qdisc's length";
const EGRESS_MARKER: &str = "marker, no probe";
const EGRESS_PROBE: &str = "marker + probe, every arrival";

#[derive(Clone, Debug, Default, Serialize)]
pub struct SwitchReport {
    /// Receiver goodput per run: (with marker, round, Gbit/s).
    pub runs: Vec<(bool, usize, f64)>,
    pub ratio: Option<Ratio>,
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
/// `bottleneck`, with `egress` on it. Returns the receiver's goodput after
/// slow start and the programs' cost per call (while bpf_stats are on).
fn through_switch(
    bottleneck: &Bottleneck,
    egress: Egress,
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
                .marker_config(bottleneck.buffer_pkts, bottleneck.rate_bps, sample),
            false,
            &star.switch.path(),
            &star.bottleneck_if,
            &star.receiver.ns.path(),
            &star.receiver.ifname,
        )?),
        _ => None,
    };
    let ids = progs_since(before, "");
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

fn switch(cfg: &BenchConfig, stop: &Arc<AtomicBool>) -> Result<SwitchReport> {
    let mut report = SwitchReport::default();
    let mut ratios = Vec::new();
    // The top rate htb is given; probe mode marks nothing, so TCP behaves
    // alike with and without the program and only its cost differs.
    let top = Bottleneck {
        rate_bps: tc_qdisc::bottleneck::RATE_MAX,
        buffer_pkts: 425,
        backend: Backend::Droptail,
    };
    for round in 1..=cfg.rounds {
        let mut pair = [0.0; 2];
        for (i, egress) in [Egress::Nothing, Egress::Switch { sample: 1 }]
            .into_iter()
            .enumerate()
        {
            let (gbps, _, _) = through_switch(&top, egress, cfg.switch_secs, false, stop)?;
            let with = egress != Egress::Nothing;
            eprintln!(
                "  round {round}/{}: bottleneck {} the marker: {gbps:.2} Gbit/s",
                cfg.rounds,
                if with { "with" } else { "without" }
            );
            report.runs.push((with, round, gbps));
            pair[i] = gbps;
        }
        ratios.push(pair[1] / pair[0]);
    }
    report.ratio = Some(ratio(
        "bottleneck goodput, with / without the marker".into(),
        &mut ratios,
    ));
    // Per packet, as labs run it (bpf-step K = 20 at 1 Gbit/s), against
    // the floor, alternating every round: the marker with its probe taking
    // every arrival into the ring, one in 16, none.
    let _stats = BpfStats::on()?;
    let step = Bottleneck::step(1_000_000_000, 425, 20);
    let setups = [
        (Egress::Floor(tc_qdisc::Floor::Empty), EGRESS_FLOOR),
        (Egress::Floor(tc_qdisc::Floor::QueueRead), EGRESS_QUEUE_READ),
        (Egress::Switch { sample: 0 }, EGRESS_MARKER),
        (
            Egress::Switch { sample: 16 },
            "marker + probe, 1 arrival in 16",
        ),
        (Egress::Switch { sample: 1 }, EGRESS_PROBE),
    ];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
    for round in 1..=cfg.rounds {
        for (i, (egress, what)) in setups.iter().enumerate() {
            let (_, cost, _) = through_switch(&step, *egress, cfg.switch_secs, false, stop)?;
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
    for ((_, what), v) in setups.iter().zip(&mut ns) {
        report.egress.push(ratio(what.to_string(), v));
    }
    drop(_stats);
    // The same in situ by perf's sampling, with no clock reads in the
    // programs (bpf_stats off).
    if cfg.perf {
        let mut ns: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
        for round in 1..=cfg.rounds {
            for (i, (egress, what)) in setups.iter().enumerate() {
                let (_, _, perf_ns) = through_switch(&step, *egress, cfg.switch_secs, true, stop)?;
                let v = perf_ns.context("perf measured nothing")?;
                eprintln!(
                    "  round {round}/{}: {what}: {v:.1} ns per packet (perf)",
                    cfg.rounds
                );
                ns[i].push(v);
            }
        }
        for ((_, what), v) in setups.iter().zip(&mut ns) {
            report.sampled.push(ratio(what.to_string(), v));
        }
    }
    // The same programs in isolation (BPF_PROG_TEST_RUN, 100,000 runs each,
    // on the pass path), without bpf_stats' clock reads in every call.
    // (A test run's queue is the loopback's, hot in this CPU's cache: the
    // queue-reading floor would say nothing there.)
    let markers: Vec<(u32, &str)> = setups
        .iter()
        .filter_map(|&(egress, what)| match egress {
            Egress::Switch { sample } => Some((sample, what)),
            _ => None,
        })
        .collect();
    let mut floor = Vec::new();
    let mut isolated: Vec<Vec<f64>> = vec![Vec::new(); markers.len()];
    for _ in 0..cfg.rounds {
        for (i, &(sample, _)) in markers.iter().enumerate() {
            let config = step
                .backend
                .marker_config(step.buffer_pkts, step.rate_bps, sample);
            let (f, m) = tc_qdisc::marker::isolated_ns(config, 100_000)?;
            floor.push(f);
            isolated[i].push(m);
        }
    }
    report
        .isolated
        .push(ratio(EGRESS_FLOOR.to_string(), &mut floor));
    for ((_, what), v) in markers.iter().zip(&mut isolated) {
        report.isolated.push(ratio(what.to_string(), v));
    }
    Ok(report)
}

#[derive(Clone, Debug, Serialize)]
pub struct ScaleRun {
    pub senders: usize,
    pub setup_s: f64,
    pub teardown_s: f64,
    /// Resident memory of the lab process with the star up, and what
    /// building it added.
    pub rss_mib: f64,
    pub rss_added_mib: f64,
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0
}

fn scale(cfg: &BenchConfig) -> Result<Vec<ScaleRun>> {
    cfg.scale
        .iter()
        .map(|&n| {
            let rss0 = rss_mib();
            let t = Instant::now();
            let star = Star::build(&StarSpec::senders(n))?;
            let setup_s = t.elapsed().as_secs_f64();
            let rss = rss_mib();
            let t = Instant::now();
            drop(star);
            let run = ScaleRun {
                senders: n,
                setup_s,
                teardown_s: t.elapsed().as_secs_f64(),
                rss_mib: rss,
                rss_added_mib: rss - rss0,
            };
            eprintln!(
                "  {n:>3} senders: up in {:.2} s, down in {:.2} s, lab RSS {:.1} MiB (+{:.1})",
                run.setup_s, run.teardown_s, run.rss_mib, run.rss_added_mib
            );
            Ok(run)
        })
        .collect()
}

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub kernel: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub commit: String,
}

fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Machine {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model: cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or("")
            .trim()
            .to_string(),
        commit: std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default(),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub machine: Machine,
    pub config: BenchConfig,
    pub algorithms: AlgorithmReport,
    pub switch: Option<SwitchReport>,
    pub scale: Vec<ScaleRun>,
    pub delay: Vec<crate::experiments::delay_bench::DelayRun>,
}

fn run(cfg: &BenchConfig, stop: &Arc<AtomicBool>) -> Result<BenchReport> {
    cfg.validate()?;
    let machine = machine();
    eprintln!(
        "bench on {} ({} CPUs, {}), commit {}",
        machine.kernel, machine.cpus, machine.cpu_model, machine.commit
    );
    eprintln!(
        "algorithms: {} rounds of {} MiB per contender, interleaved",
        cfg.rounds,
        cfg.bytes >> 20
    );
    let algorithms = algorithms(cfg, stop)?;
    let switch = (cfg.switch_secs > 0.0)
        .then(|| {
            eprintln!(
                "switch: {} rounds of {} s, with and without the marker",
                cfg.rounds, cfg.switch_secs
            );
            switch(cfg, stop)
        })
        .transpose()?;
    if !cfg.scale.is_empty() {
        eprintln!("lab scale:");
    }
    let scale = scale(cfg)?;
    let delay = match &cfg.delay {
        Some(d) => {
            eprintln!("delay: each rate without a delay, then each delay and backend");
            crate::experiments::delay_bench::run(d, stop)?
        }
        None => Vec::new(),
    };
    Ok(BenchReport {
        machine,
        config: cfg.clone(),
        algorithms,
        switch,
        scale,
        delay,
    })
}

/// PASS when every round (or the whole interval) meets the goal, MISS when
/// none does, UNRESOLVED when they fall on both sides of it.
fn verdict(min: f64, max: f64, goal: f64) -> &'static str {
    if max <= goal {
        "PASS"
    } else if min > goal {
        "MISS"
    } else {
        "UNRESOLVED"
    }
}

/// Each goal of the hot path against its floor: the figure, the goal, the
/// verdict.
fn goals(
    algorithms: &AlgorithmReport,
    switch: Option<&SwitchReport>,
    scale: &[ScaleRun],
) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "\n{:<52} {:>22} {:>22}  {}\n",
        "goal", "measured", "goal", "verdict"
    );
    let mut row = |what: String, measured: String, goal: String, v: &str| {
        let _ = writeln!(s, "{what:<52} {measured:>22} {goal:>22}  {v}");
    };
    let methods = switch.into_iter().flat_map(|w| {
        [
            (&w.egress, "bpf_stats"),
            (&w.sampled, "perf"),
            (&w.isolated, "isolated"),
        ]
    });
    for (costs, method) in methods {
        let of = |what: &str| costs.iter().find(|e| e.what == what);
        if let (Some(floor), Some(marker), Some(probe)) =
            (of(EGRESS_FLOOR), of(EGRESS_MARKER), of(EGRESS_PROBE))
        {
            // Against the empty program, and against one that reads the
            // queue as any marker must (measured in situ only).
            let reads = of(EGRESS_QUEUE_READ).map(|f| (f, "queue-read floor"));
            for (floor, name) in std::iter::once((floor, "floor")).chain(reads) {
                for (x, extra, what) in [
                    (marker, 30.0, "marker, ns per packet"),
                    (probe, 100.0, "marker + probe, ns per sampled arrival"),
                ] {
                    let goal = floor.median + extra;
                    row(
                        format!("{what} ({method})"),
                        format!("{:.1} ({:.1}-{:.1})", x.median, x.min, x.max),
                        format!("<= {name} {:.1} + {extra:.0}", floor.median),
                        verdict(x.min, x.max, goal),
                    );
                }
            }
        }
    }
    // The floor per call: the Reno fallback's cong_avoid, which only calls
    // the kernel's tcp_reno_cong_avoid kfunc.
    let floor = algorithms
        .floor_per_call
        .iter()
        .find(|p| p.program.starts_with("dctcp_reno_cong"));
    if let Some(floor) = floor {
        for p in algorithms.per_call.iter().filter(|p| p.calls >= 1000) {
            let goal = 1.5 * floor.ns;
            row(
                format!("{}, ns per call", p.program),
                format!("{:.1}", p.ns),
                format!("<= 1.5 x {:.1}", floor.ns),
                verdict(p.ns, p.ns, goal),
            );
        }
    }
    // Against the kernel's own reno here and its dctcp in the VM (cubic
    // grows its window differently: not the same work per GB).
    for x in algorithms.ratios.iter().filter(|x| {
        x.what == "CPU per GB, bpf_dctcp / reno" || x.what == "CPU per GB, bpf_dctcp / dctcp"
    }) {
        row(
            x.what.clone(),
            format!("{:.3} (95% {:.3}-{:.3})", x.median, x.ci.0, x.ci.1),
            "<= 1.03".into(),
            verdict(x.ci.0, x.ci.1, 1.03),
        );
    }
    if let Some(x) = scale.iter().find(|x| x.senders == 64) {
        let t = x.setup_s + x.teardown_s;
        row(
            "64 senders up and down, s".into(),
            format!("{t:.2}"),
            "< 5".into(),
            verdict(t, t, 5.0),
        );
    }
    s
}

/// The table `just bench` prints.
pub fn table(r: &BenchReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let median = |label: &str, f: fn(&Transfer) -> f64| {
        let mut v: Vec<f64> = r
            .algorithms
            .transfers
            .iter()
            .filter(|t| t.contender == label)
            .map(f)
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let mut labels: Vec<&str> = Vec::new();
    for t in &r.algorithms.transfers {
        if !labels.contains(&t.contender.as_str()) {
            labels.push(&t.contender);
        }
    }
    let _ = writeln!(
        s,
        "\nbench: {} ({} CPUs), commit {}; {} rounds, {} MiB per transfer",
        r.machine.kernel,
        r.machine.cpus,
        r.machine.commit,
        r.config.rounds,
        r.config.bytes >> 20
    );
    let _ = writeln!(
        s,
        "\n{:<28} {:>10} {:>14} {:>16}",
        "contender (median)", "Gbit/s", "CPU s/GB", "process s/GB"
    );
    for l in &labels {
        let _ = writeln!(
            s,
            "{:<28} {:>10.2} {:>14.3} {:>16.3}",
            l,
            median(l, |t| t.gbps),
            median(l, |t| t.cpu_s_per_gb),
            median(l, |t| t.process_cpu_s_per_gb)
        );
    }
    let _ = writeln!(
        s,
        "\n{:<52} {:>8} {:>16}",
        "ratio (paired per round)", "median", "rounds min-max"
    );
    let ratios = r
        .algorithms
        .ratios
        .iter()
        .chain(r.switch.iter().filter_map(|w| w.ratio.as_ref()));
    for x in ratios {
        let _ = writeln!(
            s,
            "{:<52} {:>8.3} {:>8.3}-{:.3}",
            x.what, x.median, x.min, x.max
        );
    }
    let _ = writeln!(
        s,
        "\n{:<44} {:>10} {:>14}",
        "BPF program (bpf_stats)", "ns/call", "calls"
    );
    let labelled = |v: &[PerCall], what: &str| -> Vec<PerCall> {
        v.iter()
            .map(|p| PerCall {
                program: format!("{} ({what})", p.program),
                ..p.clone()
            })
            .collect()
    };
    let programs = r
        .algorithms
        .per_call
        .iter()
        .cloned()
        .chain(labelled(&r.algorithms.per_call_unguarded, "guard=0"))
        .chain(labelled(
            &r.algorithms.floor_per_call,
            "floor: Reno fallback",
        ))
        .chain(r.switch.iter().flat_map(|w| w.per_packet.iter().cloned()));
    for p in programs {
        let _ = writeln!(s, "{:<52} {:>10.1} {:>14}", p.program, p.ns, p.calls);
    }
    if let Some(t) = &r.algorithms.timed_alike {
        let _ = writeln!(
            s,
            "\n{:<52} {:>10} {:>14}",
            "timed alike (fentry/fexit, no bpf_stats)", "ns/call", "calls"
        );
        for (who, calls) in [
            ("bpf_dctcp", &t.bpf_dctcp),
            ("kernel dctcp", &t.kernel_dctcp),
        ] {
            for p in calls.iter() {
                let what = format!("{who}: {}", p.program);
                let _ = writeln!(s, "{what:<52} {:>10.1} {:>14}", p.ns, p.calls);
            }
        }
        let _ = writeln!(
            s,
            "in the algorithm per GB: bpf_dctcp {:.1} ms, kernel dctcp {:.1} ms ({:.2}x)",
            t.ms_per_gb.0,
            t.ms_per_gb.1,
            t.ms_per_gb.0 / t.ms_per_gb.1
        );
    }
    if let Some(w) = &r.switch {
        for (costs, head, unit) in [
            (
                &w.egress,
                "on the bottleneck's egress (bpf_stats)",
                "ns/packet",
            ),
            (
                &w.sampled,
                "in situ, perf samples (no bpf_stats)",
                "ns/packet",
            ),
            (&w.isolated, "in isolation (BPF_PROG_TEST_RUN)", "ns/run"),
        ] {
            let _ = writeln!(s, "\n{head:<44} {unit:>10} {:>18}", "rounds min-max");
            for e in costs {
                let _ = writeln!(
                    s,
                    "{:<44} {:>10.1} {:>10.1}-{:.1}",
                    e.what, e.median, e.min, e.max
                );
            }
        }
    }
    s += &goals(&r.algorithms, r.switch.as_ref(), &r.scale);
    if !r.scale.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<10} {:>10} {:>12} {:>12}",
            "senders", "up (s)", "down (s)", "RSS (MiB)"
        );
        for x in &r.scale {
            let _ = writeln!(
                s,
                "{:<10} {:>10.2} {:>12.2} {:>12.1}",
                x.senders, x.setup_s, x.teardown_s, x.rss_mib
            );
        }
    }

    if !r.delay.is_empty() {
        s += &crate::experiments::delay_bench::table(&r.delay);
    }
    s
}

/// What bpf_dctcp, its tracing and the BPF switch cost (`just bench`).
///
/// Each comparison is measured side by side in one run, alternating A and
/// B every round, and printed as a ratio with its spread and the 95 %
/// interval of its median: CPU per GB and throughput of bpf_dctcp
/// against the kernel's algorithms (bulk over a veth pair, offloads off)
/// and with tracing per window and per ACK; ns per call of every
/// struct_ops program (kernel.bpf_stats_enabled, in a separate transfer)
/// against its Reno fallback's; the lab bottleneck's top goodput with and without the BPF marker, and
/// the marker's ns per packet against an empty program and one that only
/// reads the queue, by bpf_stats, perf and BPF_PROG_TEST_RUN; set-up and
/// tear-down time and memory of stars of N senders. Ends with every goal
/// (PASS, MISS, UNRESOLVED). Writes a JSON report.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// 2 rounds, 256 MiB transfers, 2 s switch runs, stars of 1 and 16.
    #[arg(long)]
    pub quick: bool,
    /// Rounds of every comparison, 1 to 500 (default 5, 2 with
    /// --quick). CPU per GB spreads by about 15 % per round on a small
    /// guest: a 95 % interval of the median narrower than 3 % takes
    /// about 100.
    #[arg(long)]
    pub rounds: Option<usize>,
    /// MiB per bulk transfer (default 1024, 256 with --quick).
    #[arg(long)]
    pub mib: Option<u64>,
    /// Kernel algorithms to compare bpf_dctcp with.
    #[arg(long, value_delimiter = ',', default_value = "reno,cubic")]
    pub baselines: Vec<String>,
    /// Leave out bpf_dctcp traced per window and per ACK.
    #[arg(long)]
    pub no_tracing: bool,
    /// Seconds per switch run, 0 to skip (default 4, 2 with --quick).
    #[arg(long)]
    pub switch_secs: Option<f64>,
    /// Leave out the switch's cost from perf's samples (perf record -a
    /// -g, from linux-perf), which needs perf and adds a set of runs.
    #[arg(long)]
    pub no_perf: bool,
    /// Star sizes to set up and tear down (default 1,16,64,256; 1,16
    /// with --quick).
    #[arg(long, value_delimiter = ',')]
    pub scale: Option<Vec<usize>>,
    /// Rates of the delay section: each without a delay and at every
    /// --delays with every --delay-backends (cubic on droptail).
    #[arg(long, value_delimiter = ',', value_parser = crate::units::parse_rate, default_value = "100M,1G")]
    pub delay_rates: Vec<u64>,
    /// Round trips of the delay section.
    #[arg(long, value_delimiter = ',', value_parser = crate::net::delay::parse_duration, default_value = "100us,1ms,8ms,25ms")]
    pub delays: Vec<Duration>,
    /// Backends of the delay section (netem where the kernel has it).
    #[arg(long, value_delimiter = ',', value_enum, default_value = "auto")]
    pub delay_backends: Vec<crate::net::delay::DelayBackend>,
    /// Seconds per delay-section run, 0 to skip the section (default 6,
    /// 4 with --quick).
    #[arg(long)]
    pub delay_secs: Option<f64>,
    /// JSON report (default bench/results/<timestamp>.json).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

impl BenchArgs {
    pub fn config(&self) -> BenchConfig {
        let quick = self.quick;
        let delay_secs = self.delay_secs.unwrap_or(if quick { 4.0 } else { 6.0 });
        BenchConfig {
            rounds: self.rounds.unwrap_or(if quick { 2 } else { 5 }),
            bytes: self.mib.unwrap_or(if quick { 256 } else { 1024 }) << 20,
            baselines: self.baselines.clone(),
            tracing: !self.no_tracing,
            switch_secs: self.switch_secs.unwrap_or(if quick { 2.0 } else { 4.0 }),
            perf: !self.no_perf,
            scale: self.scale.clone().unwrap_or(if quick {
                vec![1, 16]
            } else {
                vec![1, 16, 64, 256]
            }),
            delay: (delay_secs > 0.0).then(|| crate::experiments::delay_bench::DelayBenchConfig {
                rates_bps: self.delay_rates.clone(),
                delays: self.delays.clone(),
                backends: self.delay_backends.clone(),
                duration: Duration::from_secs_f64(delay_secs),
            }),
        }
    }
}

/// `lab bench`: checks the configuration, runs every comparison, writes
/// the JSON report (`--out`, default bench/results/<timestamp>.json) and
/// prints the table.
pub fn command(args: &BenchArgs, stop: &Arc<AtomicBool>) -> Result<()> {
    let cfg = args.config();
    cfg.validate()
        .map_err(|e| anyhow::Error::new(dctcp_utils::error::UsageError(format!("{e:#}"))))?;
    dctcp_utils::preflight::require_root("lab")?;
    dctcp_utils::preflight::require_btf()?;
    dctcp_utils::preflight::require_struct_ops()?;
    let path = args.out.clone().unwrap_or_else(|| {
        std::path::PathBuf::from("bench/results")
            .join(format!("{}.json", crate::report::results::timestamp()))
    });
    let report = run(&cfg, stop)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    print!("{}", table(&report));
    println!("report: {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_medians_interval_holds_the_median_and_narrows_with_rounds() {
        assert_eq!(median_interval(&[1.0; 5]), (1.0, 1.0));
        let spread = |n: usize| -> Vec<f64> {
            let mut rng = crate::rng::Rng(7);
            let mut v: Vec<f64> = (0..n).map(|_| 0.85 + 0.3 * rng.unit()).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let (few, many) = (spread(5), spread(200));
        let (a, b) = median_interval(&few);
        assert!(a <= median_of(&few) && median_of(&few) <= b, "{a} {b}");
        let (c, d) = median_interval(&many);
        assert!(c <= median_of(&many) && median_of(&many) <= d);
        assert!(d - c < (b - a) / 3.0, "{} against {}", d - c, b - a);
    }

    #[test]
    fn a_verdict_needs_every_round_on_one_side() {
        assert_eq!(verdict(0.9, 1.02, 1.03), "PASS");
        assert_eq!(verdict(1.04, 1.2, 1.03), "MISS");
        assert_eq!(verdict(0.9, 1.1, 1.03), "UNRESOLVED");
        // A round at the goal meets it.
        assert_eq!(verdict(1.03, 1.1, 1.03), "UNRESOLVED");
        assert_eq!(verdict(1.0, 1.03, 1.03), "PASS");
    }

    #[test]
    fn time_in_the_algorithm_per_gb_sums_every_operation() {
        let op = |ns: f64, calls: u64| PerCall {
            program: String::new(),
            ns,
            calls,
        };
        // 100 ns x 1,000,000 + 50 ns x 2,000,000 = 200 ms over 2 GB.
        let ms = ms_per_gb(&[op(100.0, 1_000_000), op(50.0, 2_000_000)], 2_000_000_000);
        assert!((ms - 100.0).abs() < 1e-9, "{ms}");
        assert_eq!(ms_per_gb(&[], 1 << 30), 0.0);
    }

    #[test]
    fn a_ratio_is_the_median_and_range_of_the_rounds() {
        let r = ratio("x".into(), &mut [3.0, 1.0, 2.0, 5.0, 4.0]);
        assert_eq!((r.median, r.min, r.max), (3.0, 1.0, 5.0));
        assert!(r.ci.0 <= 3.0 && 3.0 <= r.ci.1);
    }

    fn spread(what: &str, min: f64, median: f64, max: f64) -> Ratio {
        Ratio {
            what: what.into(),
            median,
            min,
            max,
            ci: (min, max),
        }
    }

    /// The goals table's row for `what`: (measured, goal, verdict) columns.
    fn row<'a>(table: &'a str, what: &str) -> &'a str {
        table
            .lines()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no row {what} in\n{table}"))[what.len()..]
            .trim()
    }

    #[test]
    fn every_goal_is_judged_against_its_floor() {
        let per_call = |program: &str, ns: f64, calls: u64| PerCall {
            program: program.into(),
            ns,
            calls,
        };
        let algorithms = AlgorithmReport {
            per_call: vec![
                per_call("dctcp_in_ack_ev", 110.0, 5000),
                per_call("dctcp_cwnd_even", 130.0, 5000),
                // Too few calls to judge.
                per_call("dctcp_init", 900.0, 2),
            ],
            floor_per_call: vec![per_call("dctcp_reno_cong", 80.0, 5000)],
            ratios: vec![
                spread("CPU per GB, bpf_dctcp / reno", 0.95, 1.0, 1.02),
                spread("CPU per GB, bpf_dctcp / dctcp", 1.04, 1.1, 1.2),
                spread("CPU per GB, bpf_dctcp / cubic", 1.5, 1.6, 1.7),
            ],
            ..Default::default()
        };
        let switch = SwitchReport {
            sampled: vec![
                spread(EGRESS_FLOOR, 60.0, 62.0, 70.0),
                spread(EGRESS_QUEUE_READ, 90.0, 100.0, 110.0),
                spread(EGRESS_MARKER, 95.0, 110.0, 135.0),
                spread(EGRESS_PROBE, 250.0, 300.0, 340.0),
            ],
            ..Default::default()
        };
        let scale = |senders, setup_s| ScaleRun {
            senders,
            setup_s,
            teardown_s: 0.5,
            rss_mib: 0.0,
            rss_added_mib: 0.0,
        };
        let t = goals(&algorithms, Some(&switch), &[scale(1, 0.1), scale(64, 4.6)]);
        // 110 against 62 + 30; against the queue-read floor 100 + 30 one
        // round (135) is over.
        let marker: Vec<&str> = t
            .lines()
            .filter(|l| l.starts_with("marker, ns per packet (perf)"))
            .collect();
        assert_eq!(marker.len(), 2, "{t}");
        assert!(
            marker[0].contains("<= floor 62.0 + 30") && marker[0].ends_with("MISS"),
            "{t}"
        );
        assert!(
            marker[1].contains("<= queue-read floor 100.0 + 30")
                && marker[1].ends_with("UNRESOLVED"),
            "{t}"
        );
        assert!(row(&t, "marker + probe, ns per sampled arrival (perf)").ends_with("MISS"));
        // Per call against 1.5 x 80 = 120.
        assert!(
            row(&t, "dctcp_in_ack_ev, ns per call").ends_with("PASS"),
            "{t}"
        );
        assert!(
            row(&t, "dctcp_cwnd_even, ns per call").ends_with("MISS"),
            "{t}"
        );
        assert!(!t.contains("dctcp_init"), "{t}");
        // CPU per GB on the interval against 1.03; cubic is not judged.
        assert!(
            row(&t, "CPU per GB, bpf_dctcp / reno").ends_with("PASS"),
            "{t}"
        );
        assert!(
            row(&t, "CPU per GB, bpf_dctcp / dctcp").ends_with("MISS"),
            "{t}"
        );
        assert!(!t.contains("/ cubic"), "{t}");
        // 64 senders: 4.6 + 0.5 s against 5.
        let up_down = row(&t, "64 senders up and down, s");
        assert!(
            up_down.starts_with("5.10") && up_down.ends_with("MISS"),
            "{t}"
        );
        // Without a switch report, no switch goals.
        assert!(!goals(&algorithms, None, &[]).contains("marker"));
    }
}
