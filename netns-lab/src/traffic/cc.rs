//! Congestion controls a lab uses: the kernel's by name, or a BPF algorithm
//! attached for the lab alone under the lab's own name and detached after.

use anyhow::Result;
use loader::algo::Algo;
use loader::instance::{self, AttachMode, AttachRequest};
use loader::params::Assignment;

use crate::net::prefix::Prefix;

/// The guard's (ssthresh repairs, cwnd repairs, in-flight holds).
pub type Repairs = (u64, u64, u64);
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
    pub fn repairs(&self) -> Result<(u64, u64, u64)> {
        Ok(self.guard()?.0)
    }

    /// The repairs as `repairs` counts them, and the impossible (ssthresh,
    /// cwnd) the guard last repaired, as found: one read of the stats.
    pub fn guard(&self) -> Result<(Repairs, Found)> {
        let i = instance::describe(&dctcp_utils::bpffs::InstanceDir::new(&self.name))?;
        Ok((
            (i.ssthresh_repairs, i.cwnd_repairs, i.inflight_holds),
            (i.found_ssthresh, i.found_cwnd),
        ))
    }
}

/// The names the lab attaches a BPF algorithm for, and which.
pub const OURS: &[(&str, Algo)] = &[("bpf_dctcp", Algo::Dctcp), ("bpf_prague", Algo::Prague)];

/// Refuses, before a lab builds anything, an algorithm that is neither
/// ours (attached for the run, and runnable on this kernel) nor in this
/// kernel.
pub fn check_names(names: &[String]) -> Result<()> {
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    let ours: Vec<&str> = OURS.iter().map(|(n, _)| *n).collect();
    for name in names {
        if let Some((_, algo)) = OURS.iter().find(|(n, _)| n == name) {
            algo.require_kernel()?;
        } else {
            anyhow::ensure!(
                available.split_whitespace().any(|x| x == name),
                "algorithm `{name}` is not in this kernel (it has {}; {} are attached for the run)",
                available.trim(),
                ours.join(" and ")
            );
        }
    }
    Ok(())
}

/// An experiment's algorithms by the names its sockets use: `bpf_dctcp`
/// and `bpf_prague` are attached for the run under the lab's own names,
/// kernel ones pass through.
pub struct Algorithms {
    bpf: Vec<(&'static str, LabCc)>,
}

impl Algorithms {
    pub fn attach(names: &[String]) -> Result<Algorithms> {
        let mut bpf = Vec::new();
        for (name, algo) in OURS {
            if names.iter().any(|a| a == name) {
                bpf.push((*name, LabCc::attach(*algo, vec![])?));
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
        self.bpf.iter().find(|(n, _)| *n == name).map(|(_, cc)| cc)
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
    Ok((
        t,
        (after.0 - before.0, after.1 - before.1, after.2 - before.2),
        found,
    ))
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
        backend: if OURS.iter().any(|(n, _)| *n == algorithm) {
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
