//! A star for request/response experiments: one `rpcgen worker` per sender
//! namespace, the bottleneck and BPF switch in front of the receiver, and
//! the aggregator (`rpcgen client`) run at the receiver. Used by `lab
//! incast` and `lab rpc`.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tc_qdisc::intf::queue_sample;
use tc_qdisc::qdisc_stats::{self, QdiscCounters};
use tc_qdisc::{Bottleneck, BpfSwitch};

use crate::net::delay::{RoundTrip, RttMeasured};
use crate::net::netns::Netns;
use crate::net::topology::{sender_addr, Star, StarSpec};

pub const WORKER_PORT: u16 = 7000;

/// The rpcgen binary built beside this one.
pub fn rpcgen() -> Result<PathBuf> {
    crate::net::netns::sibling_binary("rpcgen")
}

/// The TCP MIB summed over namespaces (each has its own /proc/net):
/// retransmission timeouts, tail-loss probes, retransmitted segments.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct TcpCounters {
    pub timeouts: u64,
    pub loss_probes: u64,
    pub retransmits: u64,
}

impl TcpCounters {
    fn of(ns: &Netns) -> Result<TcpCounters> {
        ns.run(|| -> Result<TcpCounters> {
            // thread-self: this thread is the one in the namespace.
            let value = |file: &str, group: &str, key: &str| -> Result<u64> {
                let text = std::fs::read_to_string(format!("/proc/thread-self/net/{file}"))?;
                let mut lines = text.lines().filter(|l| l.starts_with(group));
                let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
                    bail!("{file}: no {group} lines");
                };
                names
                    .split_whitespace()
                    .zip(values.split_whitespace())
                    .find(|(n, _)| *n == key)
                    .and_then(|(_, v)| v.parse().ok())
                    .with_context(|| format!("{file}: no {key}"))
            };
            Ok(TcpCounters {
                timeouts: value("netstat", "TcpExt:", "TCPTimeouts")?,
                loss_probes: value("netstat", "TcpExt:", "TCPLossProbes")?,
                retransmits: value("snmp", "Tcp:", "RetransSegs")?,
            })
        })?
    }

    fn since(self, before: TcpCounters) -> TcpCounters {
        TcpCounters {
            timeouts: self.timeouts - before.timeouts,
            loss_probes: self.loss_probes - before.loss_probes,
            retransmits: self.retransmits - before.retransmits,
        }
    }
}

/// CPU seconds a process has run so far, its exited threads included: the
/// process's CPU-time clock (`clock_getcpuclockid`), counted by the scheduler
/// in nanoseconds, where `/proc/PID/stat` counts whole clock ticks (10 ms),
/// which a 100 Mbit/s run's senders use only a few of. Falls back to the
/// ticks where the clock cannot be read.
fn cpu_seconds(pid: u32) -> f64 {
    cpu_clock_seconds(pid).unwrap_or_else(|| stat_seconds(pid))
}

fn cpu_clock_seconds(pid: u32) -> Option<f64> {
    let mut clock: libc::clockid_t = 0;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: both pointers are to live locals of the right types.
    let ok = unsafe {
        libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) == 0
            && libc::clock_gettime(clock, &mut ts) == 0
    };
    ok.then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
}

pub(crate) fn stat_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / hz
}

/// What one aggregator run measured.
pub struct ClientRun {
    pub report: serde_json::Value,
    /// The workers' retransmission counters over the run.
    pub tcp: TcpCounters,
    /// The bottleneck qdisc over the run.
    pub qdisc: QdiscCounters,
    /// CE marks over the run: the BPF marker's and the qdisc's.
    pub marks: u64,
    /// CPU seconds of the workers together, and of the aggregator.
    pub worker_cpu_s: f64,
    pub client_cpu_s: f64,
}

/// The star with its workers up; everything goes when dropped.
pub struct RpcStar {
    /// `lab --pcap`: stopped first, before the workers and namespaces go.
    capture: Option<crate::capture::Capture>,
    star: Star,
    round_trip: Option<RoundTrip>,
    switch: BpfSwitch,
    workers: Vec<Child>,
    bin: PathBuf,
}

