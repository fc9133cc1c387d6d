//! DualPI2 (RFC 9332) in BPF: the parameters as tc-dualpi2(8) names them,
//! their check, the config the switch runs with, and a model of the
//! controller and the decisions (src/bpf/dualpi2.h) that replays what the
//! program traced.
//!
//! On the bottleneck, htb's class 1:1 (the link) has two leaves: 1:10 the
//! L queue (priority 0, guaranteed `100 - classic_protection` % of the link)
//! and 1:20 the C queue (priority 1, guaranteed `classic_protection` %),
//! each able to borrow the whole link. The marker on tcx egress classifies,
//! marks or drops, and steers each packet to its leaf; the departure probe
//! feeds the controller each queue's sojourn.

use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::backend::PKT_BYTES;
use crate::intf::{
    dualpi2_config, dualpi2_decision, dualpi2_queue_stats, dualpi2_update, queue_action_QA_DROP,
    queue_action_QA_MARK, queue_action_QA_PASS, DUALPI2_C, DUALPI2_HIST_SHIFT, DUALPI2_L,
    DUALPI2_PROB_ONE,
};

/// htb classes of the two queues, as `skb->priority` names them (1:10, 1:20).
pub const L_CLASSID: u32 = 0x1_0010;
pub const C_CLASSID: u32 = 0x1_0020;
/// sch_dualpi2's scaling of alpha and beta (ALPHA_BETA_GRANULARITY).
const GAIN_SHIFT: u32 = 6;

/// The step threshold: a sojourn, or a count of L packets.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    Time(Duration),
    Packets(u32),
}

/// Which packets join the L queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EcnMask {
    /// ECT(1) and CE (the L4S identifier, RFC 9331).
    L4sEct,
    /// Any ECT: ECT(0) too (DCTCP-like senders in a data centre).
    AnyEct,
}

/// DualPI2's parameters, with tc-dualpi2(8)'s names and defaults; the
/// queue limit is the bottleneck's buffer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dualpi2 {
    pub target: Duration,
    pub tupdate: Duration,
    /// Integral gain, Hz.
    pub alpha: f64,
    /// Proportional gain, Hz.
    pub beta: f64,
    pub step_thresh: Step,
    pub min_qlen_step: u32,
    pub coupling_factor: u32,
    /// In overload (k p' > 1) L packets meet the classic drop (`drop_overload`),
    /// or are only marked (`overflow`).
    pub drop_overload: bool,
    /// The C queue's guaranteed share of the link, percent.
    pub classic_protection: u32,
    pub ecn_mask: EcnMask,
}

impl Default for Dualpi2 {
    fn default() -> Dualpi2 {
        Dualpi2 {
            target: Duration::from_millis(15),
            tupdate: Duration::from_millis(16),
            alpha: 0.16,
            beta: 3.2,
            step_thresh: Step::Time(Duration::from_millis(1)),
            min_qlen_step: 0,
            coupling_factor: 2,
            drop_overload: true,
            classic_protection: 10,
            ecn_mask: EcnMask::L4sEct,
        }
    }
}

/// A gain in Hz as sch_dualpi2 keeps it: tc sends it in 1/256 Hz, the
/// kernel scales it to probability per ns of delay, in 2^-6 units.
pub fn scale_gain(hz: f64) -> u32 {
    let param = (hz * 256.0).round() as u64;
    (((param * u64::from(DUALPI2_PROB_ONE)) >> (8 - GAIN_SHIFT)) / 1_000_000_000) as u32
}

