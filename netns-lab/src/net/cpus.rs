//! The CPUs a lab runs on (`lab --cpus`). Set on the lab's own thread
//! before it starts any other, so every thread and process of the run (the
//! senders and receivers, the delay element, rpcgen) inherits it, and with
//! them the softirq work their packets cause. On the Firecracker guests
//! these labs were built on, that is what keeps the impossible window away:
//! it strikes only where the platform's agent runs on the same CPU as the
//! lab's TCP processing (docs/kernels.md, "the strikes follow the agent").

use anyhow::{bail, Result};

/// A list of CPU numbers, as `taskset -c` takes them: `1`, `0-3`, `1,3`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// The highest CPU number a list may name (the kernel's cpu_set_t).
const MAX_CPU: usize = libc::CPU_SETSIZE as usize - 1;

pub fn parse_cpus(s: &str) -> Result<CpuList, String> {
    let mut cpus = Vec::new();
    for part in s.split(',') {
        let num = |x: &str| {
            x.trim()
                .parse::<usize>()
                .ok()
                .filter(|&c| c <= MAX_CPU)
                .ok_or_else(|| format!("`{s}`: `{x}` is not a CPU number (0-{MAX_CPU})"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("`{s}`: range {a}-{b} runs backwards"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(CpuList(cpus))
}

impl CpuList {
    /// Refuses CPUs this process may not run on (offline, or outside its
    /// cgroup or affinity), naming those it may.
    pub fn check(&self) -> Result<()> {
        let allowed = allowed()?;
        let missing: Vec<usize> = self
            .0
            .iter()
            .copied()
            .filter(|c| !allowed.contains(c))
            .collect();
        if !missing.is_empty() {
            bail!(
                "--cpus: CPU {} not available to this process (it may run on {})",
                join(&missing),
                join(&allowed)
            );
        }
        Ok(())
    }

    /// Confines the calling thread, and everything it starts from now on.
    pub fn pin_self(&self) -> Result<()> {
        self.check()?;
        // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET stays within
        // it for numbers up to MAX_CPU, which parse_cpus guarantees.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in &self.0 {
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        if r != 0 {
            bail!(
                "--cpus: sched_setaffinity: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }
}

/// How many CPUs are online.
pub fn online() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// The CPUs this thread is confined to (`lab --cpus`, taskset), or None
/// where it may run on every online CPU.
pub fn pinned_to() -> Option<Vec<usize>> {
    let allowed = allowed().ok()?;
    (allowed.len() < online()).then_some(allowed)
}

/// The CPUs this thread may run on now.
pub(crate) fn allowed() -> Result<Vec<usize>> {
    // SAFETY: as in pin_self; the kernel fills the set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if r != 0 {
        bail!("sched_getaffinity: {}", std::io::Error::last_os_error());
    }
    Ok((0..=MAX_CPU)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

fn join(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges_as_taskset_takes_them() {
        assert_eq!(parse_cpus("1"), Ok(CpuList(vec![1])));
        assert_eq!(parse_cpus("0-3"), Ok(CpuList(vec![0, 1, 2, 3])));
        assert_eq!(parse_cpus("3,1,2-3"), Ok(CpuList(vec![1, 2, 3])));
        for bad in ["", "x", "3-1", "1,", "-1", "1024"] {
            assert!(parse_cpus(bad).is_err(), "{bad}");
        }
        assert!(parse_cpus("3-1").unwrap_err().contains("backwards"));
        assert_eq!(parse_cpus("2-2"), Ok(CpuList(vec![2])));
    }

    #[test]
    fn only_cpus_this_process_may_use_pass() {
        let mine = allowed().unwrap();
        assert_eq!(
            mine.len(),
            std::thread::available_parallelism().unwrap().get()
        );
        assert!(CpuList(mine.clone()).check().is_ok());
        let e = CpuList(vec![MAX_CPU]).check().unwrap_err().to_string();
        assert!(e.contains(&format!("CPU {MAX_CPU} not available")), "{e}");
    }

    #[test]
    fn a_pinned_thread_runs_only_where_it_was_told() {
        let last = *allowed().unwrap().last().unwrap();
        let after = std::thread::spawn(move || {
            CpuList(vec![last]).pin_self().unwrap();
            allowed().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(after, vec![last]);
    }
}
