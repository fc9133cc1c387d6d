//! `loader flows`: every TCP socket that uses an attached algorithm, in every
//! network namespace, with what `ss -ti` would show for the kernel's dctcp.
//!
//! A BPF iterator (bpf/flows.bpf.c) walks the TCP sockets of the namespace of
//! the thread that opens it, so the walk is repeated on one thread per
//! namespace. Namespaces come from /run/netns and from /proc/*/ns/net.

use std::collections::BTreeMap;
use std::io::Read;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, Link};
use serde::Serialize;

use dctcp_utils::preflight;
use dctcp_utils::setns;

use crate::instance::{attached_names, c_str};
use crate::intf::{
    dctcp_flow_key, flow_record, DCTCP_ALPHA_ONE, DCTCP_FLAG_FALLBACK, DCTCP_ONE, PRAGUE_CWND_SHIFT,
    PRAGUE_FLAG_CLASSIC, PRAGUE_FLAG_ECT1, PRAGUE_FLAG_RATE_MODE,
};
use crate::skel::flows::FlowsSkelBuilder;

const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// A network namespace to look into.
#[derive(Clone, Debug)]
pub struct Namespace {
    /// `host`, the /run/netns name, or `pid:N`.
    pub label: String,
    pub path: PathBuf,
    pub inode: u64,
}

/// Every network namespace on the machine that has a name or a process
/// (processes whose namespace we may not open are skipped).
pub fn namespaces() -> Vec<Namespace> {
    let mut by_inode: BTreeMap<u64, Namespace> = BTreeMap::new();
    let mut add = |label: String, path: PathBuf| {
        if let Some(inode) = setns::inode(&path) {
            by_inode
                .entry(inode)
                .or_insert(Namespace { label, path, inode });
        }
    };
    // The loader's own namespace first, so it is the one called `host`.
    add("host".into(), PathBuf::from("/proc/self/ns/net"));
    if let Ok(entries) = std::fs::read_dir("/run/netns") {
        let mut names: Vec<_> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            add(name.clone(), Path::new("/run/netns").join(name));
        }
    }
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.bytes().all(|b| b.is_ascii_digit()) {
                add(format!("pid:{name}"), e.path().join("ns/net"));
            }
        }
    }
    by_inode.into_values().collect()
}

/// One socket, decoded.
#[derive(Clone, Debug, Serialize)]
pub struct Flow {
    pub netns: String,
    pub local: String,
    pub remote: String,
    pub algorithm: String,
    /// The socket runs one of our algorithms (or its fallback).
    pub ours: bool,
    /// ECN was not negotiated: the flow runs the Reno fallback.
    pub fallback: bool,
    pub tcp_state: &'static str,
    pub ca_state: &'static str,
    pub ecn: bool,
    /// Which ECN feedback the connection negotiated: `rfc3168` (ECE on
    /// every ACK until CWR), `accecn` (AccECN's CE counter, on
    /// kernels that negotiate it), `pending` (AccECN asked, the handshake
    /// not done) or `off`.
    pub ecn_mode: &'static str,
    pub cwnd: u32,
    pub ssthresh: Option<u32>,
    pub srtt_us: u32,
    pub mss: u32,
    /// alpha in 1/2^20 (null for other algorithms and the fallback).
    pub alpha: Option<u32>,
    pub ce_state: Option<u32>,
    /// Bytes acknowledged with ECE / in total in the current window, as the
    /// kernel's dctcp reports them (INET_DIAG_DCTCPINFO).
    pub ab_ecn: Option<u64>,
    pub ab_tot: Option<u64>,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub cookie: u64,
    /// sk_pacing_rate, bit/s (0: not paced by TCP).
    pub pacing_rate_bps: u64,
    /// Prague's own, absent for the others.
    #[serde(flatten)]
    pub prague: Option<PragueFlow>,
}

/// What `flows` shows of a Prague socket.
#[derive(Clone, Debug, Serialize)]
pub struct PragueFlow {
    /// The fractional window, segments.
    pub frac_cwnd: f64,
    /// window or rate: which leads.
    pub mode: &'static str,
    /// The codepoint its data leaves with where the ECT(1) program runs.
    pub ect: &'static str,
    /// Growth relative to unscaled (RTT independence).
    pub rtt_scale: f64,
    /// Rounds since slow start ended.
    pub round: u32,
    /// The classic-ECN fallback in force (Reno's response), and its
    /// evidence 0..1.
    pub classic: bool,
    pub classic_score: f64,
}

