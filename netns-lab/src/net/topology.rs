//! The star (dumbbell) of the experiments: N senders, one switch, one
//! receiver, each host in its own namespace, joined by veth pairs.
//!
//! ```text
//! sender i (198.18.i.1/24) ── switch (198.18.i.254 | 198.19.0.254) ── receiver (198.19.0.1/24)
//!                                                       ^ bottleneck: htb + marking backend
//! ```
//!
//! With a round trip (`--rtt`), the delay sits on the ACK path: netem on
//! the switch's port toward each sender, or, on kernels without netem, a
//! layer-2 namespace between the switch and the receiver whose delay
//! element (`crate::net::delay`) holds the receiver's frames:
//!
//! ```text
//! switch ── [dl: do ─ mirred ─> di ] ── receiver     data: in the kernel
//!           [    do <─ delayline ─ di]               ACKs: held per sender
//! ```
//!
//! Offloads (TSO, GSO, GRO) are off on every lab link, so a packet in the
//! queue is a packet on the wire.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use tc_qdisc::{Backend, Bottleneck};

use crate::net::delay::{DelayBackend, Element, FlowRtt, RoundTrip, RttMeasured};
use crate::net::delayline::{Report, Route};
use crate::net::netns::Netns;
use crate::net::prefix::Prefix;
use crate::net::veth::{pin_neighbours, Veth};

/// Payload of one full-sized segment on the lab's 1500-byte links (TCP
/// timestamps on), the unit of a window in packets.
pub const SEGMENT_BYTES: u32 = 1448;

/// Most senders one star holds: one 198.18.i.0/24 each.
pub const MAX_SENDERS: usize = 256;

