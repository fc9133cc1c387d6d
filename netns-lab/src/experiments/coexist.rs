//! `lab coexist` (seed 002): DCTCP beside Reno through one queue.
//!
//! Seed 002's dual AQM is WRED keyed on ECN capability: one queue, two RED
//! profiles on their own averages of it. ECN-capable packets (DCTCP's) are
//! marked by a DCTCP profile, a step at K on the instantaneous queue or a
//! RED slope; Not-ECT packets (Reno's, which never negotiates ECN here) are
//! dropped by a classic RED profile: w 0.002, Max_Prob 0.1, Max_Thresh =
//! 3 Min_Thresh. The switch is the BPF marker's `bpf-dual` backend.
//!
//! Parts, each a set of runs of long flows at 10 Mbit/s and 25 ms (the
//! seed's BDP of 31,250 bytes):
//! - `step`: for each Min_Thresh_Reno M, K / M over a grid (Fig. 5); the
//!   K / M of maximum fairness with its utilization and queue beside two
//!   Reno flows at the same M (Table I);
//! - `flows`: N DCTCP flows against one Reno flow at M = BDP / 8 (Fig. 6);
//! - `slope`: M = BDP, Max_Prob_DCTCP over a grid for several
//!   Min_Thresh_DCTCP (Figs. 7-9), the maximum-fairness points beside the
//!   seed's rule (its equation 3);
//! - `equal`: the rule's configurations over M (Fig. 10);
//! - `starvation`: the motivation, the same flows through one step marker
//!   that marks ECT and drops Not-ECT at the same K.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use tc_qdisc::backend::PKT_BYTES;
use tc_qdisc::{Backend, Bottleneck, RedProfile};

use crate::experiments::Sweep;
use crate::measure::scenario::{Outcome, Scenario};
use crate::net::delay::{
    fmt_duration, parse_duration, summary_lines, DelayBackend, RoundTrip, Rtt, RttMeasured,
};
use crate::net::topology::sender_addr;
use crate::net::topology::SEGMENT_BYTES;
use crate::report::plot::{self, Chart, Series};
use crate::report::results::ResultsDir;
use crate::report::model::{Cell, Columns, Figure, Fmt, Report, Table};
use crate::report::tables::{repairs_line, Repairs};
use crate::stats::jain;
use crate::traffic::cc::{LabCc, KDCTCP_ALL_FOUR};
use crate::units::{fmt_rate, parse_fraction, parse_rate};
use loader::algo::Algo;

/// Seed 002's Reno profile: RED's recommended weight and Max_Prob, and
/// Max_Thresh three times Min_Thresh.
pub const RENO_WEIGHT: f64 = 0.002;
pub const RENO_MAX_P: f64 = 0.1;
pub const RENO_MAX_OVER_MIN: u32 = 3;

/// Seed 002's Table I: M (in BDPs), K / M at maximum fairness, utilization
/// and queue occupancy (BDPs) with one DCTCP and one Reno flow, then with
/// two Reno flows.
pub const SEED_TABLE_I: [(f64, f64, f64, f64, f64, f64); 5] = [
    (0.125, 2.3, 0.98, 0.207, 0.946, 0.216),
    (0.25, 1.73, 0.987, 0.335, 0.968, 0.336),
    (0.5, 1.34, 0.996, 0.548, 0.986, 0.524),
    (
        std::f64::consts::FRAC_1_SQRT_2,
        1.26,
        0.999,
        0.724,
        0.995,
        0.679,
    ),
    (1.0, 1.16, 1.000, 0.99, 0.999, 0.914),
];

/// The DCTCP beside Reno.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Dctcp {
    /// bpf_dctcp: the 6.18 kernel's dctcp (alpha at 1/2^10, once per window).
    BpfDctcp,
    /// bpf_kdctcp with all four of seed 002's modifications (alpha per ACK
    /// at g = 1/2^8 and 1/2^20 resolution, growth in CWR, progressive
    /// cut): the DCTCP the seed ran its dual AQM with.
    Seed002,
}

impl Dctcp {
    pub fn label(self) -> &'static str {
        match self {
            Dctcp::BpfDctcp => "bpf_dctcp",
            Dctcp::Seed002 => "bpf_kdctcp with seed 002's four modifications",
        }
    }

    fn attach(self) -> Result<LabCc> {
        match self {
            Dctcp::BpfDctcp => LabCc::attach(Algo::Dctcp, vec![]),
            Dctcp::Seed002 => LabCc::attach(
                Algo::Kdctcp,
                KDCTCP_ALL_FOUR
                    .iter()
                    .map(|a| a.parse().map_err(anyhow::Error::msg))
                    .collect::<Result<_>>()?,
            ),
        }
    }
}

/// The parts of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// DCTCP's profile a step at K, K / M swept (Fig. 5, Table I).
    Step,
    /// N DCTCP flows against one Reno flow at M = BDP / 8 (Fig. 6).
    Flows,
    /// DCTCP's profile a RED slope, Max_Prob swept (Figs. 7-9).
    Slope,
    /// The equal-sharing rule's configurations over M (Fig. 10).
    Equal,
    /// One step marker for both classes: the starvation the seed set out to
    /// avoid.
    Starvation,
}