impl RpcStar {
    /// `n` workers running `cc` behind `bottleneck`, at `round_trip` if
    /// given; `rto_min_ms` on the workers' routes if given.
    pub fn start(
        n: usize,
        cc: &str,
        bottleneck: &Bottleneck,
        round_trip: Option<RoundTrip>,
        rto_min_ms: Option<u32>,
    ) -> Result<RpcStar> {
        let bin = rpcgen()?;
        let star = Star::build(&StarSpec {
            round_trip: round_trip.clone(),
            ..StarSpec::senders(n)
        })?;
        star.ecn_everywhere()?;
        bottleneck.install(star.switch.name(), &star.bottleneck_if)?;
        let switch = BpfSwitch::start(
            None,
            bottleneck.backend.marker_config(bottleneck.buffer_pkts, 1),
            bottleneck.rate_bps,
            false,
            &star.switch.path(),
            &star.bottleneck_if,
            &star.receiver.ns.path(),
            &star.receiver.ifname,
        )?;
        if let Some(ms) = rto_min_ms {
            let rto = format!("{ms}ms");
            for (i, h) in star.senders.iter().enumerate() {
                let gw = format!("198.18.{i}.254");
                h.ns.ip(&["route", "replace", "default", "via", &gw, "rto_min", &rto])?;
            }
        }
        crate::capture::name_next_run(&format!("{cc} {n} workers"));
        let capture = crate::capture::Capture::start(&star)?;
        let mut s = RpcStar {
            capture,
            star,
            round_trip,
            switch,
            workers: Vec::new(),
            bin,
        };
        for h in &s.star.senders {
            let listen = format!("{}:{WORKER_PORT}", h.addr);
            s.workers.push(
                h.ns.command(&s.bin)
                    .args(["worker", "--listen", &listen, "--cc", cc])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("starting rpcgen workers")?,
            );
        }
        s.wait_ready()?;
        Ok(s)
    }

