//! `loader`: attach, detach, list, set and inspect BPF congestion controls.

mod cli;
mod output;
mod trace_cmd;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use cli::{Cli, Command};
use loader::{flows, instance};

/// Holds off SIGINT, SIGTERM and SIGHUP while pins and registrations change,
/// so Ctrl-C lands after attach or detach finished (or undid) its work.
struct SignalsDeferred(libc::sigset_t);

impl SignalsDeferred {
    fn new() -> Self {
        // SAFETY: plain libc signal-set manipulation on owned values.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut set, sig);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            SignalsDeferred(old)
        }
    }
}

impl Drop for SignalsDeferred {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in new().
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

fn run(cli: Cli) -> Result<()> {
    let _deferred = matches!(cli.command, Command::Attach { .. } | Command::Detach { .. })
        .then(SignalsDeferred::new);
    match cli.command {
        Command::Attach {
            from: Some(path), ..
        } => from_file(&path, loader::attach_file::attach)?,
        Command::Detach {
            from: Some(path), ..
        } => from_file(&path, loader::attach_file::detach)?,
        Command::Attach {
            algo: Some(algo),
            name,
            params,
            mode,
            ect1_devs,
            from: None,
        } => {
            let name = name.unwrap_or_else(|| algo.default_name().to_string());
            let req = instance::AttachRequest {
                algo,
                name,
                params,
                mode,
                ect1_devs: (!ect1_devs.is_empty()).then_some(ect1_devs),
            };
            let dir = instance::attach(&req)?;
            let inst = instance::describe(&dir)?;
            println!(
                "attached {} ({}, fallback {}) with {}; pinned at {}",
                inst.name,
                inst.algo,
                inst.fallback,
                loader::params::describe(algo, &inst.params_raw),
                inst.pin
            );
        }
        Command::Detach {
            name: Some(name), ..
        } => {
            instance::detach(&name)?;
            println!("detached {name}");
        }
        Command::Attach { algo: None, .. } => unreachable!("clap requires --algo or --from"),
        Command::Detach { name: None, .. } => {
            let names = instance::detach_all()?;
            if names.is_empty() {
                println!("nothing attached");
            }
            for name in names {
                println!("detached {name}");
            }
        }
        Command::Check { json } => loader::check::command(json)?,
        Command::List { json } => output::instances(&instance::list()?, json)?,
        Command::Set { name, params } => {
            let now = instance::set(&name, &params)?;
            println!("{name}: {now}");
        }
        Command::Flows { all, json } => output::flows(&flows::collect(all)?, json)?,
        Command::Top { interval } => loader::top::run(&loader::top::Options {
            interval: std::time::Duration::from_millis(interval),
        })?,
        Command::Serve { metrics, config } => {
            let from_file = match &config {
                Some(path) => loader::attach_file::read(path)?.metrics,
                None => None,
            };
            let addr = metrics.or(from_file).unwrap_or_else(|| {
                loader::metrics::DEFAULT_LISTEN
                    .parse()
                    .expect("the default address parses")
            });
            loader::metrics::run(addr)?
        }
        Command::Trace {
            name,
            flow,
            per_ack,
            ack_every,
            format,
            duration,
            output,
            take_over,
        } => trace_cmd::run(trace_cmd::Args {
            name,
            flow,
            detail: if per_ack {
                loader::trace::Detail::PerAck { every: ack_every }
            } else {
                loader::trace::Detail::Window
            },
            format,
            duration: duration.map(|s| std::time::Duration::from_secs(s.into())),
            output,
            take_over,
        })?,
    }
    Ok(())
}

/// `attach --from` and `detach --from`: the file is read and checked whole
/// before `op` touches anything.
fn from_file(
    path: &std::path::Path,
    op: fn(&loader::attach_file::AttachFile) -> Result<Vec<loader::attach_file::Outcome>>,
) -> Result<()> {
    let file = loader::attach_file::read(path)?;
    for outcome in op(&file)? {
        println!("{outcome}");
    }
    Ok(())
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`loader flows | head`), as a filter should.
    // SAFETY: setting a signal disposition before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    if let Some(status) = loader::generate::intercept(<Cli as clap::CommandFactory>::command) {
        return status;
    }
    let cli = Cli::parse();
    dctcp_utils::error::init_logging(cli.verbose);
    dctcp_utils::error::exit_code("loader", run(cli))
}
