//! Command line of `loader`.

use clap::{Parser, Subcommand};

use loader::algo::Algo;
use loader::instance::AttachMode;
use loader::params::Assignment;

const AFTER_HELP: &str = "\
Examples:
  sudo loader check                                can this kernel run them? (registers nothing)
  sudo loader attach --algo dctcp                  register bpf_dctcp (and bpf_dctcp_reno)
  sudo loader attach --algo dctcp --name dc5 --param shift_g=5
  sudo loader attach --algo xdctcp --param ns=0.25  register bpf_xdctcp, short flows cut less
  sudo loader attach --algo kdctcp --name kd_ack --param per_ack_alpha=1 --param fine_alpha=1
  sudo loader attach --algo prague --ect1-dev eth0  TCP Prague (L4S), ECT(1) on eth0 (Linux 6.10+)
  sudo sysctl net.ipv4.tcp_congestion_control=bpf_dctcp
  sudo loader flows                                sockets using it, like `ss -ti`
  sudo loader top                                  live view of flows and lab switch queues
  sudo loader set bpf_dctcp shift_g=6              retune while flows run
  sudo loader trace --algo bpf_dctcp --flow dport=5201 --duration 10 > trace.jsonl
  sudo loader detach bpf_dctcp
  sudo loader attach --from /etc/dctcp-bpf/attach.toml   what dctcp-bpf.service runs

Attached algorithms stay registered after loader exits: they are pinned under
/sys/fs/bpf/dctcp-bpf/<name>/. Every command but --help needs root.
Exit status: 0 success, 1 failure, 2 bad input or config (nothing was
changed), 4 not root, 6 the --from file does not exist.";

/// Output of `loader trace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    Jsonl,
    Csv,
}

