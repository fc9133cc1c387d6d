//! The qdisc's own counters (`tc -s -j qdisc show`), to check the probe
//! against and to measure what left the bottleneck.

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::tc::tc;

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct QdiscCounters {
    /// Sent by the root qdisc (what crossed the bottleneck).
    pub sent_bytes: u64,
    pub sent_packets: u64,
    /// Dropped anywhere in the tree (tail drops, RED drops, ...).
    pub drops: u64,
    /// ECN marks made by the qdisc (red `marked`, fq_codel `ce_mark`).
    pub marks: u64,
    /// Queued in the root's tree when read: packets, and bytes as the
    /// qdisc counts them (qdisc_pkt_len).
    pub qlen: u64,
    pub backlog_bytes: u64,
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Packets sent by the qdisc with `handle` (e.g. `110:`, DualPI2's L leaf)
/// on `dev`.
pub fn sent_by(ns: &str, dev: &str, handle: &str) -> Result<u64> {
    let out = tc(ns, &["-s", "-j", "qdisc", "show", "dev", dev])?;
    let qdiscs: Vec<Value> = serde_json::from_str(&out).context("parsing tc -j output")?;
    let q = qdiscs
        .iter()
        .find(|q| q.get("handle").and_then(Value::as_str) == Some(handle))
        .with_context(|| format!("no qdisc {handle} on {dev}"))?;
    Ok(num(q, "packets"))
}

/// Counters of the shaper (the root qdisc) and its child queue on `dev`.
/// The root counts every drop in its tree: a child's drop fails the root's
/// enqueue too.
pub fn read(ns: &str, dev: &str) -> Result<QdiscCounters> {
    let out = tc(ns, &["-s", "-j", "qdisc", "show", "dev", dev])?;
    let qdiscs: Vec<Value> = serde_json::from_str(&out).context("parsing tc -j output")?;
    let is_root = |q: &&Value| q.get("root").and_then(Value::as_bool).unwrap_or(false);
    let root = qdiscs.iter().find(is_root).context("no root qdisc")?;
    Ok(QdiscCounters {
        sent_bytes: num(root, "bytes"),
        sent_packets: num(root, "packets"),
        drops: num(root, "drops"),
        // Names differ by qdisc: red says `marked`, fq_codel `ce_mark`.
        marks: qdiscs
            .iter()
            .map(|q| num(q, "marked") + num(q, "ce_mark"))
            .sum(),
        qlen: num(root, "qlen"),
        backlog_bytes: num(root, "backlog"),
    })
}
