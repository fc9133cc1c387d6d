//! Man pages and shell completions from a binary's own clap definition, so
//! they cannot drift from `--help`: `<bin> --generate man DIR` writes
//! `<bin>.1` and one `<bin>-<subcommand>.1` per subcommand into DIR;
//! `<bin> --generate complete-bash|complete-zsh` prints a completion script.
//! `just install` and `just deb` call it; it is not in `--help` because no
//! one runs it by hand.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap_complete::Shell;

const FLAG: &str = "--generate";
const USAGE: &str = "usage: --generate man DIR | complete-bash | complete-zsh";

/// Handles `--generate ...` as the first argument and returns the exit
/// status; `None` when the command line is an ordinary one, for clap.
pub fn intercept(command: impl FnOnce() -> clap::Command) -> Option<ExitCode> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_none_or(|a| a != FLAG) {
        return None;
    }
    let cmd = command();
    let bin = cmd.get_name().to_string();
    Some(dctcp_utils::error::exit_code(&bin, run(cmd, &args[1..])))
}

fn run(cmd: clap::Command, args: &[OsString]) -> Result<()> {
    let args: Vec<&str> = args
        .iter()
        .map(|a| a.to_str().context(USAGE))
        .collect::<Result<_>>()?;
    match args.as_slice() {
        ["man", dir] => man_pages(cmd, PathBuf::from(dir)),
        ["complete-bash"] => completion(cmd, Shell::Bash),
        ["complete-zsh"] => completion(cmd, Shell::Zsh),
        _ => dctcp_utils::usage_bail!("{USAGE}"),
    }
}

fn man_pages(cmd: clap::Command, dir: PathBuf) -> Result<()> {
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(cmd, &dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))
}

fn completion(mut cmd: clap::Command, shell: Shell) -> Result<()> {
    let bin = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, bin, &mut std::io::stdout());
    Ok(())
}