/// DCTCP beside Reno through one queue: seed 002's dual AQM.
///
/// bpf_dctcp (ECN; or, with --dctcp seed002, bpf_kdctcp with seed 002's
/// four modifications) and the kernel's reno (ECN off) share a 10 Mbit/s
/// bottleneck at 25 ms through `bpf-dual`: one queue, two RED profiles
/// on their own averages of it, ECN-capable packets marked by the DCTCP
/// profile, Not-ECT packets dropped by the Reno profile (Min_Thresh M,
/// Max_Thresh 3 M, Max_Prob 0.1, w 0.002). Parts: step (K / M swept per
/// M, the seed's Fig. 5 and Table I with a two-Reno baseline), flows (N
/// DCTCP against one Reno, Fig. 6), slope (Max_Prob_DCTCP swept, Figs.
/// 7-9, beside the seed's equation 3), equal (the equal-sharing rule
/// over M, Fig. 10), starvation (one step marker for both classes).
/// About 55 min by default. Writes results/coexist/<timestamp>/:
/// runs.csv, runs.json, step.png, flows.png, slope.png,
/// max_fairness.png, equal.png, summary.md (our Table I beside the
/// seed's).
#[derive(Debug, Clone, clap::Args)]
pub struct CoexistArgs {
    /// Short runs of a few points for tests and a first look: M = BDP / 4
    /// at K / M = 1 and 3 with the two-Reno baseline, the rule at
    /// M = BDP / 2, and the starvation baseline; 12 s runs.
    #[arg(long)]
    pub quick: bool,
    /// Which parts to run, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub parts: Option<Vec<Part>>,
    /// Bottleneck rate (the seed's 10 Mbit/s).
    #[arg(long, value_parser = parse_rate, default_value = "10M")]
    pub rate: u64,
    /// Round trip of every flow (the seed's 25 ms; BDP = rate x RTT).
    #[arg(long, value_parser = parse_duration, default_value = "25ms")]
    pub rtt: Duration,
    /// What adds the round trip (netem where the kernel has it, else the
    /// lab's delay element).
    #[arg(long, value_enum, default_value = "auto")]
    pub delay_backend: DelayBackend,
    /// The DCTCP: bpf_dctcp, or seed 002's own (bpf_kdctcp with its four
    /// modifications).
    #[arg(long, value_enum, default_value = "bpf-dctcp")]
    pub dctcp: Dctcp,
    /// Long DCTCP flows (ECN-capable), one sender each, in the step,
    /// slope, equal and starvation parts.
    #[arg(long, default_value_t = 1)]
    pub dctcp_flows: usize,
    /// Long reno flows without ECN, one sender each, in the step, slope,
    /// equal and starvation parts (the flows part runs one). The step
    /// part's baseline runs dctcp-flows + reno-flows Reno flows.
    #[arg(long, default_value_t = 1)]
    pub reno_flows: usize,
    /// Min_Thresh_Reno values M, in BDPs, comma-separated; fractions as
    /// 1/8 (default 1/8,1/4,1/2,0.7071,1, the seed's Table I rows).
    #[arg(long, value_delimiter = ',', value_parser = parse_fraction)]
    pub m: Option<Vec<f64>>,
    /// K / M values of the step part, comma-separated (default 1 to 3 in
    /// steps of 0.25); the flows part takes every other one.
    #[arg(long, value_delimiter = ',', value_parser = parse_fraction)]
    pub k_ratios: Option<Vec<f64>>,
    /// The flows part: N = 1 .. this many DCTCP flows against one Reno flow.
    #[arg(long, default_value_t = 5)]
    pub n_max: usize,
    /// The slope part: Min_Thresh_DCTCP values in BDPs (default
    /// 1/4,1/2,3/4; M = 1 BDP there), Max_Thresh_DCTCP 2 BDP above each.
    #[arg(long, value_delimiter = ',', value_parser = parse_fraction)]
    pub slope_min: Option<Vec<f64>>,
    /// The slope part: Max_Prob_DCTCP values (default
    /// 0,0.1,0.15,0.2,0.3,0.4,0.6,1).
    #[arg(long, value_delimiter = ',', value_parser = parse_fraction)]
    pub slope_max_p: Option<Vec<f64>>,
    /// The equal part: M values in BDPs (default 0.2,0.3,0.5,0.7,1). Each
    /// gets Max_Prob_Reno 0.1 / M, Max_Prob_DCTCP 0.2 / M and
    /// Min_Thresh_DCTCP M / 2 (the seed's Fig. 10); M must be at least 0.2
    /// so that 0.2 / M is a probability.
    #[arg(long, value_delimiter = ',', value_parser = parse_fraction)]
    pub equal_m: Option<Vec<f64>>,
    /// Seconds per run (default 30, 12 with --quick); the first third is
    /// not measured (RED's slow average and Reno's first cuts).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Bottleneck buffer, packets: deeper than every threshold, so that
    /// only the profiles act.
    #[arg(long, default_value_t = 200)]
    pub buffer: u32,
    /// Results directory (default results/coexist/<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl CoexistArgs {
    pub fn config(&self) -> CoexistConfig {
        let q = self.quick;
        let or = |v: &Option<Vec<f64>>, full: &[f64], quick: &[f64]| {
            v.clone()
                .unwrap_or_else(|| if q { quick.to_vec() } else { full.to_vec() })
        };
        let duration =
            Duration::from_secs_f64(self.duration.unwrap_or(if q { 12.0 } else { 30.0 }));
        CoexistConfig {
            parts: self.parts.clone().unwrap_or_else(|| {
                if q {
                    vec![Part::Step, Part::Equal, Part::Starvation]
                } else {
                    vec![
                        Part::Step,
                        Part::Flows,
                        Part::Slope,
                        Part::Equal,
                        Part::Starvation,
                    ]
                }
            }),
            dctcp: self.dctcp,
            rate_bps: self.rate,
            rtt: self.rtt,
            delay_backend: self.delay_backend,
            dctcp_flows: self.dctcp_flows,
            reno_flows: self.reno_flows,
            m: or(
                &self.m,
                &[0.125, 0.25, 0.5, std::f64::consts::FRAC_1_SQRT_2, 1.0],
                &[0.25],
            ),
            k_ratios: or(
                &self.k_ratios,
                &[1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0],
                &[1.0, 3.0],
            ),
            n_max: self.n_max,
            slope_min: or(&self.slope_min, &[0.25, 0.5, 0.75], &[0.5]),
            slope_max_p: or(
                &self.slope_max_p,
                &[0.0, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 1.0],
                &[0.1, 0.4],
            ),
            equal_m: or(&self.equal_m, &[0.2, 0.3, 0.5, 0.7, 1.0], &[0.5]),
            duration,
            warmup: duration / 3,
            buffer_pkts: self.buffer,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct CoexistConfig {
    pub parts: Vec<Part>,
    pub dctcp: Dctcp,
    pub rate_bps: u64,
    pub rtt: Duration,
    pub delay_backend: DelayBackend,
    pub dctcp_flows: usize,
    pub reno_flows: usize,
    pub m: Vec<f64>,
    pub k_ratios: Vec<f64>,
    pub n_max: usize,
    pub slope_min: Vec<f64>,
    pub slope_max_p: Vec<f64>,
    pub equal_m: Vec<f64>,
    pub duration: Duration,
    pub warmup: Duration,
    pub buffer_pkts: u32,
}

/// The flows part's Min_Thresh_Reno: the seed's BDP / 8.
const FLOWS_M: f64 = 0.125;
/// The slope part's Min_Thresh_Reno: one BDP.
const SLOPE_M: f64 = 1.0;
/// Senders a star takes here (one per flow).
const FLOWS_MAX: usize = 16;

impl CoexistConfig {
    /// rate x RTT, bytes (the seed's 31,250 at 10 Mbit/s and 25 ms).
    pub fn bdp_bytes(&self) -> f64 {
        self.rate_bps as f64 / 8.0 * self.rtt.as_secs_f64()
    }

    /// Each receiver's window cap, packets: one BDP plus half the buffer.
    /// Reno at the seed's deepest profile (Max_Thresh 3 BDP) needs 4 BDP
    /// (84 packets at the seed's 21), under it; a window the kernel issue
    /// corrupts (README "Known issue") cannot burst past the buffer (a
    /// quick run without it tail-dropped 198 packets of such a burst).
    pub fn window_cap_pkts(&self) -> u32 {
        let need = (self.bdp_bytes() / f64::from(PKT_BYTES)).ceil() + f64::from(self.buffer_pkts / 2);
        crate::measure::scenario::window_cap_pkts(need, 1.0, 0)
    }

    fn bytes(&self, bdps: f64) -> u32 {
        (bdps * self.bdp_bytes()).round().max(1.0) as u32
    }

    /// Seed 002's Reno profile at Min_Thresh `m` BDPs with Max_Prob `max_p`.
    fn reno(&self, m: f64, max_p: f64) -> RedProfile {
        RedProfile {
            min_bytes: self.bytes(m),
            max_bytes: RENO_MAX_OVER_MIN * self.bytes(m),
            max_p,
            weight: RENO_WEIGHT,
        }
    }

    /// A DCTCP slope from `min` BDPs to 2 BDP above it (the seed keeps the
    /// distance of the thresholds fixed, 2 BDP at M = 1), weight as Reno's.
    fn dctcp_slope(&self, min: f64, span: f64, max_p: f64) -> RedProfile {
        RedProfile {
            min_bytes: self.bytes(min),
            max_bytes: self.bytes(min + span),
            max_p,
            weight: RENO_WEIGHT,
        }
    }

    fn dual(&self, ect: RedProfile, not_ect: RedProfile) -> Bottleneck {
        Bottleneck {
            rate_bps: self.rate_bps,
            buffer_pkts: self.buffer_pkts,
            backend: Backend::BpfDual { ect, not_ect },
        }
    }

    /// Every run of the configured parts, in order.
    pub fn plan(&self) -> Vec<Plan> {
        let (nd, nr) = (self.dctcp_flows, self.reno_flows);
        let mut v = Vec::new();
        for &part in &self.parts {
            match part {
                Part::Step => {
                    for &m in &self.m {
                        for &r in &self.k_ratios {
                            v.push(Plan {
                                part,
                                m,
                                x: r,
                                dctcp_flows: nd,
                                reno_flows: nr,
                                bottleneck: self.dual(
                                    RedProfile::step(self.bytes(r * m)),
                                    self.reno(m, RENO_MAX_P),
                                ),
                            });
                        }
                        v.push(Plan {
                            part,
                            m,
                            x: 0.0,
                            dctcp_flows: 0,
                            reno_flows: nd + nr,
                            bottleneck: self
                                .dual(RedProfile::step(self.bytes(m)), self.reno(m, RENO_MAX_P)),
                        });
                    }
                }
                Part::Flows => {
                    for n in 1..=self.n_max {
                        for &r in self.k_ratios.iter().step_by(2) {
                            v.push(Plan {
                                part,
                                m: FLOWS_M,
                                x: r,
                                dctcp_flows: n,
                                reno_flows: 1,
                                bottleneck: self.dual(
                                    RedProfile::step(self.bytes(r * FLOWS_M)),
                                    self.reno(FLOWS_M, RENO_MAX_P),
                                ),
                            });
                        }
                    }
                }
                Part::Slope => {
                    for &min in &self.slope_min {
                        for &p in &self.slope_max_p {
                            v.push(Plan {
                                part,
                                m: min,
                                x: p,
                                dctcp_flows: nd,
                                reno_flows: nr,
                                bottleneck: self.dual(
                                    self.dctcp_slope(min, 2.0 * SLOPE_M, p),
                                    self.reno(SLOPE_M, RENO_MAX_P),
                                ),
                            });
                        }
                    }
                }
                Part::Equal => {
                    for &m in &self.equal_m {
                        v.push(Plan {
                            part,
                            m,
                            x: 0.2 / m,
                            dctcp_flows: nd,
                            reno_flows: nr,
                            bottleneck: self.dual(
                                self.dctcp_slope(m / 2.0, 2.0 * m, 0.2 / m),
                                self.reno(m, 0.1 / m),
                            ),
                        });
                    }
                }
                Part::Starvation => {
                    for &m in &[self.m[0], *self.m.last().unwrap_or(&1.0)] {
                        if v.iter().any(|p: &Plan| p.part == part && p.m == m) {
                            continue;
                        }
                        // The BPF step marker: ECT marked and Not-ECT
                        // dropped at the same K, in packets.
                        let k = (self.bytes(m) as f64 / f64::from(PKT_BYTES))
                            .round()
                            .max(1.0) as u32;
                        v.push(Plan {
                            part,
                            m,
                            x: f64::from(k),
                            dctcp_flows: nd,
                            reno_flows: nr,
                            bottleneck: Bottleneck::step(self.rate_bps, self.buffer_pkts, k),
                        });
                    }
                }
            }
        }
        v
    }

    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(!self.parts.is_empty(), "--parts: name at least one part");
        anyhow::ensure!(
            self.rtt >= Duration::from_millis(1) && self.rtt <= Duration::from_secs(1),
            "--rtt {}: 1ms to 1s (the seed's is 25ms)",
            fmt_duration(self.rtt)
        );
        anyhow::ensure!(
            self.dctcp_flows >= 1 && self.reno_flows >= 1,
            "--dctcp-flows and --reno-flows: at least one of each (coexistence needs both)"
        );
        anyhow::ensure!(
            self.dctcp_flows + self.reno_flows <= FLOWS_MAX && self.n_max < FLOWS_MAX,
            "at most {FLOWS_MAX} flows in a run (--dctcp-flows + --reno-flows, --n-max + 1)"
        );
        anyhow::ensure!(
            (1..=FLOWS_MAX - 1).contains(&self.n_max),
            "--n-max {}: 1 to {}",
            self.n_max,
            FLOWS_MAX - 1
        );
        anyhow::ensure!(!self.m.is_empty(), "--m: give at least one Min_Thresh_Reno");
        for &m in self.m.iter().chain(&self.slope_min).chain(&self.equal_m) {
            anyhow::ensure!(
                m > 0.0 && m <= 4.0,
                "a threshold of {m} BDPs: above 0, at most 4"
            );
        }
        for &r in &self.k_ratios {
            anyhow::ensure!(
                (0.25..=8.0).contains(&r),
                "--k-ratios {r}: K / M from 0.25 to 8 (the seed's 1 to 3)"
            );
        }
        for &p in &self.slope_max_p {
            anyhow::ensure!(p <= 1.0, "--slope-max-p {p}: a probability, 0 to 1");
        }
        for &m in &self.equal_m {
            anyhow::ensure!(
                m >= 0.2,
                "--equal-m {m}: at least 0.2 (Max_Prob_DCTCP = 0.2 / M must be at most 1)"
            );
        }
        anyhow::ensure!(
            self.duration >= Duration::from_secs(6) && self.duration <= Duration::from_secs(3600),
            "--duration {:.0} s: 6 to 3600",
            self.duration.as_secs_f64()
        );
        for p in self.plan() {
            p.bottleneck.validate().map_err(|e| {
                e.context(format!(
                    "{} (raise --buffer, now {})",
                    p.label(),
                    self.buffer_pkts
                ))
            })?;
        }
        Ok(())
    }
}

/// One run to make.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub part: Part,
    /// Min_Thresh_Reno in BDPs (the slope part: Min_Thresh_DCTCP).
    pub m: f64,
    /// The swept value: K / M (step, flows), Max_Prob_DCTCP (slope, equal),
    /// K in packets (starvation); 0 for the two-Reno baseline.
    pub x: f64,
    pub dctcp_flows: usize,
    pub reno_flows: usize,
    pub bottleneck: Bottleneck,
}

impl Plan {
    pub fn label(&self) -> String {
        let flows = format!("{}D+{}R", self.dctcp_flows, self.reno_flows);
        match self.part {
            Part::Step if self.dctcp_flows == 0 => format!("step M={:.3} {flows} baseline", self.m),
            Part::Step | Part::Flows => {
                format!("{:?} M={:.3} K/M={:.2} {flows}", self.part, self.m, self.x).to_lowercase()
            }
            Part::Slope => format!("slope MinD={:.3} max_p={:.2} {flows}", self.m, self.x),
            Part::Equal => format!("equal M={:.3} {flows}", self.m),
            Part::Starvation => format!("starvation K={} {flows}", self.x),
        }
    }
}

/// One run's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CoRun {
    pub part: Part,
    pub m: f64,
    pub x: f64,
    pub dctcp_flows: usize,
    pub reno_flows: usize,
    /// Goodput per flow, bit/s, DCTCP's then Reno's.
    pub dctcp_bps: Vec<f64>,
    pub reno_bps: Vec<f64>,
    /// Mean Reno flow over mean DCTCP flow (None without DCTCP flows).
    pub ratio: Option<f64>,
    /// Jain's index over every flow.
    pub jain: f64,
    pub utilization: f64,
    /// Share of the lab's CPU the hypervisor took (Outcome::steal_share).
    pub steal_share: f64,
    /// Mean queue over time, packets, and in BDPs (bytes / rate x RTT).
    pub queue_pkts: f64,
    pub queue_bdp: f64,
    /// The marker's counts per class over the run.
    pub ect_marked: u64,
    pub not_ect_dropped: u64,
    pub ect_dropped: u64,
    pub not_ect_marked: u64,
    pub taildrops: u64,
    /// Reno's packets that arrived ECN-capable at the receiver (must be 0),
    /// and DCTCP's (must not be).
    pub reno_ect_pkts: u64,
    pub dctcp_ect_pkts: u64,
    pub guard_repairs: Repairs,
    pub rtt: RttMeasured,
}

