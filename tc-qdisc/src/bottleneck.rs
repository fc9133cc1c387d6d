//! The shaped bottleneck at the switch's egress: htb at the link rate with
//! the backend's qdisc as its only class's queue.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, PKT_BYTES};
use crate::dualpi2::{C_CLASSID, L_CLASSID};
use crate::tc::tc;

/// Rates the lab accepts: below 1 Mbit/s the htb quantum is less than a
/// packet; above 10 Gbit/s veth forwarding on a small machine is the limit.
pub const RATE_MIN: u64 = 1_000_000;
pub const RATE_MAX: u64 = 10_000_000_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    /// Link rate, bit/s.
    pub rate_bps: u64,
    /// Queue capacity in MTU-sized packets.
    pub buffer_pkts: u32,
    pub backend: Backend,
}

impl Bottleneck {
    /// DCTCP's switch: the BPF step marker at K packets.
    pub fn step(rate_bps: u64, buffer_pkts: u32, k: u32) -> Bottleneck {
        Bottleneck {
            rate_bps,
            buffer_pkts,
            backend: Backend::BpfStep { k },
        }
    }

    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(
            (RATE_MIN..=RATE_MAX).contains(&self.rate_bps),
            "bottleneck rate {} bit/s out of range: 1 Mbit/s to 10 Gbit/s",
            self.rate_bps
        );
        anyhow::ensure!(
            (2..=100_000).contains(&self.buffer_pkts),
            "buffer of {} packets out of range: 2 to 100000",
            self.buffer_pkts
        );
        self.backend.validate(self.buffer_pkts)?;
        self.backend.runs_on(crate::marker::kernel())
    }

    /// The same link at another rate (a step of a rate schedule).
    pub fn at_rate(&self, rate_bps: u64) -> Bottleneck {
        Bottleneck {
            rate_bps,
            ..self.clone()
        }
    }

    /// Token bucket depth: 40 us of line rate (3 packets at 1 Gbit/s), at
    /// least two packets. In hysteresis mode htb sends a burst per timer, and
    /// the queue drains in steps of it that every arrival sees: at 100 us
    /// (8 packets) DCTCP's mean queue at 1 Gbit/s sat 4 packets below K;
    /// at 40 us it costs a quarter more softirq time (docs/lab/README.md, "The lab at
    /// 1 Gbit/s").
    pub fn burst_bytes(&self) -> u64 {
        (self.rate_bps / 8 / 25_000).max(2 * u64::from(PKT_BYTES))
    }

    /// Installs the shaper and the backend's queue on `dev` in namespace `ns`.
    pub fn install(&self, ns: &str, dev: &str) -> Result<()> {
        self.validate()?;
        tc(
            ns,
            &[
                "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1",
            ],
        )?;
        self.link_class(ns, dev, "add")?;
        if let Backend::BpfDualpi2(_) = &self.backend {
            return self.install_dual_queue(ns, dev);
        }
        let child = self.backend.child_qdisc(self.buffer_pkts, self.rate_bps);
        let mut args = vec!["qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"];
        args.extend(child.iter().map(String::as_str));
        tc(ns, &args).map_err(|e| match self.backend.kernel_qdisc() {
            Some(q) => e.context(format!(
                "this kernel has no sch_{q} (see `lab doctor`); use bpf-step or bpf-red here, or run \
                 the lab in the stock-kernel VM (`just vm-test`)"
            )),
            None => e,
        })?;
        Ok(())
    }

    /// Moves the installed link on `dev` to `rate_bps` (htb's classes
    /// changed in place: the queues keep what they hold). The BPF switch's
    /// own figure of the rate is [`crate::BpfSwitch::set_rate`]; a kernel
    /// qdisc under the link keeps the rate it was installed with (RED's
    /// `bandwidth` only ages its average over idle time).
    pub fn set_rate(&self, ns: &str, dev: &str, rate_bps: u64) -> Result<()> {
        let moved = self.at_rate(rate_bps);
        moved.validate()?;
        moved.link_class(ns, dev, "change")?;
        if let Backend::BpfDualpi2(_) = &self.backend {
            for leaf in moved.dual_queue_leaves() {
                moved.leaf_class(ns, dev, "change", &leaf)?;
            }
        }
        Ok(())
    }

    /// The link's class 1:1 at the rate (`verb`: add or change).
    fn link_class(&self, ns: &str, dev: &str, verb: &str) -> Result<()> {
        let rate = format!("{}bit", self.rate_bps);
        let burst = self.burst_bytes().to_string();
        tc(
            ns,
            &[
                "class", verb, "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
                "ceil", &rate, "burst", &burst, "cburst", &burst,
            ],
        )
        .map(drop)
    }
}

