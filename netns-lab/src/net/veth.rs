//! A veth pair between two namespaces, with an address on each end.

use anyhow::Result;

use crate::net::netns::{ip, Netns};

pub struct Veth {
    pub a: String,
    pub b: String,
}

impl Veth {
    /// Creates `a` in `ns_a` and `b` in `ns_b`, assigns `addr_a`/`addr_b`
    /// (CIDR) and brings both up. The pair lives as long as its namespaces.
    pub fn create(
        ns_a: &Netns,
        a: &str,
        addr_a: &str,
        ns_b: &Netns,
        b: &str,
        addr_b: &str,
    ) -> Result<Veth> {
        Veth::create_with(ns_a, a, Some(addr_a), ns_b, b, Some(addr_b))
    }

    /// As `create`, an end without an address being a plain layer-2 port.
    /// Two addressed ends know each other's hardware address for good
    /// (see `pin_neighbours`).
    pub fn create_with(
        ns_a: &Netns,
        a: &str,
        addr_a: Option<&str>,
        ns_b: &Netns,
        b: &str,
        addr_b: Option<&str>,
    ) -> Result<Veth> {
        ip(&[
            "link",
            "add",
            a,
            "netns",
            ns_a.name(),
            "type",
            "veth",
            "peer",
            "name",
            b,
            "netns",
            ns_b.name(),
        ])?;
        for (ns, dev, addr) in [(ns_a, a, addr_a), (ns_b, b, addr_b)] {
            if let Some(addr) = addr {
                ns.ip(&["addr", "add", addr, "dev", dev])?;
            }
            ns.ip(&["link", "set", dev, "up"])?;
        }
        if let (Some(addr_a), Some(addr_b)) = (addr_a, addr_b) {
            pin_neighbours((ns_a, a, addr_a), (ns_b, b, addr_b))?;
        }
        Ok(Veth {
            a: a.to_string(),
            b: b.to_string(),
        })
    }
}

/// Makes two interfaces (namespace, device, address with or without its
/// prefix length) on one layer-2 path permanent neighbours of each other.
/// A router's entry for a host it only forwards to goes stale within
/// 15-45 s, and its ARP probe then waits in the bottleneck queue: a marking
/// qdisc cannot mark ARP and drops it once the queue is past K, a drop no
/// flow caused.
pub fn pin_neighbours(a: (&Netns, &str, &str), b: (&Netns, &str, &str)) -> Result<()> {
    let host = |cidr: &str| cidr.split('/').next().unwrap_or(cidr).to_string();
    let (mac_a, mac_b) = (a.0.mac(a.1)?, b.0.mac(b.1)?);
    a.0.pin_neighbour(a.1, &host(b.2), &mac_b)?;
    b.0.pin_neighbour(b.1, &host(a.2), &mac_a)
}
