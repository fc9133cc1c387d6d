//! Faults on the lab's links, as real networks have them: random loss on
//! the data path or the ACK path, ECN bleached by a middlebox after the
//! switch, ECN negotiation stripped from SYNs, and reordering. BPF programs
//! on the receiver's interface (tcx, or clsact before 6.6) do them (tc_qdisc::faults); a
//! reordered segment takes a detour through the delay element and comes
//! back behind the segments sent after it:
//!
//! ```text
//! switch ── rx dev ──(fault_ingress)── receiver's stack
//!             │ reordered                  ^
//!             v                            │ detour_return (ingress of rx dev)
//!           [fo ─> fi: delayline, held ─> fo'] ─> back dev
//! ```

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use tc_qdisc::faults::{Detour, Direction, FaultCounts, FaultyLink, LinkFaults};

use crate::net::delay::{parse_duration, Element};
use crate::net::delayline::{Report, Route};
use crate::net::netns::Netns;
use crate::net::topology::{offloads_off, Star};
use crate::net::veth::Veth;

/// Faults on the way between the switch and the receiver.
#[derive(Debug, Clone, Default, PartialEq, clap::Args, Serialize, Deserialize)]
pub struct FaultArgs {
    /// Drop each data segment with probability P on its way from the
    /// switch to the receiver (0.01 is 1 %): loss the switch's queue did
    /// not cause. Handshakes and closes pass.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub loss: f64,
    /// Drop each pure ACK from the receiver with probability P (ACKs that
    /// carry nothing else; handshakes and closes pass).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub ack_loss: f64,
    /// Clear the ECN field of each ECN-capable segment after the switch
    /// with probability P, as a middlebox that bleaches ECN does: CE marks
    /// never reach the receiver (1 bleaches them all).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub ecn_bleach: f64,
    /// Clear ECE and CWR on every SYN that asks for ECN, so that the
    /// receiver never agrees to it: senders run without ECN (bpf_dctcp
    /// falls back to Reno).
    #[arg(long)]
    pub bleach_syn: bool,
    /// Send each data segment on a detour with probability P: it reaches
    /// the receiver --reorder-delay later, behind the segments sent after
    /// it.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub reorder: f64,
    /// How long a reordered segment is held (default: four full-sized
    /// packets' time at the bottleneck's rate, so that about four
    /// segments overtake it).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub reorder_delay: Option<Duration>,
}

/// Packets a reordered segment is held for by default.
const REORDER_PKTS: u64 = 4;

impl FaultArgs {
    pub fn is_none(&self) -> bool {
        self.data().is_none() && self.acks().is_none()
    }

    /// What the data path does.
    pub fn data(&self) -> LinkFaults {
        LinkFaults {
            loss: self.loss,
            ecn_bleach: self.ecn_bleach,
            reorder: self.reorder,
            syn_bleach: self.bleach_syn,
        }
    }

    /// What the ACK path does.
    pub fn acks(&self) -> LinkFaults {
        LinkFaults {
            loss: self.ack_loss,
            ..LinkFaults::default()
        }
    }

    /// Each probability in [0, 1], named by its option; a delay only with
    /// reordering. (Every kernel the lab runs on can inject them: on tcx,
    /// or on clsact before 6.6.)
    pub fn validate(&self) -> Result<()> {
        for (opt, p) in [
            ("--loss", self.loss),
            ("--ack-loss", self.ack_loss),
            ("--ecn-bleach", self.ecn_bleach),
            ("--reorder", self.reorder),
        ] {
            if !(0.0..=1.0).contains(&p) {
                bail!("{opt} {p}: a probability, give 0 to 1 (0.01 is 1 %)");
            }
        }
        // --reorder-delay's own range (1 us to 1 s) is parse_duration's.
        if self.reorder_delay.is_some() && self.reorder == 0.0 {
            bail!("--reorder-delay without --reorder: give --reorder P too");
        }
        Ok(())
    }