fn tcp_state_name(s: u8) -> &'static str {
    match s {
        1 => "ESTAB",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "CLOSE",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        _ => "?",
    }
}

pub(crate) fn ca_state_name(s: u8) -> &'static str {
    match s {
        0 => "open",
        1 => "disorder",
        2 => "cwr",
        3 => "recovery",
        4 => "loss",
        _ => "?",
    }
}

/// `addr:port`; an IPv4 peer of a dual-stack socket (`::ffff:a.b.c.d`)
/// as the IPv4 address it is, which is also what fits `loader top`'s column.
fn addr(family: u8, bytes: &[u8; 16], port: u16) -> String {
    let v4 = match family as i32 {
        libc::AF_INET => Some(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
        _ => Ipv6Addr::from(*bytes).to_ipv4_mapped(),
    };
    match v4 {
        Some(a) => format!("{a}:{port}"),
        None => format!("[{}]:{port}", IpAddr::V6(Ipv6Addr::from(*bytes))),
    }
}

/// The local end of a flow as `addr:port` (`[v6]:port`).
pub fn local_end(k: &dctcp_flow_key) -> String {
    addr(k.family, &k.saddr, k.sport)
}

/// The remote end of a flow as `addr:port` (`[v6]:port`).
pub fn remote_end(k: &dctcp_flow_key) -> String {
    addr(k.family, &k.daddr, k.dport)
}

fn decode(ns: &str, r: &flow_record, ours: &[String]) -> Flow {
    let algorithm = c_str(&r.ca_name);
    let is_ours = ours.contains(&algorithm);
    let fallback = is_ours && r.ca.flags & DCTCP_FLAG_FALLBACK != 0;
    let dctcp = is_ours && !fallback;
    let window = |now: u32, old: u32| u64::from(r.mss_cache) * u64::from(now.wrapping_sub(old));
    Flow {
        netns: ns.to_string(),
        local: local_end(&r.key),
        remote: remote_end(&r.key),
        algorithm,
        ours: is_ours,
        fallback,
        tcp_state: tcp_state_name(r.tcp_state),
        ca_state: ca_state_name(r.ca_state),
        ecn: r.ecn_flags & ECN_MODES != 0,
        ecn_mode: ecn_mode(r.ecn_flags),
        cwnd: r.snd_cwnd,
        ssthresh: (r.snd_ssthresh < TCP_INFINITE_SSTHRESH).then_some(r.snd_ssthresh),
        srtt_us: r.srtt_us,
        mss: r.mss_cache,
        alpha: dctcp.then_some(r.ca.alpha),
        ce_state: dctcp.then_some(r.ca.ce_state),
        ab_ecn: dctcp.then(|| window(r.delivered_ce, r.ca.old_delivered_ce)),
        ab_tot: dctcp.then(|| window(r.delivered, r.ca.old_delivered)),
        delivered: r.delivered,
        delivered_ce: r.delivered_ce,
        bytes_acked: r.bytes_acked,
        bytes_received: r.bytes_received,
        cookie: r.sock_cookie,
        pacing_rate_bps: r.pacing_rate.saturating_mul(8),
        // Only Prague's init marks a socket for its ECT(1) program.
        prague: (dctcp && r.ca.flags & PRAGUE_FLAG_ECT1 != 0).then(|| {
            let one = f64::from(1u32 << PRAGUE_CWND_SHIFT);
            PragueFlow {
                frac_cwnd: r.prague.frac_cwnd as f64 / one,
                mode: if r.ca.flags & PRAGUE_FLAG_RATE_MODE != 0 {
                    "rate"
                } else {
                    "window"
                },
                ect: "ECT(1)",
                rtt_scale: f64::from(r.prague.ai_per_ack) / one,
                round: r.prague.round,
                classic: r.ca.flags & PRAGUE_FLAG_CLASSIC != 0,
                classic_score: f64::from(r.prague.classic_score) / f64::from(DCTCP_ONE),
            }
        }),
    }
}

/// tp->ecn_flags' mode bits (include/net/tcp.h): TCP_ECN_MODE_RFC3168 is
/// bit 0, TCP_ECN_MODE_ACCECN bit 4 (Linux 6.18 on), both while AccECN is
/// pending.
const ECN_MODES: u8 = 0x11;

fn ecn_mode(flags: u8) -> &'static str {
    match flags & ECN_MODES {
        0x01 => "rfc3168",
        0x10 => "accecn",
        0x11 => "pending",
        _ => "off",
    }
}

