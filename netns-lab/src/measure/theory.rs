//! DCTCP's analysis (Alizadeh et al., SIGCOMM 2010, section 3.3) for N
//! synchronized long flows through one bottleneck of C packets per second,
//! base round trip RTT and marking threshold K, all in 1500-byte packets.
//!
//! The flows' windows together grow by N packets per round trip. The queue
//! crosses K, and the packets already in flight then add N more before the
//! first mark reaches a sender, so it peaks at K + N. Each flow then cuts by
//! alpha / 2, which takes A packets off the queue; growth at N per round
//! trip brings them back in A / N round trips.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::net::delay::bdp_pkts;

/// Seconds one 1500-byte packet takes at `rate_bps`: 1 / C.
pub fn packet_time(rate_bps: u64) -> f64 {
    1500.0 * 8.0 / rate_bps as f64
}

/// Payload of a full segment (1448 bytes with TCP timestamps) over its
/// 1514 bytes on the lab's links: the most of a link's rate TCP delivers.
pub const PAYLOAD_SHARE: f64 = 1448.0 / 1514.0;

/// A link's goodput when full of full-sized segments, bit/s.
pub fn goodput_bps(rate_bps: u64) -> f64 {
    rate_bps as f64 * PAYLOAD_SHARE
}

/// K_opt = C x RTT / 7: the smallest K with which the queue never runs empty
/// (seed 001's sizing rule).
pub fn k_opt(rate_bps: u64, rtt: Duration) -> f64 {
    bdp_pkts(rate_bps, rtt) / 7.0
}

/// The sawtooth of N synchronized flows, packets and round trips.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sawtooth {
    /// C x RTT.
    pub bdp: f64,
    /// Qmax = K + N.
    pub q_max: f64,
    /// A = 1/2 sqrt(2N (C x RTT + K)).
    pub amplitude: f64,
    /// Qmax - A, the bottom of the sawtooth.
    pub q_min: f64,
    /// T_c = 1/2 sqrt(2 (C x RTT + K) / N) = A / N round trips.
    pub period_rtts: f64,
    /// Each flow's window when the queue peaks: (C x RTT + Qmax) / N.
    pub window_at_peak: f64,
}

impl Sawtooth {
    pub fn new(flows: usize, rate_bps: u64, rtt: Duration, k: u32) -> Sawtooth {
        let (n, k) = (flows as f64, f64::from(k));
        let bdp = bdp_pkts(rate_bps, rtt);
        let amplitude = 0.5 * (2.0 * n * (bdp + k)).sqrt();
        Sawtooth {
            bdp,
            q_max: k + n,
            amplitude,
            q_min: k + n - amplitude,
            period_rtts: amplitude / n,
            window_at_peak: (bdp + k + n) / n,
        }
    }

    /// The round trip the flows have on average, queue included: the
    /// analysis counts time in these (a window grows by one per round
    /// trip), and at 100 Mbit/s the queue is most of it.
    pub fn loaded_rtt(&self, rate_bps: u64) -> Duration {
        Duration::from_secs_f64(
            (self.bdp + self.q_max - self.amplitude / 2.0) * packet_time(rate_bps),
        )
    }

    /// T_c in seconds at the loaded round trip.
    pub fn period(&self, rate_bps: u64) -> Duration {
        self.loaded_rtt(rate_bps).mul_f64(self.period_rtts)
    }

    /// Whether the analysis can hold: a window cut by alpha / 2 must stay
    /// above TCP's floor of 2 packets. Below it (many flows, a short round
    /// trip) the flows cannot shrink the queue below 2N - C x RTT.
    pub fn above_window_floor(&self) -> bool {
        // Each flow gives up A / N = T_c packets per cut.
        self.window_at_peak - self.period_rtts > 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 000's numbers: 100 Mbit/s, 500 us, K = 20, N = 2, 10, 40 cap
    /// the queue at 22, 30 and 60 packets.
    #[test]
    fn the_seeds_setting() {
        let rtt = Duration::from_micros(500);
        let two = Sawtooth::new(2, 100_000_000, rtt, 20);
        assert_eq!(two.q_max, 22.0);
        // C x RTT = 4.17 packets; A = 1/2 sqrt(4 x 24.17) = 4.92.
        assert!((two.bdp - 4.167).abs() < 0.01);
        assert!((two.amplitude - 4.92).abs() < 0.01, "{}", two.amplitude);
        assert!((two.period_rtts - 2.46).abs() < 0.01);
        assert!(two.above_window_floor());
        let forty = Sawtooth::new(40, 100_000_000, rtt, 20);
        assert_eq!(forty.q_max, 60.0);
        assert!(
            (forty.amplitude - 21.99).abs() < 0.01,
            "{}",
            forty.amplitude
        );
        // 1.6 packets per flow at the peak: under TCP's floor.
        assert!(!forty.above_window_floor());
        assert!((k_opt(100_000_000, Duration::from_millis(8)) - 9.52).abs() < 0.01);
        // The loaded round trip: C x RTT plus the mean queue Qmax - A / 2,
        // 23.7 packets of 120 us at N = 2.
        let rt = two.loaded_rtt(100_000_000).as_secs_f64();
        assert!((rt - 23.7 * 120e-6).abs() < 1e-5, "{rt}");
    }

    #[test]
    fn goodput_is_the_payload_share_of_the_rate() {
        // 1448 payload bytes in 1514 on the wire: 95.64 % of the rate.
        assert!((goodput_bps(100_000_000) - 95_640_687.0).abs() < 1.0);
        assert!((PAYLOAD_SHARE - 0.956_407).abs() < 1e-6);
    }

    #[test]
    fn period_and_window_floor() {
        let rtt = Duration::from_micros(500);
        let two = Sawtooth::new(2, 100_000_000, rtt, 20);
        // T_c = 2.46 round trips of 2.84 ms: 7.0 ms.
        let p = two.period(100_000_000).as_secs_f64();
        assert!((p - two.period_rtts * 23.7 * 120e-6).abs() < 2e-5, "{p}");
        // Exactly 2 packets left after a cut is TCP's floor, not above it.
        let at_floor = Sawtooth {
            window_at_peak: 4.0,
            period_rtts: 2.0,
            ..two
        };
        assert!(!at_floor.above_window_floor());
    }
}