impl Dualpi2 {
    /// Refuses what tc-dualpi2(8) or this backend cannot run, saying the
    /// range.
    pub fn validate(&self) -> Result<()> {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        anyhow::ensure!(
            self.target >= Duration::from_micros(100) && self.target <= Duration::from_secs(1),
            "bpf-dualpi2: target {} ms must be 0.1 ms to 1 s",
            ms(self.target)
        );
        anyhow::ensure!(
            self.tupdate >= Duration::from_millis(1) && self.tupdate <= Duration::from_secs(1),
            "bpf-dualpi2: tupdate {} ms must be 1 ms to 1 s",
            ms(self.tupdate)
        );
        for (name, hz) in [("alpha", self.alpha), ("beta", self.beta)] {
            anyhow::ensure!(
                hz.is_finite() && (1.0 / 256.0..=8_388_607.0 / 256.0).contains(&hz),
                "bpf-dualpi2: {name} {hz} Hz must be 1/256 to 32767.99 Hz (tc-dualpi2's range)"
            );
        }
        match self.step_thresh {
            Step::Time(t) => anyhow::ensure!(
                t >= Duration::from_micros(1) && t <= Duration::from_secs(1),
                "bpf-dualpi2: step_thresh {} ms must be 1 us to 1 s",
                ms(t)
            ),
            Step::Packets(p) => anyhow::ensure!(
                p >= 1,
                "bpf-dualpi2: step_thresh in packets must be at least 1"
            ),
        }
        anyhow::ensure!(
            (1..=255).contains(&self.coupling_factor),
            "bpf-dualpi2: coupling_factor {} must be 1..=255",
            self.coupling_factor
        );
        // htb needs a rate for each leaf: neither queue may go without.
        anyhow::ensure!(
            (1..=99).contains(&self.classic_protection),
            "bpf-dualpi2: classic_protection {} % must be 1..=99 (each htb leaf needs a rate of \
             its own)",
            self.classic_protection
        );
        Ok(())
    }

    /// The program's config (what depends on the link's rate is its
    /// `link_rate`).
    pub fn to_bpf(&self) -> dualpi2_config {
        let (step_ns, step_pkts) = match self.step_thresh {
            // validate keeps it under 1 s.
            Step::Time(t) => (t.as_nanos() as u32, 0),
            Step::Packets(p) => (0, p),
        };
        dualpi2_config {
            target_ns: self.target.as_nanos() as u64,
            tupdate_ns: self.tupdate.as_nanos() as u32,
            alpha: scale_gain(self.alpha),
            beta: scale_gain(self.beta),
            step_ns,
            step_pkts,
            min_qlen_step: self.min_qlen_step,
            coupling: self.coupling_factor,
            drop_overload: self.drop_overload.into(),
            min_backlog: 2 * PKT_BYTES,
            ecn_mask: match self.ecn_mask {
                EcnMask::L4sEct => 1,
                EcnMask::AnyEct => 3,
            },
            l_classid: L_CLASSID,
            c_classid: C_CLASSID,
            trace: 0,
        }
    }

    /// Parses `name=value` pairs (tc-dualpi2(8)'s names) over the defaults:
    /// target=15ms, tupdate=16ms, alpha=0.16, beta=3.2, step_thresh=1ms (or
    /// 30p: packets), min_qlen_step=0, coupling_factor=2,
    /// drop_overload=1 (0: overflow), classic_protection=10,
    /// ecn_mask=l4s_ect (or any_ect).
    pub fn parse(spec: &str) -> Result<Dualpi2> {
        let mut d = Dualpi2::default();
        for kv in spec.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("bpf-dualpi2: `{kv}` is not name=value"))?;
            let bad = |what: &str| anyhow::anyhow!("bpf-dualpi2: {k}={v}: {what}");
            let time = || dctcp_utils::duration::parse(v).map_err(|e| bad(&e));
            let num = || v.parse::<f64>().map_err(|_| bad("not a number"));
            let int = || v.parse::<u32>().map_err(|_| bad("not a whole number"));
            match k {
                "target" => d.target = time()?,
                "tupdate" => d.tupdate = time()?,
                "alpha" => d.alpha = num()?,
                "beta" => d.beta = num()?,
                "step_thresh" => {
                    d.step_thresh = match v.strip_suffix('p') {
                        Some(p) => Step::Packets(p.parse().map_err(|_| bad("not a count"))?),
                        None => Step::Time(time()?),
                    }
                }
                "min_qlen_step" => d.min_qlen_step = int()?,
                "coupling_factor" => d.coupling_factor = int()?,
                "drop_overload" => d.drop_overload = int()? != 0,
                "classic_protection" => d.classic_protection = int()?,
                "ecn_mask" => {
                    d.ecn_mask = match v {
                        "l4s_ect" => EcnMask::L4sEct,
                        "any_ect" => EcnMask::AnyEct,
                        _ => return Err(bad("use l4s_ect or any_ect")),
                    }
                }
                _ => anyhow::bail!(
                    "bpf-dualpi2: unknown parameter `{k}`: use target, tupdate, alpha, beta, \
                     step_thresh, min_qlen_step, coupling_factor, drop_overload, \
                     classic_protection, ecn_mask"
                ),
            }
        }
        d.validate()?;
        Ok(d)
    }
}