/// Walks the TCP sockets of every namespace. With `all`, sockets of every
/// congestion control; otherwise only those of attached algorithms.
pub fn collect(all: bool) -> Result<Vec<Flow>> {
    Collector::new()?.collect(all)
}

/// The socket iterator, loaded once for repeated walks (`loader top`).
pub struct Collector {
    link: Arc<Link>,
}

impl Collector {
    pub fn new() -> Result<Collector> {
        preflight::require_root("loader flows")?;
        preflight::require_btf()?;
        let mut storage = MaybeUninit::uninit();
        let skel = FlowsSkelBuilder::default()
            .open(&mut storage)
            .context("opening the flows iterator")?
            .load()
            .context("loading the flows iterator (needs BPF iterators, Linux 5.9+)")?;
        // The link keeps the program loaded once the skeleton is gone.
        let link = skel
            .progs
            .dump_tcp
            .attach()
            .context("attaching the TCP iterator")?;
        Ok(Collector {
            link: Arc::new(link),
        })
    }

    /// One walk over every namespace.
    pub fn collect(&self, all: bool) -> Result<Vec<Flow>> {
        let ours: Vec<String> = attached_names()
            .into_iter()
            .flat_map(|(a, b)| [a, b])
            .collect();
        let mut flows = Vec::new();
        for ns in namespaces() {
            let link = Arc::clone(&self.link);
            // A namespace can vanish between listing and entering it.
            let Ok(records) = setns::run_in(&ns.path, move || read_records(&link)) else {
                continue;
            };
            for r in records.with_context(|| format!("iterating sockets in {}", ns.label))? {
                let flow = decode(&ns.label, &r, &ours);
                if all || flow.ours {
                    flows.push(flow);
                }
            }
        }
        Ok(flows)
    }
}

fn read_records(link: &Link) -> Result<Vec<flow_record>> {
    let mut iter = Iter::new(link)?;
    let mut buf = Vec::new();
    iter.read_to_end(&mut buf)?;
    let size = std::mem::size_of::<flow_record>();
    Ok(buf
        .chunks_exact(size)
        .filter_map(dctcp_utils::bytes::from_bytes)
        .collect())
}

/// alpha as a fraction, three decimals.
pub fn alpha_fraction(alpha: u32) -> f64 {
    f64::from(alpha) / f64::from(DCTCP_ALPHA_ONE)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_ipv4_mapped_end_reads_as_ipv4() {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&[198, 18, 253, 2]);
        assert_eq!(
            super::addr(libc::AF_INET as u8, &b, 5201),
            "198.18.253.2:5201"
        );
        let mapped: [u8; 16] = "::ffff:198.18.253.2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        assert_eq!(
            super::addr(libc::AF_INET6 as u8, &mapped, 5201),
            "198.18.253.2:5201"
        );
        let v6: [u8; 16] = "fd00::2".parse::<std::net::Ipv6Addr>().unwrap().octets();
        assert_eq!(super::addr(libc::AF_INET6 as u8, &v6, 80), "[fd00::2]:80");
    }

    /// The mode bits alone decide it; CWR and SEEN bits (1-3) do not.
    #[test]
    fn the_ecn_mode_is_read_from_its_two_bits() {
        let modes: Vec<&str> = [0x00, 0x01, 0x0f, 0x10, 0x18, 0x11]
            .into_iter()
            .map(super::ecn_mode)
            .collect();
        assert_eq!(modes, ["off", "rfc3168", "rfc3168", "accecn", "accecn", "pending"]);
    }
}
