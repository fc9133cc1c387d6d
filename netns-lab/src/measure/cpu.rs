//! CPU accounting of a run: the whole machine's time by kind (/proc/stat)
//! and this process's (getrusage).

use anyhow::{Context, Result};
use serde::Serialize;

/// CPU time of the whole machine and of this process, in seconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Cpu {
    pub user: f64,
    pub system: f64,
    /// irq + softirq: where veth's receive path and ACK processing run.
    pub softirq: f64,
    pub process: f64,
}

impl Cpu {
    pub(crate) fn now() -> Result<Cpu> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        let f: Vec<f64> = stat
            .lines()
            .next()
            .context("/proc/stat is empty")?
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap_or(0.0))
            .collect();
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
            process: tv(ru.ru_utime) + tv(ru.ru_stime),
        })
    }

    pub(crate) fn since(self, before: Cpu) -> Cpu {
        Cpu {
            user: self.user - before.user,
            system: self.system - before.system,
            softirq: self.softirq - before.softirq,
            process: self.process - before.process,
        }
    }

    pub fn total(&self) -> f64 {
        self.user + self.system + self.softirq
    }
}
