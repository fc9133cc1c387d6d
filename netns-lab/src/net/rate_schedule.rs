//! The bottleneck's rate over a run: `0s:50M,30s:25M` starts the link at 50
//! Mbit/s and moves it to 25 Mbit/s 30 s in. Each change moves htb's
//! classes in place (the queue keeps what it holds) and the BPF switch's
//! own figure of the rate, so that every backend sees the new link; the
//! times they were applied are recorded, and the capacity of any window
//! is the rate integrated over it.

use std::time::Duration;

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};
use tc_qdisc::bottleneck::{RATE_MAX, RATE_MIN};

use crate::units::{fmt_rate, parse_rate};

/// One change: from `at` after the run starts, the link runs at `rate_bps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateStep {
    pub at: Duration,
    pub rate_bps: u64,
}

/// The changes in time order; empty, the link keeps its rate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateSchedule(pub Vec<RateStep>);

impl RateSchedule {
    /// `TIME:RATE,...` (`0s:50M,30s:25M`); times strictly increasing, rates
    /// within the bottleneck's range.
    pub fn parse(s: &str) -> Result<RateSchedule, String> {
        let mut steps = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (t, r) = item.split_once(':').ok_or_else(|| {
                format!("rate schedule `{item}`: give TIME:RATE, e.g. 0s:50M,30s:25M")
            })?;
            // The duration parser wants a positive time; 0 starts the run.
            let zero = t
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse::<f64>()
                == Ok(0.0);
            let at = if zero {
                Duration::ZERO
            } else {
                dctcp_utils::duration::parse_up_to(t, Duration::from_secs(3600))
                    .map_err(|e| format!("rate schedule `{item}`: {e}"))?
            };
            let rate_bps = parse_rate(r).map_err(|e| format!("rate schedule `{item}`: {e}"))?;
            steps.push(RateStep { at, rate_bps });
        }
        let schedule = RateSchedule(steps);
        schedule.validate().map_err(|e| e.to_string())?;
        Ok(schedule)
    }

    /// One step to `rate_bps` at `at`.
    pub fn step(at: Duration, rate_bps: u64) -> RateSchedule {
        RateSchedule(vec![RateStep { at, rate_bps }])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn validate(&self) -> Result<()> {
        for s in &self.0 {
            ensure!(
                (RATE_MIN..=RATE_MAX).contains(&s.rate_bps),
                "rate schedule: {} at {:?} out of range: 1 Mbit/s to 10 Gbit/s",
                fmt_rate(s.rate_bps),
                s.at
            );
        }
        for w in self.0.windows(2) {
            ensure!(
                w[1].at > w[0].at,
                "rate schedule: times must increase ({:?} after {:?})",
                w[1].at,
                w[0].at
            );
        }
        Ok(())
    }

    /// The rate the link starts with: the schedule's own at 0 s, else
    /// `configured`.
    pub fn initial(&self, configured: u64) -> u64 {
        match self.0.first() {
            Some(s) if s.at.is_zero() => s.rate_bps,
            _ => configured,
        }
    }

    /// The changes after the start, each applied once its time comes.
    pub fn changes(&self) -> impl Iterator<Item = &RateStep> {
        self.0.iter().filter(|s| !s.at.is_zero())
    }

    /// `0 s 50 Mbit/s, 30 s 25 Mbit/s`.
    pub fn describe(&self) -> String {
        self.0
            .iter()
            .map(|s| format!("{} s {}", s.at.as_secs_f64(), fmt_rate(s.rate_bps)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A change as the run made it: its CLOCK_MONOTONIC time (that of the
/// switch's update, after htb's) and the rate from then on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedRate {
    pub ns: u64,
    pub rate_bps: u64,
}

/// The link's rate at `ns` (CLOCK_MONOTONIC), from `initial` and the
/// changes applied (in time order).
pub fn rate_at(initial: u64, applied: &[AppliedRate], ns: u64) -> u64 {
    applied
        .iter()
        .take_while(|a| a.ns <= ns)
        .last()
        .map_or(initial, |a| a.rate_bps)
}

/// Bits the link could send from `from_ns` to `to_ns`: its rate over time,
/// integrated.
pub fn capacity_bits(initial: u64, applied: &[AppliedRate], from_ns: u64, to_ns: u64) -> f64 {
    let mut t = from_ns;
    let mut rate = rate_at(initial, applied, from_ns);
    let mut bits = 0.0;
    for a in applied.iter().filter(|a| a.ns > from_ns && a.ns < to_ns) {
        bits += rate as f64 * (a.ns - t) as f64 / 1e9;
        (t, rate) = (a.ns, a.rate_bps);
    }
    bits + rate as f64 * to_ns.saturating_sub(t) as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_reads_times_and_rates() {
        let s = RateSchedule::parse("0s:50M, 30s:25M,45s:5M").unwrap();
        assert_eq!(s.initial(100_000_000), 50_000_000);
        let changes: Vec<_> = s.changes().map(|c| (c.at.as_secs(), c.rate_bps)).collect();
        assert_eq!(changes, [(30, 25_000_000), (45, 5_000_000)]);
        assert_eq!(s.describe(), "0 s 50 Mbit/s, 30 s 25 Mbit/s, 45 s 5 Mbit/s");
        // Without an entry at 0 the configured rate starts the run.
        let later = RateSchedule::parse("10s:5M").unwrap();
        assert_eq!(later.initial(50_000_000), 50_000_000);
        assert!(RateSchedule::parse("").unwrap().is_empty());
    }

    #[test]
    fn a_bad_schedule_is_refused_by_name() {
        let e = |s: &str| RateSchedule::parse(s).unwrap_err();
        assert!(e("30s").contains("TIME:RATE"), "{}", e("30s"));
        assert!(e("xs:5M").contains("xs:5M"));
        assert!(e("1s:fast").contains("not a rate"));
        assert!(e("1s:500k").contains("out of range"));
        assert!(e("1s:20G").contains("out of range"));
        assert!(
            e("2s:5M,1s:10M").contains("times must increase"),
            "{}",
            e("2s:5M,1s:10M")
        );
        assert!(e("2s:5M,2s:10M").contains("times must increase"));
    }

    #[test]
    fn the_capacity_is_the_rate_integrated_over_the_window() {
        let applied = [
            AppliedRate {
                ns: 2_000_000_000,
                rate_bps: 25_000_000,
            },
            AppliedRate {
                ns: 3_000_000_000,
                rate_bps: 5_000_000,
            },
        ];
        assert_eq!(rate_at(50_000_000, &applied, 1_999_999_999), 50_000_000);
        assert_eq!(rate_at(50_000_000, &applied, 2_000_000_000), 25_000_000);
        assert_eq!(rate_at(50_000_000, &applied, 9_000_000_000), 5_000_000);
        // 1 s at 50, 1 s at 25, 0.5 s at 5 Mbit/s.
        let bits = capacity_bits(50_000_000, &applied, 1_000_000_000, 3_500_000_000);
        assert!((bits - 77.5e6).abs() < 1.0, "{bits}");
        // A window inside one rate, and one with no changes at all.
        assert!(
            (capacity_bits(50_000_000, &applied, 2_500_000_000, 2_600_000_000) - 2.5e6).abs() < 1.0
        );
        assert!((capacity_bits(8_000_000, &[], 0, 1_000_000_000) - 8e6).abs() < 1.0);
    }
}
