//! The experiments of the seeds, each writing a results directory.

pub mod bench;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};

use serde::{Deserialize, Serialize};
use tc_qdisc::Marking;

use crate::measure::scenario::{self, RunData, Scenario};
use crate::net::delay::{bdp_pkts, fmt_duration, parse_duration};
use crate::report::model::Report;
use crate::report::results::ResultsDir;
use crate::traffic::cc::LabCc;
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
    pub rtt: crate::net::delay::RttArgs,
}

/// The switch in front of a request/response star's receiver (`lab incast`,
/// `lab rpc`). Each experiment gives `--buffer` its own default and says
/// why, with `#[command(mut_arg("buffer", ...))]` (not a const generic:
/// clap keeps a derived default in one static for every instance).
#[derive(Debug, Clone, clap::Args)]
pub struct RpcSwitchArgs {
    /// Bottleneck rate (100M, 1G, ...).
    #[arg(long, value_parser = crate::units::parse_rate, default_value = "1G")]
    pub rate: u64,
    /// Marking threshold K for bpf_dctcp, packets.
    #[arg(long, default_value_t = 20)]
    pub k: u32,
    /// Switch buffer, packets.
    #[arg(long)]
    pub buffer: u32,
}

/// One line of a comparison (`lab queue`, `lab convergence`): an algorithm
/// on a backend, `bpf_dctcp:bpf-step`.
#[derive(Clone, Debug, Serialize)]
pub struct Variant {
    /// As given: `bpf_dctcp` (attached for the run), or a kernel algorithm.
    pub cc: String,
    pub backend: Marking,
}

impl Variant {
    pub fn label(&self) -> String {
        format!("{}@{}", self.cc, self.backend)
    }

    /// ECN-based DCTCP, held to the DCTCP targets.
    pub fn is_dctcp(&self) -> bool {
        self.cc.ends_with("dctcp")
    }

    /// Whether the backend marks at K (everything but droptail), where a
    /// working ECN sender never needs a window beyond K + C x RTT.
    pub fn marks(&self) -> bool {
        self.backend.marks()
    }
}

/// DCTCP on the BPF step marker beside TCP on a drop-tail queue.
pub const DEFAULT_VARIANTS: &str = "bpf_dctcp:bpf-step,cubic:droptail,reno:droptail";

pub fn parse_variant(s: &str) -> Result<Variant, String> {
    let (cc, backend) = s.split_once(':').ok_or_else(|| {
        format!("`{s}`: expected algorithm:backend, e.g. bpf_dctcp:bpf-step or cubic:droptail")
    })?;
    let backend = backend.parse()?;
    if cc.is_empty() {
        return Err(format!("`{s}`: no algorithm"));
    }
    Ok(Variant {
        cc: cc.to_string(),
        backend,
    })
}

/// One (C, RTT) setting: `100M@8ms`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
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
        crate::measure::theory::k_opt(self.rate_bps, self.rtt)
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
    crate::capture::name_next_run(&msg);
    bar.set_message(msg);
    let (mut run, repairs, found) = crate::traffic::cc::guarded(ours, || {
        scenario::run(scn, stop, |t| bar.set_position(t.as_millis() as u64))
    })?;
    run.outcome.guard_repairs = repairs;
    // The values found, where this run repaired any (the stats may hold an
    // earlier run's).
    run.outcome.guard_found = (
        found.0 * u64::from(repairs.ssthresh > 0),
        found.1 * u64::from(repairs.cwnd > 0),
    );
    bar.finish_and_clear();
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    for line in run.capture.iter().flat_map(|c| c.lines()) {
        eprintln!("  {line}");
    }
    Ok(run)
}

/// An experiment's runs in order: each numbered `run n/total` behind its
/// progress bar ([`run_scenario`]), and each finished run's line printed
/// with what every run reports beside its own figures: the guard's repairs
/// and the values it found (README "Known issue"), and the steal.
pub struct Sweep<'a> {
    total: usize,
    done: usize,
    /// The total is an estimate (`~`): a search decides how many runs.
    about: bool,
    stop: &'a Arc<AtomicBool>,
}

impl<'a> Sweep<'a> {
    pub fn new(total: usize, stop: &'a Arc<AtomicBool>) -> Self {
        Sweep {
            total,
            done: 0,
            about: false,
            stop,
        }
    }

    /// A sweep of about `total` runs.
    pub fn about(total: usize, stop: &'a Arc<AtomicBool>) -> Self {
        Sweep {
            about: true,
            ..Sweep::new(total, stop)
        }
    }

    /// The next run's progress label: `run 3/12: what`.
    fn label(&mut self, what: &str) -> String {
        self.done += 1;
        let about = if self.about { "~" } else { "" };
        format!("run {}/{about}{}: {what}", self.done, self.total)
    }

