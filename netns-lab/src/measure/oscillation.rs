//! Measuring an oscillation such as DCTCP's sawtooth: a series put on a
//! uniform time grid, its period from the autocorrelation, the extremes of
//! each cycle, and how closely several series move together.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::stats::quantile;

/// Values held over time, `(value, seconds held)` from time 0, as the value
/// at each multiple of `dt`.
pub fn resample_steps(steps: &[(u32, f64)], dt: f64) -> Vec<f64> {
    let total: f64 = steps.iter().map(|s| s.1).sum();
    let n = (total / dt).floor() as usize;
    let mut out = Vec::with_capacity(n);
    let (mut i, mut end) = (0, steps.first().map_or(0.0, |s| s.1));
    for j in 0..n {
        let t = j as f64 * dt;
        while t >= end && i + 1 < steps.len() {
            i += 1;
            end += steps[i].1;
        }
        out.push(f64::from(steps[i].0));
    }
    out
}

/// Values set at times, `(t, value)` ascending, each held until the next,
/// as the value at `t0 + j dt` for every j up to `t1` (the first value
/// before the first time).
pub fn resample_events(points: &[(f64, f64)], t0: f64, t1: f64, dt: f64) -> Vec<f64> {
    let Some(first) = points.first() else {
        return Vec::new();
    };
    let n = ((t1 - t0) / dt).floor().max(0.0) as usize;
    let mut out = Vec::with_capacity(n);
    let (mut i, mut v) = (0, first.1);
    for j in 0..n {
        let t = t0 + j as f64 * dt;
        while i < points.len() && points[i].0 <= t {
            v = points[i].1;
            i += 1;
        }
        out.push(v);
    }
    out
}

/// The autocorrelation at lags 0 ..= max_lag of one series measured in
/// stretches (the gaps between them left out): products are taken within
/// each stretch, around the mean of them all. 1 at lag 0; all 0 if the
/// series is constant.
pub fn autocorrelation(stretches: &[&[f64]], max_lag: usize) -> Vec<f64> {
    let n: usize = stretches.iter().map(|s| s.len()).sum();
    let mean = stretches.iter().flat_map(|s| s.iter()).sum::<f64>() / n.max(1) as f64;
    let d: Vec<Vec<f64>> = stretches
        .iter()
        .map(|s| s.iter().map(|v| v - mean).collect())
        .collect();
    let var: f64 = d.iter().flatten().map(|v| v * v).sum();
    let longest = stretches.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..=max_lag.min(longest.saturating_sub(1)))
        .map(|lag| {
            if var <= 0.0 {
                return 0.0;
            }
            d.iter()
                .filter(|s| s.len() > lag)
                .map(|s| {
                    s[..s.len() - lag]
                        .iter()
                        .zip(&s[lag..])
                        .map(|(a, b)| a * b)
                        .sum::<f64>()
                })
                .sum::<f64>()
                / var
        })
        .collect()
}

/// The stretches of `x` clear of excursions above `limit`, each excursion
/// cut out with `before` steps before it and `after` after it.
pub fn clear_stretches(x: &[f64], limit: f64, before: usize, after: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < x.len() {
        if x[i] <= limit {
            i += 1;
            continue;
        }
        let end = i.saturating_sub(before);
        if end > start {
            out.push(start..end);
        }
        while i < x.len() && x[i] > limit {
            i += 1;
        }
        start = (i + after).min(x.len());
        i = start;
    }
    if start < x.len() {
        out.push(start..x.len());
    }
    out
}

/// A period found in a series.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Period {
    /// Grid steps (interpolated between them).
    pub lag: f64,
    pub seconds: f64,
    /// The autocorrelation there: near 1 for a clean oscillation, near 0
    /// for noise.
    pub strength: f64,
}

/// An autocorrelation peak lower than this is noise, not a period.
pub const MIN_STRENGTH: f64 = 0.1;

/// The period of a series sampled every `dt` seconds, looking at lags up to
/// `max_lag`: the first peak of its autocorrelation after the latter has
/// gone below zero (half a cycle), that is at least half the highest peak
/// there (so a peak at twice the period, which noise can make higher,
/// is not taken). None if the autocorrelation never goes negative or no
/// peak reaches `MIN_STRENGTH`.
pub fn period(stretches: &[&[f64]], dt: f64, max_lag: usize) -> Option<Period> {
    let acf = autocorrelation(stretches, max_lag);
    let z = acf.iter().position(|&r| r < 0.0)?;
    let top = acf[z..].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if top < MIN_STRENGTH {
        return None;
    }
    let peak = (z.max(1)..acf.len().saturating_sub(1))
        .find(|&i| acf[i] >= top / 2.0 && acf[i] >= acf[i - 1] && acf[i] >= acf[i + 1])
        .unwrap_or_else(|| z + acf[z..].iter().position(|&r| r == top).unwrap_or(0));
    // The vertex of the parabola through the peak and its neighbours.
    let offset = match (acf.get(peak.wrapping_sub(1)), acf.get(peak + 1)) {
        (Some(&a), Some(&c)) if peak > 0 => {
            let b = acf[peak];
            let curve = a - 2.0 * b + c;
            if curve < 0.0 {
                (0.5 * (a - c) / curve).clamp(-0.5, 0.5)
            } else {
                0.0
            }
        }
        _ => 0.0,
    };
    let lag = peak as f64 + offset;
    Some(Period {
        lag,
        seconds: lag * dt,
        strength: acf[peak],
    })
}

