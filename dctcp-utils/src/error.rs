//! How the project's binaries log and end: errors the user can fix by
//! changing the command line (or a config file) exit with status 2, missing
//! privileges with 4, a config file that does not exist with 6, everything
//! else with 1: the LSB codes systemd shows as INVALIDARGUMENT, NOPERMISSION
//! and NOTCONFIGURED.

use std::fmt;
use std::process::ExitCode;

#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// An error with an exit status of its own.
#[derive(Debug)]
pub struct Exit {
    pub status: u8,
    pub message: String,
}

impl Exit {
    /// Not root, or without the capabilities.
    pub fn no_permission(message: String) -> anyhow::Error {
        anyhow::Error::new(Exit { status: 4, message })
    }
    /// A config file that does not exist.
    pub fn not_configured(message: String) -> anyhow::Error {
        anyhow::Error::new(Exit { status: 6, message })
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// `bail!` for bad input: returns a [`UsageError`] from the current function.
#[macro_export]
macro_rules! usage_bail {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::error::UsageError(format!($($arg)*))))
    };
}

/// Logs to stderr: warnings by default, `-v` info, `-vv` debug; RUST_LOG wins.
/// Colours only on a terminal: journald and log files get plain text.
pub fn init_logging(verbose: u8) {
    use std::io::IsTerminal;
    let level = ["warn", "info", "debug"][usize::from(verbose.min(2))];
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Prints `prog: <error chain>` and picks the exit status.
pub fn exit_code(prog: &str, result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prog}: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else if let Some(exit) = e.downcast_ref::<Exit>() {
                ExitCode::from(exit.status)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