/// One queue of DualPI2 over a measured window: what arrived and what
/// the marker did to it, and the sojourn of what departed (from the
/// histogram, to its 32.8 us buckets), beside the error of the backlog
/// over rate the marker estimated it with at the packet's arrival.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueWindow {
    pub arrivals: u64,
    pub marked: u64,
    pub step_marked: u64,
    pub dropped: u64,
    pub taildrop: u64,
    pub departures: u64,
    /// Departures that carried their enqueue time: the sojourn's figures
    /// are theirs.
    pub stamped: u64,
    pub sojourn_mean_ms: f64,
    pub sojourn_p50_ms: f64,
    pub sojourn_p99_ms: f64,
    pub sojourn_p999_ms: f64,
    /// Mean |sojourn - estimate|, and mean sojourn - estimate (the bias).
    pub estimate_error_ms: f64,
    pub estimate_bias_ms: f64,
    /// The window's departures per sojourn bucket (2^DUALPI2_HIST_SHIFT ns).
    #[serde(skip)]
    pub hist: Vec<u64>,
}

impl QueueWindow {
    /// The sojourn's CDF: (0 at the first non-empty bucket's lower edge,
    /// half a bucket for the first), then one point per non-empty bucket:
    /// (its upper edge in ms, the share of departures at or under it).
    pub fn cdf_ms(&self) -> Vec<(f64, f64)> {
        let total: u64 = self.hist.iter().sum();
        let bucket_ms = f64::from(1u32 << DUALPI2_HIST_SHIFT) / 1e6;
        let Some(first) = self.hist.iter().position(|&n| n > 0) else {
            return Vec::new();
        };
        let start = (first as f64 * bucket_ms).max(bucket_ms / 2.0);
        let mut seen = 0;
        std::iter::once((start, 0.0))
            .chain(
                self.hist
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(|(i, &n)| {
                        seen += n;
                        ((i + 1) as f64 * bucket_ms, seen as f64 / total as f64)
                    }),
            )
            .collect()
    }
}

/// Both queues over a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dualpi2Window {
    pub l: QueueWindow,
    pub c: QueueWindow,
}

impl Dualpi2Window {
    /// From the counters read at the window's start and at its end.
    pub fn between(
        start: &[dualpi2_queue_stats; 2],
        end: &[dualpi2_queue_stats; 2],
    ) -> Dualpi2Window {
        let i = |q: u32| q as usize;
        Dualpi2Window {
            l: QueueWindow::between(&start[i(DUALPI2_L)], &end[i(DUALPI2_L)]),
            c: QueueWindow::between(&start[i(DUALPI2_C)], &end[i(DUALPI2_C)]),
        }
    }
}

impl QueueWindow {
    pub fn between(a: &dualpi2_queue_stats, b: &dualpi2_queue_stats) -> QueueWindow {
        let hist: Vec<u64> = b.hist.iter().zip(&a.hist).map(|(y, x)| y - x).collect();
        let stamped = b.stamped - a.stamped;
        let per = |sum: f64| sum / stamped.max(1) as f64 / 1e6;
        QueueWindow {
            arrivals: b.arrivals - a.arrivals,
            marked: b.marked - a.marked,
            step_marked: b.step_marked - a.step_marked,
            dropped: b.dropped - a.dropped,
            taildrop: b.taildrop - a.taildrop,
            departures: b.departures - a.departures,
            stamped,
            sojourn_mean_ms: per((b.sojourn_ns - a.sojourn_ns) as f64),
            sojourn_p50_ms: hist_quantile_ms(&hist, 0.5),
            sojourn_p99_ms: hist_quantile_ms(&hist, 0.99),
            sojourn_p999_ms: hist_quantile_ms(&hist, 0.999),
            estimate_error_ms: per((b.est_err_abs_ns - a.est_err_abs_ns) as f64),
            estimate_bias_ms: per(b.est_err_ns.wrapping_sub(a.est_err_ns) as f64),
            hist,
        }
    }
}

