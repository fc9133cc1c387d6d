//! `lab bench`'s delay section: the round trip's element (or netem) against
//! no delay at all, side by side at each rate and delay: holding error,
//! frames lost and reordered, the flows' min RTT, bottleneck goodput with
//! the delay over goodput without, and the CPU the element costs.
//!
//! The flows are cubic on droptail with a buffer of twice the path's
//! bandwidth-delay product (at least 425 packets), so the link stays full
//! after a loss at any of the delays: what the goodput ratio measures is
//! the element, not TCP's recovery at a long round trip.

use std::fmt::Write as _;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use tc_qdisc::{Backend, Bottleneck};

use crate::experiments::run_scenario;
use crate::measure::scenario::Scenario;
use crate::net::delay::{bdp_pkts, fmt_duration, DelayBackend, RoundTrip, Rtt, RttMeasured};
use crate::units::fmt_rate;

#[derive(Clone, Debug, Serialize)]
pub struct DelayBenchConfig {
    pub rates_bps: Vec<u64>,
    pub delays: Vec<Duration>,
    pub backends: Vec<DelayBackend>,
    pub duration: Duration,
}

impl DelayBenchConfig {
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(
            !self.rates_bps.is_empty(),
            "--delay-rates: give at least one rate"
        );
        anyhow::ensure!(!self.delays.is_empty(), "--delays: give at least one delay");
        anyhow::ensure!(
            !self.backends.is_empty(),
            "--delay-backends: give at least one"
        );
        anyhow::ensure!(
            self.duration > Duration::from_secs(2),
            "--delay-secs must exceed the 2 s warmup"
        );
        for &rate in &self.rates_bps {
            for &d in &self.delays {
                Bottleneck {
                    rate_bps: rate,
                    buffer_pkts: buffer_for(rate, Some(d)),
                    backend: Backend::Droptail,
                }
                .validate()?;
            }
        }
        Ok(())
    }
}

/// One run: a rate, and a delay with its backend, or none.
#[derive(Clone, Debug, Serialize)]
pub struct DelayRun {
    pub rate_bps: u64,
    pub rtt: Option<Duration>,
    pub backend: Option<DelayBackend>,
    pub goodput_bps: f64,
    pub drops: u64,
    /// What the run measured of its round trip (the element's report too).
    pub measured: RttMeasured,
    pub duration_s: f64,
}

impl DelayRun {
    /// Share of one CPU the element used, per Gbit/s the flows moved.
    pub fn element_cpu_per_gbps(&self) -> Option<f64> {
        let e = self.measured.element.as_ref()?;
        Some(e.cpu_s / self.duration_s / (self.goodput_bps / 1e9).max(1e-9))
    }
}

fn buffer_for(rate_bps: u64, rtt: Option<Duration>) -> u32 {
    let bdp = rtt.map_or(0.0, |d| bdp_pkts(rate_bps, d));
    (2.0 * bdp).ceil().max(425.0) as u32
}

pub fn run(cfg: &DelayBenchConfig, stop: &Arc<AtomicBool>) -> Result<Vec<DelayRun>> {
    let mut runs = Vec::new();
    for &rate in &cfg.rates_bps {
        let mut points: Vec<(Option<Duration>, Option<DelayBackend>)> = vec![(None, None)];
        for &d in &cfg.delays {
            for &b in &cfg.backends {
                points.push((Some(d), Some(b)));
            }
        }
        for (rtt, backend) in points {
            let label = match rtt {
                Some(d) => format!("{} {}", fmt_rate(rate), fmt_duration(d)),
                None => format!("{} no delay", fmt_rate(rate)),
            };
            let bottleneck = Bottleneck {
                rate_bps: rate,
                buffer_pkts: buffer_for(rate, rtt),
                backend: Backend::Droptail,
            };
            let scn = Scenario {
                round_trip: rtt.zip(backend).map(|(d, b)| RoundTrip::new(Rtt::uniform(d), b)),
                ..Scenario::long_flows(
                    &label,
                    bottleneck,
                    2,
                    "cubic",
                    cfg.duration,
                    Duration::from_secs(2),
                )
            };
            let o = run_scenario(&scn, None, format!("delay: {label}"), stop)?.outcome;
            let run = DelayRun {
                rate_bps: rate,
                rtt,
                backend: o.rtt.backend,
                goodput_bps: o.goodput_bps.iter().sum(),
                drops: o.drops,
                measured: o.rtt,
                duration_s: cfg.duration.as_secs_f64(),
            };
            eprintln!("  {}", line(&run, None));
            runs.push(run);
        }
    }
    Ok(runs)
}

