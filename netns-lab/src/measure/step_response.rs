//! How a queue answers a change of the link's rate: the queue delay every
//! arrival found (its backlog over the link's rate at that moment), before
//! the change, at its peak after it, where it settles, and how long it took
//! to come back down to that level.

use serde::{Deserialize, Serialize};
use tc_qdisc::intf::queue_sample;

use crate::net::rate_schedule::{rate_at, AppliedRate};

/// Bins of the queue delay: the peak is the largest 20 ms mean (not one
/// packet's), the way back is judged on 100 ms means.
const PEAK_BIN_NS: u64 = 20_000_000;
const SETTLE_BIN_NS: u64 = 100_000_000;
/// The settled level is the median 100 ms mean over the last 40 % of the
/// time after the change.
const SETTLED_TAIL: f64 = 0.4;
/// Back means at most a quarter over the settled level, or 1 ms over it,
/// whichever is larger (a sawtooth's 100 ms means swing wider than that
/// around the level, so the time is to the first one back, not to the last
/// one outside).
const BACK_WITHIN_SHARE: f64 = 0.25;
const BACK_WITHIN_MIN_MS: f64 = 1.0;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepResponse {
    pub from_bps: u64,
    pub to_bps: u64,
    /// Mean queue delay from the window's start to the change, ms.
    pub before_ms: f64,
    /// The largest 20 ms mean after the change, ms, and when it was, s
    /// after the change.
    pub peak_ms: f64,
    pub peak_at_s: f64,
    /// Where the queue settled at the new rate, ms.
    pub settled_ms: f64,
    /// From the change to the end of the first 100 ms after the peak whose
    /// mean is back at the settled level (within the margin), s (None:
    /// never).
    pub back_s: Option<f64>,
    /// The queue delay over time: (s from the change, ms), one point per
    /// 20 ms bin.
    #[serde(skip)]
    pub series: Vec<(f64, f64)>,
}

/// Queue delay of each arrival, (ns, ms), at the link's rate then.
fn delays(samples: &[queue_sample], initial: u64, applied: &[AppliedRate]) -> Vec<(u64, f64)> {
    samples
        .iter()
        .map(|s| {
            let rate = rate_at(initial, applied, s.ts_ns).max(1);
            (s.ts_ns, f64::from(s.backlog) * 8e3 / rate as f64)
        })
        .collect()
}

/// Means of `(ns, ms)` points per bin of `bin_ns` from `from_ns`: (bin's
/// start in ns, mean); empty bins left out.
fn binned(points: &[(u64, f64)], from_ns: u64, bin_ns: u64) -> Vec<(u64, f64)> {
    let mut bins: Vec<(u64, f64, u32)> = Vec::new();
    for &(ns, ms) in points.iter().filter(|p| p.0 >= from_ns) {
        let start = from_ns + (ns - from_ns) / bin_ns * bin_ns;
        match bins.last_mut() {
            Some(b) if b.0 == start => {
                b.1 += ms;
                b.2 += 1;
            }
            _ => bins.push((start, ms, 1)),
        }
    }
    bins.into_iter().map(|(s, sum, n)| (s, sum / f64::from(n))).collect()
}

