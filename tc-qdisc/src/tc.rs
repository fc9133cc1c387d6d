//! Running `tc` inside a namespace.

use std::process::Command;

use anyhow::{bail, Context, Result};

/// `tc -n <ns> <args>`; the error carries tc's own message.
pub fn tc(ns: &str, args: &[&str]) -> Result<String> {
    let out = Command::new("tc")
        .arg("-n")
        .arg(ns)
        .args(args)
        .output()
        .context("running tc (install iproute2)")?;
    if !out.status.success() {
        bail!(
            "tc -n {ns} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