/// The extremes of a series cut into consecutive cycles of `len` grid steps
/// (medians over the cycles, so a burst in one cycle moves none of them).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Cycles {
    pub cycles: usize,
    /// Median of each cycle's highest value.
    pub top: f64,
    /// Median of each cycle's lowest value.
    pub bottom: f64,
    /// Median of each cycle's highest less its lowest: the amplitude.
    pub amplitude: f64,
}

/// Each stretch is cut from its own start; what is left at its end, less
/// than a cycle, is not counted.
pub fn cycles(stretches: &[&[f64]], len: f64) -> Cycles {
    if len < 1.0 {
        return Cycles::default();
    }
    let (mut tops, mut bottoms, mut spans) = (Vec::new(), Vec::new(), Vec::new());
    for x in stretches {
        let count = (x.len() as f64 / len).floor() as usize;
        for c in 0..count {
            let a = (c as f64 * len).round() as usize;
            let b = (((c + 1) as f64 * len).round() as usize).min(x.len());
            let cycle = &x[a..b];
            let hi = cycle.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lo = cycle.iter().copied().fold(f64::INFINITY, f64::min);
            tops.push(hi);
            bottoms.push(lo);
            spans.push(hi - lo);
        }
    }
    let count = tops.len();
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        quantile(&v, 0.5)
    };
    Cycles {
        cycles: count,
        top: median(tops),
        bottom: median(bottoms),
        amplitude: median(spans),
    }
}

/// Each value the mean of the `w` around it (fewer at the ends).
pub fn moving_average(x: &[f64], w: usize) -> Vec<f64> {
    if w <= 1 {
        return x.to_vec();
    }
    let mut prefix = Vec::with_capacity(x.len() + 1);
    prefix.push(0.0);
    for v in x {
        prefix.push(prefix.last().unwrap() + v);
    }
    (0..x.len())
        .map(|i| {
            let a = i.saturating_sub(w / 2);
            let b = (i + w - w / 2).min(x.len());
            (prefix[b] - prefix[a]) / (b - a) as f64
        })
        .collect()
}

/// Pearson's correlation of two series of one length; None if either is
/// constant.
pub fn correlation(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len().min(b.len());
    if n < 2 {
        return None;
    }
    let (ma, mb) = (
        a[..n].iter().sum::<f64>() / n as f64,
        b[..n].iter().sum::<f64>() / n as f64,
    );
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a[..n].iter().zip(&b[..n]) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    (saa > 0.0 && sbb > 0.0).then(|| sab / (saa * sbb).sqrt())
}

/// How synchronized several series are: the mean correlation over every
/// pair of them, and the number of pairs it averages (pairs with a
/// constant series have none).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Synchrony {
    pub mean_correlation: f64,
    pub pairs: usize,
}