    /// Every worker accepts connections before the aggregator starts.
    fn wait_ready(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        for i in 0..self.star.senders.len() {
            let addr = std::net::SocketAddr::from((sender_addr(i), WORKER_PORT));
            loop {
                let up = self.star.receiver.ns.run(move || {
                    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
                })?;
                if up {
                    break;
                }
                anyhow::ensure!(Instant::now() < deadline, "rpcgen worker {i} did not start");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    pub fn worker_addrs(&self) -> String {
        (0..self.star.senders.len())
            .map(|i| format!("{}:{WORKER_PORT}", sender_addr(i)))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn counters(&self) -> Result<TcpCounters> {
        let mut total = TcpCounters::default();
        for h in &self.star.senders {
            let c = TcpCounters::of(&h.ns)?;
            total.timeouts += c.timeouts;
            total.loss_probes += c.loss_probes;
            total.retransmits += c.retransmits;
        }
        Ok(total)
    }

    /// Runs `rpcgen client <args>` at the receiver to completion (or `stop`).
    pub fn client(&self, args: &[String], stop: &Arc<AtomicBool>) -> Result<ClientRun> {
        let ns = self.star.switch.name();
        let dev = &self.star.bottleneck_if;
        let (c0, q0) = (self.counters()?, qdisc_stats::read(ns, dev)?);
        let m0 = self.switch.stats()?.marked;
        let w0: f64 = self.workers.iter().map(|w| cpu_seconds(w.id())).sum();
        let mut client = self
            .star
            .receiver
            .ns
            .command(&self.bin)
            .arg("client")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = client.id();
        let mut client_cpu_s = 0.0;
        while client.try_wait()?.is_none() {
            if stop.load(Ordering::Relaxed) {
                let _ = client.kill();
                let _ = client.wait();
                bail!("interrupted");
            }
            client_cpu_s = cpu_seconds(pid).max(client_cpu_s);
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = client.wait_with_output()?;
        anyhow::ensure!(
            out.status.success(),
            "aggregator failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let w1: f64 = self.workers.iter().map(|w| cpu_seconds(w.id())).sum();
        let (c1, q1) = (self.counters()?, qdisc_stats::read(ns, dev)?);
        let m1 = self.switch.stats()?.marked;
        Ok(ClientRun {
            report: serde_json::from_slice(&out.stdout)?,
            tcp: c1.since(c0),
            qdisc: QdiscCounters {
                sent_bytes: q1.sent_bytes - q0.sent_bytes,
                sent_packets: q1.sent_packets - q0.sent_packets,
                drops: q1.drops - q0.drops,
                marks: q1.marks - q0.marks,
                // A level, not a count: what was queued at the end.
                ..q1.clone()
            },
            marks: (m1 - m0) + (q1.marks - q0.marks),
            worker_cpu_s: w1 - w0,
            client_cpu_s,
        })
    }

    /// The round trip the run had (the delay element stops here; rpcgen's
    /// sockets are another process's, so the probe's figures stand for the
    /// flows').
    pub fn rtt(&mut self) -> Result<RttMeasured> {
        let element = self.star.stop_delay()?;
        Ok(self
            .star
            .rtt_measured(self.round_trip.as_ref(), std::iter::empty(), element))
    }

    /// The queue at every arrival so far.
    pub fn queue(&mut self) -> Result<Vec<queue_sample>> {
        Ok(self.switch.take_trace()?.samples)
    }
}

impl Drop for RpcStar {
    fn drop(&mut self) {
        match self.capture.take().map(crate::capture::Capture::finish) {
            Some(Ok(report)) => report.lines().iter().for_each(|l| eprintln!("  {l}")),
            Some(Err(e)) => eprintln!("warning: {e:#}"),
            None => {}
        }
        for w in &self.workers {
            // SAFETY: signalling a child we spawned.
            unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
        }
        for w in &mut self.workers {
            let _ = w.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's own CPU time, seconds.
    fn thread_cpu() -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid clock id and a pointer to a live timespec.
        assert_eq!(
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) },
            0
        );
        ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
    }

    /// Runs until this thread has used `secs` of CPU (however long that
    /// takes on a busy machine), mostly in the kernel when `in_kernel`.
    fn burn(secs: f64, in_kernel: bool) {
        let start = thread_cpu();
        let mut x = 0u64;
        while thread_cpu() - start < secs {
            for _ in 0..1000 {
                if in_kernel {
                    // SAFETY: getppid has no preconditions.
                    x = x.wrapping_add(unsafe { libc::getppid() } as u64);
                } else {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            }
        }
        std::hint::black_box(x);
    }

    #[test]
    fn cpu_seconds_counts_user_and_kernel_time_of_every_thread() {
        let pid = std::process::id();
        let before = (
            cpu_seconds(pid),
            cpu_clock_seconds(pid).unwrap(),
            stat_seconds(pid),
        );
        let wall = Instant::now();
        // In a second thread that has exited when read: its time must count.
        std::thread::spawn(|| {
            burn(0.1, false);
            burn(0.3, true);
        })
        .join()
        .unwrap();
        let spent = wall.elapsed().as_secs_f64();
        let after = (
            cpu_seconds(pid),
            cpu_clock_seconds(pid).unwrap(),
            stat_seconds(pid),
        );
        let cpus = std::thread::available_parallelism().unwrap().get() as f64;
        for (what, d) in [
            ("cpu_seconds", after.0 - before.0),
            ("cpu clock", after.1 - before.1),
            ("stat ticks", after.2 - before.2),
        ] {
            // At least the 0.4 s the thread used, less a few 10 ms ticks for
            // the tick count; at most every CPU busy for the whole wait
            // (other tests run beside this one).
            assert!(
                d >= 0.35 && d <= spent * cpus + 0.05,
                "{what}: {d:.3} s over {spent:.3} s of wall time"
            );
        }
    }

    #[test]
    fn cpu_seconds_reads_another_process() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until the busy child has a few ticks, however busy the machine.
        let wall = Instant::now();
        while stat_seconds(pid) < 0.05 && wall.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let (clock, ticks) = (cpu_seconds(pid), stat_seconds(pid));
        let spent = wall.elapsed().as_secs_f64();
        let _ = child.kill();
        let _ = child.wait();
        // The kernel scales the ticks to the scheduler's count: the two
        // agree within a tick or two, and neither exceeds the wall time.
        assert!(ticks >= 0.05, "{ticks} s of ticks in {spent:.2} s");
        assert!(
            (clock - ticks).abs() <= 0.03 + 0.1 * ticks && clock <= spent + 0.01,
            "clock {clock:.3} s, ticks {ticks:.3} s, over {spent:.3} s"
        );
    }
}
