//! Command line of `loader`.

use clap::{Parser, Subcommand};

use loader::algo::Algo;
use loader::instance::AttachMode;
use loader::params::Assignment;

const AFTER_HELP: &str = "\
Examples:
  sudo loader attach --algo dctcp                  register bpf_dctcp (and bpf_dctcp_reno)
  sudo loader attach --algo dctcp --name dc5 --param shift_g=5
  sudo sysctl net.ipv4.tcp_congestion_control=bpf_dctcp
  sudo loader flows                                sockets using it, like `ss -ti`
  sudo loader set bpf_dctcp shift_g=6              retune while flows run
  sudo loader detach bpf_dctcp

Attached algorithms stay registered after loader exits: they are pinned under
/sys/fs/bpf/dctcp-bpf/<name>/. Every command but --help needs root.
Exit status: 0 success, 1 failure, 2 bad input (nothing was changed).";

/// Load DCTCP as a BPF struct_ops congestion control, with no kernel rebuild.
///
/// DCTCP reacts to the fraction of ECN-marked packets rather than to their
/// presence: each window it updates alpha = (1 - g) alpha + g F, and on
/// congestion cuts cwnd by alpha / 2. Sockets pick an attached algorithm by
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
    /// reported and left as it is.
    Attach {
        /// Algorithm to load.
        #[arg(long, value_enum)]
        algo: Algo,
        /// Name to register under (1-10 of [A-Za-z0-9_-]); default bpf_<algo>.
        #[arg(long)]
        name: Option<String>,
        /// Tunable as name=value, repeatable. dctcp: shift_g (0..=10, default
        /// 4: g = 1/2^shift_g), alpha_on_init (0..=1024, default 1024 = 1.0).
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<Assignment>,
        /// How the registration is held: a struct_ops link (Linux 6.4+) or
        /// the struct_ops map itself (older kernels). auto picks by kernel.
        #[arg(long, value_enum, default_value_t = AttachMode::Auto)]
        mode: AttachMode,
    },
    /// Unregister an attached algorithm and remove its pins.
    ///
    /// Sockets already using it keep running it until they close; new
    /// sockets can no longer select it.
    Detach {
        /// Name given at attach (see `loader list`).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Detach every algorithm loader attached.
        #[arg(long)]
        all: bool,
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
        /// name=value pairs, e.g. shift_g=5.
        #[arg(value_name = "NAME=VALUE", required = true)]
        params: Vec<Assignment>,
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
}
