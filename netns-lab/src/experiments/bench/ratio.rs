//! A comparison's rounds as a ratio: median, range and the median's 95 %
//! interval.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    pub what: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// 95 % interval of the median: percentile bootstrap over the rounds.
    pub ci: (f64, f64),
}

fn median_of(sorted: &[f64]) -> f64 {
    sorted[sorted.len() / 2]
}

pub(super) fn ratio(what: String, v: &mut [f64]) -> Ratio {
    v.sort_by(f64::total_cmp);
    Ratio {
        what,
        median: median_of(v),
        min: v[0],
        max: v[v.len() - 1],
        ci: median_interval(v),
    }
}

/// The 2.5th and 97.5th percentiles of the medians of 2,000 resamples
/// (with replacement, seeded: the same rounds give the same interval).
fn median_interval(v: &[f64]) -> (f64, f64) {
    let mut rng = crate::rng::Rng(0x5eed);
    let mut medians: Vec<f64> = (0..2000)
        .map(|_| {
            let mut r: Vec<f64> = (0..v.len())
                .map(|_| v[(rng.next_u64() % v.len() as u64) as usize])
                .collect();
            r.sort_by(f64::total_cmp);
            median_of(&r)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    (medians[50], medians[1949])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_medians_interval_holds_the_median_and_narrows_with_rounds() {
        assert_eq!(median_interval(&[1.0; 5]), (1.0, 1.0));
        let spread = |n: usize| -> Vec<f64> {
            let mut rng = crate::rng::Rng(7);
            let mut v: Vec<f64> = (0..n).map(|_| 0.85 + 0.3 * rng.unit()).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let (few, many) = (spread(5), spread(200));
        let (a, b) = median_interval(&few);
        assert!(a <= median_of(&few) && median_of(&few) <= b, "{a} {b}");
        let (c, d) = median_interval(&many);
        assert!(c <= median_of(&many) && median_of(&many) <= d);
        assert!(d - c < (b - a) / 3.0, "{} against {}", d - c, b - a);
    }

    #[test]
    fn a_ratio_is_the_median_and_range_of_the_rounds() {
        let r = ratio("x".into(), &mut [3.0, 1.0, 2.0, 5.0, 4.0]);
        assert_eq!((r.median, r.min, r.max), (3.0, 1.0, 5.0));
        assert!(r.ci.0 <= 3.0 && 3.0 <= r.ci.1);
    }
}
