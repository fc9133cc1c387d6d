//! ECN-marking backends of the bottleneck: what marks (or drops) when the
//! queue grows. Kernel qdiscs where the kernel has them, BPF anywhere.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::intf::{
    marker_config, marker_mode_MARKER_DUAL, marker_mode_MARKER_DUALPI2, marker_mode_MARKER_PROBE,
    marker_mode_MARKER_RED, marker_mode_MARKER_STEP, red_profile, MARKER_PROB_ONE,
};

/// Bytes one MTU-sized packet occupies in the queue (1500 + Ethernet).
pub const PKT_BYTES: u32 = 1514;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Backend {
    /// No marking: a FIFO that drops at the buffer limit (the TCP baseline).
    Droptail,
    /// BPF on tcx egress: CE when the instantaneous queue holds at least
    /// `k` packets; non-ECN packets dropped there instead.
    BpfStep { k: u32 },
    /// RED in BPF on the average queue (packets), marking instead of dropping.
    BpfRed {
        min: u32,
        max: u32,
        max_p: f64,
        wlog: u32,
    },
    /// Seed 002's dual AQM in BPF: one queue, two RED profiles on their own
    /// averages of its backlog; ECN-capable packets marked by `ect`,
    /// the others dropped by `not_ect`.
    BpfDual {
        ect: RedProfile,
        not_ect: RedProfile,
    },
    /// RFC 9332's DualPI2 in BPF: two htb leaves (L and C) under the link,
    /// the marker classifying into them and marking or dropping by the
    /// coupled PI2 probability (src/dualpi2.rs).
    BpfDualpi2(crate::dualpi2::Dualpi2),
    /// The kernel's sch_red with `ecn`, thresholds in packets.
    /// [`Backend::red_step`] makes it Mininet's DCTCP switch.
    Red {
        min: u32,
        max: u32,
        probability: f64,
    },
    /// The kernel's fq_codel with `ce_threshold` (microseconds).
    FqCodel { ce_threshold_us: u32 },
}

/// A backend as the lab's command lines name it (`--variants
/// bpf_dctcp:red`): one threshold, K, sets it up ([`Marking::at`]). The one
/// place a backend's name is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Marking {
    Droptail,
    BpfStep,
    BpfRed,
    BpfDualpi2,
    Red,
    #[serde(rename = "fq_codel")]
    FqCodel,
}

impl Marking {
    pub const ALL: [Marking; 6] = [
        Marking::Droptail,
        Marking::BpfStep,
        Marking::BpfRed,
        Marking::BpfDualpi2,
        Marking::Red,
        Marking::FqCodel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Marking::Droptail => "droptail",
            Marking::BpfStep => "bpf-step",
            Marking::BpfRed => "bpf-red",
            Marking::BpfDualpi2 => "bpf-dualpi2",
            Marking::Red => "red",
            Marking::FqCodel => "fq_codel",
        }
    }

    /// Whether it marks at all (everything but droptail).
    pub fn marks(self) -> bool {
        self != Marking::Droptail
    }

    /// The backend marking at K packets on a link of `rate_bps`: a step at
    /// K (BPF, or sch_red as Mininet's DCTCP switch), RED from K to 3K, or
    /// fq_codel's ce_threshold at the time K packets take at the rate.
    /// DualPI2 takes its own defaults (a 1 ms step, a 15 ms target): K does
    /// not set it.
    pub fn at(self, k: u32, rate_bps: u64) -> Backend {
        match self {
            Marking::Droptail => Backend::Droptail,
            Marking::BpfStep => Backend::BpfStep { k },
            Marking::BpfRed => Backend::BpfRed {
                min: k,
                max: 3 * k,
                max_p: 0.1,
                wlog: 9,
            },
            Marking::Red => Backend::red_step(k),
            Marking::BpfDualpi2 => Backend::BpfDualpi2(Default::default()),
            Marking::FqCodel => Backend::FqCodel {
                ce_threshold_us: ((u64::from(k) * u64::from(PKT_BYTES) * 8 * 1_000_000)
                    / rate_bps.max(1))
                .max(1) as u32,
            },
        }
    }
}

impl std::str::FromStr for Marking {
    type Err = String;

