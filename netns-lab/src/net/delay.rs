//! The round-trip time of a lab: `--rtt`, and what adds it to the path.
//!
//! The delay sits on the ACK path (receiver to senders), so the bottleneck's
//! queue stays the only queue on the data path. Two backends:
//! - `netem` on the switch's port toward each sender, where the kernel has
//!   sch_netem (stock kernels, the VM tier);
//! - the `delayline` element where it does not (this 6.18 kernel): a
//!   process in a namespace of its own between the receiver and the switch
//!   that holds each frame from the receiver for its sender's delay
//!   (`crate::net::delayline`). The data direction crosses that namespace by a
//!   tc mirred redirect, in the kernel, untouched.
//!
//! The element adds the whole configured RTT: veth's own round trip (tens
//! of microseconds, more under load) comes on top, and every run measures
//! the RTT its flows really had (tcp_info's min_rtt) beside the configured.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::net::delayline::{Report, Route, Slot};
use crate::net::netns::Netns;

/// Longest round trip the lab emulates.
pub use dctcp_utils::duration::MAX as MAX_RTT;

/// Parses a duration with its unit: `100us`, `8ms`, `2.5ms`, `1s`, `500ns`.
pub use dctcp_utils::duration::parse as parse_duration;

/// `500 us`, `8 ms`, `1.5 ms`.
pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{} us", trim(us))
    } else {
        format!("{} ms", trim(us / 1000.0))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The data-center round trip of seed 000 and the paper at a rate, every
/// experiment's default but where its seed says otherwise: 500 us below
/// 1 Gbit/s (seed 000's Mininet runs at 100 Mbit/s), 100 us at 1 Gbit/s and
/// above (the paper's testbed).
pub fn datacenter_rtt(rate_bps: u64) -> Duration {
    if rate_bps >= 1_000_000_000 {
        Duration::from_micros(100)
    } else {
        Duration::from_micros(500)
    }
}

/// Packets of 1500 bytes a link of `rate_bps` holds in flight over `rtt`:
/// C x RTT, the bandwidth-delay product.
pub fn bdp_pkts(rate_bps: u64, rtt: Duration) -> f64 {
    rate_bps as f64 * rtt.as_secs_f64() / (1500.0 * 8.0)
}

/// Round-trip times: one for every sender, or one per sender in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rtt(pub Vec<Duration>);

impl Rtt {
    /// `500us`, `100us,1ms`, or `none` (no delay: veth's own round trip).
    pub fn parse(s: &str) -> Result<Rtt, String> {
        if s.trim() == "none" {
            return Ok(Rtt(Vec::new()));
        }
        let v = s
            .split(',')
            .map(parse_duration)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Rtt(v))
    }

    pub fn uniform(d: Duration) -> Rtt {
        Rtt(vec![d])
    }

    /// The RTT of sender `i`.
    pub fn of(&self, i: usize) -> Duration {
        self.0[if self.0.len() == 1 { 0 } else { i }]
    }

    /// A list must name every sender.
    pub fn validate(&self, senders: usize) -> Result<()> {
        if self.0.len() != 1 && self.0.len() != senders {
            bail!(
                "--rtt lists {} round trips for {senders} senders: give one for all, or one per sender",
                self.0.len()
            );
        }
        Ok(())
    }
}

/// What adds the delay.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum DelayBackend {
    /// netem where the kernel has it, else the element.
    #[default]
    Auto,
    /// The lab's own element (delayline), on any kernel.
    Element,
    /// sch_netem on the switch's sender ports.
    Netem,
}

/// The round trip a star is built with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundTrip {
    pub rtt: Rtt,
    pub backend: DelayBackend,
    /// The ACK path releases in slots (netem's `slot`, or the element's):
    /// bursty arrivals at the senders, so bursts at the bottleneck.
    pub slot: Option<Slot>,
}

impl RoundTrip {
    /// `rtt` added by `backend`, each frame released as it is due.
    pub fn new(rtt: Rtt, backend: DelayBackend) -> RoundTrip {
        RoundTrip {
            rtt,
            backend,
            slot: None,
        }
    }
}