impl CoRun {
    fn of(cfg: &CoexistConfig, p: &Plan, o: &Outcome) -> CoRun {
        let nd = p.dctcp_flows;
        // DCTCP runs on senders 0 .. nd, Reno on the rest.
        let (mut dctcp_bps, mut reno_bps) = (Vec::new(), Vec::new());
        for (f, &bps) in o.flows.iter().zip(&o.goodput_bps) {
            if f.sender < nd {
                dctcp_bps.push(bps)
            } else {
                reno_bps.push(bps)
            }
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let queue_pkts = o.queue_over_time.as_ref().map_or(o.queue.mean, |q| q.mean);
        // A flow at the receiver is its sender's address and port.
        let ect_of = |flows: &[crate::traffic::bulk::FlowResult], dctcp: bool| -> u64 {
            o.rx.iter()
                .filter(|rx| {
                    flows.iter().any(|f| {
                        (f.sender < nd) == dctcp
                            && sender_addr(f.sender) == rx.src
                            && f.sport == rx.sport
                    })
                })
                .map(|f| f.ect_pkts)
                .sum()
        };
        CoRun {
            part: p.part,
            m: p.m,
            x: p.x,
            dctcp_flows: nd,
            reno_flows: p.reno_flows,
            ratio: (nd > 0).then(|| mean(&reno_bps) / mean(&dctcp_bps).max(1.0)),
            jain: jain(&o.goodput_bps),
            dctcp_bps,
            reno_bps,
            utilization: o.utilization,
            steal_share: o.steal_share,
            queue_pkts,
            queue_bdp: queue_pkts * f64::from(PKT_BYTES) / cfg.bdp_bytes(),
            ect_marked: o.marker.ect.marked,
            not_ect_dropped: o.marker.not_ect.dropped,
            ect_dropped: o.marker.ect.dropped,
            not_ect_marked: o.marker.not_ect.marked,
            taildrops: o.marker.taildrop,
            reno_ect_pkts: ect_of(&o.flows, false),
            dctcp_ect_pkts: ect_of(&o.flows, true),
            guard_repairs: o.guard_repairs,
            rtt: o.rtt.clone(),
        }
    }

    fn line(&self) -> String {
        format!(
            "ratio Reno/DCTCP {}, Jain {:.3}, utilization {:.1} %, queue {:.1} packets ({:.3} BDP), marks {}, drops {} (+{} at the limit)",
            self.ratio.map_or("-".into(), |r| format!("{r:.2}")),
            self.jain,
            self.utilization * 100.0,
            self.queue_pkts,
            self.queue_bdp,
            self.ect_marked,
            self.not_ect_dropped,
            self.taildrops
        )
    }
}

/// One planned run: DCTCP (`dctcp`) on the first senders, Reno without
/// ECN on the rest, all at the configured round trip, each receiver's
/// window capped (`window_cap_pkts`).
fn scenario(cfg: &CoexistConfig, p: &Plan, dctcp: &str) -> Scenario {
    let flows = p.dctcp_flows + p.reno_flows;
    let mut scn = Scenario {
        round_trip: Some(RoundTrip::new(Rtt::uniform(cfg.rtt), cfg.delay_backend)),
        no_ecn_senders: (p.dctcp_flows..flows).collect(),
        rwnd_clamp_bytes: Some(cfg.window_cap_pkts() * SEGMENT_BYTES),
        ..Scenario::long_flows(
            &p.label(),
            p.bottleneck.clone(),
            flows,
            dctcp,
            cfg.duration,
            cfg.warmup,
        )
    };
    for f in &mut scn.flows[p.dctcp_flows..] {
        f.cc = "reno".into();
    }
    scn
}

fn run(cfg: &CoexistConfig, out: &ResultsDir, stop: &Arc<AtomicBool>) -> Result<Report> {
    let cc = cfg.dctcp.attach()?;
    let ours = Some(&cc);
    let dctcp = cc.name.clone();
    let plan = cfg.plan();
    let mut runs = Vec::with_capacity(plan.len());
    let mut sweep = Sweep::new(plan.len(), stop);
    for p in &plan {
        let scn = scenario(cfg, p, &dctcp);
        let data = sweep.run(&scn, ours, &p.label())?;
        let r = CoRun::of(cfg, p, &data.outcome);
        sweep.said(&format!("{}: {}", p.label(), r.line()), &data.outcome);
        if r.reno_ect_pkts > 0 {
            bail!(
                "{}: {} of Reno's packets arrived ECN-capable; its sender's tcp_ecn = 0 did not hold",
                p.label(),
                r.reno_ect_pkts
            );
        }
        if p.dctcp_flows > 0 && r.dctcp_ect_pkts == 0 {
            bail!(
                "{}: no DCTCP packet arrived ECN-capable: ECN was not negotiated",
                p.label()
            );
        }
        runs.push(r);
    }
    plots(out, cfg, &runs)?;
    out.write_json("runs.json", &runs)?;
    Ok(report(cfg, &runs))
}

/// The step part's row of Table I for one M: the run of maximum fairness
/// (Jain's index over the flows) and the two-Reno baseline.
#[derive(Clone, Debug, Serialize)]
pub struct TableRow {
    pub m: f64,
    pub k_over_m: f64,
    pub ratio: f64,
    pub jain: f64,
    pub u_dr: f64,
    pub o_dr: f64,
    pub u_2r: Option<f64>,
    pub o_2r: Option<f64>,
    /// Where the rate ratio crosses 1 between two grid points (linear in
    /// log ratio), if it does.
    pub crossing: Option<f64>,
}

/// The thresholds `m` a part ran at, each once, in the order run.
fn distinct_m(runs: &[CoRun], part: Part) -> Vec<f64> {
    let mut ms: Vec<f64> = Vec::new();
    for r in runs.iter().filter(|r| r.part == part) {
        if !ms.contains(&r.m) {
            ms.push(r.m);
        }
    }
    ms
}

pub fn table_i(runs: &[CoRun]) -> Vec<TableRow> {
    distinct_m(runs, Part::Step)
        .iter()
        .filter_map(|&m| {
            let mut at: Vec<&CoRun> = runs
                .iter()
                .filter(|r| r.part == Part::Step && r.m == m && r.dctcp_flows > 0)
                .collect();
            at.sort_by(|a, b| a.x.total_cmp(&b.x));
            let best = at.iter().max_by(|a, b| a.jain.total_cmp(&b.jain))?;
            let base = runs
                .iter()
                .find(|r| r.part == Part::Step && r.m == m && r.dctcp_flows == 0);
            let crossing = at.windows(2).find_map(|w| {
                let (a, b) = (w[0].ratio?.ln(), w[1].ratio?.ln());
                ((a >= 0.0) != (b >= 0.0) && a != b)
                    .then(|| w[0].x + (w[1].x - w[0].x) * a / (a - b))
            });
            Some(TableRow {
                m,
                k_over_m: best.x,
                ratio: best.ratio.unwrap_or(f64::NAN),
                jain: best.jain,
                u_dr: best.utilization,
                o_dr: best.queue_bdp,
                u_2r: base.map(|b| b.utilization),
                o_2r: base.map(|b| b.queue_bdp),
                crossing,
            })
        })
        .collect()
}

/// M as the seed writes it: 1/8, 1/4, 1/2, 1/sqrt(2), 1, or a decimal.
pub fn m_label(m: f64) -> String {
    for (v, s) in [
        (0.125, "1/8"),
        (0.25, "1/4"),
        (0.5, "1/2"),
        (std::f64::consts::FRAC_1_SQRT_2, "1/sqrt(2)"),
        (1.0, "1"),
    ] {
        if (m - v).abs() < 1e-3 {
            return s.into();
        }
    }
    format!("{m:.3}")
}

/// The seed's equation 3 solved for Max_Prob_DCTCP / Max_Prob_Reno:
/// with x = Min_Thresh_Reno / Min_Thresh_DCTCP, y = x / (x - 1).
pub fn equal_share_prob_ratio(min_reno_over_min_dctcp: f64) -> f64 {
    let x = min_reno_over_min_dctcp;
    x / (x - 1.0)
}

/// Per Min_Thresh_DCTCP of the slope part, the Max_Prob of maximum fairness.
pub fn slope_best(runs: &[CoRun]) -> Vec<(f64, f64, f64)> {
    distinct_m(runs, Part::Slope)
        .iter()
        .filter_map(|&min| {
            runs.iter()
                .filter(|r| r.part == Part::Slope && r.m == min)
                .max_by(|a, b| a.jain.total_cmp(&b.jain))
                .map(|r| (min, r.x, r.jain))
        })
        .collect()
}

fn plots(out: &ResultsDir, cfg: &CoexistConfig, runs: &[CoRun]) -> Result<()> {
    let series =
        |part: Part, key: &dyn Fn(&CoRun) -> Option<(String, f64)>, f: &dyn Fn(&CoRun) -> f64| {
            let mut named: Vec<Series> = Vec::new();
            for r in runs.iter().filter(|r| r.part == part && r.dctcp_flows > 0) {
                let Some((name, x)) = key(r) else { continue };
                match named.iter_mut().find(|s| s.name == name) {
                    Some(s) => s.points.push((x, f(r))),
                    None => named.push(Series {
                        name,
                        points: vec![(x, f(r))],
                    }),
                }
            }
            named
        };
    let three = |path: &str,
                 part: Part,
                 what: &str,
                 x_label: &str,
                 key: &dyn Fn(&CoRun) -> Option<(String, f64)>|
     -> Result<()> {
        if !runs.iter().any(|r| r.part == part) {
            return Ok(());
        }
        let t = [
            format!("{what}: Reno / (Reno + DCTCP), per flow"),
            format!("{what}: utilization"),
            format!("{what}: mean queue"),
        ];
        let charts = vec![
            Chart::new(
                &t[0],
                x_label,
                "Reno's share (%)",
                series(part, key, &|r| {
                    let q = r.ratio.unwrap_or(1.0);
                    100.0 * q / (1.0 + q)
                }),
            )
            .y_max(100.0)
            .hline(50.0, "equal rates".into())
            .points(),
            Chart::new(
                &t[1],
                x_label,
                "utilization (%)",
                series(part, key, &|r| r.utilization * 100.0),
            )
            .points(),
            Chart::new(
                &t[2],
                x_label,
                "queue (BDP)",
                series(part, key, &|r| r.queue_bdp),
            )
            .points(),
        ];
        plot::draw_stack(&out.file(path), &charts)
    };
    three(
        "step.png",
        Part::Step,
        "Step marking (seed 002 Fig. 5)",
        "K / Min_Thresh_Reno",
        &|r| Some((format!("M = {} BDP", m_label(r.m)), r.x)),
    )?;
    three(
        "flows.png",
        Part::Flows,
        "N DCTCP against 1 Reno, M = BDP/8 (Fig. 6)",
        "K / Min_Thresh_Reno",
        &|r| Some((format!("N = {}", r.dctcp_flows), r.x)),
    )?;
    three(
        "slope.png",
        Part::Slope,
        "Slope marking, M = BDP (Fig. 7)",
        "Max_Prob_DCTCP",
        &|r| Some((format!("Min_Thresh_DCTCP = {} BDP", m_label(r.m)), r.x)),
    )?;
    if runs.iter().any(|r| r.part == Part::Slope) {
        let best = slope_best(runs);
        let measured: Vec<(f64, f64)> = best
            .iter()
            .map(|&(min, p, _)| (SLOPE_M / min, p / RENO_MAX_P))
            .collect();
        // The curve over the measured span, where its y is on the chart.
        let x_hi = measured.iter().map(|p| p.0).fold(2.0, f64::max).ceil() + 1.0;
        let curve: Vec<(f64, f64)> = (0..=200)
            .map(|i| 1.0 + (x_hi - 1.0) * f64::from(i) / 200.0)
            .map(|x| (x, equal_share_prob_ratio(x)))
            .filter(|p| p.1 <= 12.0)
            .collect();
        plot::draw(
            &out.file("max_fairness.png"),
            &Chart::new(
                "Maximum fairness of the slope (seed 002 Fig. 9)",
                "Min_Thresh_Reno / Min_Thresh_DCTCP",
                "Max_Prob_DCTCP / Max_Prob_Reno",
                vec![Series {
                    name: "measured: Max_Prob_DCTCP of the highest Jain".into(),
                    points: measured,
                }],
            )
            .curve(Series {
                name: "y = x / (x - 1), the seed's equation 3".into(),
                points: curve,
            })
            .points(),
        )?;
    }
    if runs.iter().any(|r| r.part == Part::Equal) {
        let pts = |f: &dyn Fn(&CoRun) -> f64| -> Vec<Series> {
            vec![Series {
                name: format!("{} DCTCP + {} Reno", cfg.dctcp_flows, cfg.reno_flows),
                points: runs
                    .iter()
                    .filter(|r| r.part == Part::Equal)
                    .map(|r| (r.m, f(r)))
                    .collect(),
            }]
        };
        let x = "Min_Thresh_Reno (BDP)";
        plot::draw_stack(
            &out.file("equal.png"),
            &[
                Chart::new(
                    "Equal-sharing rule (seed 002 Fig. 10): Jain's index",
                    x,
                    "Jain",
                    pts(&|r| r.jain),
                )
                .y_max(1.0)
                .points(),
                Chart::new(
                    "utilization",
                    x,
                    "utilization (%)",
                    pts(&|r| r.utilization * 100.0),
                )
                .points(),
                Chart::new("mean queue", x, "queue (BDP)", pts(&|r| r.queue_bdp)).points(),
            ],
        )?;
    }
    Ok(())
}

fn within(ours: f64, seed: f64, tol: f64) -> &'static str {
    if ((ours - seed) / seed).abs() <= tol {
        "yes"
    } else {
        "no"
    }
}