    fn from_str(s: &str) -> Result<Marking, String> {
        Marking::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Marking::ALL.iter().map(|m| m.name()).collect();
                format!("backend `{s}`: use {}", names.join(", "))
            })
    }
}

impl std::fmt::Display for Marking {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Droptail => "droptail",
            Backend::BpfStep { .. } => "bpf-step",
            Backend::BpfRed { .. } => "bpf-red",
            Backend::BpfDual { .. } => "bpf-dual",
            Backend::BpfDualpi2(_) => "bpf-dualpi2",
            Backend::Red { .. } => "red",
            Backend::FqCodel { .. } => "fq_codel",
        }
    }

    /// RED as a step at K packets, the way mininet-tests configured DCTCP.
    pub fn red_step(k: u32) -> Backend {
        Backend::Red {
            min: k,
            max: k + 1,
            probability: 1.0,
        }
    }

    /// Whether the marker drops arrivals at the limit itself (DualPI2: the
    /// limit is both queues'), where the others leave that to the qdisc,
    /// which counts it.
    pub fn marker_holds_limit(&self) -> bool {
        matches!(self, Backend::BpfDualpi2(_))
    }

    /// Kernel qdisc this backend needs (module name), if any.
    pub fn kernel_qdisc(&self) -> Option<&'static str> {
        match self {
            Backend::Red { .. } => Some("red"),
            Backend::FqCodel { .. } => Some("fq_codel"),
            _ => None,
        }
    }

    /// Refuses a BPF marker on a kernel older than `MARKER_KERNEL` (it runs
    /// on tcx), naming what marks there instead.
    pub fn runs_on(&self, kernel: (u32, u32)) -> Result<()> {
        let bpf = matches!(
            self,
            Backend::BpfStep { .. }
                | Backend::BpfRed { .. }
                | Backend::BpfDual { .. }
                | Backend::BpfDualpi2(_)
        );
        let need = crate::marker::MARKER_KERNEL;
        anyhow::ensure!(
            !bpf || kernel >= need,
            "{}: the BPF markers run on tcx, Linux {}.{} or later (this kernel: {}.{}); here the \
             kernel's qdiscs mark instead: backend red (a step at K, as Mininet's DCTCP switch) or \
             fq_codel (e.g. `lab queue --variants bpf_dctcp:red`)",
            self.name(),
            need.0,
            need.1,
            kernel.0,
            kernel.1
        );
        Ok(())
    }

    /// Checks the parameters against the buffer; the message gives the range.
    pub fn validate(&self, buffer_pkts: u32) -> Result<()> {
        match *self {
            Backend::Droptail => {}
            Backend::BpfStep { k } => {
                anyhow::ensure!(
                    k >= 1 && k < buffer_pkts,
                    "bpf-step: K = {k} must be 1..{buffer_pkts} (below the buffer)"
                );
            }
            Backend::BpfRed {
                min,
                max,
                max_p,
                wlog,
            } => {
                anyhow::ensure!(
                    min < max && max <= buffer_pkts,
                    "bpf-red: need min < max <= buffer ({buffer_pkts}), got {min}, {max}"
                );
                anyhow::ensure!(
                    max_p > 0.0 && max_p <= 1.0,
                    "bpf-red: max_p = {max_p} must be in (0, 1]"
                );
                anyhow::ensure!(
                    wlog <= 16,
                    "bpf-red: wlog = {wlog} must be 0..=16 (weight 2^-wlog)"
                );
            }
            Backend::Red {
                min,
                max,
                probability,
            } => {
                anyhow::ensure!(
                    min >= 1 && min < max && max <= buffer_pkts,
                    "red: need 1 <= min < max <= buffer ({buffer_pkts}), got {min}, {max}"
                );
                anyhow::ensure!(
                    probability > 0.0 && probability <= 1.0,
                    "red: probability = {probability} must be in (0, 1]"
                );
            }
            Backend::BpfDual {
                ref ect,
                ref not_ect,
            } => {
                ect.validate("ECT profile", buffer_pkts)?;
                not_ect.validate("Not-ECT profile", buffer_pkts)?;
            }
            Backend::BpfDualpi2(ref d) => d.validate()?,
            Backend::FqCodel { ce_threshold_us } => {
                anyhow::ensure!(
                    ce_threshold_us >= 1,
                    "fq_codel: ce_threshold must be at least 1 us"
                );
            }
        }
        Ok(())
    }

    /// The child qdisc under the shaper: `tc qdisc add ... parent 1:1 <this>`.
    pub fn child_qdisc(&self, buffer_pkts: u32, rate_bps: u64) -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match *self {
            Backend::Droptail
            | Backend::BpfStep { .. }
            | Backend::BpfRed { .. }
            | Backend::BpfDual { .. }
            | Backend::BpfDualpi2(_) => s(&["pfifo", "limit", &buffer_pkts.to_string()]),
            Backend::Red {
                min,
                max,
                probability,
            } => {
                // burst sets RED's averaging weight; min/avpkt + 1 follows the
                // tc-red(8) advice and keeps the average close to the queue.
                // tc finds no weight for burst 2 over a 1-packet min ("burst
                // seems to be too large"): there 1, the average is the queue.
                let burst = if min <= 1 { 1 } else { min + 1 }.to_string();
                s(&[
                    "red",
                    "limit",
                    &(buffer_pkts * PKT_BYTES).to_string(),
                    "min",
                    &(min * PKT_BYTES).to_string(),
                    "max",
                    &(max * PKT_BYTES).to_string(),
                    "avpkt",
                    &PKT_BYTES.to_string(),
                    "burst",
                    &burst,
                    "bandwidth",
                    &format!("{rate_bps}bit"),
                    "probability",
                    &probability.to_string(),
                    "ecn",
                ])
            }
            // CoDel's own target (5 ms by default) would mark too, below
            // K at low rates; keep it above the threshold so ce_threshold is
            // the marker under test.
            Backend::FqCodel { ce_threshold_us } => {
                let target = (4 * ce_threshold_us).max(5_000);
                let interval = (20 * ce_threshold_us).max(100_000);
                s(&[
                    "fq_codel",
                    "limit",
                    &buffer_pkts.to_string(),
                    "ce_threshold",
                    &format!("{ce_threshold_us}us"),
                    "target",
                    &format!("{target}us"),
                    "interval",
                    &format!("{interval}us"),
                    "ecn",
                ])
            }
        }
    }

    /// What the BPF program on the bottleneck does for this backend. It
    /// always probes; it marks only for the BPF backends. What depends on
    /// the link's rate is the switch's `link_rate` ([`crate::marker::link_rate`]),
    /// which can change mid-run.
    pub fn marker_config(&self, buffer_pkts: u32, sample: u32) -> marker_config {
        let mut c = marker_config {
            mode: marker_mode_MARKER_PROBE,
            sample,
            ..Default::default()
        };
        match *self {
            Backend::BpfStep { k } => {
                c.mode = marker_mode_MARKER_STEP;
                c.k_pkts = k;
            }
            Backend::BpfRed {
                min,
                max,
                max_p,
                wlog,
            } => {
                c.mode = marker_mode_MARKER_RED;
                c.red_min = min;
                c.red_max = max;
                c.red_max_p = (max_p * f64::from(MARKER_PROB_ONE)).round() as u32;
                c.red_wlog = wlog;
            }
            Backend::BpfDual {
                ref ect,
                ref not_ect,
            } => {
                c.mode = marker_mode_MARKER_DUAL;
                c.ect = ect.to_bpf();
                c.not_ect = not_ect.to_bpf();
            }
            Backend::BpfDualpi2(ref d) => {
                c.mode = marker_mode_MARKER_DUALPI2;
                c.dualpi2 = d.to_bpf();
            }
            _ => {}
        }
        // pfifo drops an arrival that finds the queue full; the probe can say
        // so. RED and fq_codel drop by their own rules.
        if self.kernel_qdisc().is_none() {
            c.limit_pkts = buffer_pkts;
        }
        c
    }
}