#[derive(Clone, Debug, Default)]
pub struct StarSpec {
    pub senders: usize,
    /// Round trip added on the ACK path, if any.
    pub round_trip: Option<RoundTrip>,
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
    // First: the element stops before its namespace goes.
    element: Option<Element>,
    /// What adds the round trip, if one was asked for (never Auto).
    pub delay_backend: Option<DelayBackend>,
    pub senders: Vec<Host>,
    pub receiver: Host,
    pub switch: Netns,
    /// The switch port toward the receiver: where the queue forms.
    pub bottleneck_if: String,
    /// The delay element's namespace, when it runs.
    _delay_ns: Option<Netns>,
    /// The path's own round trip, measured before any delay was added.
    pub path_base: Option<Duration>,
    /// Senders' round trips measured the same way once it was added.
    pub probed_rtt: Vec<(usize, Duration)>,
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

/// Whether the kernel has sch_netem, tried on the switch's loopback.
fn has_netem(switch: &Netns) -> bool {
    let tc = |args: &[&str]| tc_qdisc::tc::tc(switch.name(), args);
    let ok = tc(&["qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]).is_ok();
    let _ = tc(&["qdisc", "del", "dev", "lo", "root"]);
    ok
}

/// The CPU the delay element runs on: the last, when there are two or more.
fn element_cpu() -> Option<usize> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (n >= 2).then(|| n - 1)
}

/// Steers the receive work of a link around the element (RPS) to every CPU
/// but the element's. The switch port it sends into: the senders' whole ACK
/// processing, which veth would otherwise run inside the element's send
/// call (on 6.18 at 1 Gbit/s, p99 holding error 121 us before, 20 us
/// after). The links it reads from and the data path's: softirq work
/// raised on its CPU waits for ksoftirqd, which the spinning SCHED_FIFO
/// element starves (cubic at 1 Gbit/s with a deep queue: p99 1-4 ms
/// before, 0.3 ms after).
fn keep_receive_off(switch: &Netns, dev: &str, cpu: usize) -> Result<()> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mask: u128 = ((1u128 << n.min(127)) - 1) & !(1u128 << cpu);
    // sysfs shows the namespace of whoever mounted it: `ip netns exec`
    // mounts the switch's.
    let out = Command::new("ip")
        .args(["netns", "exec", switch.name(), "sh", "-c"])
        .arg(format!(
            "echo {mask:x} > /sys/class/net/{dev}/queues/rx-0/rps_cpus"
        ))
        .output()
        .context("running ip netns exec")?;
    if !out.status.success() {
        bail!(
            "setting RPS on {dev}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Star {
    /// The round trip a run on this star really had: the probe's and the
    /// path's figures, each flow's (sender, tcp_info min_rtt) against what
    /// `rt` configured, and the delay element's report.
    pub fn rtt_measured(
        &self,
        rt: Option<&RoundTrip>,
        flows: impl Iterator<Item = (usize, u32)>,
        element: Option<Report>,
    ) -> RttMeasured {
        RttMeasured {
            backend: self.delay_backend,
            path_base_us: self.path_base.map(|d| d.as_secs_f64() * 1e6),
            probed_us: self
                .probed_rtt
                .iter()
                .map(|&(i, d)| (i, d.as_secs_f64() * 1e6))
                .collect(),
            flows: flows
                .map(|(sender, min_rtt_us)| FlowRtt {
                    sender,
                    configured_us: rt.map(|r| r.rtt.of(sender).as_secs_f64() * 1e6),
                    min_rtt_us,
                })
                .collect(),
            element,
        }
    }

    pub fn validate(spec: &StarSpec) -> Result<()> {
        anyhow::ensure!(
            (1..=MAX_SENDERS).contains(&spec.senders),
            "{} senders out of range: 1 to {MAX_SENDERS}",
            spec.senders
        );
        if let Some(rt) = &spec.round_trip {
            anyhow::ensure!(
                !rt.rtt.0.is_empty(),
                "--slot needs a round trip: with --rtt none nothing holds the ACKs to release in slots"
            );
            rt.rtt.validate(spec.senders)?;
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
        let backend = spec.round_trip.as_ref().map(|rt| match rt.backend {
            DelayBackend::Auto if has_netem(&switch) => DelayBackend::Netem,
            DelayBackend::Auto => DelayBackend::Element,
            b => b,
        });
        let rx_cidr = format!("{RECEIVER_ADDR}/24");
        let (bottleneck_if, rx_if, delay_ns) = if backend == Some(DelayBackend::Element) {
            let dl = Netns::create(&prefix.ns("dl"))?;
            let up = Veth::create_with(
                &switch,
                &prefix.ifname("r"),
                Some("198.19.0.254/24"),
                &dl,
                &prefix.ifname("do"),
                None,
            )?;
            let down = Veth::create_with(
                &dl,
                &prefix.ifname("di"),
                None,
                &rx_ns,
                &prefix.ifname("rx"),
                Some(&rx_cidr),
            )?;
            for (ns, dev) in [
                (&switch, &up.a),
                (&dl, &up.b),
                (&dl, &down.a),
                (&rx_ns, &down.b),
            ] {
                offloads_off(ns, dev)?;
            }
            pin_neighbours(
                (&switch, &up.a, "198.19.0.254"),
                (&rx_ns, &down.b, &rx_cidr),
            )?;
            // Data toward the receiver crosses in the kernel, untouched.
            let tc = |args: &[&str]| tc_qdisc::tc::tc(dl.name(), args);
            tc(&["qdisc", "add", "dev", &up.b, "clsact"])?;
            tc(&[
                "filter", "add", "dev", &up.b, "ingress", "u32", "match", "u32", "0", "0",
                "action", "mirred", "egress", "redirect", "dev", &down.a,
            ])
            .context("redirecting the data path through the delay namespace (needs act_mirred and cls_u32)")?;
            if let Some(c) = element_cpu() {
                for (ns, dev) in [
                    (&switch, &up.a),
                    (&dl, &down.a),
                    (&dl, &up.b),
                    (&rx_ns, &down.b),
                ] {
                    keep_receive_off(ns, dev, c)?;
                }
            }
            let ports = (down.a, up.b);
            (up.a, down.b, Some((dl, ports)))
        } else {
            let rx = Veth::create(
                &switch,
                &prefix.ifname("r"),
                "198.19.0.254/24",
                &rx_ns,
                &prefix.ifname("rx"),
                &rx_cidr,
            )?;
            offloads_off(&switch, &rx.a)?;
            offloads_off(&rx_ns, &rx.b)?;
            (rx.a, rx.b, None)
        };
        rx_ns.ip(&["route", "add", "default", "via", "198.19.0.254"])?;
        let receiver = Host {
            ns: rx_ns,
            addr: RECEIVER_ADDR,
            ifname: rx_if,
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
        let mut star = Star {
            element: None,
            delay_backend: backend,
            senders,
            receiver,
            switch,
            bottleneck_if,
            _delay_ns: None,
            path_base: None,
            probed_rtt: Vec::new(),
            prefix,
        };
        if let Some(rt) = &spec.round_trip {
            star.add_round_trip(rt, delay_ns)?;
        }
        Ok(star)
    }

    /// Measures the path's own round trip, then adds what makes each
    /// sender's the configured one: `--rtt 100us` means flows see 100 us,
    /// not 100 us on top of veth's 25-45.
    fn add_round_trip(
        &mut self,
        rt: &RoundTrip,
        delay_ns: Option<(Netns, (String, String))>,
    ) -> Result<()> {
        let base = match &delay_ns {
            Some((dl, (input, output))) => {
                // Measured through the element holding every frame for a
                // known time: passing frames straight through would add the
                // time it takes to wake for each (about 25 us here), which
                // a held frame never waits (its due time counts from the
                // kernel's receive timestamp).
                const HOLD: Duration = Duration::from_micros(500);
                let all = Route {
                    net: Ipv4Addr::UNSPECIFIED,
                    prefix_len: 0,
                    delay_ns: HOLD.as_nanos() as u64,
                };
                let probe = Element::start(dl, input, output, &[all], None, element_cpu())?;
                let rtt = self.measure_rtt(0);
                probe.stop()?;
                rtt?.saturating_sub(HOLD)
            }
            None => self.measure_rtt(0)?,
        };
        self.path_base = Some(base);
        let added = |i: usize| rt.rtt.of(i).saturating_sub(base);
        match delay_ns {
            Some((dl, (input, output))) => {
                let routes: Vec<Route> = (0..self.senders.len())
                    .map(|i| Route {
                        net: Ipv4Addr::new(198, 18, i as u8, 0),
                        prefix_len: 24,
                        delay_ns: added(i).as_nanos() as u64,
                    })
                    .collect();
                self.element = Some(Element::start(
                    &dl,
                    &input,
                    &output,
                    &routes,
                    rt.slot,
                    element_cpu(),
                )?);
                self._delay_ns = Some(dl);
            }
            None => {
                let slot = rt
                    .slot
                    .map(|s| (format!("{}us", s.interval_ns / 1000), s.packets.to_string()));
                for i in 0..self.senders.len() {
                    let port = self.switch_port(i);
                    let us = format!("{}us", added(i).as_micros());
                    // netem's default limit (1000 packets) is less than a
                    // long round trip of ACKs.
                    let mut args = vec!["qdisc", "replace", "dev", &port, "root", "netem", "delay", &us, "limit", "1000000"];
                    if let Some((interval, packets)) = &slot {
                        args.extend(["slot", interval, "packets", packets]);
                    }
                    tc_qdisc::tc::tc(self.switch.name(), &args)
                    .context("adding netem on a sender port (--delay-backend element works on any kernel)")?;
                }
            }
        }
        // What the senders now see: the first, and each with an RTT of its own.
        let probed: Vec<usize> = if rt.rtt.0.len() > 1 {
            (0..self.senders.len()).collect()
        } else {
            vec![0]
        };
        self.probed_rtt = probed
            .into_iter()
            .map(|i| Ok((i, self.measure_rtt(i)?)))
            .collect::<Result<_>>()?;
        Ok(())
    }

    /// The switch's port toward sender `i`.
    pub fn switch_port(&self, i: usize) -> String {
        self.prefix.ifname(&format!("p{i}"))
    }

    /// A sender's round trip to the receiver with no load, as TCP measures
    /// it (tcp_info's min_rtt, as each run reports its flows'): one-byte
    /// exchanges on a fresh connection.
    fn measure_rtt(&self, sender: usize) -> Result<Duration> {
        use std::io::{Read, Write};
        const PORT: u16 = 9;
        const EXCHANGES: usize = 100;
        let listener = self
            .receiver
            .ns
            .run(|| std::net::TcpListener::bind((RECEIVER_ADDR, PORT)))?
            .context("listening for the round-trip probe")?;
        let echo = std::thread::spawn(move || -> std::io::Result<()> {
            let (mut s, _) = listener.accept()?;
            s.set_nodelay(true)?;
            let mut b = [0u8; 1];
            while s.read(&mut b)? == 1 {
                s.write_all(&b)?;
            }
            Ok(())
        });
        let min_rtt_us = self.senders[sender].ns.run(|| -> std::io::Result<u32> {
            let to = std::net::SocketAddr::from((RECEIVER_ADDR, PORT));
            let mut c = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(2))?;
            c.set_nodelay(true)?;
            c.set_read_timeout(Some(Duration::from_secs(2)))?;
            let mut b = [0u8; 1];
            for _ in 0..EXCHANGES {
                c.write_all(&b)?;
                c.read_exact(&mut b)?;
            }
            use std::os::fd::AsFd;
            let rtt = crate::net::tcpinfo::read(c.as_fd())?.min_rtt_us;
            // Closed both ways before the run's probes attach: the last ACK
            // of the close leaves as the receiver's FIN arrives.
            c.shutdown(std::net::Shutdown::Write)?;
            while c.read(&mut b)? > 0 {}
            Ok(rtt)
        })?;
        let _ = echo.join();
        let us = min_rtt_us
            .context("probing the path's round trip (one-byte exchanges to the receiver)")?;
        Ok(Duration::from_micros(u64::from(us)))
    }

    /// Stops the delay element, if one runs, and returns its report.
    pub fn stop_delay(&mut self) -> Result<Option<Report>> {
        self.element.take().map(Element::stop).transpose()
    }

    /// Sets a sysctl in every host namespace (not the switch).
    pub fn sysctl_hosts(&self, key: &str, value: &str) -> Result<()> {
        for h in self.senders.iter().chain(std::iter::once(&self.receiver)) {
            h.ns.sysctl(key, value)?;
        }
        Ok(())
    }

    /// ECN on every host (classic, or AccECN with `lab --ecn accecn`), for every algorithm that does not ask for
    /// it itself (TCP on a marking backend reacts to marks as RFC 3168
    /// says), and kept after a lost SYN: by default the kernel retries a
    /// SYN without asking for ECN (tcp_ecn_fallback, for middleboxes that
    /// drop ECN SYNs), and in a lab whose queue stays above K (64 flows
    /// hold it at 120 packets) the flow that then sends without ECT loses
    /// all it sends to the marker, for the whole run.
    pub fn ecn_everywhere(&self) -> Result<()> {
        self.sysctl_hosts("net.ipv4.tcp_ecn", super::ecn::selected().sysctl_value())?;
        self.sysctl_hosts("net.ipv4.tcp_ecn_fallback", "0")
    }
}
