//! Removing what lab runs left behind: namespaces and host-side veths named
//! with a lab prefix whose owning process is gone.

use anyhow::Result;

use crate::netns::ip;
use crate::prefix::Prefix;

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

fn leftover(name: &str, include_live: bool) -> bool {
    Prefix::owner(name).is_some_and(|pid| include_live || !alive(pid))
}

/// Names of lab objects among the entries of `dir`, sorted.
fn lab_names_in(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.retain(|n| Prefix::owner(n).is_some());
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
    let mut removed = Vec::new();
    for ns in lab_namespaces()
        .into_iter()
        .filter(|n| leftover(n, include_live))
    {
        ip(&["netns", "del", &ns])?;
        removed.push(format!("netns {ns}"));
    }
    for link in lab_links()
        .into_iter()
        .filter(|n| leftover(n, include_live))
    {
        // The peer may have gone with its namespace a moment ago.
        if ip(&["link", "del", &link]).is_ok() {
            removed.push(format!("link {link}"));
        }
    }
    Ok(removed)
}