/// `--slot 4ms:8`: held ACKs leave only as a slot opens, every interval
/// (100 us to 100 ms), at most so many packets (1 to 10,000) of a
/// sender's per slot.
pub fn parse_slot(s: &str) -> Result<Slot, String> {
    let (d, n) = s
        .split_once(':')
        .ok_or_else(|| format!("--slot {s}: give INTERVAL:PACKETS, e.g. 4ms:8"))?;
    let interval = parse_duration(d).map_err(|e| format!("--slot {s}: {e}"))?;
    let packets: u32 = n
        .parse()
        .map_err(|_| format!("--slot {s}: `{n}` is not a packet count"))?;
    if !(Duration::from_micros(100)..=Duration::from_millis(100)).contains(&interval) {
        return Err(format!("--slot {s}: the interval must be 100us to 100ms"));
    }
    if !(1..=10_000).contains(&packets) {
        return Err(format!("--slot {s}: 1 to 10000 packets per slot"));
    }
    Ok(Slot {
        interval_ns: interval.as_nanos() as u64,
        packets,
    })
}

/// `--rtt` and `--delay-backend`, flattened into each experiment.
#[derive(Clone, Debug, Default, Serialize, Deserialize, clap::Args)]
pub struct RttArgs {
    /// Round-trip time added to every flow's path (on the ACK path), e.g.
    /// 500us, 8ms, 25ms; or one per sender, comma-separated (100us,1ms), so
    /// flows with different round trips share the bottleneck. Above 0 and at
    /// most 1s; `none` adds nothing (veth's own round trip, tens of
    /// microseconds). veth's own round trip comes on top of what is added;
    /// summary.md shows each flow's measured min RTT beside the configured.
    #[arg(long, value_parser = Rtt::parse)]
    pub rtt: Option<Rtt>,
    /// What adds the delay: netem (kernels with sch_netem), element (the
    /// lab's delayline process, any kernel), auto (netem if present).
    #[arg(long, value_enum, default_value = "auto")]
    pub delay_backend: DelayBackend,
    /// Bursty arrivals: the ACK path releases in slots, as netem's `slot`
    /// does (INTERVAL:PACKETS, e.g. 4ms:8): held ACKs leave only as a slot
    /// opens, every INTERVAL, at most PACKETS of a sender's per slot, so
    /// the senders send, and the bottleneck receives, in bursts. Needs
    /// --rtt.
    #[arg(long, value_parser = parse_slot)]
    pub slot: Option<Slot>,
}

impl RttArgs {
    /// The round trip, with `default` where `--rtt` was not given; none
    /// for `--rtt none`.
    /// With `--slot` and no delay to hold ACKs in, a round trip of none
    /// that the star refuses by name.
    pub fn or(&self, default: Option<Duration>) -> Option<RoundTrip> {
        let rtt = self
            .rtt
            .clone()
            .or(default.map(Rtt::uniform))
            .filter(|r| !r.0.is_empty() || self.slot.is_some())
            .or(self.slot.map(|_| Rtt(Vec::new())))?;
        Some(RoundTrip {
            slot: self.slot,
            ..RoundTrip::new(rtt, self.delay_backend)
        })
    }
}

/// One flow's round trip: configured, and the smallest its sender measured.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct FlowRtt {
    pub sender: usize,
    /// None: no delay added, veth's own round trip.
    pub configured_us: Option<f64>,
    /// tcp_info's min_rtt of the sender's socket.
    pub min_rtt_us: u32,
}

impl FlowRtt {
    /// Measured over configured, minus one (0.05: 5 % longer).
    pub fn excess(&self) -> Option<f64> {
        self.configured_us
            .filter(|_| self.min_rtt_us > 0)
            .map(|c| f64::from(self.min_rtt_us) / c - 1.0)
    }
}

/// The round trip a run really had.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct RttMeasured {
    pub backend: Option<DelayBackend>,
    /// The path's own round trip, measured before the delay was added
    /// (what the delay is reduced by), us.
    pub path_base_us: Option<f64>,
    /// (sender, min RTT us) of a probe connection once the delay was added,
    /// before the run.
    pub probed_us: Vec<(usize, f64)>,
    pub flows: Vec<FlowRtt>,
    /// The element's own report, where it ran.
    pub element: Option<Report>,
}

/// How far a measured base RTT may stray from the configured one before a
/// summary says so first.
pub const RTT_TOLERANCE: f64 = 0.10;

impl RttMeasured {
    /// Flows whose base RTT is off the configured one by more than the
    /// tolerance.
    pub fn off(&self) -> Vec<&FlowRtt> {
        self.flows
            .iter()
            .filter(|f| f.excess().is_some_and(|e| e.abs() > RTT_TOLERANCE))
            .collect()
    }