/// Load DCTCP and its variants as BPF struct_ops congestion controls, with no
/// kernel rebuild.
///
/// DCTCP reacts to the fraction of ECN-marked packets rather than to their
/// presence: each window it updates alpha = (1 - g) alpha + g F, and on
/// congestion cuts cwnd by alpha / 2. xdctcp (seed 003) cuts short flows by
/// ns alpha and long ones by nl alpha; kdctcp is DCTCP with seed 002's four
/// modifications, each a switch; prague is L4S's TCP Prague (RFC 9331): a
/// fractional window, RTT independence, pacing, and ECT(1) through its tcx
/// program. Sockets pick an attached algorithm by
/// name with setsockopt(TCP_CONGESTION) or the per-namespace sysctl
/// net.ipv4.tcp_congestion_control; both ends need ECN, which DCTCP requests
/// on its own. Without ECN a flow falls back to Reno (`<name>_reno`).
#[derive(Debug, Parser)]
#[command(name = "loader", version, after_help = AFTER_HELP, max_term_width = 100)]
pub struct Cli {
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load an algorithm, register it with the kernel and pin it.
    ///
    /// Registers <name> (default bpf_<algo>) and its Reno fallback
    /// <name>_reno, and pins both under /sys/fs/bpf/dctcp-bpf/<name>/ so they
    /// stay registered after loader exits. An already attached name is
    /// reported and nothing changes (exit status 1).
    ///
    /// With --from FILE, attaches every algorithm a TOML file lists, as the
    /// systemd unit dctcp-bpf.service does at boot: one [[attach]] table per
    /// algorithm with algo, and optionally name, params (a table, e.g.
    /// params = { shift_g = 5 }) and mode; an optional [sysctl] table sets
    /// this network namespace's net.ipv4.tcp_congestion_control (default =
    /// "NAME") and adds names to net.ipv4.tcp_allowed_congestion_control
    /// (allowed = ["NAME", ...]). The whole file is checked before anything
    /// loads; a name already attached with the same algorithm is left as it
    /// is (a second start succeeds); if one attach fails, those this run
    /// made are detached again. Exit status 2 for a malformed file, 6 when
    /// it does not exist (systemd: NOTCONFIGURED).
    Attach {
        /// Algorithm to load.
        #[arg(long, value_enum, required_unless_present = "from")]
        algo: Option<Algo>,
        /// Name to register under (1-10 of [A-Za-z0-9_-]); default bpf_<algo>.
        #[arg(long)]
        name: Option<String>,
        /// Tunable as name=value, repeatable; a value out of range is refused
        /// before anything loads. dctcp: shift_g (0..=10, default 4: g =
        /// 1/2^shift_g), alpha_on_init (0..=1024, default 1024 = 1.0). xdctcp:
        /// g ((0, 1], 0.09), ns and nl ([0, 1], 0.3 and 1.0: short and long
        /// flows cut cwnd to cwnd (1 - n alpha)), short_bytes (1048576: short
        /// until this much was sent), alpha_on_init. kdctcp: g (0.0625), g_ack
        /// (0.00390625), per_ack_alpha, progressive, cwr_growth, fine_alpha (0
        /// or 1, all 0: DCTCP), alpha_on_init. prague: g (0.0625),
        /// alpha_on_init (0: the first mark halves the window), rtt_target_us
        /// (100..=100000, 25000), rtt_scaling (1), rtt_transition (4 rounds),
        /// mode (window, rate or auto), mode_switch_mtus (4), pacing (1).
        /// Every algorithm: inject_ssthresh
        /// (0: off; N: each flow's first N reductions return the impossible
        /// ssthresh of docs/kernels.md's Known issue, to watch the guard
        /// repair it: `loader trace` shows `repair` events, `loader list` the
        /// counts; a test hook, fixed at attach: an instance attached without
        /// it carries no injection code and `set` cannot turn it on); guard
        /// (1, the default: repair impossible ssthresh and
        /// cwnd values and hold their bursts; 0: off, for kernels that never
        /// need it).
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<Assignment>,
        /// How the registration is held: a struct_ops link (Linux 6.4+) or
        /// the struct_ops map itself (older kernels). auto picks by kernel.
        #[arg(long, value_enum, default_value_t = AttachMode::Auto)]
        mode: AttachMode,
        /// prague: put its ECT(1) program on the egress (tcx) of this
        /// interface of loader's network namespace, repeatable; by default
        /// every interface that is up but loopback. It rewrites ECT(0) to
        /// ECT(1) on the packets of prague's own sockets only; detach
        /// removes it. A network namespace of its own (a container's, the
        /// lab's) needs it on its own interfaces: run loader there, or let
        /// the lab attach it.
        #[arg(long = "ect1-dev", value_name = "DEV")]
        ect1_devs: Vec<String>,
        /// Attach what this TOML file lists instead (see above; the unit
        /// reads /etc/dctcp-bpf/attach.toml).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["algo", "name", "params", "mode", "ect1_devs"])]
        from: Option<std::path::PathBuf>,
    },
    /// Unregister an attached algorithm and remove its pins.
    ///
    /// Sockets already using it keep running it until they close; new
    /// sockets can no longer select it.
    ///
    /// With --from FILE (what the unit runs at stop), puts back the sysctls
    /// the file's [sysctl] changed, as they were before the first
    /// `attach --from` (a default naming one of the file's algorithms
    /// becomes cubic if nothing was recorded), then detaches every algorithm
    /// the file lists that is attached.
    Detach {
        /// Name given at attach (see `loader list`).
        #[arg(required_unless_present_any = ["all", "from"], conflicts_with_all = ["all", "from"])]
        name: Option<String>,
        /// Detach every algorithm loader attached, and remove what an attach
        /// or detach killed midway left (its `+attaching-*` directory).
        #[arg(long, conflicts_with = "from")]
        all: bool,
        /// Detach what this TOML file lists (the file `attach --from` read).
        #[arg(long, value_name = "FILE")]
        from: Option<std::path::PathBuf>,
    },
    /// Show attached algorithms: parameters, live sockets, counters.
    List {
        /// One JSON array for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Change parameters of an attached algorithm without reloading it.
    ///
    /// Takes effect on every socket using it at its next ACK.
    Set {
        /// Name given at attach.
        name: String,
        /// name=value pairs, e.g. shift_g=5 or nl=0.8 (see attach --help).
        #[arg(value_name = "NAME=VALUE", required = true)]
        params: Vec<Assignment>,
    },
    /// Stream an attached algorithm's events: alpha windows, cwnd, states.
    ///
    /// Switches the algorithm's event tracing on, drains its pinned ring
    /// buffer (/sys/fs/bpf/dctcp-bpf/<name>/events) every 10 ms and writes one
    /// record per event: `start`/`end` of a flow, `window` (alpha updated at
    /// the end of an observation window, with the window's delivered and
    /// ECE-echoed packets and their ratio F), `state` (congestion state
    /// changes: open, cwr, recovery, loss), `fallback` (no ECN: Reno), and
    /// with --per-ack an `ack` record with cwnd on every ACK. Every record
    /// carries the flow (the socket's own view: local and remote address,
    /// network namespace inode), a CLOCK_MONOTONIC timestamp, cwnd,
    /// ssthresh, alpha, srtt and the delivered counters. Tracing is off
    /// again when this exits (end of --duration, Ctrl-C, closed pipe).
    /// On exit the events seen, dropped (ring full) and produced by the
    /// programs are reported on stderr; seen + dropped = produced. One
    /// tracer per algorithm at a time.
    Trace {
        /// Attached algorithm to trace (see `loader list`); default: the one
        /// attached, if there is exactly one.
        #[arg(long = "algo", value_name = "NAME")]
        name: Option<String>,
        /// Only flows matching all of these comma-separated conditions:
        /// port=N, sport=N, dport=N, addr=IP, saddr=IP, daddr=IP,
        /// netns=INODE (s = the socket's own end, d = its peer).
        #[arg(long, value_name = "FILTER")]
        flow: Option<loader::event::FlowFilter>,
        /// Also trace cwnd on ACKs (see --ack-every).
        #[arg(long)]
        per_ack: bool,
        /// With --per-ack, one ACK in N of each flow.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        ack_every: u32,
        /// Output format: one JSON object per line, or CSV with a header.
        #[arg(long, value_enum, default_value_t = TraceFormat::Jsonl)]
        format: TraceFormat,
        /// Stop after this many seconds (default: until Ctrl-C).
        #[arg(long, value_name = "SECONDS",
              value_parser = clap::value_parser!(u32).range(1..=86_400))]
        duration: Option<u32>,
        /// Write to this file instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
        /// Take over a trace left switched on by a tracer that was killed.
        #[arg(long)]
        take_over: bool,
    },
    /// Show sockets using attached algorithms, in every network namespace.
    ///
    /// One line per socket with what `ss -ti` shows for the kernel's dctcp
    /// (ce_state, alpha, ab_ecn, ab_tot) plus cwnd, ssthresh, srtt and whether
    /// the flow fell back to Reno. `ss` itself shows nothing for BPF
    /// algorithms: struct_ops cannot implement get_info.
    Flows {
        /// Every TCP socket, whatever its congestion control.
        #[arg(long)]
        all: bool,
        /// One JSON array for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Live dashboard of the flows using attached algorithms, and of lab switches.
    ///
    /// A full-screen terminal view. Every --interval a background thread runs
    /// the BPF flows iterator in every network namespace (what `loader flows`
    /// shows), lists the attached algorithms and reads the switch of every
    /// running lab; the screen is redrawn as polls arrive and keys are
    /// pressed.
    ///
    /// The header names the attached algorithms, the number of live flows, the
    /// time window, the poll interval, and PAUSED while paused. The table has
    /// one row per socket: local -> remote address, network namespace,
    /// algorithm, cwnd and ssthresh (packets), alpha (0 to 1), F (the fraction
    /// of packets delivered since the last poll that were echoed with ECE),
    /// smoothed RTT (ms), throughput (Mbit/s acknowledged since the last poll;
    /// "rx" and the rate received for a socket that only receives), and the
    /// TCP and congestion state, with "reno-fb" when the flow fell back to
    /// Reno for lack of ECN. A socket that closed stays greyed for 5 s.
    /// Below, two charts follow the selected flow over the time window: its
    /// cwnd and its alpha (10 minutes of history are kept per flow).
    ///
    /// When a lab runs (`lab`, which pins its switch under
    /// /sys/fs/bpf/dctcp-bpf-lab/<prefix>/), a panel per lab shows the
    /// bottleneck queue now (packets and bytes) and over the window, CE marks
    /// per second and as a fraction of arrivals since the last poll, and
    /// drops.
    ///
    /// Keys: Up/Down or j/k move the selection (wrapping round), PgUp/PgDn by a
    /// page, Home/End to the first or last flow; p or space pause the display
    /// (polling goes on, so unpausing shows the present); + and - widen and
    /// narrow the time window (10 s, 30 s, 1 min, 5 min, 10 min); q, Esc or
    /// Ctrl-C quit. The terminal is restored on exit, on error and on a
    /// crash.
    ///
    /// Needs root and a terminal: for scripts use `loader flows --json` or
    /// `loader trace`.
    Top {
        /// Poll period in milliseconds (50 to 5000).
        #[arg(long, value_name = "MS", default_value_t = 250,
              value_parser = clap::value_parser!(u64)
                  .range(loader::top::MIN_INTERVAL_MS..=loader::top::MAX_INTERVAL_MS))]
        interval: u64,
    },
    /// Check that this kernel can run every algorithm, registering nothing.
    ///
    /// A preflight for a host or a fleet's nodes (the DaemonSet's first init
    /// container runs it): the kernel's version, BTF
    /// (/sys/kernel/btf/vmlinux), BPF struct_ops, how a registration will
    /// be held (struct_ops links from Linux 6.4, the struct_ops map
    /// before), whether bpffs is mounted at /sys/fs/bpf, and, for dctcp,
    /// xdctcp and kdctcp, their programs loaded through the kernel's
    /// verifier with default parameters and dropped again (each line gives
    /// the programs that passed and the instructions the verifier walked in
    /// them): nothing is registered or pinned. One line per check (or
    /// --json, where an algorithm's check adds them as `verified`); exit status 0
    /// when every check passes, 1 when one fails (the failed ones are
    /// named), 4 without root.
    Check {
        /// One JSON array for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Serve Prometheus metrics of the attached algorithms and lab switches.
    ///
    /// An HTTP endpoint in the Prometheus exposition format (OpenMetrics
    /// text) for a fleet's monitoring: GET /metrics reads, at each scrape,
    /// the pinned maps of every attached instance (labels `algorithm` and
    /// `name`: sockets, flows started and released, fallbacks to Reno,
    /// window reductions, loss reactions, guard repairs, trace events, alpha
    /// as a histogram over the live flows and the fraction of their packets
    /// echoed with ECE) and of every running lab switch (label `switch`:
    /// queue, packets, marks, drops). GET /healthz answers `ok` (a
    /// readiness probe); any other path is 404, any other method 405. The
    /// endpoint follows instances attached, detached and re-attached while
    /// it runs; a scrape never holds up the BPF programs. The metrics and
    /// their names are in docs/metrics.md.
    ///
    /// Listens on --metrics, else on the [metrics] table's `listen` of
    /// --config FILE (the unit's attach.toml), else on 127.0.0.1:9842;
    /// port 0 picks a free one. The first line on standard output says
    /// where. Runs until Ctrl-C or SIGTERM. Exit status 1 when the address
    /// is taken, 2 for a malformed address or file.
    Serve {
        /// Address and port to listen on (HOST:PORT; [::]:9842 for every
        /// address: mind who can reach it).
        #[arg(long, value_name = "HOST:PORT")]
        metrics: Option<std::net::SocketAddr>,
        /// Take the address from this file's [metrics] table.
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
    },
}
