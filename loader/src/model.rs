//! The arithmetic of bpf/dctcp_core.h in Rust, step for step: what the
//! programs must have computed, so tests and labs can check every traced
//! alpha update and every cut exactly against it.

use crate::intf::{DCTCP_ALPHA_SHIFT, DCTCP_ONE};

/// alpha (1/2^20) after a window of `delivered` packets, `delivered_ce` of
/// them ECE-echoed, with gain `g` (1/65536) at `bits` of resolution.
pub fn ewma(alpha: u32, delivered: u32, delivered_ce: u32, g: u32, bits: u32) -> u32 {
    let shift = DCTCP_ALPHA_SHIFT - bits;
    let g = u64::from(g.min(DCTCP_ONE));
    let mut a = u64::from(alpha >> shift);
    let decay = (a * g) >> 16;
    a -= if decay > 0 { decay } else { a };
    if delivered_ce > 0 {
        let g_f = ((u64::from(delivered_ce) * g) << bits) / (u64::from(delivered.max(1)) << 16);
        a = (a + g_f).min(1 << bits);
    }
    (a as u32) << shift
}

/// cwnd (1 - n alpha), at least 2; n in 1/65536, alpha in 1/2^20.
pub fn reduced(cwnd: u32, alpha: u32, n: u32) -> u32 {
    let cut = (u64::from(cwnd) * u64::from(alpha) * u64::from(n.min(DCTCP_ONE)))
        >> (DCTCP_ALPHA_SHIFT + 16);
    cwnd.saturating_sub(cut as u32).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tcp_dctcp.c's update, as the kernel writes it (10-bit alpha).
    fn kernel_ewma(mut alpha: u32, delivered: u32, mut ce: u32, shift_g: u32) -> u32 {
        let min_not_zero = |a: u32, b: u32| match (a, b) {
            (0, b) => b,
            (a, 0) => a,
            (a, b) => a.min(b),
        };
        alpha -= min_not_zero(alpha, alpha >> shift_g);
        if ce > 0 {
            ce <<= 10 - shift_g;
            ce /= delivered.max(1);
            alpha = (alpha + ce).min(1024);
        }
        alpha
    }

    #[test]
    fn power_of_two_gains_at_10_bits_are_the_kernels_dctcp() {
        for shift_g in 0..=10 {
            let g = DCTCP_ONE >> shift_g;
            for alpha in (0..=1024).step_by(7) {
                for (d, ce) in [(1, 0), (1, 1), (10, 3), (44, 44), (97, 13), (1000, 1)] {
                    assert_eq!(
                        ewma(alpha << 10, d, ce, g, 10) >> 10,
                        kernel_ewma(alpha, d, ce, shift_g),
                        "alpha {alpha} d {d} ce {ce} shift_g {shift_g}"
                    );
                }
            }
        }
        // cwnd (1 - alpha / 2) rounds as cwnd - (cwnd alpha >> 11).
        for cwnd in [2, 3, 10, 57, 1000] {
            for alpha in (0..=1024).step_by(11) {
                assert_eq!(
                    reduced(cwnd, alpha << 10, DCTCP_ONE / 2),
                    (cwnd - ((cwnd * alpha) >> 11)).max(2)
                );
            }
        }
    }

    #[test]
    fn fine_alpha_keeps_what_10_bits_lose() {
        // A flow with rare marks: at 10 bits alpha sinks to 0, at 20 it stays.
        let (mut a10, mut a20) = (1 << 20, 1 << 20);
        for _ in 0..200 {
            a10 = ewma(a10, 100, 1, 4096, 10);
            a20 = ewma(a20, 100, 1, 4096, 20);
        }
        assert_eq!(a10, 0);
        assert!(
            (a20 as f64 / f64::from(1 << 20) - 0.01).abs() < 0.001,
            "{a20}"
        );
    }

    #[test]
    fn xdctcp_factors() {
        let half = 1 << 19;
        assert_eq!(reduced(100, half, DCTCP_ONE), 50); // nl = 1: cwnd (1 - alpha)
        assert_eq!(reduced(100, half, 19661), 85); // ns = 0.3: 100 (1 - 0.15)
        assert_eq!(reduced(100, half, 0), 100);
        assert_eq!(reduced(3, 1 << 20, DCTCP_ONE), 2);
    }
}