/// Table I: per M, K / M at maximum fairness and its U and O, beside the
/// seed's.
fn table_i_table(rows: &[TableRow]) -> Table {
    let seed = |r: &TableRow| SEED_TABLE_I.iter().find(|t| (t.0 - r.m).abs() < 1e-3);
    let opt = |v: Option<f64>, dp: usize| v.map_or(Cell::Missing, |v| Cell::num(v, dp));
    Columns::<TableRow>::new()
        .col("M", "BDP", |r| Cell::text(m_label(r.m)))
        .col("K/M ours: crossing (fairest run)", "", |r| {
            let crossing = r.crossing.map_or("-".to_string(), |c| format!("{c:.2}"));
            Cell::text(format!("{crossing} ({:.2})", r.k_over_m))
        })
        .col("seed", "", move |r| opt(seed(r).map(|t| t.1), 2))
        .col("Reno/DCTCP there", "", |r| Cell::num(r.ratio, 2))
        .col("U_DR ours", "", |r| Cell::num(r.u_dr, 3))
        .col("seed", "", move |r| opt(seed(r).map(|t| t.2), 3))
        .col("O_DR ours", "BDP", |r| Cell::num(r.o_dr, 3))
        .col("seed", "", move |r| opt(seed(r).map(|t| t.3), 3))
        .col("U_2R ours", "", move |r| opt(r.u_2r, 3))
        .col("seed", "", move |r| opt(seed(r).map(|t| t.4), 3))
        .col("O_2R ours", "BDP", move |r| opt(r.o_2r, 3))
        .col("seed", "", move |r| opt(seed(r).map(|t| t.5), 3))
        .col("within 10 %", "", move |r| {
            Cell::text(seed(r).map_or("-".to_string(), |t| {
                format!(
                    "K/M {}, U {}, O {}",
                    within(r.crossing.unwrap_or(r.k_over_m), t.1, 0.1),
                    within(r.u_dr, t.2, 0.1),
                    within(r.o_dr, t.3, 0.1)
                )
            }))
        })
        .table(rows)
}

