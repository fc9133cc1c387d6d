//! Which ECN feedback the lab's hosts negotiate (`lab --ecn`): classic
//! RFC 3168 ECN (tcp_ecn = 1, the default) or Accurate ECN (tcp_ecn = 3,
//! RFC 9768's AccECN where both ends have it, classic ECN otherwise). Set once
//! per process, before a lab is built, and recorded in every run's outcome.

use std::sync::OnceLock;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EcnFeedback {
    /// RFC 3168: one ECE flag per ACK (tcp_ecn = 1).
    #[default]
    Classic,
    /// Accurate ECN: the ACE counter and the AccECN option (tcp_ecn = 3).
    Accecn,
}

impl EcnFeedback {
    /// The hosts' net.ipv4.tcp_ecn.
    pub fn sysctl_value(self) -> &'static str {
        match self {
            EcnFeedback::Classic => "1",
            EcnFeedback::Accecn => "3",
        }
    }
}

static SELECTED: OnceLock<EcnFeedback> = OnceLock::new();

/// Chooses the feedback for every lab this process builds, after asking
/// the kernel whether it takes it: AccECN needs a kernel whose tcp_ecn
/// accepts 3 (Debian's 7.3 does; this project's 6.18 refuses it).
pub fn select(feedback: EcnFeedback) -> Result<()> {
    if feedback == EcnFeedback::Accecn {
        kernel_takes(feedback).context(
            "--ecn accecn needs a kernel with AccECN negotiation (net.ipv4.tcp_ecn = 3; Linux \
             6.18 as built here refuses it, Debian's 7.3 takes it: `just vm-test 7.3`); use \
             --ecn classic here",
        )?;
    }
    let _ = SELECTED.set(feedback);
    Ok(())
}

/// The feedback chosen with [`select`] (classic if none was).
pub fn selected() -> EcnFeedback {
    SELECTED.get().copied().unwrap_or_default()
}

/// Writes the value in a network namespace of a short-lived thread's own,
/// which goes with the thread: the machine's settings are never touched.
fn kernel_takes(feedback: EcnFeedback) -> Result<()> {
    std::thread::spawn(move || -> Result<()> {
        // SAFETY: unshare only changes this thread's namespaces.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error()).context("unshare(CLONE_NEWNET)");
        }
        std::fs::write("/proc/sys/net/ipv4/tcp_ecn", feedback.sysctl_value())
            .context("writing net.ipv4.tcp_ecn in a throwaway namespace")
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the probe thread panicked"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_feedback_has_its_sysctl_value() {
        assert_eq!(EcnFeedback::Classic.sysctl_value(), "1");
        assert_eq!(EcnFeedback::Accecn.sysctl_value(), "3");
        assert_eq!(EcnFeedback::default(), EcnFeedback::Classic);
    }
}
