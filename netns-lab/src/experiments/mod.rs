//! The experiments of the seeds, each writing a results directory.

pub mod coexist;
pub mod convergence;
pub mod incast;
pub mod ksweep;
pub mod queue;
pub mod rpc;
pub mod sawtooth;
pub mod variants;
pub mod xdctcp;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};

use std::fmt::Write as _;

use serde::Serialize;

use crate::cc::LabCc;
use crate::delay::{bdp_pkts, fmt_duration, parse_duration};
use crate::results::ResultsDir;
use crate::scenario::{self, RunData, Scenario};
use crate::units::{fmt_rate, parse_rate};

/// The switch and the long flows every star experiment has.
#[derive(Debug, Clone, clap::Args)]
pub struct StarArgs {
    /// Marking threshold K, packets.
    #[arg(long, default_value_t = 20)]
    pub k: u32,
    /// Bottleneck buffer, packets (deep enough for TCP's sawtooth).
    #[arg(long, default_value_t = 425)]
    pub buffer: u32,
    /// Long-lived flows, one sender each.
    #[arg(long, default_value_t = 2)]
    pub flows: usize,
}

/// The star at one bottleneck rate.
#[derive(Debug, Clone, clap::Args)]
pub struct OneRate {
    /// Bottleneck rate (100M, 1G, ...).
    #[arg(long, value_parser = crate::units::parse_rate, default_value = "100M")]
    pub rate: u64,
    #[command(flatten)]
    pub star: StarArgs,
    #[command(flatten)]
    pub rtt: crate::delay::RttArgs,
}

/// One (C, RTT) setting: `100M@8ms`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Pair {
    pub rate_bps: u64,
    pub rtt: Duration,
}

impl Pair {
    pub fn parse(s: &str) -> Result<Pair, String> {
        let (rate, rtt) = s
            .split_once('@')
            .ok_or_else(|| format!("`{s}`: expected RATE@RTT, e.g. 100M@8ms"))?;
        Ok(Pair {
            rate_bps: parse_rate(rate)?,
            rtt: parse_duration(rtt)?,
        })
    }

    /// C x RTT / 7, packets.
    pub fn k_opt(&self) -> f64 {
        crate::theory::k_opt(self.rate_bps, self.rtt)
    }

    /// C x RTT, packets.
    pub fn bdp(&self) -> f64 {
        bdp_pkts(self.rate_bps, self.rtt)
    }

    pub fn label(&self) -> String {
        format!("{} at {}", fmt_rate(self.rate_bps), fmt_duration(self.rtt))
    }

    /// An experiment's built-in default list, `100M@8ms,1G@100us`.
    pub fn defaults(list: &str) -> Vec<Pair> {
        list.split(',')
            .map(|p| Pair::parse(p).expect("default pairs parse"))
            .collect()
    }
}

/// Runs `scn` behind a progress bar labelled `msg`, counting the guard
/// repairs of `ours` (the BPF algorithm of the run, if any) into the
/// outcome. Ctrl-C during the run is an error once the lab is torn down.
pub fn run_scenario(
    scn: &Scenario,
    ours: Option<&LabCc>,
    msg: String,
    stop: &Arc<AtomicBool>,
) -> Result<RunData> {
    let bar = ProgressBar::new(scn.duration.as_millis() as u64);
    bar.set_style(ProgressStyle::with_template("[{pos:>5}/{len:5} ms] {bar:30} {msg}").unwrap());
    bar.set_message(msg);
    let (mut run, (s, c, h), found) = crate::cc::guarded(ours, || {
        scenario::run(scn, stop, |t| bar.set_position(t.as_millis() as u64))
    })?;
    run.outcome.guard_repairs = (s, c, h);
    // The values found, where this run repaired any (the stats may hold an
    // earlier run's).
    run.outcome.guard_found = (found.0 * u64::from(s > 0), found.1 * u64::from(c > 0));
    bar.finish_and_clear();
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    Ok(run)
}

/// One experiment of `lab`: checked before anything touches the kernel, run
/// into results/<NAME>/<timestamp>/.
pub trait Experiment {
    const NAME: &'static str;
    fn validate(&self) -> Result<()>;
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()>;
}

impl Experiment for ksweep::KsweepConfig {
    const NAME: &'static str = "ksweep";
    fn validate(&self) -> Result<()> {
        ksweep::KsweepConfig::validate(self)
    }
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()> {
        ksweep::run(self, out, stop).map(drop)
    }
}

