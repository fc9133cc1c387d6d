//! The lab's scale: set-up and tear-down time and memory of stars of N
//! senders.

use std::time::Instant;

use anyhow::Result;
use serde::Serialize;

use crate::net::topology::{Star, StarSpec};

use super::BenchConfig;

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

pub(super) fn rss_mib() -> f64 {
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

pub(super) fn run(cfg: &BenchConfig) -> Result<Vec<ScaleRun>> {
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