pub fn synchrony(series: &[Vec<f64>]) -> Option<Synchrony> {
    let mut sum = 0.0;
    let mut pairs = 0;
    for i in 0..series.len() {
        for j in i + 1..series.len() {
            if let Some(r) = correlation(&series[i], &series[j]) {
                sum += r;
                pairs += 1;
            }
        }
    }
    (pairs > 0).then(|| Synchrony {
        mean_correlation: sum / pairs as f64,
        pairs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// A sawtooth from `bottom` up to `bottom + amp` over `len` steps, then
    /// down at once, plus noise of +/- `noise`.
    fn sawtooth(n: usize, len: f64, bottom: f64, amp: f64, noise: f64, phase: f64) -> Vec<f64> {
        let mut rng = Rng(7);
        (0..n)
            .map(|i| {
                let frac = ((i as f64 + phase) / len).fract();
                bottom + amp * frac + noise * (2.0 * rng.unit() - 1.0)
            })
            .collect()
    }

    #[test]
    fn a_clean_sawtooth_gives_its_period_and_amplitude() {
        // T_c 37.5 steps (not whole), A 12 above 30.
        let x = sawtooth(20_000, 37.5, 30.0, 12.0, 0.0, 11.0);
        let p = period(&[&x], 1e-5, 200).unwrap();
        assert!((p.lag - 37.5).abs() < 0.5, "{p:?}");
        assert!((p.seconds - 37.5e-5).abs() < 5e-6);
        assert!(p.strength > 0.9, "{p:?}");
        let c = cycles(&[&x], p.lag);
        assert!((c.amplitude - 12.0).abs() < 0.8, "{c:?}");
        assert!(
            (c.top - 42.0).abs() < 0.8 && (c.bottom - 30.0).abs() < 0.8,
            "{c:?}"
        );
    }

    #[test]
    fn noise_moves_neither_much() {
        let x = sawtooth(50_000, 120.0, 10.0, 8.0, 2.0, 0.0);
        let p = period(&[&x], 1.0, 600).unwrap();
        // Not the harmonic at 240, though noise may make it as high.
        assert!((p.lag - 120.0).abs() < 2.0, "{p:?}");
        assert!(p.strength > 0.5, "{p:?}");
        // The raw extremes carry the noise (+/- 2); averaged over a few
        // steps it mostly goes.
        let raw = cycles(&[&x], p.lag);
        assert!(raw.amplitude > 8.0 + 2.0, "{raw:?}");
        let smooth = cycles(&[&moving_average(&x, 9)], p.lag);
        assert!((smooth.amplitude - 8.0).abs() < 1.5, "{smooth:?}");
    }

    #[test]
    fn noise_alone_has_no_period() {
        let mut rng = Rng(3);
        let x: Vec<f64> = (0..20_000).map(|_| rng.unit()).collect();
        assert!(period(&[&x], 1.0, 300).is_none());
        assert!(period(&[&[5.0; 1000]], 1.0, 100).is_none());
    }

    /// Bursts far above the sawtooth every so often: cut out, the stretches
    /// between them give the sawtooth's figures; left in, the bursts' own.
    #[test]
    fn bursts_cut_out_leave_the_sawtooth() {
        let mut x = sawtooth(40_000, 40.0, 15.0, 6.0, 0.5, 0.0);
        for start in [5_000, 17_000, 31_000] {
            for (i, v) in x[start..start + 600].iter_mut().enumerate() {
                *v = 150.0 - i as f64 * 0.2;
            }
        }
        let stretches = clear_stretches(&x, 40.0, 50, 200);
        assert_eq!(
            stretches,
            vec![0..4_950, 5_750..16_950, 17_750..30_950, 31_750..40_000]
        );
        let parts: Vec<&[f64]> = stretches.iter().map(|r| &x[r.clone()]).collect();
        let p = period(&parts, 1.0, 300).unwrap();
        assert!((p.lag - 40.0).abs() < 1.0, "{p:?}");
        let c = cycles(&parts, p.lag);
        assert!((c.amplitude - 6.0).abs() < 1.5 && c.top < 23.0, "{c:?}");
        // The whole series: the bursts swamp the sawtooth.
        let whole = cycles(&[&x], 40.0);
        assert!(whole.cycles > c.cycles);
        assert!(clear_stretches(&[50.0; 10], 40.0, 1, 1).is_empty());
    }

    #[test]
    fn resampling_holds_each_value_until_the_next() {
        // 3 for 2.5 s, 7 for 1 s, 1 for 0.6 s.
        let steps = [(3, 2.5), (7, 1.0), (1, 0.6)];
        assert_eq!(resample_steps(&steps, 1.0), vec![3.0, 3.0, 3.0, 7.0]);
        let events = [(10.0, 1.0), (10.25, 2.0), (10.5, 4.0)];
        assert_eq!(
            resample_events(&events, 10.0, 11.0, 0.2),
            vec![1.0, 1.0, 2.0, 4.0, 4.0]
        );
    }

    #[test]
    fn synchrony_is_one_in_step_and_minus_one_opposed() {
        let a = sawtooth(5_000, 50.0, 0.0, 10.0, 0.0, 0.0);
        let b: Vec<f64> = a.iter().map(|v| 2.0 * v + 1.0).collect();
        let c: Vec<f64> = a.iter().map(|v| 10.0 - v).collect();
        let s = synchrony(&[a.clone(), b]).unwrap();
        assert!((s.mean_correlation - 1.0).abs() < 1e-9);
        assert!((synchrony(&[a.clone(), c]).unwrap().mean_correlation + 1.0).abs() < 1e-9);
        // Independent phases: near 0.
        let d = sawtooth(5_000, 50.0 * 1.37, 0.0, 10.0, 0.0, 0.0);
        assert!(synchrony(&[a.clone(), d]).unwrap().mean_correlation.abs() < 0.1);
        // A constant series pairs with nothing.
        let s = synchrony(&[a, vec![2.0; 5_000]]);
        assert!(s.is_none());
    }
}