impl Experiment for sawtooth::SawtoothConfig {
    const NAME: &'static str = "sawtooth";
    fn validate(&self) -> Result<()> {
        sawtooth::SawtoothConfig::validate(self)
    }
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()> {
        sawtooth::run(self, out, stop).map(drop)
    }
}

impl Experiment for convergence::ConvergenceConfig {
    const NAME: &'static str = "convergence";
    fn validate(&self) -> Result<()> {
        convergence::ConvergenceConfig::validate(self)
    }
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()> {
        convergence::run(self, out, stop).map(drop)
    }
}

impl Experiment for coexist::CoexistConfig {
    const NAME: &'static str = "coexist";
    fn validate(&self) -> Result<()> {
        coexist::CoexistConfig::validate(self)
    }
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()> {
        coexist::run(self, out, stop).map(drop)
    }
}

impl Experiment for queue::QueueConfig {
    const NAME: &'static str = "queue";
    fn validate(&self) -> Result<()> {
        queue::validate(self)
    }
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()> {
        queue::run(self, out, stop).map(drop)
    }
}

impl Experiment for xdctcp::XdctcpConfig {
    const NAME: &'static str = "xdctcp";
    fn validate(&self) -> Result<()> {
        xdctcp::validate(self)
    }
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()> {
        xdctcp::run(self, out, stop).map(drop)
    }
}

impl Experiment for incast::IncastConfig {
    const NAME: &'static str = "incast";
    fn validate(&self) -> Result<()> {
        incast::IncastConfig::validate(self)
    }
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()> {
        incast::run(self, out, stop).map(drop)
    }
}

impl Experiment for rpc::RpcConfig {
    const NAME: &'static str = "rpc";
    fn validate(&self) -> Result<()> {
        rpc::RpcConfig::validate(self)
    }
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()> {
        rpc::run(self, out, stop).map(drop)
    }
}

impl Experiment for variants::VariantsConfig {
    const NAME: &'static str = "variants";
    fn validate(&self) -> Result<()> {
        variants::validate(self)
    }
    fn run(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<()> {
        variants::run(self, out, stop).map(drop)
    }
}

/// A markdown table's header row and its separator.
pub fn table_header(s: &mut String, columns: &[&str]) {
    let _ = writeln!(s, "| {} |", columns.join(" | "));
    let _ = writeln!(s, "|{}", " --- |".repeat(columns.len()));
}

/// A summary's sentence on the guard's repairs (ssthresh, cwnd, holds) in
/// each labelled run that had any.
pub fn repairs_line(runs: impl Iterator<Item = (String, (u64, u64, u64))>) -> String {
    let v: Vec<String> = runs
        .filter(|(_, r)| *r != (0, 0, 0))
        .map(|(label, r)| format!("{label}: {r:?}"))
        .collect();
    format!(
        "Guard repairs (README \"Known issue\"): {}.",
        if v.is_empty() {
            "none in any run".to_string()
        } else {
            v.join("; ")
        }
    )
}

/// `(s, c, h)` guard repairs as a note for a run's line, empty if none.
pub fn repairs_note(r: (u64, u64, u64)) -> String {
    match r {
        (0, 0, 0) => String::new(),
        (s, c, h) => format!(", guard repairs {s}/{c}/{h} (README: Known issue)"),
    }
}

/// The impossible values the guard found, for a run's line: empty if none.
pub fn found_note((s, c): (u64, u64)) -> String {
    let v: Vec<String> = [("ssthresh", s), ("cwnd", c)]
        .iter()
        .filter(|(_, v)| *v != 0)
        .map(|(what, v)| format!("{what} {v:#x}"))
        .collect();
    if v.is_empty() {
        String::new()
    } else {
        format!(", found {}", v.join(" and "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_found_note_names_each_value_found_in_hex() {
        assert_eq!(found_note((0, 0)), "");
        assert_eq!(found_note((0x8220_34e5, 0)), ", found ssthresh 0x822034e5");
        assert_eq!(found_note((0, 0x2709_a97e)), ", found cwnd 0x2709a97e");
        assert_eq!(
            found_note((0x8110_4110, 0x2709_a97e)),
            ", found ssthresh 0x81104110 and cwnd 0x2709a97e"
        );
    }
}
