//! What each BPF program cost: the kernel's run_time_ns and run_cnt
//! (kernel.bpf_stats_enabled), per call over a run.

use anyhow::{Context, Result};
use serde::Serialize;

/// run_time_ns and run_cnt of the programs whose ids are in `ids`.
pub(super) fn prog_stats(ids: &[u32]) -> Vec<(String, u64, u64)> {
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

pub(super) fn max_prog_id() -> u32 {
    libbpf_rs::query::ProgInfoIter::default()
        .map(|p| p.id)
        .max()
        .unwrap_or(0)
}

/// Programs loaded since `after` (an earlier max_prog_id()) whose name
/// starts with `prefix`.
pub(super) fn progs_since(after: u32, prefix: &str) -> Vec<u32> {
    libbpf_rs::query::ProgInfoIter::default()
        .filter(|p| p.id > after && p.name.to_string_lossy().starts_with(prefix))
        .map(|p| p.id)
        .collect()
}

/// kernel.bpf_stats_enabled on while alive; it costs every BPF program two
/// clock reads, so only the runs that measure per-call cost have it.
pub(super) struct BpfStats;

impl BpfStats {
    pub(super) fn on() -> Result<BpfStats> {
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

pub(super) fn per_call(
    before: &[(String, u64, u64)],
    after: &[(String, u64, u64)],
) -> Vec<PerCall> {
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
