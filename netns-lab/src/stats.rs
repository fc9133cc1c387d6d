//! Summaries of samples: mean, percentiles, CDF, Jain's index.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub p5: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// The q-quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub fn summarize(values: &[f64]) -> Summary {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return Summary::default();
    }
    Summary {
        n: v.len(),
        mean: v.iter().sum::<f64>() / v.len() as f64,
        min: v[0],
        p5: quantile(&v, 0.05),
        p50: quantile(&v, 0.50),
        p95: quantile(&v, 0.95),
        p99: quantile(&v, 0.99),
        max: v[v.len() - 1],
    }
}

/// Summary of (value, weight) pairs, each value counting by its weight (the
/// time it held): quantiles are the least value whose cumulative weight
/// reaches the fraction. `n` counts pairs.
pub fn weighted_summary(pairs: &[(f64, f64)]) -> Summary {
    let mut v = pairs.to_vec();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = v.iter().map(|p| p.1).sum();
    if v.is_empty() || total <= 0.0 {
        return Summary::default();
    }
    let quantile = |q: f64| {
        let mut acc = 0.0;
        for &(x, w) in &v {
            acc += w;
            if acc >= q * total {
                return x;
            }
        }
        v[v.len() - 1].0
    };
    Summary {
        n: v.len(),
        mean: v.iter().map(|p| p.0 * p.1).sum::<f64>() / total,
        min: v[0].0,
        p5: quantile(0.05),
        p50: quantile(0.50),
        p95: quantile(0.95),
        p99: quantile(0.99),
        max: v[v.len() - 1].0,
    }
}

/// (value, fraction of samples <= value) at each distinct value.
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len() as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, x) in v.iter().enumerate() {
        match out.last_mut() {
            Some(last) if last.0 == *x => last.1 = (i + 1) as f64 / n,
            _ => out.push((*x, (i + 1) as f64 / n)),
        }
    }
    out
}

/// The arithmetic mean, NaN for no values.
pub fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        return f64::NAN;
    }
    x.iter().sum::<f64>() / x.len() as f64
}

/// Standard deviation over mean (population), NaN for no values or a mean
/// not above 0.
pub fn cov(x: &[f64]) -> f64 {
    let m = mean(x);
    if m.is_nan() || m <= 0.0 {
        return f64::NAN;
    }
    let var = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / x.len() as f64;
    var.sqrt() / m
}

/// Jain's fairness index of allocations: 1 when equal, 1/n when one takes all.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if s2 == 0.0 {
        return f64::NAN;
    }
    s * s / (x.len() as f64 * s2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_mean() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = summarize(&v);
        assert_eq!(
            (s.min, s.p5, s.p50, s.p95, s.p99, s.max),
            (1.0, 5.0, 50.0, 95.0, 99.0, 100.0)
        );
        assert!((s.mean - 50.5).abs() < 1e-9);
    }

    #[test]
    fn weighted_quantiles_follow_the_weights() {
        // 0 held 90 % of the time, 10 held 10 %: mean 1, median 0, p95 10.
        let s = weighted_summary(&[(10.0, 1.0), (0.0, 9.0)]);
        assert!((s.mean - 1.0).abs() < 1e-12);
        assert_eq!((s.min, s.p50, s.p95, s.max, s.n), (0.0, 0.0, 10.0, 10.0, 2));
        // Equal weights give what summarize gives.
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let w: Vec<(f64, f64)> = v.iter().map(|&x| (x, 0.5)).collect();
        let (a, b) = (weighted_summary(&w), summarize(&v));
        assert_eq!((a.p5, a.p50, a.p95, a.p99), (b.p5, b.p50, b.p95, b.p99));
        assert!(weighted_summary(&[]).mean == 0.0);
    }

    #[test]
    fn cdf_steps() {
        assert_eq!(
            cdf(&[2.0, 1.0, 2.0, 3.0]),
            vec![(1.0, 0.25), (2.0, 0.75), (3.0, 1.0)]
        );
    }

    #[test]
    fn jain_bounds() {
        assert!((jain(&[5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[10.0, 0.0]) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn weighted_summary_counts_each_value_by_its_weight() {
        // 1 held for 1 s, 2 held for 3 s: 2 is the median and the mean is
        // (1 + 6) / 4.
        let s = weighted_summary(&[(2.0, 3.0), (1.0, 1.0)]);
        assert_eq!((s.n, s.min, s.max), (2, 1.0, 2.0));
        assert_eq!((s.p5, s.p50, s.p95), (1.0, 2.0, 2.0));
        assert!((s.mean - 1.75).abs() < 1e-12, "{}", s.mean);
        // Nothing held any time: nothing to summarize.
        assert_eq!(weighted_summary(&[(5.0, 0.0)]).n, 0);
        assert_eq!(weighted_summary(&[]).n, 0);
    }

    #[test]
    fn cov_is_undefined_for_a_mean_of_zero() {
        assert!(cov(&[-1.0, 1.0]).is_nan());
        assert!(cov(&[]).is_nan());
        assert!((cov(&[1.0, 3.0]) - 0.5).abs() < 1e-12);
    }
}