/// Every run's figures; `x` names the part's swept parameter, and the part
/// comes first where the rows are every part's (runs.csv).
fn runs_columns<'a>(x: &str, with_part: bool) -> Columns<'a, CoRun> {
    let each = |v: &[f64]| Cell::List(v.iter().map(|b| b / 1e6).collect(), Fmt::dp(2));
    Columns::<CoRun>::new()
        .col_if(with_part, "part", "", |r| {
            Cell::text(clap::ValueEnum::to_possible_value(&r.part).map_or(String::new(), |v| v.get_name().to_string()))
        })
        .col("M / Min_D", "BDP", |r| Cell::text(m_label(r.m)))
        .col(x, "", |r| {
            if r.dctcp_flows == 0 {
                Cell::text("2R baseline")
            } else {
                Cell::num(r.x, 3)
            }
        })
        .col("flows", "", |r| Cell::text(format!("{}D+{}R", r.dctcp_flows, r.reno_flows)))
        .col("DCTCP, each", "Mbit/s", move |r| {
            if r.dctcp_bps.is_empty() {
                Cell::Missing
            } else {
                each(&r.dctcp_bps)
            }
        })
        .col("Reno, each", "Mbit/s", move |r| each(&r.reno_bps))
        .col("Reno/DCTCP", "", |r| r.ratio.map_or(Cell::Missing, |x| Cell::num(x, 2)))
        .col("Jain", "", |r| Cell::num(r.jain, 3))
        .col("U", "", |r| Cell::num(r.utilization, 3))
        .col("O", "BDP", |r| Cell::num(r.queue_bdp, 3))
        .col("marks (whole run)", "", |r| Cell::int(r.ect_marked))
        .col("drops (at the limit), whole run", "", |r| {
            Cell::text(format!("{} ({})", r.not_ect_dropped, r.taildrops))
        })
        .col("guard repairs", "", |r| Cell::text(r.guard_repairs.to_string()))
}