    /// One line: configured, measured, and the element's accuracy.
    pub fn describe(&self) -> String {
        let min = |f: &[&FlowRtt]| -> String {
            let v: Vec<u32> = f.iter().map(|f| f.min_rtt_us).filter(|&r| r > 0).collect();
            match (v.iter().min(), v.iter().max()) {
                (Some(a), Some(b)) if a == b => format!("{a} us"),
                (Some(a), Some(b)) => format!("{a}-{b} us"),
                _ => "-".into(),
            }
        };
        let all: Vec<&FlowRtt> = self.flows.iter().collect();
        let configured: Vec<String> = {
            let mut c: Vec<f64> = self.flows.iter().filter_map(|f| f.configured_us).collect();
            c.dedup();
            c.iter()
                .map(|us| fmt_duration(Duration::from_secs_f64(us / 1e6)))
                .collect()
        };
        let mut s = if configured.is_empty() {
            format!("no delay added (veth only); measured min RTT {}", min(&all))
        } else {
            format!(
                "configured {} (the path's own {:.0} us + {}), measured min RTT {}",
                configured.join(", "),
                self.path_base_us.unwrap_or(0.0),
                match self.backend {
                    Some(DelayBackend::Netem) => "netem",
                    _ => "delay element",
                },
                min(&all)
            )
        };
        if !self.probed_us.is_empty() {
            let p: Vec<String> = self
                .probed_us
                .iter()
                .map(|(_, us)| format!("{us:.0}"))
                .collect();
            s += &format!("; probe before the run {} us", p.join(" / "));
        }
        if let Some(e) = &self.element {
            s += &format!(
                "; element holding error p50 {:.1} / p99 {:.1} / max {:.1} us, {} frames held, {} lost, {} reordered",
                e.lateness.p50_ns as f64 / 1e3,
                e.lateness.p99_ns as f64 / 1e3,
                e.lateness.max_ns as f64 / 1e3,
                e.received,
                e.dropped_full + e.dropped_oversize,
                e.reordered
            );
            if e.slots_used > 0 {
                s += &format!(
                    "; released in {} slots, at most {} of a sender's in one, {} frames held back by a full slot",
                    e.slots_used, e.most_in_a_slot, e.slot_full_waits
                );
            }
        }
        s
    }
}

/// The lines a summary opens with: each run's round trip (or, past a
/// handful of runs, their range), and a warning first where a measured RTT
/// strays from the configured one.
pub fn summary_lines<'a>(runs: impl Iterator<Item = (String, &'a RttMeasured)>) -> String {
    const EACH_UP_TO: usize = 6;
    let runs: Vec<(String, &RttMeasured)> = runs.collect();
    let mut warn = String::new();
    for (label, m) in &runs {
        for f in m.off() {
            warn += &format!(
                "**Round trip off:** {label}, sender {}: measured min RTT {} us against {:.0} us configured ({:+.0} %).\n",
                f.sender,
                f.min_rtt_us,
                f.configured_us.unwrap_or(0.0),
                f.excess().unwrap_or(0.0) * 100.0
            );
        }
    }
    if !warn.is_empty() {
        warn += &format!(
            "(More than {:.0} % off: the path's own round trip varies with the host's load, and at low rates a \
             packet's transmission time is part of every RTT sample; the theory uses the configured RTT.)\n\n",
            RTT_TOLERANCE * 100.0
        );
    }
    let mut lines = String::new();
    if runs.len() <= EACH_UP_TO {
        for (label, m) in &runs {
            lines += &format!("- {label}: {}\n", m.describe());
        }
    } else if let Some((_, first)) = runs.first() {
        let range = |v: Vec<f64>| -> String {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if v.is_empty() {
                "-".into()
            } else {
                format!("{lo:.0}-{hi:.0}")
            }
        };
        let probes = range(
            runs.iter()
                .flat_map(|(_, m)| m.probed_us.iter().map(|p| p.1))
                .collect(),
        );
        let mins = range(
            runs.iter()
                .flat_map(|(_, m)| m.flows.iter().map(|f| f64::from(f.min_rtt_us)))
                .filter(|&v| v > 0.0)
                .collect(),
        );
        let elements: Vec<&Report> = runs
            .iter()
            .filter_map(|(_, m)| m.element.as_ref())
            .collect();
        lines += &format!(
            "- {} runs, {}: probe before each run {probes} us, flows' min RTT {mins} us",
            runs.len(),
            first.describe().split(';').next().unwrap_or_default()
        );
        if !elements.is_empty() {
            let p50 = elements
                .iter()
                .map(|e| e.lateness.p50_ns)
                .max()
                .unwrap_or(0);
            let p99 = elements
                .iter()
                .map(|e| e.lateness.p99_ns)
                .max()
                .unwrap_or(0);
            let lost: u64 = elements
                .iter()
                .map(|e| e.dropped_full + e.dropped_oversize)
                .sum();
            let reordered: u64 = elements.iter().map(|e| e.reordered).sum();
            lines += &format!(
                "; element holding error at worst p50 {:.1} / p99 {:.1} us, {lost} frames lost, {reordered} reordered",
                p50 as f64 / 1e3,
                p99 as f64 / 1e3
            );
        }
        lines += "\n";
    }
    format!("{warn}Round trip per run:\n{lines}")
}

