//! A faulty link (src/bpf/faults.bpf.c), loaded and attached to the receiver's
//! interface (tcx, or clsact before 6.6): random loss, ECN bleached by a middlebox, ECN
//! negotiation stripped from SYNs, and reordering through a detour.

use std::mem::MaybeUninit;
use std::path::Path;

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::{Deserialize, Serialize};

use crate::hook::{self, Attached, Position};
use crate::intf::{
    fault_config, fault_segments_FAULT_ACKS, fault_segments_FAULT_DATA, fault_stats, FAULT_PROB_ONE,
};
use crate::skel::faults::FaultsSkelBuilder;

/// What one faulty link does to the segments it carries: each fault a
/// probability in [0, 1], drawn per segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkFaults {
    pub loss: f64,
    /// Clear the ECN field of an ECN-capable segment (CE or ECT to Not-ECT).
    pub ecn_bleach: f64,
    /// Send a segment on the detour, which hands it back late.
    pub reorder: f64,
    /// Clear ECE and CWR on every SYN that asks for ECN.
    pub syn_bleach: bool,
}

impl LinkFaults {
    pub fn is_none(&self) -> bool {
        *self == LinkFaults::default()
    }

    /// Each probability in [0, 1].
    pub fn validate(&self) -> Result<()> {
        for (name, p) in [
            ("loss", self.loss),
            ("ecn-bleach", self.ecn_bleach),
            ("reorder", self.reorder),
        ] {
            if !(0.0..=1.0).contains(&p) {
                bail!("{name} {p}: a probability, give 0 to 1 (0.01 is 1 %)");
            }
        }
        Ok(())
    }
}

/// p as a threshold for a 32-bit random draw (FAULT_PROB_ONE: always).
fn threshold(p: f64) -> u64 {
    ((p * FAULT_PROB_ONE as f64).round() as u64).min(FAULT_PROB_ONE)
}

/// Which way the link's faults act.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Direction {
    /// Data segments arriving at the receiver (tcx ingress).
    Data,
    /// Pure ACKs the receiver sends (tcx egress).
    Acks,
}

/// The way reordered segments take: out of `out_dev`, and back in through
/// `back_dev`, both in the faulty link's namespace. Whatever lies between
/// (the lab's delay element) holds them.
pub struct Detour<'a> {
    pub out_dev: &'a str,
    pub back_dev: &'a str,
}

/// What a faulty link did (struct fault_stats, summed over CPUs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultCounts {
    /// Every TCP segment, of any kind: handshakes and closes too.
    pub crossed: u64,
    /// Segments of the kind the faults act on.
    pub seen: u64,
    pub dropped: u64,
    pub ce_bleached: u64,
    pub ect_bleached: u64,
    /// SYNs that asked for ECN, and of them those stripped of it.
    pub syns: u64,
    pub syn_bleached: u64,
    pub reordered: u64,
    pub returned: u64,
    pub detour_failed: u64,
}

impl From<fault_stats> for FaultCounts {
    fn from(s: fault_stats) -> Self {
        FaultCounts {
            crossed: s.crossed,
            seen: s.seen,
            dropped: s.dropped,
            ce_bleached: s.ce_bleached,
            ect_bleached: s.ect_bleached,
            syns: s.syns,
            syn_bleached: s.syn_bleached,
            reordered: s.reordered,
            returned: s.returned,
            detour_failed: s.detour_failed,
        }
    }
}

/// A faulty link, attached for as long as this value lives.
pub struct FaultyLink {
    _links: Vec<Attached>,
    stats: MapHandle,
}