    /// Runs `scn`, named `what`, as the sweep's next run.
    pub fn run(&mut self, scn: &Scenario, ours: Option<&LabCc>, what: &str) -> Result<RunData> {
        let msg = self.label(what);
        run_scenario(scn, ours, msg, self.stop)
    }

    /// A finished run's line, and the notes every run carries.
    pub fn said(&self, line: &str, o: &crate::measure::scenario::Outcome) {
        eprintln!("{line}{}", notes(o));
    }
}

/// What every run's line ends with: the guard's repairs and the values
/// found, the steal; empty for a run with none of them.
fn notes(o: &crate::measure::scenario::Outcome) -> String {
    use crate::report::tables::{found_note, repairs_note, steal_note};
    format!(
        "{}{}{}",
        repairs_note(o.guard_repairs),
        found_note(o.guard_found),
        steal_note(o.steal_share)
    )
}

/// One experiment of `lab`: checked before anything touches the kernel, run
/// into results/<NAME>/<timestamp>/. `register!` implements it.
pub trait Experiment {
    const NAME: &'static str;
    /// Bad input, named, before anything is built.
    fn check(&self) -> Result<()>;
    /// The runs, their analysis and plots, into `out`; the report of them.
    fn execute(&self, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<Report>;
}

/// An experiment's command-line options (`lab <NAME> --help`).
pub trait ExperimentArgs {
    type Config: Experiment;
    fn config(&self) -> Self::Config;
    /// `--out`: the results directory instead of results/<NAME>/<timestamp>.
    fn out(&self) -> Option<&Path>;
}

/// Registers an experiment module: `register!("name", Args => Config)`,
/// where `Args::config` builds the configuration, `Config::validate` checks
/// it and the module's `run` runs it, after config.json is written, and
/// returns its report.
macro_rules! register {
    ($name:literal, $args:ty => $config:ty) => {
        impl $crate::experiments::Experiment for $config {
            const NAME: &'static str = $name;
            fn check(&self) -> anyhow::Result<()> {
                <$config>::validate(self)
            }
            fn execute(
                &self,
                out: &$crate::report::results::ResultsDir,
                stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
            ) -> anyhow::Result<$crate::report::model::Report> {
                out.write_json("config.json", self)?;
                run(self, out, stop)
            }
        }

        impl $crate::experiments::ExperimentArgs for $args {
            type Config = $config;
            fn config(&self) -> $config {
                <$args>::config(self)
            }
            fn out(&self) -> Option<&std::path::Path> {
                self.out.as_deref()
            }
        }
    };
}
pub(crate) use register;

/// Every experiment's subcommand with its module's `Args` (`lab <name>`,
/// help from the `Args`' doc). A new experiment is its file, its `pub mod`
/// line below and one line in this list. (The modules are declared outside
/// the macro: cargo-mutants finds a module's file only by its `mod` line.)
macro_rules! experiments {
    ($($module:ident => $variant:ident($args:ident)),* $(,)?) => {
        /// The experiments' subcommands, in `lab --help`'s order.
        #[derive(Debug, clap::Subcommand)]
        pub enum ExperimentCommand {
            $($variant($module::$args),)*
        }

        impl ExperimentCommand {
            /// Runs the experiment ([`launch`]).
            pub fn launch(&self, htb_hysteresis: bool, stop: &Arc<AtomicBool>) -> Result<()> {
                match self {
                    $(Self::$variant(args) => launch(args, htb_hysteresis, stop),)*
                }
            }
        }
    };
}

pub mod coexist;
pub mod convergence;
pub mod incast;
pub mod ksweep;
pub mod l4s;
pub mod queue;
pub mod rpc;
pub mod sawtooth;
pub mod variants;
pub mod xdctcp;

experiments! {
    queue => Queue(QueueArgs),
    ksweep => Ksweep(KsweepArgs),
    sawtooth => Sawtooth(SawtoothArgs),
    convergence => Convergence(ConvergenceArgs),
    coexist => Coexist(CoexistArgs),
    xdctcp => Xdctcp(XdctcpArgs),
    variants => Variants(VariantsArgs),
    incast => Incast(IncastArgs),
    rpc => Rpc(RpcArgs),
    l4s => L4s(L4sArgs),
}

/// `lab <experiment>`: checks the configuration (bad input is a usage
/// error, before anything touches the kernel), holds htb's hysteresis mode
/// for the run unless told not to, runs the experiment into
/// results/<NAME>/<timestamp>/ (or `--out`) and says where its summary is.
pub fn launch<A: ExperimentArgs>(
    args: &A,
    htb_hysteresis: bool,
    stop: &Arc<AtomicBool>,
) -> Result<()> {
    let usage =
        |e: anyhow::Error| anyhow::Error::new(dctcp_utils::error::UsageError(format!("{e:#}")));
    let cfg = args.config();
    cfg.check().map_err(usage)?;
    tc_qdisc::marker::require_kernel().map_err(usage)?;
    dctcp_utils::preflight::require_root("lab")?;
    let _htb = htb_hysteresis
        .then(|| tc_qdisc::hysteresis::Hysteresis::hold(Path::new(crate::net::prefix::HTB_STATE)))
        .transpose()?;
    let dir = ResultsDir::create(
        &crate::report::results::default_root(),
        A::Config::NAME,
        args.out(),
    )?;
    crate::capture::set_results_dir(&dir.path);
    dir.write_json("lab.json", &crate::report::results::RunInfo::now(A::Config::NAME))?;
    let mut report = cfg.execute(&dir, stop)?;
    let repaired = crate::traffic::cc::repaired_so_far();
    if repaired > 0 {
        let advice = repairs_advice(repaired, crate::net::cpus::pinned_to());
        eprintln!("lab: {advice}");
        report.heading(2, "The guard's repairs").text(advice);
    }
    if let Some(packets) = crate::capture::summary_section(&dir.path)? {
        report.heading(2, "Packets (`lab --pcap`)").markdown(packets);
    }
    dir.write_report(&report)?;
    println!("results: {}", dir.path.display());
    println!("summary: {}", dir.file("summary.md").display());
    println!("page:    {}", dir.file("index.html").display());
    Ok(())
}

/// What a run the guard had to repair means, and what to do: where the lab
/// shared its CPUs with the platform's agent, `lab --cpus` (the last CPU,
/// the one it kept clean here); where it was pinned already, that the
/// strikes came anyway and where to read of them.
fn repairs_advice(repaired: u64, pinned: Option<Vec<usize>>) -> String {
    let what = format!(
        "bpf_dctcp's guard repaired {repaired} impossible ssthresh, cwnd or in-flight values in these runs (the \
         kernel issue, README \"Known issue\"): the queue and window figures of those runs carry the bursts it \
         made, not only DCTCP's control."
    );
    let last = crate::net::cpus::online() - 1;
    match pinned {
        None if last > 0 => format!(
            "{what} On the guests this lab was built on it strikes only where the platform's agent shares a CPU with \
             the lab: run it again with `lab --cpus {last} ...` to keep the lab on CPU {last} (docs/kernels.md)."
        ),
        _ => format!(
            "{what} The lab ran on its own CPUs and it struck anyway: read docs/kernels.md (\"Known issue\") for \
             where it comes from, and judge these runs' queues with it."
        ),
    }
}

/// Each `(config, says)` is refused by `validate` with an error that says
/// `says` (the experiments' refusal tests).
#[cfg(test)]
pub(crate) fn assert_each_refused<C>(cases: Vec<(C, &str)>, validate: impl Fn(&C) -> Result<()>) {
    for (bad, says) in cases {
        let said = match validate(&bad) {
            Ok(()) => panic!("accepted, but should say {says}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(said.contains(says), "{says}: {said}");
    }
}

/// Runs recorded with the hand-written summaries (7f68eb8, each experiment
/// once with `--quick`): tests/fixtures/reports/<experiment>/ holds the
/// command line's options (`args`), the runs' data the summary was printed
/// from (runs.json, and what else an experiment keeps) and that summary.md.
/// An experiment's report, fed the same data, must print the same figures.
#[cfg(test)]
pub(crate) mod recorded {
    use std::path::PathBuf;

    #[derive(clap::Parser)]
    struct Cli<A: clap::Args> {
        #[command(flatten)]
        args: A,
    }

    fn dir(experiment: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports").join(experiment)
    }

    fn read(experiment: &str, file: &str) -> String {
        let path = dir(experiment).join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The recorded run's options, parsed as `lab <experiment>` would.
    pub fn args<A: clap::Args>(experiment: &str) -> A {
        let words = read(experiment, "args");
        let argv = std::iter::once(experiment).chain(words.split_whitespace());
        <Cli<A> as clap::Parser>::try_parse_from(argv).unwrap().args
    }

    /// One of the recorded run's data files.
    pub fn data<T: serde::de::DeserializeOwned>(experiment: &str, file: &str) -> T {
        serde_json::from_str(&read(experiment, file)).unwrap_or_else(|e| panic!("{experiment}/{file}: {e}"))
    }

    /// The report prints every figure the recorded summary printed, and no
    /// other, but for `dropped`: figures the old summary printed wrongly,
    /// each with why (each must be one the report no longer prints).
    pub fn assert_same_figures(
        experiment: &str,
        report: &crate::report::model::Report,
        dropped: &[(&str, &str)],
    ) {
        let new = crate::report::render::markdown(report);
        let mut diff = crate::report::figures::differences(&read(experiment, "summary.md"), &new);
        for (figure, why) in dropped {
            let d = diff
                .iter_mut()
                .find(|(f, old, new)| f == figure && old > new)
                .unwrap_or_else(|| panic!("{figure} ({why}) is not missing from the report"));
            d.1 -= 1;
        }
        diff.retain(|(_, old, new)| old != new);
        assert!(diff.is_empty(), "(figure, in the old summary, in the report): {diff:?}\n{new}");
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser)]
    struct Cli<A: clap::Args> {
        #[command(flatten)]
        args: A,
    }

    #[test]
    fn a_sweep_numbers_its_runs_and_each_line_ends_with_its_notes() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut sweep = super::Sweep::new(12, &stop);
        assert_eq!(sweep.label("a"), "run 1/12: a");
        assert_eq!(sweep.label("b"), "run 2/12: b");
        assert_eq!(super::Sweep::about(7, &stop).label("k"), "run 1/~7: k");
        let quiet = crate::measure::scenario::Outcome::default();
        assert_eq!(super::notes(&quiet), "");
        let struck = crate::measure::scenario::Outcome {
            guard_repairs: [1, 0, 2].into(),
            guard_found: (0x8220_34e5, 0),
            steal_share: 0.05,
            ..Default::default()
        };
        assert_eq!(
            super::notes(&struck),
            ", guard repairs 1/0/2 (README: Known issue), found ssthresh 0x822034e5, the hypervisor took 5 % of \
             the lab's CPU (steal: the link stood still that long)"
        );
    }

    #[test]
    fn repairs_advise_pinning_unless_the_lab_was_pinned() {
        let cpus = crate::net::cpus::online();
        let free = super::repairs_advice(12, None);
        assert!(free.contains("repaired 12 impossible"), "{free}");
        if cpus > 1 {
            let last = cpus - 1;
            assert!(free.contains(&format!("`lab --cpus {last} ...`")), "{free}");
        }
        let pinned = super::repairs_advice(3, Some(vec![1]));
        assert!(pinned.contains("struck anyway") && !pinned.contains("--cpus"), "{pinned}");
    }

    #[test]
    fn incast_and_rpc_keep_their_own_buffer_defaults() {
        let incast = Cli::<super::incast::IncastArgs>::parse_from(["lab"]).args;
        let rpc = Cli::<super::rpc::RpcArgs>::parse_from(["lab"]).args;
        assert_eq!((incast.switch.buffer, rpc.switch.buffer), (100, 425));
        assert_eq!((incast.switch.rate, incast.switch.k), (1_000_000_000, 20));
        let rpc = Cli::<super::rpc::RpcArgs>::parse_from(["lab", "--buffer", "60"]).args;
        assert_eq!(rpc.switch.buffer, 60);
    }

    #[test]
    fn variants_parse_label_and_say_what_they_are() {
        let all: Vec<super::Variant> = super::DEFAULT_VARIANTS
            .split(',')
            .map(|v| super::parse_variant(v).unwrap())
            .collect();
        let labels: Vec<String> = all.iter().map(super::Variant::label).collect();
        assert_eq!(
            labels,
            ["bpf_dctcp@bpf-step", "cubic@droptail", "reno@droptail"]
        );
        let what: Vec<(bool, bool)> = all.iter().map(|v| (v.is_dctcp(), v.marks())).collect();
        assert_eq!(what, [(true, true), (false, false), (false, false)]);
        let kernel = super::parse_variant("dctcp:red").unwrap();
        assert_eq!((kernel.is_dctcp(), kernel.marks()), (true, true));
        assert!(!super::parse_variant("bpf_dctcp_reno:bpf-step")
            .unwrap()
            .is_dctcp());
        for bad in ["bpf_dctcp", ":bpf-step", "cubic:nothing"] {
            assert!(super::parse_variant(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pairs_parse_and_say_their_path() {
        let p = super::Pair::defaults("100M@8ms,1G@100us");
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].label(), "100 Mbit/s at 8 ms");
        // 100 Mbit/s x 8 ms in 1500-byte packets: 66.7, and K_opt its seventh.
        assert!((p[0].bdp() - 66.67).abs() < 0.01, "{}", p[0].bdp());
        assert!((p[0].k_opt() - p[0].bdp() / 7.0).abs() < 1e-9);
        assert_eq!(p[1], super::Pair::parse("1G@100us").unwrap());
    }
}