/// One of DualPI2's htb leaves under the link.
struct Leaf {
    classid: u32,
    handle: &'static str,
    rate_bps: u64,
    prio: &'static str,
}

impl Bottleneck {
    /// DualPI2's two queues under the link's class 1:1: the L leaf (1:10,
    /// priority 0, `100 - classic_protection` % of the link guaranteed) and
    /// the C leaf (1:20, priority 1, `classic_protection` %), each able to
    /// borrow the whole link: L goes first, C keeps its share when both
    /// wait (sch_dualpi2's weighted round robin, by htb). Each leaf's pfifo
    /// takes the whole buffer: the marker holds the limit over both.
    fn install_dual_queue(&self, ns: &str, dev: &str) -> Result<()> {
        let limit = self.buffer_pkts.to_string();
        for leaf in self.dual_queue_leaves() {
            self.leaf_class(ns, dev, "add", &leaf)?;
            let class = format!("1:{:x}", leaf.classid & 0xffff);
            tc(
                ns,
                &[
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "parent",
                    &class,
                    "handle",
                    leaf.handle,
                    "pfifo",
                    "limit",
                    &limit,
                ],
            )?;
        }
        Ok(())
    }

    /// The L and C leaves at this link's rate.
    fn dual_queue_leaves(&self) -> [Leaf; 2] {
        let classic_pct = match &self.backend {
            Backend::BpfDualpi2(d) => d.classic_protection,
            _ => 0,
        };
        let c_rate = (self.rate_bps * u64::from(classic_pct) / 100).max(8);
        let l_rate = self.rate_bps.saturating_sub(c_rate).max(8);
        [
            Leaf {
                classid: L_CLASSID,
                handle: "110:",
                rate_bps: l_rate,
                prio: "0",
            },
            Leaf {
                classid: C_CLASSID,
                handle: "120:",
                rate_bps: c_rate,
                prio: "1",
            },
        ]
    }

    /// A leaf's class: its guaranteed rate, the link's as its ceiling.
    fn leaf_class(&self, ns: &str, dev: &str, verb: &str, leaf: &Leaf) -> Result<()> {
        let burst = self.burst_bytes().to_string();
        let ceil = format!("{}bit", self.rate_bps);
        let class = format!("1:{:x}", leaf.classid & 0xffff);
        let rate = format!("{}bit", leaf.rate_bps);
        tc(
            ns,
            &[
                "class", verb, "dev", dev, "parent", "1:1", "classid", &class, "htb", "rate",
                &rate, "ceil", &ceil, "burst", &burst, "cburst", &burst, "prio", leaf.prio,
            ],
        )
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bottleneck_out_of_range_is_refused_by_name() {
        Bottleneck::step(100_000_000, 425, 20).validate().unwrap();
        let e = |b: Bottleneck| b.validate().unwrap_err().to_string();
        assert!(e(Bottleneck::step(999_999, 425, 20)).contains("rate"));
        assert!(e(Bottleneck::step(20_000_000_000, 425, 20)).contains("rate"));
        assert!(e(Bottleneck::step(100_000_000, 1, 1)).contains("buffer"));
        assert!(e(Bottleneck::step(100_000_000, 100_001, 20)).contains("buffer"));
        // The backend's own check: K beyond the buffer.
        assert!(Bottleneck::step(100_000_000, 10, 20).validate().is_err());
    }

    /// A step of a rate schedule moves the rate, and with it the token
    /// bucket, and keeps the buffer and the switch.
    #[test]
    fn the_same_link_at_another_rate_keeps_all_but_the_rate() {
        let b = Bottleneck::step(1_000_000_000, 425, 20);
        let twice = b.at_rate(2_000_000_000);
        assert_eq!(twice.rate_bps, 2_000_000_000);
        assert_eq!(twice.burst_bytes(), 10_000);
        assert_eq!(twice.buffer_pkts, 425);
        assert_eq!(twice.backend, b.backend);
    }

    /// 40 us of line rate, never under two packets.
    #[test]
    fn the_token_bucket_holds_40_us_of_line_rate() {
        assert_eq!(
            Bottleneck::step(1_000_000_000, 425, 20).burst_bytes(),
            5_000
        );
        assert_eq!(
            Bottleneck::step(10_000_000_000, 425, 20).burst_bytes(),
            50_000
        );
        assert_eq!(Bottleneck::step(100_000_000, 425, 20).burst_bytes(), 3_028);
    }
}
