//! `lab`: network-namespace experiments for DCTCP.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Result;
use clap::{Parser, Subcommand};

use netns_lab::experiments::queue;
use netns_lab::experiments::Experiment;
use netns_lab::prefix::HTB_STATE;
use netns_lab::results::ResultsDir;
use tc_qdisc::hysteresis::Hysteresis;

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
    /// Queue occupancy, DCTCP against TCP (paper Fig. 1).
    ///
    /// Two long flows into one receiver through the switch; DCTCP (bpf_dctcp,
    /// attached for the run) on a K-marking backend against cubic and reno on
    /// droptail, at each rate. The round trip (--rtt) is by default the
    /// seed's at each rate: 500us below 1 Gbit/s (seed 000's Mininet runs),
    /// 100us at 1 Gbit/s and above (the paper's testbed). Writes
    /// results/queue/<timestamp>/.
    Queue(queue::QueueArgs),
    /// Marking threshold K against C x RTT / 7 (seed 001).
    ///
    /// For each (rate, RTT) pair, long bpf_dctcp flows through bpf-step at
    /// each K of a log-spaced grid of K / K_opt (1/4 to 10, K_opt = C x RTT
    /// / 7), then a bisection for K_min, the smallest K whose queue is empty
    /// at most --empty-target of the time, beside the seed's "about 2 K_opt".
    /// Writes results/ksweep/<timestamp>/: runs.csv, the queue for several K
    /// (seed 001 Fig. 1), time empty and utilization against K / K_opt
    /// (Fig. 2), summary.md.
    Ksweep(netns_lab::experiments::ksweep::KsweepArgs),
    /// The sawtooth of N flows against DCTCP's analysis (seed 000, paper Fig. 12).
    ///
    /// N long bpf_dctcp flows (default 2, 10, 40) through bpf-step at K (20)
    /// at each (rate, RTT) pair (default 100M@500us, seed 000's, and
    /// 1G@100us, the paper's). The queue's top, bottom, amplitude and period
    /// (autocorrelation of the queue over time) beside Qmax = K + N,
    /// A = 1/2 sqrt(2N (C x RTT + K)) and T_c = A / N round trips, and how
    /// synchronized the flows' windows were (the analysis assumes they are).
    /// Writes results/sawtooth/<timestamp>/: runs.csv, per run the queue with
    /// the theory's band and the flows' cwnd, summary.md.
    Sawtooth(netns_lab::experiments::sawtooth::SawtoothArgs),
    /// Convergence and fairness as flows come and go (seed 000, paper Fig. 16).
    ///
    /// One long flow; the other senders (default 4 more) join one every
    /// --join (30 s), then leave one every --leave in the order they came,
    /// or any --schedule. bpf_dctcp on bpf-step at K against cubic and reno
    /// on droptail, at 100 Mbit/s (RTT 500us) and 1 Gbit/s (100us). After
    /// each change: the time until every flow stays within --tolerance of
    /// the fair share for --hold, per --interval and on --smooth means;
    /// over each phase: Jain's index, each flow's coefficient of variation,
    /// the queue and drops. The paper: DCTCP converges a few round trips
    /// slower, with less variability.
    /// Writes results/convergence/<timestamp>/: rates_<rate>.png (the
    /// paper's figure), convergence.png, rates.csv, phases.csv, summary.md.
    Convergence(netns_lab::experiments::convergence::ConvergenceArgs),
    /// DCTCP beside Reno through one queue: seed 002's dual AQM.
    ///
    /// bpf_dctcp (ECN; or, with --dctcp seed002, bpf_kdctcp with seed 002's
    /// four modifications) and the kernel's reno (ECN off) share a 10 Mbit/s
    /// bottleneck at 25 ms through `bpf-dual`: one queue, two RED profiles
    /// on their own averages of it, ECN-capable packets marked by the DCTCP
    /// profile, Not-ECT packets dropped by the Reno profile (Min_Thresh M,
    /// Max_Thresh 3 M, Max_Prob 0.1, w 0.002). Parts: step (K / M swept per
    /// M, the seed's Fig. 5 and Table I with a two-Reno baseline), flows (N
    /// DCTCP against one Reno, Fig. 6), slope (Max_Prob_DCTCP swept, Figs.
    /// 7-9, beside the seed's equation 3), equal (the equal-sharing rule
    /// over M, Fig. 10), starvation (one step marker for both classes).
    /// About 55 min by default. Writes results/coexist/<timestamp>/:
    /// runs.csv, runs.json, step.png, flows.png, slope.png,
    /// max_fairness.png, equal.png, summary.md (our Table I beside the
    /// seed's).
    Coexist(netns_lab::experiments::coexist::CoexistArgs),
    /// xDCTCP against DCTCP with short flows beside long ones (seed 003).
    ///
    /// Long flows plus short flows (Poisson arrivals, sizes uniform between
    /// two bounds) from one more sender, through the bpf-step switch. Each
    /// round runs DCTCP and xDCTCP on the same seeded arrivals; then a sweep
    /// over (g, ns, nl) plots short-flow delay against long-flow throughput.
    /// Writes results/xdctcp/<timestamp>/ with summary.md beside seed 003's
    /// claim (6.646 % lower short-flow delay at equal throughput). Round trip
    /// (--rtt) by default 500us below 1 Gbit/s, 100us at 1 Gbit/s and above
    /// (seed 003 is a simulation of a data center and names none).
    Xdctcp(netns_lab::experiments::xdctcp::XdctcpArgs),
    /// DCTCP against each modification of seed 002, side by side.
    ///
    /// Plain bpf_dctcp and bpf_kdctcp attached under their own names with
    /// one switch on each (per-ACK alpha, progressive cut, growth in CWR,
    /// alpha in 1/2^20) and with all four; each carries the same long flows
    /// through the bpf-step switch, traced. Writes results/variants/<timestamp>/:
    /// cwnd and alpha from the flows' start (seed 002's Fig. 1), the queue,
    /// throughput, fairness and when cwnd settles after slow start. Round
    /// trip (--rtt) by default 500us below 1 Gbit/s, 100us at 1 Gbit/s and
    /// above, data-center RTTs (seed 002's 25 ms is its Internet scenario,
    /// `--rate 10M --rtt 25ms`).
    Variants(netns_lab::experiments::variants::VariantsArgs),
    /// Incast: N workers answer one aggregator at once (the DCTCP paper's
    /// incast experiment).
    ///
    /// For each N of --workers and each algorithm, one `rpcgen worker` per
    /// star sender (a namespace each) and the aggregator, `rpcgen client
    /// --rounds`, at the receiver: each round asks every worker for its share
    /// of --response-bytes at once. bpf_dctcp runs on bpf-step at K, kernel
    /// algorithms on droptail, all with a shallow buffer and RTO_min set on
    /// the workers' routes. Writes results/incast/<timestamp>/: query
    /// completion times, timeouts, retransmits, drops and queue per N, plots
    /// against N, and where timeouts start beside the paper's 10 (TCP) and
    /// 35 (DCTCP) senders. Round trip (--rtt) by default 100us at 1 Gbit/s
    /// and above (the paper's testbed), 500us below.
    Incast(netns_lab::experiments::incast::IncastArgs),
    /// RPC tail latency and fairness, DCTCP against cubic (seed 004).
    ///
    /// --senders rpcgen workers answer a Poisson stream of RPCs of the --mix
    /// sizes for the receiver at --load of the bottleneck, once per
    /// algorithm. Writes results/rpc/<timestamp>/: per size p50, p99, p99.9
    /// latency and goodput share, Jain's index between sizes,
    /// retransmissions, drops, and CPU per GB of senders and receiver, in a
    /// table shaped like seed 004's Figures 5 and 6. Round trip (--rtt) by
    /// default 100us at 1 Gbit/s and above, 500us below.
    Rpc(netns_lab::experiments::rpc::RpcArgs),
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
    Bench(netns_lab::bench::BenchArgs),
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

