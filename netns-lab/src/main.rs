//! `lab`: network-namespace experiments for DCTCP.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};

use netns_lab::experiments::queue;
use netns_lab::experiments::variants::VariantsConfig;
use netns_lab::experiments::xdctcp::{Grid, Setting, XdctcpConfig};
use netns_lab::experiments::{Experiment, StarArgs};
use netns_lab::prefix::HTB_STATE;
use netns_lab::results::ResultsDir;
use netns_lab::units::parse_rate;
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

/// The star at one bottleneck rate.
#[derive(Debug, clap::Args)]
struct OneRate {
    /// Bottleneck rate (100M, 1G, ...).
    #[arg(long, value_parser = parse_rate, default_value = "100M")]
    rate: u64,
    #[command(flatten)]
    star: StarArgs,
    #[command(flatten)]
    rtt: netns_lab::delay::RttArgs,
}

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
    Xdctcp {
        /// Short runs for tests and a first look: 5 s, one round, 2-point sweep.
        #[arg(long)]
        quick: bool,
        #[command(flatten)]
        link: OneRate,
        /// Mean short-flow arrivals per second.
        #[arg(long, default_value_t = 40.0)]
        short_rate: f64,
        /// Smallest short flow, bytes.
        #[arg(long, default_value_t = 10_000)]
        short_min: u64,
        /// Largest short flow, bytes.
        #[arg(long, default_value_t = 100_000)]
        short_max: u64,
        /// xDCTCP's short/long threshold in bytes sent (its short_bytes).
        #[arg(long, default_value_t = 1 << 20)]
        short_bytes: u64,
        /// xDCTCP's gain in the head-to-head runs.
        #[arg(long, default_value_t = 0.09, allow_negative_numbers = true)]
        g: f64,
        /// xDCTCP's short-flow factor in the head-to-head runs.
        #[arg(long, default_value_t = 0.3, allow_negative_numbers = true)]
        ns: f64,
        /// xDCTCP's long-flow factor in the head-to-head runs.
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        nl: f64,
        /// Head-to-head rounds (default 3, 1 with --quick).
        #[arg(long)]
        rounds: Option<usize>,
        /// Seconds per head-to-head run (default 20, 5 with --quick).
        #[arg(long)]
        duration: Option<f64>,
        /// Sweep: reduced (12 settings), full (seed 003's 390) or none.
        #[arg(long, value_enum, default_value = "reduced")]
        grid: Grid,
        /// Seconds per sweep run (default 8, 4 with --quick).
        #[arg(long)]
        sweep_duration: Option<f64>,
        /// Seed of the short flows' arrivals and sizes.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Results directory (default results/xdctcp/<timestamp>).
        #[arg(long)]
        out: Option<PathBuf>,
    },
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
    Variants {
        /// Short runs for tests and a first look: 4 s, one round.
        #[arg(long)]
        quick: bool,
        #[command(flatten)]
        link: OneRate,
        /// Rounds over all contenders (default 2, 1 with --quick).
        #[arg(long)]
        rounds: Option<usize>,
        /// Seconds per run (default 10, 4 with --quick).
        #[arg(long)]
        duration: Option<f64>,
        /// Results directory (default results/variants/<timestamp>).
        #[arg(long)]
        out: Option<PathBuf>,
    },
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
    Incast {
        /// N = 1, 4, 16 with 20 rounds, for tests and a first look.
        #[arg(long)]
        quick: bool,
        /// Bottleneck rate (100M, 1G, ...).
        #[arg(long, value_parser = parse_rate, default_value = "1G")]
        rate: u64,
        /// Marking threshold K for bpf_dctcp, packets.
        #[arg(long, default_value_t = 20)]
        k: u32,
        /// Switch buffer, packets (the paper: a static 100).
        #[arg(long, default_value_t = 100)]
        buffer: u32,
        /// Worker counts to sweep, comma-separated (1 to 256).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "1,2,4,8,16,24,32,40,48,64"
        )]
        workers: Vec<usize>,
        /// Bytes per round, split evenly over the workers.
        #[arg(long, default_value_t = 1_000_000)]
        response_bytes: u64,
        /// --response-bytes is what each worker sends, not the total.
        #[arg(long)]
        per_worker: bool,
        /// Rounds per N and algorithm (default 200, 20 with --quick).
        #[arg(long)]
        rounds: Option<u64>,
        /// RTO_min of the workers' routes, ms.
        #[arg(long, default_value_t = 10)]
        rto_min_ms: u32,
        /// Algorithms: bpf_dctcp (attached for the run) and kernel ones.
        #[arg(long, value_delimiter = ',', default_value = "bpf_dctcp,cubic,reno")]
        algorithms: Vec<String>,
        #[command(flatten)]
        rtt: netns_lab::delay::RttArgs,
        /// Results directory (default results/incast/<timestamp>).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// RPC tail latency and fairness, DCTCP against cubic (seed 004).
    ///
    /// --senders rpcgen workers answer a Poisson stream of RPCs of the --mix
    /// sizes for the receiver at --load of the bottleneck, once per
    /// algorithm. Writes results/rpc/<timestamp>/: per size p50, p99, p99.9
    /// latency and goodput share, Jain's index between sizes,
    /// retransmissions, drops, and CPU per GB of senders and receiver, in a
    /// table shaped like seed 004's Figures 5 and 6. Round trip (--rtt) by
    /// default 100us at 1 Gbit/s and above, 500us below.
    Rpc {
        /// 4 s runs.
        #[arg(long)]
        quick: bool,
        /// Bottleneck rate (100M, 1G, ...).
        #[arg(long, value_parser = parse_rate, default_value = "1G")]
        rate: u64,
        /// Marking threshold K for bpf_dctcp, packets.
        #[arg(long, default_value_t = 20)]
        k: u32,
        /// Switch buffer, packets (deep: cubic builds standing queues in it).
        #[arg(long, default_value_t = 425)]
        buffer: u32,
        /// Sending hosts (seed 004: 2 or 3).
        #[arg(long, default_value_t = 3)]
        senders: usize,
        /// RPC sizes and their share of the RPCs, size:weight,...
        #[arg(long, default_value = "10000:0.5,1000000:0.5")]
        mix: netns_lab::rpc::Mix,
        /// Offered load as a fraction of the bottleneck.
        #[arg(long, default_value_t = 0.6)]
        load: f64,
        /// Seconds per algorithm (default 20, 4 with --quick).
        #[arg(long)]
        duration: Option<f64>,
        /// Persistent connections per sender.
        #[arg(long, default_value_t = 8)]
        connections: usize,
        /// Algorithms: bpf_dctcp (attached for the run) and kernel ones.
        #[arg(long, value_delimiter = ',', default_value = "bpf_dctcp,cubic")]
        algorithms: Vec<String>,
        #[command(flatten)]
        rtt: netns_lab::delay::RttArgs,
        /// Seed of arrivals and sizes (the same for every algorithm).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Results directory (default results/rpc/<timestamp>).
        #[arg(long)]
        out: Option<PathBuf>,
    },
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
    Bench {
        /// 2 rounds, 256 MiB transfers, 2 s switch runs, stars of 1 and 16.
        #[arg(long)]
        quick: bool,
        /// Rounds of every comparison, 1 to 500 (default 5, 2 with
        /// --quick). CPU per GB spreads by about 15 % per round on a small
        /// guest: a 95 % interval of the median narrower than 3 % takes
        /// about 100.
        #[arg(long)]
        rounds: Option<usize>,
        /// MiB per bulk transfer (default 1024, 256 with --quick).
        #[arg(long)]
        mib: Option<u64>,
        /// Kernel algorithms to compare bpf_dctcp with.
        #[arg(long, value_delimiter = ',', default_value = "reno,cubic")]
        baselines: Vec<String>,
        /// Leave out bpf_dctcp traced per window and per ACK.
        #[arg(long)]
        no_tracing: bool,
        /// Seconds per switch run, 0 to skip (default 4, 2 with --quick).
        #[arg(long)]
        switch_secs: Option<f64>,
        /// Leave out the switch's cost from perf's samples (perf record -a
        /// -g, from linux-perf), which needs perf and adds a set of runs.
        #[arg(long)]
        no_perf: bool,
        /// Star sizes to set up and tear down (default 1,16,64,256; 1,16
        /// with --quick).
        #[arg(long, value_delimiter = ',')]
        scale: Option<Vec<usize>>,
        /// Rates of the delay section: each without a delay and at every
        /// --delays with every --delay-backends (cubic on droptail).
        #[arg(long, value_delimiter = ',', value_parser = parse_rate, default_value = "100M,1G")]
        delay_rates: Vec<u64>,
        /// Round trips of the delay section.
        #[arg(long, value_delimiter = ',', value_parser = netns_lab::delay::parse_duration, default_value = "100us,1ms,8ms,25ms")]
        delays: Vec<Duration>,
        /// Backends of the delay section (netem where the kernel has it).
        #[arg(long, value_delimiter = ',', value_enum, default_value = "auto")]
        delay_backends: Vec<netns_lab::delay::DelayBackend>,
        /// Seconds per delay-section run, 0 to skip the section (default 6,
        /// 4 with --quick).
        #[arg(long)]
        delay_secs: Option<f64>,
        /// JSON report (default bench/results/<timestamp>.json).
        #[arg(long)]
        out: Option<PathBuf>,
    },
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
        Command::Xdctcp {
            quick,
            link: OneRate { rate, star, rtt },
            short_rate,
            short_min,
            short_max,
            short_bytes,
            g,
            ns,
            nl,
            rounds,
            duration,
            grid,
            sweep_duration,
            seed,
            out,
        } => {
            let secs = |v: Option<f64>, normal: f64, short: f64| {
                Duration::from_secs_f64(v.unwrap_or(if quick { short } else { normal }))
            };
            let mut settings = grid.settings();
            if quick && grid == Grid::Reduced {
                // Two points: the seed's best and DCTCP's own factors.
                settings = vec![
                    Setting::SEED_BEST,
                    Setting {
                        g: 0.0625,
                        ns: 0.5,
                        nl: 0.5,
                    },
                ];
            }
            let cfg = XdctcpConfig {
                rate_bps: rate,
                rtt,
                k: star.k,
                buffer_pkts: star.buffer,
                long_flows: star.flows,
                short_per_second: short_rate,
                short_min_bytes: short_min,
                short_max_bytes: short_max,
                short_bytes,
                duration: secs(duration, 20.0, 5.0),
                warmup: Duration::from_secs(2),
                rounds: rounds.unwrap_or(if quick { 1 } else { 3 }),
                setting: Setting { g, ns, nl },
                grid: settings,
                sweep_duration: secs(sweep_duration, 8.0, 4.0),
                seed,
            };
            experiment(&cfg, out.as_deref(), htb, &stop)?;
        }
        Command::Variants {
            quick,
            link: OneRate { rate, star, rtt },
            rounds,
            duration,
            out,
        } => {
            let cfg = VariantsConfig {
                rate_bps: rate,
                rtt,
                k: star.k,
                buffer_pkts: star.buffer,
                flows: star.flows,
                duration: Duration::from_secs_f64(duration.unwrap_or(if quick {
                    4.0
                } else {
                    10.0
                })),
                warmup: Duration::from_secs(if quick { 1 } else { 2 }),
                rounds: rounds.unwrap_or(if quick { 1 } else { 2 }),
            };
            experiment(&cfg, out.as_deref(), htb, &stop)?;
        }
        Command::Incast {
            quick,
            rate,
            k,
            buffer,
            workers,
            response_bytes,
            per_worker,
            rounds,
            rto_min_ms,
            algorithms,
            rtt,
            out,
        } => {
            let cfg = netns_lab::experiments::incast::IncastConfig {
                rate_bps: rate,
                rtt,
                k,
                buffer_pkts: buffer,
                workers: if quick { vec![1, 4, 16] } else { workers },
                response_bytes,
                per_worker,
                rounds: rounds.unwrap_or(if quick { 20 } else { 200 }),
                rto_min_ms,
                algorithms,
            };
            experiment(&cfg, out.as_deref(), htb, &stop)?;
        }
        Command::Rpc {
            quick,
            rate,
            k,
            buffer,
            senders,
            mix,
            load,
            duration,
            connections,
            algorithms,
            rtt,
            seed,
            out,
        } => {
            let cfg = netns_lab::experiments::rpc::RpcConfig {
                rate_bps: rate,
                rtt,
                k,
                buffer_pkts: buffer,
                senders,
                mix,
                load,
                duration: Duration::from_secs_f64(
                    duration.unwrap_or(if quick { 4.0 } else { 20.0 }).max(0.0),
                ),
                connections,
                algorithms,
                seed,
            };
            experiment(&cfg, out.as_deref(), htb, &stop)?;
        }
        Command::Bench {
            quick,
            rounds,
            mib,
            baselines,
            no_tracing,
            switch_secs,
            no_perf,
            scale,
            delay_rates,
            delays,
            delay_backends,
            delay_secs,
            out,
        } => {
            let delay_secs = delay_secs.unwrap_or(if quick { 4.0 } else { 6.0 });
            let cfg = netns_lab::bench::BenchConfig {
                rounds: rounds.unwrap_or(if quick { 2 } else { 5 }),
                bytes: mib.unwrap_or(if quick { 256 } else { 1024 }) << 20,
                baselines,
                tracing: !no_tracing,
                switch_secs: switch_secs.unwrap_or(if quick { 2.0 } else { 4.0 }),
                perf: !no_perf,
                scale: scale.unwrap_or(if quick {
                    vec![1, 16]
                } else {
                    vec![1, 16, 64, 256]
                }),
                delay: (delay_secs > 0.0).then(|| netns_lab::delay_bench::DelayBenchConfig {
                    rates_bps: delay_rates,
                    delays,
                    backends: delay_backends,
                    duration: Duration::from_secs_f64(delay_secs),
                }),
            };
            cfg.validate()
                .map_err(|e| anyhow::Error::new(loader::error::UsageError(format!("{e:#}"))))?;
            require_root()?;
            loader::preflight::require_btf()?;
            loader::preflight::require_struct_ops()?;
            let path = out.unwrap_or_else(|| {
                PathBuf::from("bench/results")
                    .join(format!("{}.json", netns_lab::results::timestamp()))
            });
            let report = netns_lab::bench::run(&cfg, &stop)?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            print!("{}", netns_lab::bench::table(&report));
            println!("report: {}", path.display());
        }
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
