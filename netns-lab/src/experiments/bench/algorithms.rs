//! bpf_dctcp against the kernel's algorithms: bulk transfers over a veth
//! pair, CPU per GB, throughput and per-call cost.

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

use crate::measure::cpu::Cpu;
use crate::net::netns::Netns;
use crate::net::prefix::Prefix;
use crate::net::topology::offloads_off;
use crate::net::veth::Veth;
use crate::traffic::bulk::{listen_announced, send_bytes};
use crate::traffic::cc::LabCc;

use super::bpf_stats::{max_prog_id, per_call, prog_stats, progs_since, BpfStats, PerCall};
use super::ratio::{ratio, Ratio};
use super::BenchConfig;

const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 251, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 251, 2);
const PORT: u16 = 5301;

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
pub struct VethPair {
    client: Netns,
    server: Netns,
    _prefix: Prefix,
}

impl VethPair {
    pub fn new() -> Result<VethPair> {
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
        Ok(VethPair {
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
#[derive(Clone, Debug, Default, Serialize)]
pub struct AlgorithmReport {
    pub transfers: Vec<Transfer>,
    pub ratios: Vec<Ratio>,
    pub per_call: Vec<PerCall>,
    /// bpf_dctcp with `guard=0`.
    pub per_call_unguarded: Vec<PerCall>,
    /// The Reno fallback: the floor a struct_ops program costs here.
    pub floor_per_call: Vec<PerCall>,
    /// bpf_prague's programs, where the kernel runs it (6.10+).
    pub prague_per_call: Vec<PerCall>,
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
pub(super) fn ms_per_gb(calls: &[PerCall], bytes: u64) -> f64 {
    calls.iter().map(|p| p.ns * p.calls as f64).sum::<f64>() / 1e6 / (bytes as f64 / 1e9)
}

/// bpf_dctcp's programs (`ids`) over one transfer, then the kernel's dctcp
/// functions over another, timed alike (crate::measure::calltime). The struct_ops
/// trampoline that calls a BPF program is outside its timed interval; a
/// kernel function is called directly.
pub(super) fn timed_alike(
    pair: &VethPair,
    bpf_cc: &str,
    ids: &[u32],
    bytes: u64,
) -> Result<TimedAlike> {
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

pub(super) fn run(cfg: &BenchConfig, stop: &Arc<AtomicBool>) -> Result<AlgorithmReport> {
    let before = max_prog_id();
    let dctcp = LabCc::attach(Algo::Dctcp, vec![])?;
    let ids = progs_since(before, "dctcp_");
    let pair = VethPair::new()?;
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
    // Prague beside them where the kernel runs it (its window and pacing;
    // the ECT(1) program is not on the bench's pair).
    let before_prague = max_prog_id();
    let prague = Algo::Prague
        .require_kernel()
        .is_ok()
        .then(|| LabCc::attach(Algo::Prague, vec![]))
        .transpose()?;
    let prague_ids = progs_since(before_prague, "prague_");
    if let Some(p) = &prague {
        contenders.push(Contender {
            label: "bpf_prague".into(),
            cc: p.name.clone(),
            tracing: Tracing::Off,
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
        // bpf_dctcp over a kernel baseline; a traced run, or bpf_prague,
        // over bpf_dctcp.
        let (a, b) = if cfg.baselines.contains(&c.label) {
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
        let measure = |cc: &str, ids: &[u32]| -> Result<Vec<PerCall>> {
            let s0 = prog_stats(ids);
            pair.transfer(cc, cfg.bytes)?;
            Ok(per_call(&s0, &prog_stats(ids)))
        };
        report.per_call = measure(&dctcp.name, &ids)?;
        let guard = |on: &str| loader::params::Assignment {
            key: "guard".into(),
            value: on.into(),
        };
        loader::instance::set(&dctcp.name, &[guard("0")])?;
        report.per_call_unguarded = measure(&dctcp.name, &ids)?;
        loader::instance::set(&dctcp.name, &[guard("1")])?;
        report.floor_per_call = measure(&fallback, &ids)?;
        if let Some(p) = &prague {
            report.prague_per_call = measure(&p.name, &prague_ids)?;
        }
    }
    if cfg.baselines.iter().any(|b| b == "dctcp") {
        report.timed_alike = Some(timed_alike(&pair, &dctcp.name, &ids, cfg.bytes)?);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