impl FaultyLink {
    /// Loads the faults and attaches them to `dev` in namespace `ns`, ahead
    /// of every program already there. Reordering needs the data path and a
    /// `detour`.
    pub fn attach(
        dir: Direction,
        faults: &LinkFaults,
        ns: &Path,
        dev: &str,
        detour: Option<&Detour<'_>>,
    ) -> Result<FaultyLink> {
        faults.validate()?;
        if faults.reorder > 0.0 && (dir != Direction::Data || detour.is_none()) {
            bail!("reordering is on the data path only, through a detour");
        }
        if faults.syn_bleach && dir != Direction::Data {
            bail!("SYNs are bleached on the data path (they travel toward the receiver)");
        }
        let (detour_ifindex, return_ifindex) = match detour {
            Some(d) => dctcp_utils::setns::with_netns(ns, || -> Result<(u32, u32)> {
                Ok((hook::ifindex(d.out_dev)?, hook::ifindex(dev)?))
            })??,
            None => (0, 0),
        };
        let cfg = fault_config {
            segments: match dir {
                Direction::Data => fault_segments_FAULT_DATA,
                Direction::Acks => fault_segments_FAULT_ACKS,
            },
            syn_bleach: u32::from(faults.syn_bleach),
            loss: threshold(faults.loss),
            ecn_bleach: threshold(faults.ecn_bleach),
            reorder: threshold(faults.reorder),
            detour_ifindex,
            return_ifindex,
        };
        let mut storage = MaybeUninit::uninit();
        let mut open = FaultsSkelBuilder::default()
            .open(&mut storage)
            .context("opening the faulty link")?;
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("rodata not mapped")?;
        crate::skel::set_config(&mut ro.cfg, &cfg, "fault_config");
        let skel = open.load().context("loading the faulty link")?;
        let prog = match dir {
            Direction::Data => &skel.progs.fault_ingress,
            Direction::Acks => &skel.progs.fault_egress,
        };
        let mut links = vec![hook::attach(prog, ns, dev, Position::First)?];
        if let Some(d) = detour {
            links.push(hook::attach(
                &skel.progs.detour_return,
                ns,
                d.back_dev,
                Position::First,
            )?);
        }
        Ok(FaultyLink {
            _links: links,
            stats: MapHandle::try_from(&skel.maps.stats)?,
        })
    }

    /// What the link did so far.
    pub fn counts(&self) -> Result<FaultCounts> {
        let per_cpu = self
            .stats
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .context("fault stats: empty map")?;
        dctcp_utils::bytes::sum_per_cpu::<fault_stats>(&per_cpu)
            .map(Into::into)
            .context("fault_stats: a value shorter than the struct")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probability_is_a_threshold_for_32_random_bits() {
        assert_eq!(threshold(0.0), 0);
        assert_eq!(threshold(1.0), 1 << 32);
        assert_eq!(threshold(0.5), 1 << 31);
        assert_eq!(threshold(0.001), 4_294_967);
    }

    #[test]
    fn probabilities_outside_zero_to_one_are_refused() {
        for bad in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
            let f = LinkFaults {
                loss: bad,
                ..LinkFaults::default()
            };
            let e = f.validate().unwrap_err().to_string();
            assert!(e.contains("a probability"), "{e}");
        }
        let ok = LinkFaults {
            loss: 1.0,
            ecn_bleach: 0.0,
            reorder: 0.5,
            syn_bleach: true,
        };
        ok.validate().unwrap();
        assert!(!ok.is_none());
        assert!(LinkFaults::default().is_none());
    }

    #[test]
    fn per_cpu_counters_add_field_by_field() {
        let cpu = |k: u64| {
            let s = fault_stats {
                seen: k,
                dropped: 2 * k,
                detour_failed: 3 * k,
                crossed: 4 * k,
                ..Default::default()
            };
            dctcp_utils::bytes::to_bytes(&s)
        };
        let sum: FaultCounts = dctcp_utils::bytes::sum_per_cpu::<fault_stats>(&[cpu(1), cpu(10)])
            .unwrap()
            .into();
        assert_eq!(
            (sum.seen, sum.dropped, sum.detour_failed, sum.crossed),
            (11, 22, 33, 44)
        );
        assert_eq!(sum.reordered, 0);
    }
}