    /// The detour's hold at `rate_bps`.
    pub fn reorder_hold(&self, rate_bps: u64) -> Duration {
        self.reorder_delay.unwrap_or_else(|| {
            let pkt_ns = u64::from(tc_qdisc::backend::PKT_BYTES) * 8 * 1_000_000_000 / rate_bps;
            Duration::from_nanos(REORDER_PKTS * pkt_ns)
        })
    }

    /// One line for a summary: what was injected.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let pct = |p: f64| format!("{} %", (p * 1e6).round() / 1e4);
        if self.loss > 0.0 {
            parts.push(format!("data loss {}", pct(self.loss)));
        }
        if self.ack_loss > 0.0 {
            parts.push(format!("ACK loss {}", pct(self.ack_loss)));
        }
        if self.ecn_bleach > 0.0 {
            parts.push(format!(
                "ECN bleached on {} of segments",
                pct(self.ecn_bleach)
            ));
        }
        if self.bleach_syn {
            parts.push("ECN stripped from SYNs".into());
        }
        if self.reorder > 0.0 {
            parts.push(format!("{} of data segments reordered", pct(self.reorder)));
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// What the faults did in one run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FaultReport {
    pub data: Option<FaultCounts>,
    pub acks: Option<FaultCounts>,
    /// How long the detour held reordered segments, and its holding error.
    pub reorder_hold_ns: Option<u64>,
    pub detour: Option<Report>,
}

/// One line for a run's progress output: what each path did.
pub fn counts_line(r: &FaultReport) -> String {
    let mut parts = Vec::new();
    if let Some(d) = &r.data {
        parts.push(format!(
            "data {} seen, {} dropped, {} CE and {} ECT bleached, {} of {} ECN SYNs stripped, {} reordered ({} back)",
            d.seen, d.dropped, d.ce_bleached, d.ect_bleached, d.syn_bleached, d.syns, d.reordered, d.returned
        ));
    }
    if let Some(a) = &r.acks {
        parts.push(format!("ACKs {} seen, {} dropped", a.seen, a.dropped));
    }
    parts.join("; ")
}

/// A run's faults, attached to its star; removed when dropped (the detour's
/// namespace goes with its element).
pub struct Faults {
    data: Option<FaultyLink>,
    acks: Option<FaultyLink>,
    // The element stops before its namespace goes.
    element: Option<Element>,
    _detour_ns: Option<Netns>,
    hold: Option<Duration>,
}

impl Faults {
    /// Attaches what `args` asks for to `star`'s receiver, ahead of the
    /// receiver's counter.
    pub fn install(star: &Star, args: &FaultArgs, rate_bps: u64) -> Result<Faults> {
        args.validate()?;
        let mut f = Faults {
            data: None,
            acks: None,
            element: None,
            _detour_ns: None,
            hold: None,
        };
        let rx = &star.receiver;
        let data = args.data();
        if !data.is_none() {
            let detour = if data.reorder > 0.0 {
                let hold = args.reorder_hold(rate_bps);
                let (ns, out_dev, back_dev, element) = build_detour(star, hold)?;
                f.element = Some(element);
                f._detour_ns = Some(ns);
                f.hold = Some(hold);
                Some((out_dev, back_dev))
            } else {
                None
            };
            let detour = detour
                .as_ref()
                .map(|(out_dev, back_dev)| Detour { out_dev, back_dev });
            f.data = Some(FaultyLink::attach(
                Direction::Data,
                &data,
                &rx.ns.path(),
                &rx.ifname,
                detour.as_ref(),
            )?);
        }
        let acks = args.acks();
        if !acks.is_none() {
            f.acks = Some(FaultyLink::attach(
                Direction::Acks,
                &acks,
                &rx.ns.path(),
                &rx.ifname,
                None,
            )?);
        }
        Ok(f)
    }

