//! CPU accounting of a run: the whole machine's time by kind (/proc/stat),
//! the time the hypervisor took from the lab's own CPUs, and this process's
//! (getrusage).

use anyhow::{Context, Result};
use serde::Serialize;

/// CPU time of the whole machine and of this process, in seconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
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
    }
}
