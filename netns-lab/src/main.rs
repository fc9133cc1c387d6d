//! `lab`: network-namespace experiments for DCTCP.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Network-namespace labs for DCTCP and friends.
#[derive(Debug, Parser)]
#[command(name = "lab", version, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Remove namespaces and links that lab runs left behind.
    ///
    /// Lab objects are named dl<pid>x<n>...; by default only those whose
    /// process is gone are removed, so running labs are left alone.
    Cleanup {
        /// Also remove objects of labs that are still running.
        #[arg(long)]
        all: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Cleanup { all } => netns_lab::cleanup::cleanup(all).map(|removed| {
            if removed.is_empty() {
                println!("nothing to clean up");
            }
            for r in removed {
                println!("removed {r}");
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}