impl StepResponse {
    /// The response to the first change in `applied`, from the window's
    /// arrivals (`samples`, from its start to its end); None without a
    /// change, or without arrivals on either side of it.
    pub fn of(samples: &[queue_sample], initial: u64, applied: &[AppliedRate]) -> Option<StepResponse> {
        let change = *applied.first()?;
        let points = delays(samples, initial, applied);
        let before: Vec<f64> = points.iter().filter(|p| p.0 < change.ns).map(|p| p.1).collect();
        let after = binned(&points, change.ns, PEAK_BIN_NS);
        let end_ns = points.last()?.0;
        if before.is_empty() || after.is_empty() || end_ns <= change.ns {
            return None;
        }
        let s_after = |ns: u64| (ns - change.ns) as f64 / 1e9;
        let (peak_ns, peak_ms) = after
            .iter()
            .copied()
            .fold((change.ns, f64::MIN), |m, b| if b.1 > m.1 { b } else { m });
        let mut coarse = binned(&points, change.ns, SETTLE_BIN_NS);
        // A last bin of under half its time is a sliver, not judged.
        if coarse.last().is_some_and(|b| end_ns - b.0 < SETTLE_BIN_NS / 2) {
            coarse.pop();
        }
        let tail_from = change.ns + ((end_ns - change.ns) as f64 * (1.0 - SETTLED_TAIL)) as u64;
        let mut tail: Vec<f64> = coarse.iter().filter(|b| b.0 >= tail_from).map(|b| b.1).collect();
        tail.sort_by(f64::total_cmp);
        let settled_ms = tail.get(tail.len() / 2).copied().unwrap_or(peak_ms);
        let margin = (BACK_WITHIN_SHARE * settled_ms).max(BACK_WITHIN_MIN_MS);
        let back_s = coarse
            .iter()
            .find(|b| b.0 + SETTLE_BIN_NS > peak_ns && b.1 <= settled_ms + margin)
            .map(|b| s_after(b.0 + SETTLE_BIN_NS));
        Some(StepResponse {
            from_bps: initial,
            to_bps: change.rate_bps,
            before_ms: before.iter().sum::<f64>() / before.len() as f64,
            peak_ms,
            peak_at_s: s_after(peak_ns),
            settled_ms,
            back_s,
            series: binned(&points, samples.first()?.ts_ns, PEAK_BIN_NS)
                .into_iter()
                .map(|(ns, ms)| ((ns as f64 - change.ns as f64) / 1e9, ms))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// One arrival per ms with `backlog(t_ms)` bytes queued.
    fn arrivals(until_ms: u64, backlog: impl Fn(u64) -> u32) -> Vec<queue_sample> {
        (0..until_ms)
            .map(|t| queue_sample {
                ts_ns: t * MS,
                backlog: backlog(t),
                ..Default::default()
            })
            .collect()
    }

    /// 50 Mbit/s for 2 s holding 1 ms of queue (6,250 bytes), then 25
    /// Mbit/s: the queue jumps to 20 ms, falls to 4 ms, and 1.5 s after the
    /// change to 2 ms, where it stays.
    #[test]
    fn a_step_reads_its_peak_where_it_settles_and_when_it_is_back() {
        let samples = arrivals(6_000, |t| match t {
            0..2_000 => 6_250,
            2_000..2_100 => 62_500,
            2_100..3_500 => 12_500,
            _ => 6_250,
        });
        let r = StepResponse::of(&samples, 50_000_000, &STEP).unwrap();
        assert_eq!((r.from_bps, r.to_bps), (50_000_000, 25_000_000));
        assert!((r.before_ms - 1.0).abs() < 1e-9, "{r:?}");
        // 62,500 bytes at 25 Mbit/s.
        assert!((r.peak_ms - 20.0).abs() < 1e-9, "{r:?}");
        assert!(r.peak_at_s < 0.1);
        assert!((r.settled_ms - 2.0).abs() < 1e-9, "{r:?}");
        // 4 ms is more than 1 ms over 2: back only at 1.5 s, once the
        // first 100 ms at 2 ms ended.
        assert!((r.back_s.unwrap() - 1.6).abs() < 1e-9, "{r:?}");
        assert!(r.series.iter().any(|&(t, ms)| t < 0.0 && (ms - 1.0).abs() < 1e-9));
        // Within a quarter of a deeper level: 10 ms from 0.5 s on.
        let deeper = arrivals(4_000, |t| match t {
            0..2_000 => 6_250,
            2_000..2_500 => 62_500,
            _ => 31_250,
        });
        let r = StepResponse::of(&deeper, 50_000_000, &STEP).unwrap();
        assert!((r.settled_ms - 10.0).abs() < 1e-9, "{r:?}");
        assert!((r.back_s.unwrap() - 0.6).abs() < 1e-9, "{r:?}");
    }

    /// A queue swinging around its level is back at the first 100 ms at
    /// it; one whose peak comes last is never back; a run without a change
    /// has no response at all.
    #[test]
    fn back_is_the_first_100_ms_at_the_level_after_the_peak() {
        // Every third 100 ms at 20 ms, the others at 2: the level is 2 ms,
        // the first peak the second bin, the third bin back.
        let swinging = arrivals(4_000, |t| match t {
            0..2_000 => 6_250,
            _ if ((t - 2_000) / 100) % 3 == 1 => 62_500,
            _ => 6_250,
        });
        let r = StepResponse::of(&swinging, 50_000_000, &STEP).unwrap();
        assert!((r.settled_ms - 2.0).abs() < 1e-9, "{r:?}");
        assert!((r.back_s.unwrap() - 0.3).abs() < 1e-9, "{r:?}");
        // A surge in the last 100 ms: the peak is last, and above the level.
        let late = arrivals(4_000, |t| if t < 3_900 { 6_250 } else { 62_500 });
        let r = StepResponse::of(&late, 50_000_000, &STEP).unwrap();
        assert!(r.peak_at_s > 1.8, "{r:?}");
        assert_eq!(r.back_s, None, "{r:?}");
        assert_eq!(StepResponse::of(&swinging, 50_000_000, &[]), None);
    }

    const STEP: [AppliedRate; 1] = [AppliedRate {
        ns: 2_000 * MS,
        rate_bps: 25_000_000,
    }];
}