/// One RED profile of [`Backend::BpfDual`], thresholds in bytes of backlog.
/// `min == max` is a step at `min` (DCTCP's K when `weight` is 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RedProfile {
    pub min_bytes: u32,
    pub max_bytes: u32,
    /// Probability of a mark (or drop) as the average reaches max; every
    /// packet of the class at or above it.
    pub max_p: f64,
    /// The average's weight per arrival, rounded to a power of two
    /// ([`RedProfile::wlog`]); 1 follows the instantaneous queue.
    pub weight: f64,
}

/// The smallest weight the BPF average can apply: 2^-16.
pub const RED_WEIGHT_MIN: f64 = 1.0 / 65536.0;

impl RedProfile {
    /// DCTCP's step: every packet when the queue holds at least `k_bytes`.
    pub fn step(k_bytes: u32) -> RedProfile {
        RedProfile {
            min_bytes: k_bytes,
            max_bytes: k_bytes,
            max_p: 1.0,
            weight: 1.0,
        }
    }

    /// `w = 2^-wlog`, the power of two nearest `weight` (0.002 is 2^-9,
    /// 0.00195): what the BPF average uses, as the kernel's sch_red does.
    pub fn wlog(&self) -> u32 {
        (-self.weight.log2()).round().clamp(0.0, 16.0) as u32
    }