fn require_root() -> Result<()> {
    loader::preflight::require_root("lab")
}

/// Checks the configuration (bad input is a usage error, before anything
/// touches the kernel), then runs the experiment into
/// results/<name>/<timestamp>/ (or `out`) and says where its summary is.
fn experiment<E: Experiment>(
    cfg: &E,
    out: Option<&std::path::Path>,
    htb_hysteresis: bool,
    stop: &Arc<AtomicBool>,
) -> Result<()> {
    let usage = |e: anyhow::Error| anyhow::Error::new(loader::error::UsageError(format!("{e:#}")));
    cfg.validate().map_err(usage)?;
    tc_qdisc::marker::require_kernel().map_err(usage)?;
    require_root()?;
    let _htb = htb_hysteresis
        .then(|| Hysteresis::hold(std::path::Path::new(HTB_STATE)))
        .transpose()?;
    let dir = ResultsDir::create(&queue::default_root(), E::NAME, out)?;
    cfg.run(&dir, stop)?;
    println!("results: {}", dir.path.display());
    println!("summary: {}", dir.file("summary.md").display());
    Ok(())
}

fn run(cli: Cli, stop: Arc<AtomicBool>) -> Result<()> {
    let htb = !cli.no_htb_hysteresis;
    match cli.command {
        Command::Queue(args) => experiment(&args.config(), args.out.as_deref(), htb, &stop)?,
        Command::Ksweep(args) => experiment(&args.config(), args.out.as_deref(), htb, &stop)?,
        Command::Sawtooth(args) => experiment(&args.config(), args.out.as_deref(), htb, &stop)?,
        Command::Convergence(args) => experiment(&args.config(), args.out.as_deref(), htb, &stop)?,
        Command::Coexist(args) => experiment(&args.config(), args.out.as_deref(), htb, &stop)?,
        Command::Xdctcp(args) => experiment(&args.config(), args.out.as_deref(), htb, &stop)?,
        Command::Variants(args) => experiment(&args.config(), args.out.as_deref(), htb, &stop)?,
        Command::Incast(args) => experiment(&args.config(), args.out.as_deref(), htb, &stop)?,
        Command::Rpc(args) => experiment(&args.config(), args.out.as_deref(), htb, &stop)?,
        Command::Bench(args) => netns_lab::bench::command(&args, &stop)?,
        Command::Doctor { json } => {
            require_root()?;
            let checks = netns_lab::doctor::run()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&checks)?);
            } else {
                for c in checks {
                    println!(
                        "{:<40} {:<4} {}",
                        c.feature,
                        if c.available { "yes" } else { "NO" },
                        c.note
                    );
                }
            }
        }
        Command::Cleanup { all } => {
            require_root()?;
            let removed = netns_lab::cleanup::cleanup(all)?;
            if removed.is_empty() {
                println!("nothing to clean up");
            }
            for r in removed {
                println!("removed {r}");
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    if let Some(status) = loader::generate::intercept(<Cli as clap::CommandFactory>::command) {
        return status;
    }
    let cli = Cli::parse();
    loader::error::init_logging(cli.verbose);
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
    loader::error::exit_code("lab", run(cli, stop))
}