fn report(cfg: &CoexistConfig, runs: &[CoRun]) -> Report {
    let mut r = Report::new("DCTCP beside Reno through one queue: the dual AQM (seed 002)");
    r.text(format!(
        "{} at {} (BDP {:.0} bytes, {:.1} packets of {PKT_BYTES} bytes), {} (ECN) and the kernel's reno \
         with ECN off on its senders, {} s per run, the first {:.0} s not measured, buffer {} packets. The \
         switch is `bpf-dual`: one queue, ECN-capable packets marked by the DCTCP profile, Not-ECT packets \
         dropped by the Reno profile (Min_Thresh M, Max_Thresh 3 M, Max_Prob {RENO_MAX_P}, w {RENO_WEIGHT} applied \
         as 2^-9 = 0.00195). Thresholds are bytes of the queue's backlog as the qdisc counts it (frames of \
         {PKT_BYTES} bytes). Queue (O) is the mean over time in BDPs. Each receiver caps its window at {} \
         packets (BDP + half the buffer; README \"Known issue\").",
        fmt_rate(cfg.rate_bps),
        fmt_duration(cfg.rtt),
        cfg.bdp_bytes(),
        cfg.bdp_bytes() / f64::from(PKT_BYTES),
        cfg.dctcp.label(),
        cfg.duration.as_secs_f64(),
        cfg.warmup.as_secs_f64(),
        cfg.buffer_pkts,
        cfg.window_cap_pkts()
    ))
    .markdown(summary_lines(runs.iter().map(|r| (label_of(r), &r.rtt))));
    r.runs = Some(runs_columns("x", true).table(runs));
    let rows = table_i(runs);
    if !rows.is_empty() {
        r.heading(2, "Table I: step marking, K / M at maximum fairness")
            .text(format!(
                "DCTCP's profile a step at K on the instantaneous queue (w = 1). K / M at maximum fairness, ours: \
                 where the rate ratio crosses 1 between two grid points (log-linear), and in brackets the grid point \
                 of the highest Jain's index, whose ratio, U and O the next columns give; U and O with {} DCTCP and \
                 {} Reno flows (DR) and with {} Reno flows alone (2R). \"Within 10 %\" compares K / M (the crossing, \
                 else the grid point), U_DR and O_DR with the seed's.",
                cfg.dctcp_flows,
                cfg.reno_flows,
                cfg.dctcp_flows + cfg.reno_flows
            ))
            .table(table_i_table(&rows))
            .markdown(table_i_against_seed(cfg.dctcp, &rows));
    }
    let parts = [
        (Part::Step, "Step marking, every run (Fig. 5)", "K / M"),
        (Part::Flows, "N DCTCP flows against one Reno flow, M = BDP/8 (Fig. 6)", "K / M"),
        (Part::Slope, "Slope marking, M = BDP (Figs. 7-9)", "Max_Prob_DCTCP"),
        (Part::Equal, "The equal-sharing rule over M (Fig. 10)", "Max_Prob_DCTCP = 0.2 / M"),
        (Part::Starvation, "Starvation: one step marker for both classes", "K (packets)"),
    ];
    for (part, title, x) in parts {
        let these: Vec<&CoRun> = runs.iter().filter(|r| r.part == part).collect();
        if these.is_empty() {
            continue;
        }
        r.heading(2, title).table(runs_columns(x, false).table(these.iter().copied()));
        if part == Part::Slope {
            slope_section(&mut r, runs);
        }
    }
    if runs.iter().any(|r| r.part == Part::Starvation) {
        r.text(
            "The step marker marks ECT and drops Not-ECT at the same K: Reno halves at every drop while DCTCP cuts by \
             alpha / 2, so the DCTCP flow takes the link. This is the coexistence problem the dual AQM answers.",
        );
    }
    r.text(repairs_line(runs.iter().map(|r| (label_of(r), r.guard_repairs))));
    let figs: Vec<Figure> = [
        (Part::Step, "step.png", "Fig. 5: the rate ratio and fairness against K / M"),
        (Part::Flows, "flows.png", "Fig. 6: N DCTCP flows against one Reno flow"),
        (Part::Slope, "slope.png", "Fig. 7: slope marking against Max_Prob_DCTCP"),
        (Part::Slope, "max_fairness.png", "Fig. 9: the slope's maximum fairness beside equation 3"),
        (Part::Equal, "equal.png", "Fig. 10: the equal-sharing rule over M"),
    ]
    .into_iter()
    .filter(|(part, _, _)| runs.iter().any(|r| r.part == *part))
    .map(|(_, file, caption)| Figure::new(file, caption))
    .collect();
    r.heading(2, "Plots")
        .figures(figs)
        .text("Raw: `runs.csv` (every run, every part), `runs.json`, `config.json`.");
    r
}

/// The slope's fairest Max_Prob beside equation 3.
fn slope_section(r: &mut Report, runs: &[CoRun]) {
    let best = slope_best(runs);
    if best.is_empty() {
        return;
    }
    r.text(
        "Maximum fairness of the slope beside equation 3 (Max_Prob_DCTCP = Max_Prob_Reno x x / (x - 1), \
         x = Min_Thresh_Reno / Min_Thresh_DCTCP):",
    )
    .table(
        Columns::<(f64, f64, f64)>::new()
            .col("Min_Thresh_DCTCP", "BDP", |(min, _, _)| Cell::text(m_label(*min)))
            .col("Max_Prob of max Jain", "", |(_, p, _)| Cell::num(*p, 2))
            .col("Jain there", "", |(_, _, j)| Cell::num(*j, 3))
            .col("equation 3", "", |(min, _, _)| {
                Cell::num(RENO_MAX_P * equal_share_prob_ratio(SLOPE_M / min), 3)
            })
            .table(&best),
    );
}

