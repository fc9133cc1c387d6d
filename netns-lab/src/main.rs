//! `lab`: network-namespace experiments for DCTCP.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Result;
use clap::{Parser, Subcommand};

use netns_lab::experiments::ExperimentCommand;

/// Network-namespace labs for DCTCP: a switch that marks ECN at a threshold
/// K, senders and a receiver in their own namespaces, and the experiments of
/// the DCTCP papers, with results, plots and a summary against theory.
#[derive(Debug, Parser)]
#[command(name = "lab", version, max_term_width = 100, after_help = AFTER_HELP)]
struct Cli {
    /// More log output (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Leave htb, the shaper of the lab's links, in its default mode, which
    /// arms a timer for every packet it holds back. By default an experiment
    /// runs htb in hysteresis mode (the kernel's sch_htb.htb_hysteresis, a
    /// global setting: set to 1 and put back when the last lab holding it
    /// exits, by `lab cleanup` after a killed run), where htb sends up to its
    /// burst (40 us of line rate, at least 2 packets) before it waits. At
    /// 1 Gbit/s on a virtual machine the per-packet timers took 75 % of the
    /// CPUs and kept even cubic from building a queue (each run's softirq
    /// share is in summary.md; docs/lab/README.md "The lab at 1 Gbit/s").
    #[arg(long, global = true)]
    no_htb_hysteresis: bool,
    /// Run the lab, its senders, receivers and helpers, and so their
    /// packets' softirq work, on these CPUs only (`1`, `0-3`, `1,3`, as
    /// taskset takes them). On the Firecracker guests this project was built
    /// on, the impossible window (README "Known issue") strikes only where
    /// the platform's own agent shares a CPU with the lab's TCP processing;
    /// `--cpus 1` on two CPUs kept every run clean (docs/kernels.md). One
    /// CPU carries 100 Mbit/s with room to spare; measure before using it
    /// at higher rates.
    #[arg(long, global = true, value_name = "LIST", value_parser = netns_lab::net::cpus::parse_cpus)]
    cpus: Option<netns_lab::net::cpus::CpuList>,
    /// The ECN feedback the lab's hosts negotiate: classic (RFC 3168,
    /// net.ipv4.tcp_ecn = 1) or accecn (Accurate ECN, tcp_ecn = 3: a count
    /// of CE marks on every ACK instead of one flag, where both ends have
    /// it). AccECN needs a kernel that negotiates it (Debian's 7.3 does;
    /// 6.18 as built on this project's hosts does not, and the lab says so
    /// before building anything). Each run's outcome records which.
    #[arg(long, global = true, value_enum, default_value_t = netns_lab::net::ecn::EcnFeedback::Classic)]
    ecn: netns_lab::net::ecn::EcnFeedback,
    /// Capture every run's packets, headers only (128 bytes of each), as
    /// pcapng for Wireshark and tshark: at the bottleneck (the switch's
    /// port toward the receiver: data as it leaves the queue, with the
    /// switch's CE marks, and the ACKs coming back), or with `all` at each
    /// sender's and the receiver's interface too, one file per point, in
    /// the results' pcap/<NNN>-<run>/ (listed in pcap/captures.md). Read
    /// one with `tshark -r FILE` or `lab rtts FILE`. A full socket queue
    /// loses packets from the capture, never from the run; the console
    /// says how many. A value goes after `=`: `--pcap=all`.
    #[arg(long, global = true, value_enum, value_name = "WHERE", num_args = 0..=1, require_equals = true, default_missing_value = "bottleneck")]
    pcap: Option<netns_lab::capture::Points>,
    /// Bytes at most in each capture file (k, M, G: powers of 1000); what
    /// comes after is left out, and the console and captures.md say how
    /// many packets. 200M hold about 1.6 million packets.
    #[arg(long, global = true, value_name = "SIZE", requires = "pcap",
          default_value = netns_lab::capture::DEFAULT_LIMIT, value_parser = netns_lab::capture::parse_limit)]
    pcap_limit: u64,
    #[command(subcommand)]
    command: Command,
}

const AFTER_HELP: &str = "\
Lab hosts use 198.18.0.0/15 and send traffic only inside the lab's namespaces.
Every namespace, veth, pin and program a run creates is removed on success,
error and Ctrl-C; `lab cleanup` removes what a killed run left. Needs root.
Exit status: 0 success, 1 failure, 2 bad input (nothing was built), 4 not root.";

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Experiment(Box<ExperimentCommand>),
    Bench(Box<netns_lab::experiments::bench::BenchArgs>),
    Rtts(netns_lab::capture::RttsArgs),
    Compare(netns_lab::report::compare::CompareArgs),
    /// What this kernel offers the lab, and what to use where it falls short.
    Doctor {
        /// One JSON array for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Remove namespaces, links, pins and locks that lab runs left behind.
    ///
    /// Lab objects are named dl<5 hex digits>...; by default only those whose
    /// process is gone are removed, so running labs are left alone.
    Cleanup {
        /// Also remove objects of labs that are still running.
        #[arg(long)]
        all: bool,
    },
}

fn run(cli: Cli, stop: Arc<AtomicBool>) -> Result<()> {
    let htb = !cli.no_htb_hysteresis;
    if let Some(cpus) = &cli.cpus {
        cpus.pin_self()
            .map_err(|e| dctcp_utils::error::UsageError(format!("{e:#}")))?;
    }
    netns_lab::net::ecn::select(cli.ecn)
        .map_err(|e| dctcp_utils::error::UsageError(format!("{e:#}")))?;
    if cli.pcap.is_some() && !matches!(cli.command, Command::Experiment(_)) {
        return Err(dctcp_utils::error::UsageError(
            "--pcap captures an experiment's runs (`lab --pcap queue ...`); `lab bench` measures a capture of its own"
                .into(),
        )
        .into());
    }
    netns_lab::capture::select(cli.pcap.map(|points| netns_lab::capture::Plan {
        points,
        limit_bytes: cli.pcap_limit,
    }));
    match cli.command {
        Command::Experiment(e) => e.launch(htb, &stop),
        Command::Bench(args) => netns_lab::experiments::bench::command(&args, &stop),
        Command::Rtts(args) => netns_lab::capture::rtts_command(&args),
        Command::Compare(args) => netns_lab::report::compare::command(&args),
        Command::Doctor { json } => netns_lab::net::doctor::command(json),
        Command::Cleanup { all } => netns_lab::net::cleanup::command(all),
    }
}

fn main() -> ExitCode {
    if let Some(status) = loader::generate::intercept(<Cli as clap::CommandFactory>::command) {
        return status;
    }
    let cli = Cli::parse();
    dctcp_utils::error::init_logging(cli.verbose);
    // Ctrl-C (and SIGTERM) ask the run to stop; teardown happens as it unwinds.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            eprintln!("lab: stopping, tearing down (again to force)...");
        } else {
            eprintln!("\nlab: interrupted, tearing down...");
        }
    });
    dctcp_utils::error::exit_code("lab", run(cli, stop))
}