    /// What the faults did; stops the detour's element and adds its report.
    pub fn finish(mut self) -> Result<FaultReport> {
        Ok(FaultReport {
            data: self.data.as_ref().map(FaultyLink::counts).transpose()?,
            acks: self.acks.as_ref().map(FaultyLink::counts).transpose()?,
            reorder_hold_ns: self.hold.map(|h| h.as_nanos() as u64),
            detour: self.element.take().map(Element::stop).transpose()?,
        })
    }
}

/// The reordering detour: a layer-2 namespace beside the receiver whose
/// delay element holds every frame for `hold`. Returns the namespace, the
/// receiver's ends of the way out and the way back, and the element.
fn build_detour(star: &Star, hold: Duration) -> Result<(Netns, String, String, Element)> {
    let rx = &star.receiver.ns;
    let ns = Netns::create(&star.prefix.ns("fd"))?;
    let out = Veth::create_with(
        rx,
        &star.prefix.ifname("fo"),
        None,
        &ns,
        &star.prefix.ifname("fi"),
        None,
    )?;
    let back = Veth::create_with(
        &ns,
        &star.prefix.ifname("fr"),
        None,
        rx,
        &star.prefix.ifname("fb"),
        None,
    )?;
    for (n, dev) in [(rx, &out.a), (&ns, &out.b), (&ns, &back.a), (rx, &back.b)] {
        offloads_off(n, dev)?;
    }
    let all = Route {
        net: Ipv4Addr::UNSPECIFIED,
        prefix_len: 0,
        delay_ns: hold.as_nanos() as u64,
    };
    // Unpinned: a reordered segment is rare, and the element sleeps between.
    let element = Element::start(&ns, &out.b, &back.a, &[all], None, None)?;
    Ok((ns, out.a, back.b, element))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_outside_zero_to_one_name_their_option() {
        for (args, opt) in [
            (
                FaultArgs {
                    loss: 1.5,
                    ..FaultArgs::default()
                },
                "--loss 1.5",
            ),
            (
                FaultArgs {
                    ack_loss: -0.1,
                    ..FaultArgs::default()
                },
                "--ack-loss -0.1",
            ),
            (
                FaultArgs {
                    ecn_bleach: f64::NAN,
                    ..FaultArgs::default()
                },
                "--ecn-bleach NaN",
            ),
            (
                FaultArgs {
                    reorder: 2.0,
                    ..FaultArgs::default()
                },
                "--reorder 2",
            ),
        ] {
            let e = args.validate().unwrap_err().to_string();
            assert!(e.starts_with(opt) && e.contains("give 0 to 1"), "{e}");
        }
    }

    #[test]
    fn a_reorder_delay_needs_reordering() {
        let delay = |reorder: f64| FaultArgs {
            reorder,
            reorder_delay: Some(Duration::from_millis(1)),
            ..FaultArgs::default()
        };
        let e = delay(0.0).validate().unwrap_err();
        assert!(e.to_string().contains("without --reorder"), "{e}");
        delay(0.1).validate().unwrap();
    }

    #[test]
    fn the_default_hold_is_four_packets_at_the_rate() {
        let f = FaultArgs {
            reorder: 0.01,
            ..FaultArgs::default()
        };
        // 1514 bytes at 100 Mbit/s: 121.12 us.
        assert_eq!(
            f.reorder_hold(100_000_000),
            Duration::from_nanos(4 * 121_120)
        );
    }

    #[test]
    fn each_path_gets_its_own_faults() {
        let f = FaultArgs {
            loss: 0.01,
            ack_loss: 0.1,
            bleach_syn: true,
            ..FaultArgs::default()
        };
        assert_eq!(f.data().loss, 0.01);
        assert!(f.data().syn_bleach);
        assert_eq!(f.acks().loss, 0.1);
        assert!(!f.acks().syn_bleach);
        assert!(FaultArgs::default().is_none());
        let acks_only = FaultArgs {
            ack_loss: 0.1,
            ..FaultArgs::default()
        };
        assert!(!acks_only.is_none() && acks_only.data().is_none());
        assert!(!f.is_none());
        assert_eq!(
            f.describe(),
            "data loss 1 %, ACK loss 10 %, ECN stripped from SYNs"
        );
    }

    #[test]
    fn a_summary_names_each_fault_injected_and_only_those() {
        assert_eq!(FaultArgs::default().describe(), "none");
        let f = FaultArgs {
            ecn_bleach: 1.0,
            reorder: 0.0025,
            ..FaultArgs::default()
        };
        assert_eq!(
            f.describe(),
            "ECN bleached on 100 % of segments, 0.25 % of data segments reordered"
        );
    }
}