/// How our Table I stands against the seed's, in numbers, and the known
/// differences of the two setups that may explain it.
fn table_i_against_seed(dctcp: Dctcp, rows: &[TableRow]) -> String {
    let mut lower = Vec::new();
    let mut higher = Vec::new();
    for r in rows {
        let (Some(c), Some(t)) = (
            r.crossing,
            SEED_TABLE_I.iter().find(|t| (t.0 - r.m).abs() < 1e-3),
        ) else {
            continue;
        };
        let item = format!(
            "{} at M = {}",
            format_args!("{c:.2} against {:.2}", t.1),
            m_label(r.m)
        );
        if c < t.1 {
            lower.push(item)
        } else {
            higher.push(item)
        }
    }
    let mut s = String::new();
    if !lower.is_empty() || !higher.is_empty() {
        let _ = writeln!(
            s,
            "Equal rates (the ratio's crossing of 1) come below the seed's K / M in {} of {} rows ({}){}. Where \
             ours is lower, this DCTCP takes more of the link from Reno at the same K than the seed's did. The \
             setups differ: the seed ran Linux 3.2.18 with the Stanford DCTCP patch and its four modifications \
             (`--dctcp seed002` runs them here) and New Reno, in VMs inside an event-driven simulator; here {} runs \
             on 6.18 beside the kernel's reno with SACK, RACK and PRR, and the guard repairs this kernel's issue \
             (below). RED's weight is 2^-9 (the seed's 0.002), and the thresholds count frames of 1,514 bytes. \
             Where M is a few packets, K moves in whole packets: neighbouring K / M on the grid can hold the same \
             number (the seed's steps at BDP / 8).\n",
            lower.len(),
            lower.len() + higher.len(),
            if lower.is_empty() { "none".to_string() } else { lower.join("; ") },
            if higher.is_empty() { String::new() } else { format!("; at or above it: {}", higher.join("; ")) },
            dctcp.label()
        );
    }
    s
}

fn label_of(r: &CoRun) -> String {
    let p = Plan {
        part: r.part,
        m: r.m,
        x: r.x,
        dctcp_flows: r.dctcp_flows,
        reno_flows: r.reno_flows,
        bottleneck: Bottleneck::step(1_000_000, 2, 1),
    };
    p.label()
}

crate::experiments::register!("coexist", CoexistArgs => CoexistConfig);

#[cfg(test)]
mod tests {
    use super::*;

    /// The report prints the figures of the run recorded with the
    /// hand-written summary (`experiments::recorded`).
    #[test]
    fn the_report_prints_the_recorded_runs_figures() {
        use crate::experiments::recorded;
        let cfg = recorded::args::<CoexistArgs>("coexist").config();
        let runs: Vec<CoRun> = recorded::data("coexist", "runs.json");
        // The old list of files named every part's plots, drawn or not.
        let not_drawn = "a plot of a part --quick does not run, which the old file list named anyway";
        recorded::assert_same_figures(
            "coexist",
            &report(&cfg, &runs),
            &[("6", not_drawn), ("7", not_drawn), ("9", not_drawn)],
        );
    }

    fn cfg(quick: bool) -> CoexistConfig {
        let args = CoexistArgs {
            quick,
            parts: None,
            rate: 10_000_000,
            rtt: Duration::from_millis(25),
            delay_backend: DelayBackend::Auto,
            dctcp: Dctcp::BpfDctcp,
            dctcp_flows: 1,
            reno_flows: 1,
            m: None,
            k_ratios: None,
            n_max: 5,
            slope_min: None,
            slope_max_p: None,
            equal_m: None,
            duration: None,
            buffer: 200,
            out: None,
        };
        args.config()
    }

    #[test]
    fn the_seeds_profiles_in_bytes() {
        let c = cfg(false);
        assert_eq!(c.bdp_bytes(), 31_250.0);
        // One BDP in whole packets (20.6 -> 21) and half the 200 buffer.
        assert_eq!(c.window_cap_pkts(), 121);
        assert_eq!(Dctcp::BpfDctcp.label(), "bpf_dctcp");
        assert!(Dctcp::Seed002
            .label()
            .starts_with("bpf_kdctcp with seed 002"));
        let plan = c.plan();
        c.validate().unwrap();
        // Table I's first row: M = BDP / 8 = 3,906 bytes, Reno's max 3 M;
        // K / M = 2.25 is 8,789 bytes.
        let at = plan
            .iter()
            .find(|p| p.part == Part::Step && p.m == 0.125 && p.x == 2.25)
            .unwrap();
        let Backend::BpfDual { ect, not_ect } = &at.bottleneck.backend else {
            panic!("{:?}", at.bottleneck.backend)
        };
        assert_eq!(
            (ect.min_bytes, ect.max_bytes, ect.weight),
            (8_789, 8_789, 1.0)
        );
        assert_eq!((not_ect.min_bytes, not_ect.max_bytes), (3_906, 11_718));
        assert_eq!((not_ect.max_p, not_ect.wlog()), (0.1, 9));
        // Fig. 10 at M = 0.5: Reno 0.2, DCTCP 0.4 from M / 2.
        let eq = plan
            .iter()
            .find(|p| p.part == Part::Equal && p.m == 0.5)
            .unwrap();
        let Backend::BpfDual { ect, not_ect } = &eq.bottleneck.backend else {
            panic!()
        };
        assert_eq!(
            (ect.min_bytes, ect.max_bytes, ect.max_p),
            (7_813, 39_063, 0.4)
        );
        assert_eq!((not_ect.min_bytes, not_ect.max_p), (15_625, 0.2));
        // Max_Prob_DCTCP = 0.2 / M.
        assert_eq!(eq.x, 0.4);
        assert_eq!(eq.label(), "equal M=0.500 1D+1R");
        assert_eq!(at.label(), "step m=0.125 k/m=2.25 1d+1r");
        // Each M's two-Reno baseline takes both senders.
        let base = plan
            .iter()
            .find(|p| p.part == Part::Step && p.dctcp_flows == 0)
            .unwrap();
        assert_eq!(base.reno_flows, 2);
        assert_eq!(base.label(), "step M=0.125 0D+2R baseline");
        // Its plan: DCTCP first, Reno without ECN after, at 25 ms, capped.
        let scn = scenario(&c, at, "t_dctcp");
        let ccs: Vec<&str> = scn.flows.iter().map(|f| f.cc.as_str()).collect();
        assert_eq!(ccs, ["t_dctcp", "reno"]);
        assert_eq!(scn.no_ecn_senders, vec![1]);
        assert_eq!(scn.rwnd_clamp_bytes, Some(121 * SEGMENT_BYTES));
        assert_eq!(
            scn.round_trip.unwrap().rtt,
            Rtt::uniform(Duration::from_millis(25))
        );
        assert_eq!(scn.label, at.label());
        // The flows part: DCTCP's step at K = x M with M = BDP / 8.
        for p in plan.iter().filter(|p| p.part == Part::Flows) {
            let Backend::BpfDual { ect, .. } = &p.bottleneck.backend else {
                panic!()
            };
            assert_eq!(
                ect.min_bytes,
                (p.x * 0.125 * 31_250.0).round() as u32,
                "{}",
                p.label()
            );
        }
        // The slope part: DCTCP's thresholds 2 BDP apart.
        for p in plan.iter().filter(|p| p.part == Part::Slope) {
            let Backend::BpfDual { ect, .. } = &p.bottleneck.backend else {
                panic!()
            };
            assert!(
                ect.max_bytes.abs_diff(ect.min_bytes).abs_diff(62_500) <= 1,
                "{}",
                p.label()
            );
        }
        // Runs per part: 5 M x (9 + baseline), 5 N x 5, 3 x 8, 5, 2.
        let count = |part| plan.iter().filter(|p| p.part == part).count();
        assert_eq!(
            [
                Part::Step,
                Part::Flows,
                Part::Slope,
                Part::Equal,
                Part::Starvation
            ]
            .map(count),
            [50, 25, 24, 5, 2]
        );
        // The starvation marker at K = M in whole packets: 2.6 and 20.6.
        let st: Vec<f64> = plan
            .iter()
            .filter(|p| p.part == Part::Starvation)
            .map(|p| p.x)
            .collect();
        assert_eq!(st, vec![3.0, 21.0]);
        assert_eq!(cfg(true).plan().len(), 2 + 1 + 1 + 1);
    }

    #[test]
    fn equation_3_and_fractions() {
        // Min_Thresh_DCTCP = M / 2: twice Reno's probability.
        assert!((equal_share_prob_ratio(2.0) - 2.0).abs() < 1e-12);
        assert!((equal_share_prob_ratio(4.0) - 4.0 / 3.0).abs() < 1e-12);
        assert_eq!(parse_fraction("1/8"), Ok(0.125));
        assert_eq!(parse_fraction("0.25"), Ok(0.25));
        assert!(parse_fraction("1/0").is_err());
        assert!(parse_fraction("-1").is_err());
        assert!(parse_fraction("x").is_err());
        assert_eq!(m_label(std::f64::consts::FRAC_1_SQRT_2), "1/sqrt(2)");
        assert_eq!(m_label(0.3), "0.300");
    }