/// The `q` quantile of a sojourn histogram, ms: the middle of the bucket
/// it falls in (0 for an empty one).
pub fn hist_quantile_ms(hist: &[u64], q: f64) -> f64 {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let rank = (q * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    let bucket = hist
        .iter()
        .position(|&n| {
            seen += n;
            seen >= rank
        })
        .unwrap_or(hist.len() - 1);
    (bucket as f64 + 0.5) * f64::from(1u32 << DUALPI2_HIST_SHIFT) / 1e6
}

/// dualpi2.h's controller step: p' after one update from `prob`.
pub fn calculate_probability(c: &dualpi2_config, prob: u32, qdelay: u64, last_qdelay: u64) -> u32 {
    let delta = (qdelay as i64 - c.target_ns as i64) * i64::from(c.alpha)
        + (qdelay as i64 - last_qdelay as i64) * i64::from(c.beta);
    let new_prob = if delta > 0 {
        let p = ((delta as u64 >> GAIN_SHIFT).wrapping_add(u64::from(prob))) as u32;
        if p < prob {
            DUALPI2_PROB_ONE
        } else {
            p
        }
    } else {
        let p = prob.wrapping_sub(((delta.unsigned_abs()) >> GAIN_SHIFT) as u32);
        if p > prob {
            0
        } else {
            p
        }
    };
    if c.drop_overload == 0 && c.coupling != 0 {
        new_prob.min(DUALPI2_PROB_ONE / c.coupling)
    } else {
        new_prob
    }
}

/// dualpi2.h's classifier: the queue an ECN field joins.
pub fn classify(c: &dualpi2_config, ecn: u8) -> u32 {
    if u32::from(ecn) & c.ecn_mask != 0 {
        DUALPI2_L
    } else {
        DUALPI2_C
    }
}

/// dualpi2.h's decision on one traced arrival: (enum queue_action, step).
pub fn decide(c: &dualpi2_config, d: &dualpi2_decision) -> (u32, bool) {
    let roll = |r: u32, p: u64| u64::from(r) <= p;
    let classic = roll(d.roll1, d.prob.into()) && roll(d.roll2, d.prob.into());
    let hit = if d.ecn != 0 {
        queue_action_QA_MARK
    } else {
        queue_action_QA_DROP
    };
    let l_prob = u64::from(d.prob) * u64::from(c.coupling);
    if u32::from(d.queue) == DUALPI2_C {
        let hit_c = d.backlog >= c.min_backlog && classic;
        return (if hit_c { hit } else { queue_action_QA_PASS }, false);
    }
    if d.backlog >= c.min_backlog {
        if l_prob > u64::from(DUALPI2_PROB_ONE) {
            let drop = c.drop_overload != 0 && classic;
            return (if drop { queue_action_QA_DROP } else { hit }, false);
        }
        if roll(d.roll_l, l_prob) {
            return (hit, false);
        }
    }
    let deep = if c.step_pkts != 0 {
        d.l_qlen >= c.step_pkts
    } else {
        d.l_wait_ns >= c.step_ns
    };
    if deep && d.l_qlen >= c.min_qlen_step {
        (hit, true)
    } else {
        (queue_action_QA_PASS, false)
    }
}

/// The tcx front end's estimate of a packet's wait behind `backlog` bytes
/// on a link of `ns_per_kbyte` (struct link_rate), ns, as it traces it
/// (saturated at u32::MAX).
pub fn estimated_wait_ns(backlog: u32, ns_per_kbyte: u32) -> u32 {
    ((u64::from(backlog) * u64::from(ns_per_kbyte)) >> 10).min(u64::from(u32::MAX)) as u32
}

/// Replays traced controller updates: the first where the model's p'
/// differs from the program's, as (index, model's p').
pub fn first_update_mismatch(
    c: &dualpi2_config,
    updates: &[dualpi2_update],
) -> Option<(usize, u32)> {
    updates.iter().enumerate().find_map(|(i, u)| {
        let want =
            calculate_probability(c, u.prob_before, u.qdelay_l.max(u.qdelay_c), u.last_qdelay);
        (want != u.prob_after).then_some((i, want))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intf::{dualpi2_update, DUALPI2_HIST_BUCKETS};

    fn cfg() -> dualpi2_config {
        Dualpi2::default().to_bpf()
    }

    /// sch_dualpi2's defaults, 41 and 819 in 1/256 Hz, scale to 44 and 879.
    #[test]
    fn the_default_gains_scale_as_the_kernel_scales_them() {
        assert_eq!(scale_gain(0.16), 44);
        assert_eq!(scale_gain(3.2), 879);
        let c = cfg();
        assert_eq!((c.alpha, c.beta), (44, 879));
        // The step as a time; its wait estimated at the link's rate: at 50
        // Mbit/s 1,024 bytes take 163,840 ns, so 6,250 bytes are 1 ms.
        assert_eq!((c.step_ns, c.step_pkts), (1_000_000, 0));
        assert_eq!(estimated_wait_ns(6_250, 163_840), 1_000_000);
        assert_eq!(estimated_wait_ns(6_249, 163_840), 999_840);
        assert_eq!(estimated_wait_ns(u32::MAX, u32::MAX), u32::MAX);
        assert_eq!((c.target_ns, c.tupdate_ns), (15_000_000, 16_000_000));
    }

    /// One step by hand: 1 ms over target, steady: 44 * 1e6 >> 6 = 687,500
    /// (1.6e-4 of 1: alpha times the error in seconds); a 1 ms rise adds
    /// beta's 879 * 1e6 >> 6.
    #[test]
    fn the_controller_moves_by_alpha_and_beta_and_stays_in_range() {
        let c = cfg();
        let ms = 1_000_000u64;
        assert_eq!(calculate_probability(&c, 0, 16 * ms, 16 * ms), 687_500);
        assert_eq!(
            calculate_probability(&c, 0, 16 * ms, 15 * ms),
            (44_000_000 + 879_000_000) >> 6
        );
        assert_eq!(calculate_probability(&c, 1000, 14 * ms, 14 * ms), 0);
        assert_eq!(
            calculate_probability(&c, DUALPI2_PROB_ONE - 10, 100 * ms, 0),
            DUALPI2_PROB_ONE
        );
        // Without drop_overload p' stops where k p' is 1.
        let mut c2 = c;
        c2.drop_overload = 0;
        assert_eq!(
            calculate_probability(&c2, DUALPI2_PROB_ONE / 2, 100 * ms, 0),
            DUALPI2_PROB_ONE / 2
        );
    }

    /// The edges: a rise or fall smaller than one unit leaves p' as it
    /// was (no wrap to 1 or to 0); a fall by alpha alone.
    #[test]
    fn the_controller_keeps_p_through_steps_below_its_resolution() {
        let c = cfg();
        let t = c.target_ns;
        let p = 1_000_000_000;
        assert_eq!(calculate_probability(&c, p, t + 1, t + 1), p);
        assert_eq!(calculate_probability(&c, p, t - 1, t - 1), p);
        assert_eq!(
            calculate_probability(&c, p, t - 1_000_000, t - 1_000_000),
            p - 687_500
        );
    }

    /// Replaying the model's own updates finds nothing; a tampered one is
    /// named with the model's value.
    #[test]
    fn a_replay_names_the_first_update_the_model_disagrees_with() {
        let c = cfg();
        let ms = 1_000_000u64;
        let mut updates = Vec::new();
        let (mut prob, mut last) = (0u32, 0u64);
        for q in [16, 18, 20, 14, 15] {
            let after = calculate_probability(&c, prob, q * ms, last);
            updates.push(dualpi2_update {
                qdelay_l: 0,
                qdelay_c: q * ms,
                last_qdelay: last,
                prob_before: prob,
                prob_after: after,
                ..Default::default()
            });
            (prob, last) = (after, q * ms);
        }
        assert_eq!(first_update_mismatch(&c, &updates), None);
        let want = updates[2].prob_after;
        updates[2].prob_after += 1;
        assert_eq!(first_update_mismatch(&c, &updates), Some((2, want)));
        // The larger queue's delay counts.
        updates[2].prob_after = want;
        (updates[3].qdelay_l, updates[3].qdelay_c) = (updates[3].qdelay_c, 0);
        assert_eq!(first_update_mismatch(&c, &updates), None);
    }

    fn arrival(queue: u32, ecn: u8, prob: u32) -> dualpi2_decision {
        dualpi2_decision {
            prob,
            backlog: 10 * PKT_BYTES,
            queue: queue as u8,
            ecn,
            ..Default::default()
        }
    }

    #[test]
    fn classic_packets_are_hit_with_p_squared_and_scalable_with_k_p() {
        let c = cfg();
        let half = DUALPI2_PROB_ONE / 2;
        let mut d = arrival(DUALPI2_C, 2, half);
        (d.roll1, d.roll2) = (half, half);
        assert_eq!(decide(&c, &d), (queue_action_QA_MARK, false));
        d.roll2 = half + 1;
        assert_eq!(decide(&c, &d), (queue_action_QA_PASS, false));
        d = arrival(DUALPI2_C, 0, half);
        assert_eq!(decide(&c, &d), (queue_action_QA_DROP, false));
        // Under 2 MTU nothing is hit.
        d.backlog = 2 * PKT_BYTES - 1;
        assert_eq!(decide(&c, &d), (queue_action_QA_PASS, false));
        // L: k p' = 2 * 0.3; a draw under it marks, one above passes.
        let p = (0.3 * f64::from(DUALPI2_PROB_ONE)) as u32;
        let mut l = arrival(DUALPI2_L, 1, p);
        l.roll_l = 2 * p;
        assert_eq!(decide(&c, &l), (queue_action_QA_MARK, false));
        l.roll_l = 2 * p + 1;
        assert_eq!(decide(&c, &l), (queue_action_QA_PASS, false));
        // The step: a wait of 1 ms in L, and not a nanosecond less.
        l.l_wait_ns = c.step_ns - 1;
        assert_eq!(decide(&c, &l), (queue_action_QA_PASS, false));
        l.l_wait_ns = c.step_ns;
        assert_eq!(decide(&c, &l), (queue_action_QA_MARK, true));
        // Overload (k p' > 1): marked, or dropped by the classic rule.
        let mut o = arrival(DUALPI2_L, 1, (0.6 * f64::from(DUALPI2_PROB_ONE)) as u32);
        (o.roll1, o.roll2) = (DUALPI2_PROB_ONE, DUALPI2_PROB_ONE);
        assert_eq!(decide(&c, &o), (queue_action_QA_MARK, false));
        (o.roll1, o.roll2) = (0, 0);
        assert_eq!(decide(&c, &o), (queue_action_QA_DROP, false));
    }

    /// k p' exactly 1 is not overload (k = 3, p' = 1/3): marked by the
    /// coupling, not dropped by the classic rule. The step in packets.
    #[test]
    fn overload_starts_above_k_p_of_one_and_the_step_counts_packets_when_asked() {
        let mut c = cfg();
        c.coupling = 3;
        let mut d = arrival(DUALPI2_L, 1, 0x5555_5555);
        d.roll_l = DUALPI2_PROB_ONE;
        assert_eq!(decide(&c, &d), (queue_action_QA_MARK, false));
        d.prob += 1;
        assert_eq!(decide(&c, &d), (queue_action_QA_DROP, false));
        let mut c = cfg();
        (c.step_pkts, c.min_qlen_step) = (5, 2);
        let mut d = arrival(DUALPI2_L, 1, 0);
        d.roll_l = 1;
        d.l_qlen = 4;
        d.l_wait_ns = u32::MAX;
        assert_eq!(decide(&c, &d), (queue_action_QA_PASS, false));
        d.l_qlen = 5;
        assert_eq!(decide(&c, &d), (queue_action_QA_MARK, true));
        // Not while the L queue holds fewer than min_qlen_step.
        (c.step_pkts, c.min_qlen_step) = (0, 6);
        assert_eq!(decide(&c, &d), (queue_action_QA_PASS, false));
    }

    #[test]
    fn ect1_and_ce_join_l_by_default_and_any_ect_with_any_ect() {
        let c = cfg();
        assert_eq!(
            [0, 1, 2, 3].map(|e| classify(&c, e)),
            [DUALPI2_C, DUALPI2_L, DUALPI2_C, DUALPI2_L]
        );
        let any = Dualpi2 {
            ecn_mask: EcnMask::AnyEct,
            ..Default::default()
        };
        let c = any.to_bpf();
        assert_eq!(
            [0, 1, 2, 3].map(|e| classify(&c, e)),
            [DUALPI2_C, DUALPI2_L, DUALPI2_L, DUALPI2_L]
        );
    }

    /// Quantiles at bucket middles: 98 packets in the first bucket, one in
    /// the 31st (1 ms), one in the last (everything from 67 ms).
    #[test]
    fn a_window_counts_its_own_departures_and_reads_quantiles_off_the_histogram() {
        let mut a = dualpi2_queue_stats::default();
        a.hist[0] = 10;
        a.departures = 40;
        a.stamped = 10;
        a.sojourn_ns = 1_000;
        (a.arrivals, a.marked, a.step_marked, a.dropped, a.taildrop) = (50, 5, 4, 3, 2);
        let mut b = a;
        (b.arrivals, b.marked, b.step_marked, b.dropped, b.taildrop) = (150, 15, 8, 9, 3);
        b.hist[0] += 98;
        b.hist[30] += 1;
        b.hist[DUALPI2_HIST_BUCKETS as usize - 1] += 1;
        b.departures += 400;
        b.stamped += 100;
        b.sojourn_ns += 100 * 2_000_000;
        b.est_err_ns = a.est_err_ns.wrapping_sub(100 * 500_000);
        a.est_err_abs_ns = 7_000;
        b.est_err_abs_ns = 7_000 + 100 * 500_000;
        let w = QueueWindow::between(&a, &b);
        assert_eq!(
            (w.arrivals, w.marked, w.step_marked, w.dropped, w.taildrop),
            (100, 10, 4, 6, 1)
        );
        // The sojourn's sums are over the stamped departures.
        assert_eq!((w.departures, w.stamped), (400, 100));
        assert_eq!(w.sojourn_mean_ms, 2.0);
        assert_eq!(w.sojourn_p50_ms, 0.016384);
        assert!(
            (w.sojourn_p99_ms - 30.5 * 0.032768).abs() < 1e-9,
            "{}",
            w.sojourn_p99_ms
        );
        assert!(w.sojourn_p999_ms > 67.0, "{}", w.sojourn_p999_ms);
        assert_eq!((w.estimate_error_ms, w.estimate_bias_ms), (0.5, -0.5));
        let cdf = w.cdf_ms();
        assert_eq!(cdf.len(), 4);
        assert_eq!(cdf[0], (0.016384, 0.0));
        assert_eq!(cdf[1], (0.032768, 0.98));
        assert_eq!(cdf[2].1, 0.99);
        assert_eq!(cdf[3].1, 1.0);
        assert!(QueueWindow::default().cdf_ms().is_empty());
        // A first sample in bucket 3 starts the curve at its lower edge.
        let mut later = dualpi2_queue_stats::default();
        later.hist[3] = 2;
        later.hist[5] = 2;
        let w = QueueWindow::between(&dualpi2_queue_stats::default(), &later);
        assert_eq!(
            w.cdf_ms(),
            [
                (3.0 * 0.032768, 0.0),
                (4.0 * 0.032768, 0.5),
                (6.0 * 0.032768, 1.0)
            ]
        );
        // Both queues at once, L first.
        let both = Dualpi2Window::between(&[a, dualpi2_queue_stats::default()], &[b, later]);
        assert_eq!((both.l.stamped, both.c.hist[3]), (100, 2));
        assert_eq!(hist_quantile_ms(&[0; 4], 0.5), 0.0);
    }

    #[test]
    fn parameters_parse_by_their_tc_names_and_bad_ones_say_why() {
        let d =
            Dualpi2::parse("target=5ms,step_thresh=30p,ecn_mask=any_ect,drop_overload=0").unwrap();
        assert_eq!(d.target, Duration::from_millis(5));
        assert_eq!(d.step_thresh, Step::Packets(30));
        assert_eq!(d.ecn_mask, EcnMask::AnyEct);
        assert!(!d.drop_overload);
        assert_eq!(Dualpi2::parse("").unwrap(), Dualpi2::default());
        let d =
            Dualpi2::parse("beta=1.5,min_qlen_step=3,ecn_mask=l4s_ect,step_thresh=2ms").unwrap();
        assert_eq!((d.beta, d.min_qlen_step), (1.5, 3));
        assert_eq!(d.ecn_mask, EcnMask::L4sEct);
        assert_eq!(d.step_thresh, Step::Time(Duration::from_millis(2)));
        // The message gives the value it refused, in ms.
        let e = format!("{:#}", Dualpi2::parse("tupdate=500us").unwrap_err());
        assert!(e.contains("tupdate 0.5 ms"), "{e}");
        for (bad, says) in [
            ("targets=5ms", "unknown parameter"),
            ("target", "not name=value"),
            ("alpha=x", "not a number"),
            ("alpha=0", "1/256"),
            ("classic_protection=0", "1..=99"),
            ("coupling_factor=0", "1..=255"),
            ("tupdate=500us", "1 ms to 1 s"),
            ("ecn_mask=ect0", "l4s_ect or any_ect"),
        ] {
            let e = format!("{:#}", Dualpi2::parse(bad).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
