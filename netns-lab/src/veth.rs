//! A veth pair between two namespaces, with an address on each end.

use anyhow::Result;

use crate::netns::{ip, Netns};

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
        Ok(Veth {
            a: a.to_string(),
            b: b.to_string(),
        })
    }
}
