//! Congestion controls a lab uses: the kernel's by name, or a BPF algorithm
//! attached for the lab alone under the lab's own name and detached after.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use loader::algo::Algo;
use loader::instance::{self, AttachMode, AttachRequest};
use loader::params::Assignment;

use crate::net::prefix::Prefix;

/// The guard's (ssthresh repairs, cwnd repairs, in-flight holds).
pub use crate::report::tables::Repairs;
/// The impossible (ssthresh, cwnd) the guard last repaired, as found.
pub type Found = (u64, u64);

/// bpf_kdctcp's parameters for seed 002's own DCTCP: every modification on
/// (`lab variants`' last contender, `lab coexist`'s second DCTCP).
pub const KDCTCP_ALL_FOUR: &[&str] = &[
    "per_ack_alpha=1",
    "progressive=1",
    "cwr_growth=1",
    "fine_alpha=1",
];

/// A BPF algorithm registered for one lab run.
pub struct LabCc {
    pub name: String,
    _prefix: Prefix,
}

impl LabCc {
    pub fn attach(algo: Algo, params: Vec<Assignment>) -> Result<LabCc> {
        let prefix = Prefix::unique()?;
        let name = prefix.as_str().to_string();
        instance::attach(&AttachRequest {
            algo,
            name: name.clone(),
            params,
            mode: AttachMode::Auto,
            // The lab puts Prague's ECT(1) program on its own senders.
            ect1_devs: Some(Vec::new()),
        })?;
        Ok(LabCc {
            name,
            _prefix: prefix,
        })
    }
}

impl LabCc {
    /// (ssthresh repairs, cwnd repairs, in-flight holds) of the kernel issue
    /// guarded against in bpf/dctcp_core.h, since attach.
    pub fn repairs(&self) -> Result<Repairs> {
        Ok(self.guard()?.0)
    }

    /// The repairs as `repairs` counts them, and the impossible (ssthresh,
    /// cwnd) the guard last repaired, as found: one read of the stats.
    pub fn guard(&self) -> Result<(Repairs, Found)> {
        let i = instance::describe(&dctcp_utils::bpffs::InstanceDir::new(&self.name))?;
        Ok((
            Repairs {
                ssthresh: i.ssthresh_repairs,
                cwnd: i.cwnd_repairs,
                inflight: i.inflight_holds,
            },
            (i.found_ssthresh, i.found_cwnd),
        ))
    }
}

/// The names the lab attaches a BPF algorithm for, and which.
pub const OURS: &[(&str, Algo)] = &[("bpf_dctcp", Algo::Dctcp), ("bpf_prague", Algo::Prague)];

/// An algorithm as an experiment names it: `bpf_prague`, or one of ours
/// with parameters after `+` (`bpf_prague+rtt_scaling=0+mode=window`),
/// attached under a name of its own.
fn split(name: &str) -> (&str, Vec<Assignment>, Option<Algo>) {
    let mut parts = name.split('+');
    let base = parts.next().unwrap_or_default();
    let params = parts.filter_map(|p| p.parse().ok()).collect();
    (base, params, OURS.iter().find(|(n, _)| *n == base).map(|(_, a)| *a))
}

/// Whether `name` (with or without parameters) is one of ours.
pub fn is_ours(name: &str) -> bool {
    split(name).2.is_some()
}

/// Refuses, before a lab builds anything, an algorithm that is neither
/// ours (attached for the run, and runnable on this kernel) nor in this
/// kernel, and parameters ours would refuse.
pub fn check_names(names: &[String]) -> Result<()> {
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    let ours: Vec<&str> = OURS.iter().map(|(n, _)| *n).collect();
    for name in names {
        match split(name) {
            (_, params, Some(algo)) => {
                algo.require_kernel()?;
                for p in name.split('+').skip(1) {
                    p.parse::<Assignment>().map_err(|e| {
                        anyhow::Error::new(dctcp_utils::error::UsageError(format!("`{name}`: {e}")))
                    })?;
                }
                loader::params::apply(algo, &mut algo.default_params(), &params)
                    .map_err(|e| e.context(format!("`{name}`")))?;
            }
            (base, _, None) if base != name => dctcp_utils::usage_bail!(
                "`{name}`: parameters (after `+`) are for {} only",
                ours.join(" and ")
            ),
            _ => anyhow::ensure!(
                available.split_whitespace().any(|x| x == name) || kernel_takes(name),
                "algorithm `{name}` is not in this kernel (it has {}; {} are attached for the run)",
                available.trim(),
                ours.join(" and ")
            ),
        }
    }
    Ok(())
}

/// Whether a socket can select `name`: the kernel loads an algorithm built
/// as a module (Debian's `tcp_dctcp`) on the first such request, which the
/// available list does not show before.
fn kernel_takes(name: &str) -> bool {
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};
    // SAFETY: a new socket or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: fd is ours.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    dctcp_utils::sockopt::set_congestion(sock.as_fd(), name).is_ok()
}

