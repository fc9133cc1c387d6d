//! `lab bench` (`just bench`): what DCTCP in BPF, its tracing and the BPF
//! switch cost, each measured side by side with its baseline in one run,
//! alternating A and B, reported as ratios with their spread.
//!
//! - Algorithms: fixed-size bulk transfers over a veth pair between two
//!   namespaces (offloads off: a packet per segment, an ACK per two), no
//!   bottleneck; CPU of the whole machine (/proc/stat: user, system, irq,
//!   softirq) and of this process (getrusage) per GB moved, throughput; the
//!   per-call cost of every struct_ops program from kernel.bpf_stats_enabled
//!   in one extra transfer (stats cost time themselves, so never in the
//!   compared ones). bpf_dctcp with tracing per window and per ACK too.
//! - Switch: the highest rate the lab's bottleneck (htb at 10 Gbit/s) carries
//!   with and without the BPF marker and queue probe; the marker's cost per
//!   packet from bpf_stats.
//! - Lab scale: set-up and tear-down time and memory of stars of N senders.

mod algorithms;
mod bpf_stats;
pub mod delay_element;
mod ratio;
mod scale;
mod switch;
mod table;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::net::topology::{Star, StarSpec};
use algorithms::AlgorithmReport;
pub use algorithms::VethPair;
use scale::ScaleRun;
use switch::SwitchReport;

#[derive(Clone, Debug, Serialize)]
pub struct BenchConfig {
    pub rounds: usize,
    /// Bytes per bulk transfer.
    pub bytes: u64,
    /// Kernel algorithms to compare bpf_dctcp with (reno, cubic; dctcp where
    /// the kernel has it).
    pub baselines: Vec<String>,
    /// Also bpf_dctcp traced per window and per ACK.
    pub tracing: bool,
    /// Seconds per switch run; 0 skips the switch benchmark.
    pub switch_secs: f64,
    /// Also measure the switch's programs by perf sampling.
    pub perf: bool,
    /// Star sizes to set up and tear down; empty skips.
    pub scale: Vec<usize>,
    /// The delay section; None skips it.
    pub delay: Option<delay_element::DelayBenchConfig>,
}