fn line(r: &DelayRun, without: Option<f64>) -> String {
    let mut s = format!(
        "{:<10} {:<10} {:<8} {:>9.1}",
        fmt_rate(r.rate_bps),
        r.rtt.map_or("none".into(), fmt_duration),
        match r.backend {
            Some(DelayBackend::Netem) => "netem",
            Some(_) => "element",
            None => "-",
        },
        r.goodput_bps / 1e6
    );
    let _ = write!(
        s,
        " {:>7}",
        without.map_or("-".into(), |w| format!("{:.3}", r.goodput_bps / w))
    );
    let mins: Vec<u32> = r.measured.flows.iter().map(|f| f.min_rtt_us).collect();
    let _ = write!(
        s,
        " {:>13}",
        format!(
            "{}-{}",
            mins.iter().min().unwrap_or(&0),
            mins.iter().max().unwrap_or(&0)
        )
    );
    match &r.measured.element {
        Some(e) => {
            let _ = write!(
                s,
                " {:>6.1} {:>6.1} {:>8.1} {:>6} {:>6} {:>10.3}",
                e.lateness.p50_ns as f64 / 1e3,
                e.lateness.p99_ns as f64 / 1e3,
                e.lateness.max_ns as f64 / 1e3,
                e.dropped_full + e.dropped_oversize,
                e.reordered,
                r.element_cpu_per_gbps().unwrap_or(f64::NAN)
            );
        }
        None => {
            let _ = write!(
                s,
                " {:>6} {:>6} {:>8} {:>6} {:>6} {:>10}",
                "-", "-", "-", "-", "-", "-"
            );
        }
    }
    s
}

/// The section of `just bench`'s table.
pub fn table(runs: &[DelayRun]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\ndelay (cubic x 2 on droptail, buffer 2 x BDP; goodput ratio: with the delay / without, same rate;\n\
         holding error = release - due, us; CPU: share of one CPU the element used per Gbit/s moved; goals:\n\
         p50 <= 10 us, p99 <= 50 us, 0 lost, 0 reordered, ratio >= 0.98)"
    );
    let _ = writeln!(
        s,
        "{:<10} {:<10} {:<8} {:>9} {:>7} {:>13} {:>6} {:>6} {:>8} {:>6} {:>6} {:>10}",
        "rate",
        "rtt",
        "backend",
        "Mbit/s",
        "ratio",
        "min RTT us",
        "p50",
        "p99",
        "max",
        "lost",
        "reord",
        "CPU/Gbps"
    );
    for r in runs {
        let without = runs
            .iter()
            .find(|w| w.rate_bps == r.rate_bps && w.rtt.is_none())
            .map(|w| w.goodput_bps);
        let _ = writeln!(s, "{}", line(r, without.filter(|_| r.rtt.is_some())));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_holds_twice_the_bdp_and_never_less_than_the_labs() {
        assert_eq!(buffer_for(1_000_000_000, None), 425);
        // 25 ms at 1 Gbit/s: 2,083 packets in flight.
        assert_eq!(
            buffer_for(1_000_000_000, Some(Duration::from_millis(25))),
            4167
        );
        assert_eq!(
            buffer_for(100_000_000, Some(Duration::from_micros(100))),
            425
        );
    }
}