/// The delayline binary built beside this one.
pub fn delayline_bin() -> Result<PathBuf> {
    crate::net::netns::sibling_binary("delayline")
}

/// A running delay element; stopped (SIGTERM) when dropped.
pub struct Element {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Element {
    /// Starts delayline in `ns`, reading `input` and sending to `output`,
    /// pinned to `cpu` if given; returns once its sockets are bound.
    pub fn start(
        ns: &Netns,
        input: &str,
        output: &str,
        routes: &[Route],
        slot: Option<Slot>,
        cpu: Option<usize>,
    ) -> Result<Element> {
        let mut cmd = ns.command(&delayline_bin()?);
        cmd.args(["--in", input, "--out", output]);
        for r in routes {
            cmd.arg("--route")
                .arg(format!("{}/{}={}", r.net, r.prefix_len, r.delay_ns));
        }
        if let Some(s) = slot {
            cmd.arg("--slot").arg(format!("{}ns:{}", s.interval_ns, s.packets));
        }
        if let Some(c) = cpu {
            cmd.arg("--cpu").arg(c.to_string());
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting delayline")?;
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        if line.trim() != "ready" {
            let _ = child.wait();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            bail!("the delay element did not start: {}", err.trim());
        }
        Ok(Element { child, stdout })
    }

    /// Stops the element and returns its report.
    pub fn stop(mut self) -> Result<Report> {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut out = String::new();
        self.stdout.read_to_string(&mut out)?;
        let status = self.child.wait()?;
        anyhow::ensure!(status.success(), "the delay element failed: {status}");
        serde_json::from_str(out.trim()).context("reading the delay element's report")
    }
}

impl Drop for Element {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_range() {
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("8ms"), Ok(Duration::from_millis(8)));
        assert_eq!(parse_duration("2.5ms"), Ok(Duration::from_micros(2500)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        for bad in [
            "0",
            "0ms",
            "-1ms",
            "8",
            "fast",
            "2s",
            "8 parsecs",
            "100ns",
            "NaNms",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn a_slot_is_an_interval_and_a_packet_count_in_range() {
        assert_eq!(
            parse_slot("4ms:8").unwrap(),
            Slot {
                interval_ns: 4_000_000,
                packets: 8
            }
        );
        assert_eq!(parse_slot("100us:1").unwrap().interval_ns, 100_000);
        for (bad, why) in [
            ("4ms", "INTERVAL:PACKETS"),
            ("4ms:x", "`x` is not a packet count"),
            ("50us:8", "100us to 100ms"),
            ("101ms:8", "100us to 100ms"),
            ("4ms:0", "1 to 10000"),
            ("4ms:10001", "1 to 10000"),
        ] {
            let e = parse_slot(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        // With --slot and --rtt none, a round trip with nothing to hold,
        // which the star refuses by name.
        let args = RttArgs {
            rtt: Some(Rtt(Vec::new())),
            slot: Some(parse_slot("4ms:8").unwrap()),
            ..RttArgs::default()
        };
        let rt = args.or(None).unwrap();
        assert!(rt.rtt.0.is_empty());
        assert_eq!(rt.slot, args.slot);
        // With a round trip, the slot rides along; without --slot, none.
        let eight = RttArgs {
            rtt: None,
            ..args.clone()
        };
        let rt = eight.or(Some(Duration::from_millis(8))).unwrap();
        assert_eq!((rt.rtt.0.len(), rt.slot), (1, args.slot));
        assert_eq!(RttArgs::default().or(Some(Duration::from_millis(8))).unwrap().slot, None);
        assert_eq!(RttArgs::default().or(None), None);
    }

    #[test]
    fn a_list_names_every_sender_or_one_for_all() {
        let r = Rtt::parse("100us,1ms").unwrap();
        assert_eq!(r.of(1), Duration::from_millis(1));
        assert!(r.validate(2).is_ok());
        assert!(r.validate(3).is_err());
        let one = Rtt::parse("8ms").unwrap();
        assert!(one.validate(5).is_ok());
        assert_eq!(one.of(4), Duration::from_millis(8));
    }
}
