//! CPU accounting of a run: the whole machine's time by kind (/proc/stat),
//! the time the hypervisor took from the lab's own CPUs, and this process's
//! (getrusage).

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// CPU time of the whole machine and of this process, in seconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Cpu {
    pub user: f64,
    pub system: f64,
    /// irq + softirq: where veth's receive path and ACK processing run.
    pub softirq: f64,
    /// Time the hypervisor ran something else while the CPUs this thread
    /// may run on (the lab's, `lab --cpus`) wanted to run: the link's
    /// emulation, the switch and the hosts all stop with it.
    pub steal: f64,
    /// How many CPUs `steal` is summed over.
    pub steal_cpus: usize,
    pub process: f64,
}

impl Cpu {
    pub(crate) fn now() -> Result<Cpu> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        let fields = |line: &str| -> Vec<f64> {
            line.split_whitespace()
                .skip(1)
                .map(|v| v.parse().unwrap_or(0.0))
                .collect()
        };
        let f = fields(stat.lines().next().context("/proc/stat is empty")?);
        let mine = crate::net::cpus::allowed()?;
        let steal_ticks: f64 = stat
            .lines()
            .filter_map(|l| {
                let n: usize = l
                    .split_whitespace()
                    .next()?
                    .strip_prefix("cpu")?
                    .parse()
                    .ok()?;
                mine.contains(&n)
                    .then(|| fields(l).get(7).copied().unwrap_or(0.0))
            })
            .sum();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let at = |i: usize| f.get(i).copied().unwrap_or(0.0) / hz;
        Ok(Cpu {
            user: at(0) + at(1),
            system: at(2),
            softirq: at(5) + at(6),
            steal: steal_ticks / hz,
            steal_cpus: mine.len(),
            process: tv(ru.ru_utime) + tv(ru.ru_stime),
        })
    }

    pub(crate) fn since(self, before: Cpu) -> Cpu {
        Cpu {
            user: self.user - before.user,
            system: self.system - before.system,
            softirq: self.softirq - before.softirq,
            steal: self.steal - before.steal,
            steal_cpus: self.steal_cpus,
            process: self.process - before.process,
        }
    }

    /// The share of all the machine's CPUs' time over `window_s` seconds
    /// spent in irq and softirq (on a delta from `since`): the whole
    /// machine's, as /proc/stat's first line counts it.
    pub fn softirq_share(&self, window_s: f64) -> f64 {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        self.softirq / (window_s * cpus).max(f64::MIN_POSITIVE)
    }

    /// The share of the lab's CPUs' time over `window_s` seconds that the
    /// hypervisor took (on a delta from `since`).
    pub fn steal_share(&self, window_s: f64) -> f64 {
        self.steal / (window_s * self.steal_cpus.max(1) as f64).max(f64::MIN_POSITIVE)
    }

    pub fn total(&self) -> f64 {
        self.user + self.system + self.softirq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::cpus::CpuList;

    #[test]
    fn steal_counts_only_the_cpus_the_lab_runs_on() {
        let last = *crate::net::cpus::allowed().unwrap().last().unwrap();
        let pinned = std::thread::spawn(move || {
            CpuList(vec![last]).pin_self().unwrap();
            Cpu::now().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(pinned.steal_cpus, 1);
        let all = Cpu::now().unwrap();
        assert_eq!(
            all.steal_cpus,
            std::thread::available_parallelism().unwrap().get()
        );
        // 0.3 s stolen from two CPUs over 1.5 s is a tenth of their time.
        let stolen = Cpu {
            steal: 0.3,
            steal_cpus: 2,
            ..Cpu::default()
        };
        assert!((stolen.steal_share(1.5) - 0.1).abs() < 1e-12);
        let earlier = Cpu {
            steal: 0.05,
            ..stolen
        };
        assert!((stolen.since(earlier).steal - 0.25).abs() < 1e-12);
        // With every CPU allowed, the per-CPU lines sum to the machine's
        // steal since boot (/proc/stat's first line), each line rounded on
        // its own.
        let cpus = std::fs::read_to_string("/proc/stat")
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
            .count();
        let (m0, _) = proc_seconds();
        let now = Cpu::now().unwrap();
        let (m1, _) = proc_seconds();
        if now.steal_cpus == cpus {
            let rounding = (cpus + 1) as f64 * tick();
            assert!(
                now.steal >= m0[7] - rounding && now.steal <= m1[7] + rounding,
                "{} s against {}-{} s",
                now.steal,
                m0[7],
                m1[7]
            );
        }
    }

    /// One clock tick in seconds, asked here rather than of the code under
    /// test so that the readings below stay a second opinion.
    fn tick() -> f64 {
        // SAFETY: sysconf has no preconditions.
        1.0 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
    }

    /// /proc/stat's first line (user to steal) and this process's utime +
    /// stime (/proc/self/stat, as rpcstar reads rpcgen's), in seconds.
    fn proc_seconds() -> (Vec<f64>, f64) {
        let stat = std::fs::read_to_string("/proc/stat").unwrap();
        let machine = stat
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(|v| v.parse::<f64>().unwrap() * tick())
            .collect();
        (
            machine,
            crate::traffic::rpcstar::stat_seconds(std::process::id()),
        )
    }

    #[test]
    fn each_kind_of_time_is_read_from_its_own_field() {
        // Some kernel time of our own first, so user and system differ.
        let t = std::time::Instant::now();
        while t.elapsed().as_millis() < 200 {
            let _ = std::fs::read_to_string("/proc/stat");
        }
        let (m0, p0) = proc_seconds();
        let cpu = Cpu::now().unwrap();
        let (m1, p1) = proc_seconds();
        let within = |v: f64, lo: f64, hi: f64, what: &str| {
            assert!(
                v >= lo - 2.0 * tick() && v <= hi + 2.0 * tick(),
                "{what}: {v} s against {lo}-{hi} s"
            );
        };
        within(cpu.user, m0[0] + m0[1], m1[0] + m1[1], "user + nice");
        within(cpu.system, m0[2], m1[2], "system");
        within(cpu.softirq, m0[5] + m0[6], m1[5] + m1[6], "irq + softirq");
        within(cpu.process, p0, p1, "this process");
        assert_eq!(cpu.total(), cpu.user + cpu.system + cpu.softirq);
    }

    #[test]
    fn a_delta_subtracts_each_kind_and_keeps_the_cpus() {
        let at = |k: f64| Cpu {
            user: 1.0 * k,
            system: 2.0 * k,
            softirq: 3.0 * k,
            steal: 4.0 * k,
            steal_cpus: 2,
            process: 5.0 * k,
        };
        let d = at(3.0).since(at(1.0));
        assert_eq!(
            (d.user, d.system, d.softirq, d.steal, d.process),
            (2.0, 4.0, 6.0, 8.0, 10.0)
        );
        assert_eq!(d.steal_cpus, 2);
    }

    #[test]
    fn softirq_is_a_share_of_every_cpu() {
        let cpus = std::thread::available_parallelism().unwrap().get() as f64;
        let busy = Cpu {
            softirq: 0.3 * cpus,
            ..Cpu::default()
        };
        assert!((busy.softirq_share(1.5) - 0.2).abs() < 1e-12);
        let half = Cpu {
            softirq: 0.15 * cpus,
            ..Cpu::default()
        };
        assert!((busy.since(half).softirq_share(1.5) - 0.1).abs() < 1e-12);
    }
}
