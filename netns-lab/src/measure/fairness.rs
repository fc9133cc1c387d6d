//! How flows share a link over time, from each flow's rate in successive
//! intervals (the receiver's byte counts): how long after a change they
//! take to settle at the fair share, and how evenly and steadily they
//! share it once there.

use std::ops::Range;

use crate::stats::{cov, jain, mean};

/// When flows count as converged: each within `tolerance` (a fraction) of
/// the fair share, in every interval or in the mean of every `smooth`
/// consecutive ones, for `hold` seconds.
#[derive(Clone, Copy, Debug)]
pub struct Criterion {
    pub tolerance: f64,
    pub hold: f64,
    pub smooth: usize,
}

/// Rates of flows on one grid of intervals: interval j ends `ends[j]`
/// seconds after the run starts (and begins where j - 1 ended, or at 0);
/// `rates[f][j]` is flow f's rate in it.
#[derive(Clone, Copy)]
pub struct Grid<'a> {
    pub ends: &'a [f64],
    pub rates: &'a [Vec<f64>],
}

impl Grid<'_> {
    fn begin(&self, j: usize) -> f64 {
        j.checked_sub(1).map_or(0.0, |i| self.ends[i])
    }

    /// The intervals that lie wholly between `from` and `until` seconds.
    pub fn within(&self, from: f64, until: f64) -> Range<usize> {
        // A tick lands a little after its time: a few ms of slack.
        const SLACK: f64 = 0.005;
        let first = (0..self.ends.len())
            .find(|&j| self.begin(j) >= from - SLACK)
            .unwrap_or(self.ends.len());
        let last = (first..self.ends.len())
            .take_while(|&j| self.ends[j] <= until + SLACK)
            .last()
            .map_or(first, |j| j + 1);
        first..last
    }

    /// Seconds from `from` until every flow of `active` is within the
    /// criterion's tolerance of `fair` in every interval for at least its
    /// hold, all between `from` and `until`; None if that never happens.
    /// Smoothed, each interval's rate is the mean of the `smooth` intervals
    /// ending with it (all after `from`), and the time runs to where the
    /// first fitting mean's window begins.
    pub fn convergence_time(
        &self,
        active: &[usize],
        fair: f64,
        (from, until): (f64, f64),
        c: Criterion,
    ) -> Option<f64> {
        let span = self.within(from, until);
        let w = c.smooth.max(1);
        let fits = |j: usize| {
            active.iter().all(|&f| {
                let r = mean(&self.rates[f][j + 1 - w..=j]);
                (r - fair).abs() <= c.tolerance * fair
            })
        };
        let mut run_start: Option<usize> = None;
        // Each window wholly after the change: the first ends w - 1 later.
        for j in span.start + w - 1..span.end {
            if !fits(j) {
                run_start = None;
                continue;
            }
            // The run of fitting windows counts by their ends; the time
            // reported is where the first of them begins.
            let s = *run_start.get_or_insert(j);
            if self.ends[j] - self.begin(s) >= c.hold - 1e-9 {
                return Some((self.begin(s + 1 - w) - from).max(0.0));
            }
        }
        None
    }

    /// Jain's index of the flows' mean rates over the intervals of `span`.
    pub fn jain(&self, active: &[usize], span: Range<usize>) -> f64 {
        let means: Vec<f64> = active
            .iter()
            .map(|&f| mean(&self.rates[f][span.clone()]))
            .collect();
        jain(&means)
    }

    /// The mean over `active` of each flow's coefficient of variation
    /// (standard deviation over mean) across the intervals of `span`.
    pub fn cov(&self, active: &[usize], span: Range<usize>) -> f64 {
        let covs: Vec<f64> = active
            .iter()
            .map(|&f| cov(&self.rates[f][span.clone()]))
            .collect();
        mean(&covs)
    }

    /// Every flow's rates summed, averaged over the intervals of `span`.
    pub fn total(&self, span: Range<usize>) -> f64 {
        let n = span.len().max(1) as f64;
        span.map(|j| self.rates.iter().map(|r| r[j]).sum::<f64>())
            .sum::<f64>()
            / n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 ms intervals over `secs`.
    fn ends(secs: f64) -> Vec<f64> {
        (1..=(secs * 10.0).round() as usize)
            .map(|j| j as f64 / 10.0)
            .collect()
    }

    fn c(tolerance: f64, smooth: usize) -> Criterion {
        Criterion {
            tolerance,
            hold: 1.0,
            smooth,
        }
    }

    #[test]
    fn convergence_time_is_when_all_settle_for_the_hold() {
        // Flow 0 has the link (100) alone for 2 s; flow 1 joins at 2 s and
        // ramps by 10 per interval while flow 0 gives way, both at 50 from
        // 2.4 s on. Within 10 % of 50 is 45..55: first met in the
        // interval that starts at 2.4 s.
        let e = ends(6.0);
        let f0: Vec<f64> = (0..60)
            .map(|j| {
                if j < 20 {
                    100.0
                } else {
                    (100.0 - 10.0 * (j - 19) as f64).max(50.0)
                }
            })
            .collect();
        let f1: Vec<f64> = (0..60)
            .map(|j| {
                if j < 20 {
                    0.0
                } else {
                    (10.0 * (j - 19) as f64).min(50.0)
                }
            })
            .collect();
        let rates = vec![f0, f1];
        let g = Grid {
            ends: &e,
            rates: &rates,
        };
        let t = g
            .convergence_time(&[0, 1], 50.0, (2.0, 6.0), c(0.10, 1))
            .unwrap();
        assert!((t - 0.4).abs() < 1e-9, "{t}");
        // A hold longer than what is left of the phase is never met.
        assert_eq!(
            g.convergence_time(&[0, 1], 50.0, (2.0, 3.0), c(0.10, 1)),
            None
        );
        // A looser one counts from earlier on the ramp (60 / 40 at 2.3 s).
        let t = g
            .convergence_time(&[0, 1], 50.0, (2.0, 6.0), c(0.25, 1))
            .unwrap();
        assert!((t - 0.3).abs() < 1e-9, "{t}");
        // One interval out of band restarts the hold.
        let mut rates = rates.clone();
        rates[1][30] = 30.0;
        let g = Grid {
            ends: &e,
            rates: &rates,
        };
        let t = g
            .convergence_time(&[0, 1], 50.0, (2.0, 6.0), c(0.10, 1))
            .unwrap();
        assert!((t - 1.1).abs() < 1e-9, "{t}");
        // Over 5-interval means the blip (20 under in one interval, 4 in
        // the mean) stays within 10 %: the means first fit for the window
        // 2.2-2.7 s (flow 1: 30, 40, 50, 50, 50 -> 44, out; 2.3-2.8: 46).
        let t = g
            .convergence_time(&[0, 1], 50.0, (2.0, 6.0), c(0.10, 5))
            .unwrap();
        assert!((t - 0.3).abs() < 1e-9, "{t}");
        // A flow that alternates 40 / 60 never fits per interval at 10 %,
        // and always does in 2-interval means.
        let alt: Vec<f64> = (0..60)
            .map(|j| if j % 2 == 0 { 40.0 } else { 60.0 })
            .collect();
        let rates = vec![alt.clone(), alt.iter().map(|r| 100.0 - r).collect()];
        let g = Grid {
            ends: &e,
            rates: &rates,
        };
        assert_eq!(
            g.convergence_time(&[0, 1], 50.0, (2.0, 6.0), c(0.10, 1)),
            None
        );
        let t = g
            .convergence_time(&[0, 1], 50.0, (2.0, 6.0), c(0.10, 2))
            .unwrap();
        assert!(t.abs() < 1e-9, "{t}");
    }

    #[test]
    fn jain_and_cov_of_known_shares() {
        let e = ends(1.0);
        let rates = vec![
            vec![30.0; 10],
            vec![10.0; 10],
            (0..10)
                .map(|j| if j % 2 == 0 { 5.0 } else { 15.0 })
                .collect(),
        ];
        let g = Grid {
            ends: &e,
            rates: &rates,
        };
        // Jain of 30 and 10: 40^2 / (2 x 1000) = 0.8.
        assert!((g.jain(&[0, 1], 0..10) - 0.8).abs() < 1e-12);
        assert!((g.jain(&[1, 2], 0..10) - 1.0).abs() < 1e-12);
        // 5 / 15 alternating: sd 5, mean 10.
        assert!((g.cov(&[2], 0..10) - 0.5).abs() < 1e-12);
        assert!((g.cov(&[0, 2], 0..10) - 0.25).abs() < 1e-12);
        assert!((g.total(0..10) - 50.0).abs() < 1e-12);
    }

    #[test]
    fn intervals_within_a_phase() {
        let e = ends(3.0);
        let g = Grid {
            ends: &e,
            rates: &[],
        };
        assert_eq!(g.within(1.0, 2.0), 10..20);
        assert_eq!(g.within(0.0, 0.05), 0..0);
        assert_eq!(g.within(2.5, 9.0), 25..30);
    }

    /// Only what comes after the change counts toward the hold: flows that
    /// were fair before it and stay so for less than the hold after it
    /// never converged.
    #[test]
    fn time_before_the_change_does_not_count() {
        let e = ends(6.0);
        // Fair (50 each) until 2.8 s, then 80 / 20 to the end.
        let f0: Vec<f64> = (0..60).map(|j| if j < 28 { 50.0 } else { 80.0 }).collect();
        let f1: Vec<f64> = f0.iter().map(|r| 100.0 - r).collect();
        let rates = vec![f0, f1];
        let g = Grid {
            ends: &e,
            rates: &rates,
        };
        assert_eq!(
            g.convergence_time(&[0, 1], 50.0, (2.0, 6.0), c(0.10, 1)),
            None
        );
        // A hold met exactly at an interval's end counts (floating-point
        // ends: 3.4 - 2.4 is just under 1).
        let rates = vec![vec![50.0; 60], vec![50.0; 60]];
        let g = Grid {
            ends: &e,
            rates: &rates,
        };
        let t = g
            .convergence_time(&[0, 1], 50.0, (2.4, 3.4), c(0.10, 1))
            .unwrap();
        assert!(t.abs() < 1e-9, "{t}");
    }
}