impl BenchConfig {
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(
            (1..=500).contains(&self.rounds),
            "--rounds {}: 1 to 500",
            self.rounds
        );
        anyhow::ensure!(
            (1 << 20..=64 << 30).contains(&self.bytes),
            "--mib {}: 1 to 65536",
            self.bytes >> 20
        );
        anyhow::ensure!(
            self.switch_secs == 0.0 || (1.0..=60.0).contains(&self.switch_secs),
            "--switch-secs {}: 0 (skip) or 1 to 60",
            self.switch_secs
        );
        for &n in &self.scale {
            Star::validate(&StarSpec::senders(n))?;
        }
        if let Some(d) = &self.delay {
            d.validate()?;
        }
        for b in &self.baselines {
            // A modular algorithm is listed once loaded (dctcp on Debian).
            let _ = std::process::Command::new("modprobe")
                .args(["-q", &format!("tcp_{b}")])
                .status();
        }
        let available =
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                .unwrap_or_default();
        for b in &self.baselines {
            anyhow::ensure!(
                available.split_whitespace().any(|a| a == b),
                "baseline `{b}` is not available in this kernel (it has: {}); `dctcp` is compared \
                 in the stock-kernel VM (just bench runs it there)",
                available.trim()
            );
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub kernel: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub commit: String,
}

fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Machine {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model: cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or("")
            .trim()
            .to_string(),
        commit: std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default(),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub machine: Machine,
    pub config: BenchConfig,
    pub algorithms: AlgorithmReport,
    pub switch: Option<SwitchReport>,
    pub scale: Vec<ScaleRun>,
    pub delay: Vec<delay_element::DelayRun>,
}

fn run(cfg: &BenchConfig, stop: &Arc<AtomicBool>) -> Result<BenchReport> {
    cfg.validate()?;
    let machine = machine();
    eprintln!(
        "bench on {} ({} CPUs, {}), commit {}",
        machine.kernel, machine.cpus, machine.cpu_model, machine.commit
    );
    eprintln!(
        "algorithms: {} rounds of {} MiB per contender, interleaved",
        cfg.rounds,
        cfg.bytes >> 20
    );
    let algorithms = algorithms::run(cfg, stop)?;
    let switch = (cfg.switch_secs > 0.0)
        .then(|| {
            eprintln!(
                "switch: {} rounds of {} s, with and without the marker",
                cfg.rounds, cfg.switch_secs
            );
            switch::run(cfg, stop)
        })
        .transpose()?;
    if !cfg.scale.is_empty() {
        eprintln!("lab scale:");
    }
    let scale = scale::run(cfg)?;
    let delay = match &cfg.delay {
        Some(d) => {
            eprintln!("delay: each rate without a delay, then each delay and backend");
            delay_element::run(d, stop)?
        }
        None => Vec::new(),
    };
    Ok(BenchReport {
        machine,
        config: cfg.clone(),
        algorithms,
        switch,
        scale,
        delay,
    })
}

/// What bpf_dctcp, its tracing and the BPF switch cost (`just bench`).
///
/// Each comparison is measured side by side in one run, alternating A and
/// B every round, and printed as a ratio with its spread and the 95 %
/// interval of its median: CPU per GB and throughput of bpf_dctcp
/// against the kernel's algorithms (bulk over a veth pair, offloads off)
/// and with tracing per window and per ACK; ns per call of every
/// struct_ops program (kernel.bpf_stats_enabled, in a separate transfer)
/// against its Reno fallback's; the lab bottleneck's top goodput with and without the BPF marker, and
/// the marker's ns per packet against an empty program and one that only
/// reads the queue, by bpf_stats, perf and BPF_PROG_TEST_RUN; set-up and
/// tear-down time and memory of stars of N senders. Ends with every goal
/// (PASS, MISS, UNRESOLVED). Writes a JSON report.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// 2 rounds, 256 MiB transfers, 2 s switch runs, stars of 1 and 16.
    #[arg(long)]
    pub quick: bool,
    /// Rounds of every comparison, 1 to 500 (default 5, 2 with
    /// --quick). CPU per GB spreads by about 15 % per round on a small
    /// guest: a 95 % interval of the median narrower than 3 % takes
    /// about 100.
    #[arg(long)]
    pub rounds: Option<usize>,
    /// MiB per bulk transfer (default 1024, 256 with --quick).
    #[arg(long)]
    pub mib: Option<u64>,
    /// Kernel algorithms to compare bpf_dctcp with.
    #[arg(long, value_delimiter = ',', default_value = "reno,cubic")]
    pub baselines: Vec<String>,
    /// Leave out bpf_dctcp traced per window and per ACK.
    #[arg(long)]
    pub no_tracing: bool,
    /// Seconds per switch run, 0 to skip (default 4, 2 with --quick).
    #[arg(long)]
    pub switch_secs: Option<f64>,
    /// Leave out the switch's cost from perf's samples (perf record -a
    /// -g, from linux-perf), which needs perf and adds a set of runs.
    #[arg(long)]
    pub no_perf: bool,
    /// Star sizes to set up and tear down (default 1,16,64,256; 1,16
    /// with --quick).
    #[arg(long, value_delimiter = ',')]
    pub scale: Option<Vec<usize>>,
    /// Rates of the delay section: each without a delay and at every
    /// --delays with every --delay-backends (cubic on droptail).
    #[arg(long, value_delimiter = ',', value_parser = crate::units::parse_rate, default_value = "100M,1G")]
    pub delay_rates: Vec<u64>,
    /// Round trips of the delay section.
    #[arg(long, value_delimiter = ',', value_parser = crate::net::delay::parse_duration, default_value = "100us,1ms,8ms,25ms")]
    pub delays: Vec<Duration>,
    /// Backends of the delay section (netem where the kernel has it).
    #[arg(long, value_delimiter = ',', value_enum, default_value = "auto")]
    pub delay_backends: Vec<crate::net::delay::DelayBackend>,
    /// Seconds per delay-section run, 0 to skip the section (default 6,
    /// 4 with --quick).
    #[arg(long)]
    pub delay_secs: Option<f64>,
    /// JSON report (default bench/results/<timestamp>.json).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

impl BenchArgs {
    pub fn config(&self) -> BenchConfig {
        let quick = self.quick;
        let delay_secs = self.delay_secs.unwrap_or(if quick { 4.0 } else { 6.0 });
        BenchConfig {
            rounds: self.rounds.unwrap_or(if quick { 2 } else { 5 }),
            bytes: self.mib.unwrap_or(if quick { 256 } else { 1024 }) << 20,
            baselines: self.baselines.clone(),
            tracing: !self.no_tracing,
            switch_secs: self.switch_secs.unwrap_or(if quick { 2.0 } else { 4.0 }),
            perf: !self.no_perf,
            scale: self.scale.clone().unwrap_or(if quick {
                vec![1, 16]
            } else {
                vec![1, 16, 64, 256]
            }),
            delay: (delay_secs > 0.0).then(|| delay_element::DelayBenchConfig {
                rates_bps: self.delay_rates.clone(),
                delays: self.delays.clone(),
                backends: self.delay_backends.clone(),
                duration: Duration::from_secs_f64(delay_secs),
            }),
        }
    }
}

/// `lab bench`: checks the configuration, runs every comparison, writes
/// the JSON report (`--out`, default bench/results/<timestamp>.json) and
/// prints the table.
pub fn command(args: &BenchArgs, stop: &Arc<AtomicBool>) -> Result<()> {
    let cfg = args.config();
    cfg.validate()
        .map_err(|e| anyhow::Error::new(dctcp_utils::error::UsageError(format!("{e:#}"))))?;
    dctcp_utils::preflight::require_root("lab")?;
    dctcp_utils::preflight::require_btf()?;
    dctcp_utils::preflight::require_struct_ops()?;
    let path = args.out.clone().unwrap_or_else(|| {
        std::path::PathBuf::from("bench/results")
            .join(format!("{}.json", crate::report::results::timestamp()))
    });
    let report = run(&cfg, stop)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    print!("{}", table::table(&report));
    println!("report: {}", path.display());
    Ok(())
}
