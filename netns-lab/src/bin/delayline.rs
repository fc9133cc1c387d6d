//! `delayline`: the lab's delay element on kernels without netem.

use std::process::ExitCode;

use clap::Parser;

use netns_lab::net::delay::parse_slot;
use netns_lab::net::delayline::{self, Route, Slot, Spec};

/// Hold every frame arriving on one interface for a constant delay, then
/// send it out of another, in arrival order.
///
/// The lab runs it in a namespace of its own on the receiver's ACK path;
/// it reads with an AF_PACKET socket (needs CAP_NET_RAW) and runs until
/// SIGTERM or Ctrl-C (it prints `ready` once its sockets are bound), then
/// prints a JSON report: frames received, released
/// and dropped, the most held at once, and the holding error (release time
/// minus due time) as p50 / p99 / max.
#[derive(Debug, Parser)]
#[command(name = "delayline", version, max_term_width = 100)]
struct Cli {
    /// Interface to read frames from.
    #[arg(long = "in")]
    input: String,
    /// Interface to send them out of.
    #[arg(long = "out")]
    output: String,
    /// Delay by IPv4 destination, ADDR/LEN=NANOSECONDS; repeat; first match wins.
    #[arg(long = "route")]
    routes: Vec<Route>,
    /// Delay of frames no route matches (ARP, IPv6, other addresses), ns.
    #[arg(long, default_value_t = 0)]
    default_ns: u64,
    /// Spin this many microseconds before each due time instead of sleeping
    /// (less holding error, more CPU).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=1000))]
    spin_us: u64,
    /// Hold at most this many frames; beyond, frames are dropped and counted.
    #[arg(long, default_value_t = 1 << 20)]
    max_held: usize,
    /// Release in slots, as netem's `slot` does: held frames leave only as
    /// a slot opens, every INTERVAL, at most PACKETS of a route's per slot
    /// (INTERVAL:PACKETS, as `lab --slot` takes it: 4ms:8, 4000000ns:8).
    #[arg(long, value_parser = parse_slot)]
    slot: Option<Slot>,
    /// Run on this CPU only (the lab keeps the switch's receive work off it).
    #[arg(long)]
    cpu: Option<usize>,
}

fn main() -> ExitCode {
    if let Some(status) = loader::generate::intercept(<Cli as clap::CommandFactory>::command) {
        return status;
    }
    let cli = Cli::parse();
    // SAFETY: prctl with plain arguments: die with the lab that started us.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    let spec = Spec {
        input: cli.input,
        output: cli.output,
        routes: cli.routes,
        default_delay_ns: cli.default_ns,
        spin_ns: cli.spin_us * 1000,
        max_held: cli.max_held,
        slot: cli.slot,
    };
    if let Some(cpu) = cli.cpu {
        // SAFETY: a zeroed cpu_set_t with one bit set, for this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                eprintln!(
                    "delayline: cannot run on CPU {cpu}: {}",
                    std::io::Error::last_os_error()
                );
                return ExitCode::from(2);
            }
        }
    }
    // "ready" on a line of its own once the sockets are bound; the report
    // when stopped.
    let ready = || {
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    };
    match delayline::run(&spec, ready) {
        Ok(rep) => {
            println!(
                "{}",
                serde_json::to_string(&rep).expect("report serializes")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("delayline: {e:#}");
            ExitCode::from(1)
        }
    }
}