    /// The weight really applied, 2^-wlog.
    pub fn effective_weight(&self) -> f64 {
        (-f64::from(self.wlog())).exp2()
    }

    fn validate(&self, what: &str, buffer_pkts: u32) -> Result<()> {
        let limit = u64::from(buffer_pkts) * u64::from(PKT_BYTES);
        anyhow::ensure!(
            self.min_bytes >= 1 && self.min_bytes <= self.max_bytes,
            "bpf-dual {what}: need 1 <= min <= max bytes, got min {} max {}",
            self.min_bytes,
            self.max_bytes
        );
        anyhow::ensure!(
            u64::from(self.max_bytes) <= limit,
            "bpf-dual {what}: max {} bytes above the buffer ({buffer_pkts} packets, {limit} bytes)",
            self.max_bytes
        );
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.max_p),
            "bpf-dual {what}: max_p = {} must be in [0, 1]",
            self.max_p
        );
        anyhow::ensure!(
            self.weight >= RED_WEIGHT_MIN && self.weight <= 1.0,
            "bpf-dual {what}: weight = {} must be in [2^-16, 1] (0 would never move the average)",
            self.weight
        );
        Ok(())
    }

    fn to_bpf(&self) -> red_profile {
        red_profile {
            min_bytes: self.min_bytes,
            max_bytes: self.max_bytes,
            max_p: (self.max_p * f64::from(MARKER_PROB_ONE)).round() as u32,
            wlog: self.wlog(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only DualPI2 drops at the limit itself (both queues' limit); the
    /// others' pfifo or kernel qdisc does, and counts it.
    #[test]
    fn only_dualpi2_holds_the_limit_in_the_marker() {
        assert!(Backend::BpfDualpi2(Default::default()).marker_holds_limit());
        for b in [
            Backend::Droptail,
            Backend::BpfStep { k: 4 },
            Backend::red_step(4),
        ] {
            assert!(!b.marker_holds_limit(), "{b:?}");
        }
    }

    /// DualPI2's marker config: its mode, its parameters, the buffer as the
    /// limit over both queues.
    #[test]
    fn dualpi2_configures_the_marker_with_its_parameters() {
        let d = crate::dualpi2::Dualpi2::default();
        let c = Backend::BpfDualpi2(d.clone()).marker_config(425, 1);
        assert_eq!(c.mode, crate::intf::marker_mode_MARKER_DUALPI2);
        let want = d.to_bpf();
        assert_eq!(
            (
                c.dualpi2.step_ns,
                c.dualpi2.alpha,
                c.dualpi2.target_ns,
                c.dualpi2.l_classid
            ),
            (want.step_ns, want.alpha, want.target_ns, want.l_classid)
        );
        assert_eq!(c.limit_pkts, 425);
    }

    #[test]
    fn each_marking_reads_its_own_name_and_builds_that_backend_at_k() {
        for m in Marking::ALL {
            assert_eq!(m.name().parse::<Marking>(), Ok(m));
            let b = m.at(20, 100_000_000);
            assert_eq!(b.name(), m.name());
            assert!(b.validate(425).is_ok(), "{b:?}");
            assert_eq!(m.marks(), b != Backend::Droptail);
        }
        // 20 packets of 1514 bytes take 2,422 us at 100 Mbit/s.
        assert_eq!(
            Marking::FqCodel.at(20, 100_000_000),
            Backend::FqCodel {
                ce_threshold_us: 2422
            }
        );
        assert_eq!(Marking::BpfStep.at(9, 1), Backend::BpfStep { k: 9 });
        // RED from K to 3K.
        assert!(matches!(
            Marking::BpfRed.at(20, 100_000_000),
            Backend::BpfRed {
                min: 20,
                max: 60,
                ..
            }
        ));
        assert_eq!(Marking::Red.at(20, 1).kernel_qdisc(), Some("red"));
        assert_eq!(Marking::FqCodel.at(20, 1).kernel_qdisc(), Some("fq_codel"));
        assert_eq!(Marking::BpfRed.at(20, 1).kernel_qdisc(), None);
        assert_eq!(Marking::FqCodel.to_string(), "fq_codel");
        let e = "pie".parse::<Marking>().unwrap_err();
        assert!(
            e.contains("`pie`") && e.contains("bpf-step") && e.contains("fq_codel"),
            "{e}"
        );
        assert_eq!(
            serde_json::to_string(&Marking::FqCodel).unwrap(),
            "\"fq_codel\""
        );
        assert_eq!(
            serde_json::to_string(&Marking::BpfStep).unwrap(),
            "\"bpf-step\""
        );
    }

    /// The tc words of each child qdisc, in bytes where tc wants bytes.
    #[test]
    fn child_qdiscs_in_tcs_words() {
        let words = |b: Backend| b.child_qdisc(100, 20_000_000).join(" ");
        assert_eq!(words(Backend::BpfStep { k: 5 }), "pfifo limit 100");
        assert_eq!(
            words(Backend::red_step(20)),
            "red limit 151400 min 30280 max 31794 avpkt 1514 burst 21 bandwidth 20000000bit probability 1 ecn"
        );
        // CoDel's target and interval well above ce_threshold (4 and 20
        // times it), or its defaults where those are larger.
        assert_eq!(
            words(Backend::FqCodel {
                ce_threshold_us: 10_000
            }),
            "fq_codel limit 100 ce_threshold 10000us target 40000us interval 200000us ecn"
        );
        assert_eq!(
            words(Backend::FqCodel {
                ce_threshold_us: 100
            }),
            "fq_codel limit 100 ce_threshold 100us target 5000us interval 100000us ecn"
        );
    }

    /// A backend that does not mark still probes, one arrival in `sample`.
    #[test]
    fn every_backend_probes_at_its_sample() {
        let c = Backend::Droptail.marker_config(100, 7);
        assert_eq!((c.mode, c.sample), (marker_mode_MARKER_PROBE, 7));
        let c = Backend::BpfStep { k: 5 }.marker_config(100, 3);
        assert_eq!(
            (c.mode, c.sample, c.k_pkts),
            (marker_mode_MARKER_STEP, 3, 5)
        );
    }

    #[test]
    fn validation_gives_ranges() {
        assert!(Backend::BpfStep { k: 20 }.validate(100).is_ok());
        assert!(Backend::BpfStep { k: 0 }.validate(100).is_err());
        assert!(Backend::BpfStep { k: 100 }
            .validate(100)
            .unwrap_err()
            .to_string()
            .contains("1..100"));
        assert!(Backend::red_step(20).validate(425).is_ok());
        assert!(Backend::Red {
            min: 30,
            max: 20,
            probability: 1.0
        }
        .validate(425)
        .is_err());
        assert!(Backend::BpfRed {
            min: 5,
            max: 15,
            max_p: 0.0,
            wlog: 9
        }
        .validate(100)
        .is_err());
        assert!(Backend::FqCodel { ce_threshold_us: 0 }
            .validate(100)
            .is_err());
    }

    #[test]
    fn bpf_markers_are_refused_before_tcx_and_kernel_qdiscs_are_not() {
        let step = Backend::BpfStep { k: 20 };
        let e = step.runs_on((6, 1)).unwrap_err().to_string();
        assert!(
            e.contains("bpf-step") && e.contains("Linux 6.6 or later (this kernel: 6.1)"),
            "{e}"
        );
        assert!(step.runs_on((6, 5)).is_err());
        step.runs_on((6, 6)).unwrap();
        for ok in [
            Backend::red_step(20),
            Backend::FqCodel {
                ce_threshold_us: 500,
            },
            Backend::Droptail,
        ] {
            ok.runs_on((6, 1)).unwrap();
        }
    }

    #[test]
    fn red_step_matches_mininet_shape() {
        let args = Backend::red_step(20)
            .child_qdisc(425, 100_000_000)
            .join(" ");
        assert!(args.contains("min 30280 max 31794"), "{args}");
        assert!(args.contains("burst 21 "), "{args}");
        assert!(args.ends_with("probability 1 ecn"), "{args}");
        // At K = 1 tc takes burst 1 only.
        let one = Backend::red_step(1).child_qdisc(425, 20_000_000).join(" ");
        assert!(
            one.contains("min 1514 max 3028 avpkt 1514 burst 1 "),
            "{one}"
        );
    }

    #[test]
    fn marker_modes() {
        assert_eq!(Backend::BpfStep { k: 20 }.marker_config(100, 1).k_pkts, 20);
        assert_eq!(
            Backend::Droptail.marker_config(100, 1).mode,
            marker_mode_MARKER_PROBE
        );
        assert_eq!(Backend::Droptail.marker_config(100, 1).limit_pkts, 100);
        assert_eq!(
            Backend::FqCodel {
                ce_threshold_us: 1000
            }
            .marker_config(100, 1)
            .limit_pkts,
            0
        );
        let red = Backend::BpfRed {
            min: 5,
            max: 15,
            max_p: 0.1,
            wlog: 9,
        }
        .marker_config(100, 1);
        assert_eq!(red.red_max_p, 6554);
    }

    fn reno_profile(min: u32) -> RedProfile {
        RedProfile {
            min_bytes: min,
            max_bytes: 3 * min,
            max_p: 0.1,
            weight: 0.002,
        }
    }

    #[test]
    fn dual_profiles_reach_the_program() {
        let b = Backend::BpfDual {
            ect: RedProfile::step(8_984),
            not_ect: reno_profile(3_906),
        };
        b.validate(200).unwrap();
        let c = b.marker_config(200, 1);
        assert_eq!(c.mode, marker_mode_MARKER_DUAL);
        assert_eq!(
            (c.ect.min_bytes, c.ect.max_bytes, c.ect.max_p, c.ect.wlog),
            (8_984, 8_984, 65_536, 0)
        );
        assert_eq!(
            (
                c.not_ect.min_bytes,
                c.not_ect.max_bytes,
                c.not_ect.max_p,
                c.not_ect.wlog
            ),
            (3_906, 11_718, 6_554, 9)
        );
        assert_eq!(c.limit_pkts, 200);
        assert!((reno_profile(1).effective_weight() - 0.001_953_125).abs() < 1e-12);
    }

    #[test]
    fn dual_refuses_what_red_cannot_mean() {
        let dual = |ect: RedProfile| Backend::BpfDual {
            ect,
            not_ect: reno_profile(3_906),
        };
        let err = |b: Backend| b.validate(200).unwrap_err().to_string();
        let mut p = RedProfile::step(9_000);
        p.min_bytes = 10_000;
        assert!(err(dual(p)).contains("min <= max"));
        assert!(err(dual(RedProfile::step(0))).contains("1 <= min"));
        assert!(err(dual(RedProfile::step(400_000))).contains("above the buffer"));
        let mut p = RedProfile::step(9_000);
        p.max_p = 1.5;
        assert!(err(dual(p)).contains("[0, 1]"));
        let mut p = RedProfile::step(9_000);
        p.weight = 0.0;
        assert!(err(dual(p.clone())).contains("weight"));
        p.weight = 1.5;
        assert!(err(dual(p)).contains("weight"));
        let mut p = RedProfile::step(9_000);
        p.max_p = 0.0;
        assert!(dual(p).validate(200).is_ok(), "a slope of 0 is a profile");
    }
}
