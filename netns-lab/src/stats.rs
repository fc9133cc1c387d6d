//! Summaries of samples: mean, percentiles, CDF, Jain's index.

use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
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
}