    #[test]
    fn refusals_name_the_option() {
        let bad = |f: &dyn Fn(&mut CoexistConfig)| {
            let mut c = cfg(true);
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(&|c| c.reno_flows = 0).contains("--reno-flows"));
        assert!(bad(&|c| c.equal_m = vec![0.1]).contains("--equal-m"));
        assert!(bad(&|c| c.k_ratios = vec![0.1]).contains("--k-ratios"));
        assert!(bad(&|c| c.slope_max_p = vec![1.5]).contains("--slope-max-p"));
        assert!(bad(&|c| c.m = vec![0.0]).contains("above 0"));
        assert!(bad(&|c| c.buffer_pkts = 10).contains("--buffer"));
        assert!(bad(&|c| c.rtt = Duration::from_micros(10)).contains("--rtt"));
        assert!(bad(&|c| c.duration = Duration::from_secs(2)).contains("--duration"));
    }

    fn run_at(part: Part, m: f64, x: f64, ratio: f64, jain: f64) -> CoRun {
        CoRun {
            part,
            m,
            x,
            dctcp_flows: 1,
            reno_flows: 1,
            dctcp_bps: vec![5e6],
            reno_bps: vec![5e6 * ratio],
            ratio: Some(ratio),
            jain,
            utilization: 0.97,
            steal_share: 0.0,
            queue_pkts: 4.0,
            queue_bdp: 0.19,
            ect_marked: 0,
            not_ect_dropped: 0,
            ect_dropped: 0,
            not_ect_marked: 0,
            taildrops: 0,
            reno_ect_pkts: 0,
            dctcp_ect_pkts: 1,
            guard_repairs: Repairs::default(),
            rtt: RttMeasured::default(),
        }
    }

    /// Two DCTCP senders and one Reno: each figure of the run from the
    /// outcome, ECN-capable packets counted per class by sender address and
    /// port together (a Reno port from a DCTCP sender's address is neither).
    #[test]
    fn a_run_splits_its_flows_by_sender_and_reads_the_marker_per_class() {
        let c = cfg(true);
        let plan = Plan {
            part: Part::Step,
            m: 0.25,
            x: 2.0,
            dctcp_flows: 2,
            reno_flows: 1,
            bottleneck: Bottleneck::step(c.rate_bps, c.buffer_pkts, 5),
        };
        let flow = |sender, sport| crate::traffic::bulk::FlowResult {
            sender,
            sport,
            ..Default::default()
        };
        let rx = |sender, sport, ect_pkts| tc_qdisc::RxFlow {
            src: sender_addr(sender),
            sport,
            dst: crate::net::topology::RECEIVER_ADDR,
            dport: 5001,
            pkts: ect_pkts,
            data_bytes: 0,
            ce_pkts: 0,
            ce_bytes: 0,
            ect_pkts,
        };
        let mut o = Outcome {
            flows: vec![flow(0, 1000), flow(1, 1001), flow(2, 1002)],
            goodput_bps: vec![4e6, 2e6, 6e6],
            rx: vec![
                rx(0, 1000, 500),
                rx(1, 1001, 300),
                rx(2, 1002, 7),
                rx(0, 1002, 40),
                rx(2, 1000, 60),
            ],
            utilization: 0.9,
            queue_over_time: Some(crate::stats::Summary {
                mean: 10.0,
                ..Default::default()
            }),
            guard_repairs: [1, 2, 3].into(),
            ..Default::default()
        };
        o.queue.mean = 99.0;
        o.marker.ect.marked = 11;
        o.marker.not_ect.dropped = 12;
        o.marker.ect.dropped = 13;
        o.marker.not_ect.marked = 14;
        o.marker.taildrop = 15;
        let r = CoRun::of(&c, &plan, &o);
        assert_eq!(
            (r.dctcp_bps.clone(), r.reno_bps.clone()),
            (vec![4e6, 2e6], vec![6e6])
        );
        assert_eq!(r.ratio, Some(2.0));
        assert!((r.jain - 144.0 / 168.0).abs() < 1e-12, "{}", r.jain);
        assert_eq!((r.queue_pkts, r.utilization), (10.0, 0.9));
        assert!((r.queue_bdp - 10.0 * f64::from(PKT_BYTES) / 31_250.0).abs() < 1e-12);
        assert_eq!((r.dctcp_ect_pkts, r.reno_ect_pkts), (800, 7));
        assert_eq!(
            (
                r.ect_marked,
                r.not_ect_dropped,
                r.ect_dropped,
                r.not_ect_marked,
                r.taildrops
            ),
            (11, 12, 13, 14, 15)
        );
        assert_eq!(
            (r.part, r.m, r.x, r.dctcp_flows, r.reno_flows),
            (Part::Step, 0.25, 2.0, 2, 1)
        );
        assert_eq!(r.guard_repairs, [1, 2, 3].into());
        // Without the queue over time, the per-arrival mean; the two-Reno
        // baseline has no ratio.
        o.queue_over_time = None;
        let base = Plan {
            dctcp_flows: 0,
            reno_flows: 3,
            ..plan
        };
        let r = CoRun::of(&c, &base, &o);
        assert_eq!((r.ratio, r.queue_pkts, r.dctcp_bps.len()), (None, 99.0, 0));
        assert_eq!((r.dctcp_ect_pkts, r.reno_ect_pkts), (0, 807));
    }

    #[test]
    fn table_i_takes_the_fairest_k_and_the_crossing() {
        let mut runs = vec![
            run_at(Part::Step, 0.25, 1.0, 3.0, 0.8),
            run_at(Part::Step, 0.25, 2.0, 1.5, 0.96),
            run_at(Part::Step, 0.25, 3.0, 0.75, 0.98),
        ];
        let mut base = run_at(Part::Step, 0.25, 0.0, 1.0, 1.0);
        base.dctcp_flows = 0;
        base.ratio = None;
        base.utilization = 0.95;
        runs.push(base);
        let t = table_i(&runs);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].k_over_m, 3.0);
        assert_eq!(t[0].u_2r, Some(0.95));
        // ln 1.5 / (ln 1.5 - ln 0.75) = 0.585 of the way from 2 to 3.
        assert!(
            (t[0].crossing.unwrap() - 2.585).abs() < 1e-3,
            "{:?}",
            t[0].crossing
        );
        // Reno ahead at every K: no crossing.
        let above = vec![
            run_at(Part::Step, 0.5, 1.0, 3.0, 0.7),
            run_at(Part::Step, 0.5, 2.0, 2.0, 0.8),
            run_at(Part::Step, 0.5, 3.0, 1.2, 0.9),
        ];
        let t = table_i(&above);
        assert_eq!(
            (t.len(), t[0].crossing, t[0].k_over_m, t[0].u_2r),
            (1, None, 3.0, None)
        );
        let slope = vec![
            run_at(Part::Slope, 0.5, 0.1, 2.0, 0.9),
            run_at(Part::Slope, 0.5, 0.2, 1.0, 0.999),
            run_at(Part::Slope, 0.5, 0.4, 0.5, 0.9),
        ];
        assert_eq!(slope_best(&slope), vec![(0.5, 0.2, 0.999)]);
        // Per Min_Thresh_DCTCP, of the slope part's runs only.
        let mut mixed = slope.clone();
        mixed.push(run_at(Part::Slope, 1.0, 0.3, 1.1, 0.95));
        mixed.push(run_at(Part::Step, 0.5, 2.0, 1.0, 1.0));
        assert_eq!(
            slope_best(&mixed),
            vec![(0.5, 0.2, 0.999), (1.0, 0.3, 0.95)]
        );
    }
}
