//! The star (dumbbell) of the experiments: N senders, one switch, one
//! receiver, each host in its own namespace, joined by veth pairs.
//!
//! ```text
//! sender i (198.18.i.1/24) ── switch (198.18.i.254 | 198.19.0.254) ── receiver (198.19.0.1/24)
//!                                                       ^ bottleneck: htb + marking backend
//! ```
//!
//! Offloads (TSO, GSO, GRO) are off on every lab link, so a packet in the
//! queue is a packet on the wire.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use tc_qdisc::{Backend, Bottleneck};

use crate::netns::Netns;
use crate::prefix::Prefix;
use crate::veth::Veth;

/// Most senders one star holds: one 198.18.i.0/24 each.
pub const MAX_SENDERS: usize = 256;

#[derive(Clone, Debug, Default)]
pub struct StarSpec {
    pub senders: usize,
    /// Extra one-way delay on the receiver's ACK path (netem), if any.
    pub delay: Option<Duration>,
    /// Rate of each sender's link to the switch, if shaped (a sender's NIC:
    /// htb on its side of the link, one segment per packet); otherwise as
    /// fast as veth forwards, a window's packets back to back.
    pub access_rate_bps: Option<u64>,
}

/// The queue of a shaped sender link: Linux's default txqueuelen.
const ACCESS_QUEUE_PKTS: u32 = 1000;

impl StarSpec {
    /// `n` senders on unshaped links, no extra delay.
    pub fn senders(n: usize) -> StarSpec {
        StarSpec {
            senders: n,
            ..StarSpec::default()
        }
    }

    fn access_link(&self) -> Option<Bottleneck> {
        self.access_rate_bps.map(|rate_bps| Bottleneck {
            rate_bps,
            buffer_pkts: ACCESS_QUEUE_PKTS,
            backend: Backend::Droptail,
        })
    }
}

pub struct Host {
    pub ns: Netns,
    pub addr: Ipv4Addr,
    /// The host's interface toward the switch.
    pub ifname: String,
}

pub struct Star {
    pub senders: Vec<Host>,
    pub receiver: Host,
    pub switch: Netns,
    /// The switch port toward the receiver: where the queue forms.
    pub bottleneck_if: String,
    // Last: the lock is released after every namespace is gone.
    pub prefix: Prefix,
}

pub fn sender_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, i as u8, 1)
}

pub const RECEIVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);

/// `ethtool -K` inside a namespace, through nsenter (not `ip netns exec`,
/// which would remount /sys).
pub(crate) fn offloads_off(ns: &Netns, dev: &str) -> Result<()> {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", ns.path().display()))
        .args([
            "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
        ])
        .output()
        .context("running ethtool (install ethtool)")?;
    if !out.status.success() {
        bail!(
            "ethtool -K {dev} in {}: {}",
            ns.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Star {
    pub fn validate(spec: &StarSpec) -> Result<()> {
        anyhow::ensure!(
            (1..=MAX_SENDERS).contains(&spec.senders),
            "{} senders out of range: 1 to {MAX_SENDERS}",
            spec.senders
        );
        if let Some(d) = spec.delay {
            anyhow::ensure!(
                d <= Duration::from_secs(1),
                "delay {d:?} out of range: at most 1 s"
            );
        }
        if let Some(link) = spec.access_link() {
            link.validate()
                .context("--access-rate (each sender's link)")?;
        }
        Ok(())
    }

    /// Builds the star. On error everything made so far is removed.
    pub fn build(spec: &StarSpec) -> Result<Star> {
        Star::validate(spec)?;
        let prefix = Prefix::unique()?;
        let switch = Netns::create(&prefix.ns("sw"))?;
        switch.sysctl("net.ipv4.ip_forward", "1")?;

        let rx_ns = Netns::create(&prefix.ns("rx"))?;
        let rx = Veth::create(
            &switch,
            &prefix.ifname("r"),
            "198.19.0.254/24",
            &rx_ns,
            &prefix.ifname("rx"),
            &format!("{RECEIVER_ADDR}/24"),
        )?;
        rx_ns.ip(&["route", "add", "default", "via", "198.19.0.254"])?;
        offloads_off(&switch, &rx.a)?;
        offloads_off(&rx_ns, &rx.b)?;
        if let Some(d) = spec.delay {
            let us = format!("{}us", d.as_micros());
            tc_qdisc::tc::tc(
                rx_ns.name(),
                &[
                    "qdisc", "replace", "dev", &rx.b, "root", "netem", "delay", &us,
                ],
            )
            .context(
                "this kernel has no sch_netem (see `lab doctor`); run delay experiments in the \
                     stock-kernel VM (just vm-test)",
            )?;
        }
        let receiver = Host {
            ns: rx_ns,
            addr: RECEIVER_ADDR,
            ifname: rx.b,
        };

        let mut senders = Vec::with_capacity(spec.senders);
        for i in 0..spec.senders {
            let ns = Netns::create(&prefix.ns(&format!("s{i}")))?;
            let addr = sender_addr(i);
            let v = Veth::create(
                &ns,
                &prefix.ifname(&format!("s{i}")),
                &format!("{addr}/24"),
                &switch,
                &prefix.ifname(&format!("p{i}")),
                &format!("198.18.{i}.254/24"),
            )?;
            ns.ip(&["route", "add", "default", "via", &format!("198.18.{i}.254")])?;
            offloads_off(&ns, &v.a)?;
            offloads_off(&switch, &v.b)?;
            if let Some(link) = spec.access_link() {
                // TCP builds GSO packets even when the device cannot
                // segment (they are cut after the qdisc): one segment per
                // packet, so htb spaces packets as a NIC serializes them
                // instead of passing 45-packet bursts whole.
                ns.ip(&["link", "set", "dev", &v.a, "gso_max_segs", "1"])?;
                link.install(ns.name(), &v.a)?;
            }
            senders.push(Host {
                ns,
                addr,
                ifname: v.a,
            });
        }
        Ok(Star {
            senders,
            receiver,
            switch,
            bottleneck_if: rx.a,
            prefix,
        })
    }

    /// Sets a sysctl in every host namespace (not the switch).
    pub fn sysctl_hosts(&self, key: &str, value: &str) -> Result<()> {
        for h in self.senders.iter().chain(std::iter::once(&self.receiver)) {
            h.ns.sysctl(key, value)?;
        }
        Ok(())
    }
}
