//! Removing what lab runs left behind: namespaces, host-side links, lock
//! files, the switch's live pins and congestion-control instances of labs
//! whose process is gone.

use anyhow::Result;

use crate::net::netns::ip;
use crate::net::prefix::{Prefix, HTB_STATE};

/// Names of lab objects among the entries of `dir`, sorted.
fn lab_names_in(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.retain(|n| Prefix::of(n).is_some());
    out.sort();
    out
}

/// Lab namespaces under /run/netns.
pub fn lab_namespaces() -> Vec<String> {
    lab_names_in("/run/netns")
}

/// Lab interfaces in the current namespace.
pub fn lab_links() -> Vec<String> {
    lab_names_in("/sys/class/net")
}

/// Deletes leftovers; with `include_live`, also those of running labs.
/// Returns what was removed.
pub fn cleanup(include_live: bool) -> Result<Vec<String>> {
    let gone = |n: &String| include_live || !Prefix::owner_alive(n);
    let mut removed = Vec::new();
    for ns in lab_namespaces().into_iter().filter(gone) {
        // A killed lab's TCP sockets linger orphaned (FIN_WAIT, retransmitting
        // into a namespace about to vanish) for minutes, holding the BPF
        // algorithm they use; destroy them first (sock_diag; best effort, a
        // kernel without INET_DIAG_DESTROY only lets them time out).
        let _ = ip(&["netns", "exec", &ns, "ss", "-K", "-t"]);
        ip(&["netns", "del", &ns])?;
        removed.push(format!("netns {ns}"));
    }
    for link in lab_links().into_iter().filter(gone) {
        // The peer may have gone with its namespace a moment ago.
        if ip(&["link", "del", &link]).is_ok() {
            removed.push(format!("link {link}"));
        }
    }
    for path in loader::instance::remove_abandoned()? {
        removed.push(format!("half-attached instance {path}"));
    }
    for name in dctcp_utils::bpffs::instances()?
        .into_iter()
        .map(|d| d.name)
        .filter(|n| Prefix::of(n) == Some(n.as_str()))
    {
        if gone(&name) {
            loader::instance::detach(&name)?;
            removed.push(format!("congestion control {name}"));
        }
    }
    for dir in lab_names_in(dctcp_utils::bpffs::LAB_ROOT)
        .into_iter()
        .filter(gone)
    {
        let path = std::path::Path::new(dctcp_utils::bpffs::LAB_ROOT).join(&dir);
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(format!("pins {}", path.display()));
        }
    }
    let _ = std::fs::remove_dir(dctcp_utils::bpffs::LAB_ROOT);
    for lock in Prefix::stale_locks() {
        Prefix::remove_lock(&lock);
        removed.push(format!("lock {lock}"));
    }
    if tc_qdisc::hysteresis::restore_abandoned(std::path::Path::new(HTB_STATE))? {
        removed.push("htb hysteresis mode (sch_htb.htb_hysteresis put back)".into());
    }
    Ok(removed)
}

/// `lab cleanup`: removes what killed runs left (with `all`, live ones'
/// too) and names each thing removed.
pub fn command(all: bool) -> Result<()> {
    dctcp_utils::preflight::require_root("lab")?;
    let removed = cleanup(all)?;
    if removed.is_empty() {
        println!("nothing to clean up");
    }
    for r in removed {
        println!("removed {r}");
    }
    Ok(())
}