/// An experiment's algorithms by the names its sockets use: `bpf_dctcp`
/// and `bpf_prague` (each set of parameters its own instance) are attached
/// for the run under the lab's own names, kernel ones pass through.
pub struct Algorithms {
    bpf: Vec<(String, LabCc)>,
}

impl Algorithms {
    pub fn attach(names: &[String]) -> Result<Algorithms> {
        let mut bpf: Vec<(String, LabCc)> = Vec::new();
        for name in names {
            if let (_, params, Some(algo)) = split(name) {
                if !bpf.iter().any(|(n, _)| n == name) {
                    bpf.push((name.clone(), LabCc::attach(algo, params)?));
                }
            }
        }
        Ok(Algorithms { bpf })
    }

    /// What TCP_CONGESTION takes for `name`.
    pub fn cc(&self, name: &str) -> String {
        self.ours(name)
            .map_or_else(|| name.to_string(), |b| b.name.clone())
    }

    /// The BPF algorithm attached for `name`, if it is ours.
    pub fn ours(&self, name: &str) -> Option<&LabCc> {
        self.bpf.iter().find(|(n, _)| n == name).map(|(_, cc)| cc)
    }

    /// `f`'s result and the guard's repairs of `name`'s algorithm while it
    /// ran (README "Known issue"): none for a kernel algorithm.
    pub fn counting_repairs<T>(
        &self,
        name: &str,
        f: impl FnOnce() -> Result<T>,
    ) -> Result<(T, Repairs)> {
        guarded(self.ours(name), f).map(|(t, repairs, _)| (t, repairs))
    }
}

/// `f`'s result, the guard's repairs of `ours` while it ran and the
/// impossible values it last found (README "Known issue"): none for a
/// kernel algorithm (`None`).
pub fn guarded<T>(
    ours: Option<&LabCc>,
    f: impl FnOnce() -> Result<T>,
) -> Result<(T, Repairs, Found)> {
    let before = ours.map(LabCc::repairs).transpose()?.unwrap_or_default();
    let t = f()?;
    let (after, found) = ours.map(LabCc::guard).transpose()?.unwrap_or_default();
    let repairs = after.since(before);
    REPAIRED.fetch_add(repairs.ssthresh + repairs.cwnd + repairs.inflight, Ordering::Relaxed);
    Ok((t, repairs, found))
}

/// The guard's repairs in every run this process made: an experiment that
/// had any says so, and what to do, at its end.
static REPAIRED: AtomicU64 = AtomicU64::new(0);

/// The guard's repairs so far in this process's runs (ssthresh, cwnd and
/// holds together).
pub fn repaired_so_far() -> u64 {
    REPAIRED.load(Ordering::Relaxed)
}

/// The switch of the workload experiments: DCTCP's step marker at K for
/// ours (bpf_dctcp, bpf_prague), a plain drop-tail queue for the kernel's
/// algorithms.
pub fn switch_for(
    algorithm: &str,
    rate_bps: u64,
    buffer_pkts: u32,
    k: u32,
) -> tc_qdisc::Bottleneck {
    tc_qdisc::Bottleneck {
        rate_bps,
        buffer_pkts,
        backend: if is_ours(algorithm) {
            tc_qdisc::Marking::BpfStep
        } else {
            tc_qdisc::Marking::Droptail
        }
        .at(k, rate_bps),
    }
}

impl Drop for LabCc {
    fn drop(&mut self) {
        if let Err(e) = instance::detach(&self.name) {
            eprintln!("warning: detaching {}: {e:#}", self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_follow_the_name_after_a_plus() {
        let (base, params, algo) = split("bpf_prague+rtt_scaling=0+mode=window");
        assert_eq!((base, algo), ("bpf_prague", Some(Algo::Prague)));
        assert_eq!(params.len(), 2);
        assert!(is_ours("bpf_dctcp") && is_ours("bpf_dctcp+shift_g=5") && !is_ours("cubic"));
        let refused = |n: &str| format!("{:#}", check_names(&[n.to_string()]).unwrap_err());
        assert!(refused("cubic+x=1").contains("parameters (after `+`) are for"));
        assert!(refused("bpf_dctcp+shift_g=11").contains("0..=10"), "{}", refused("bpf_dctcp+shift_g=11"));
        assert!(refused("bpf_dctcp+nosuch=1").contains("unknown parameter"));
        assert!(refused("bpf_dctcp+shift_g").contains("name=value"));
        assert!(refused("no_such_cc").contains("not in this kernel"));
        check_names(&["bpf_dctcp+shift_g=5".to_string(), "reno".to_string()]).unwrap();
    }
}

