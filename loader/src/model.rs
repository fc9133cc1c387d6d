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

/// bpf/prague.bpf.c's arithmetic, step for step.
pub mod prague {
    use crate::intf::{DCTCP_ONE, PRAGUE_ALPHA_BITS, PRAGUE_CWND_SHIFT};

    /// One segment of window, 1/2^20.
    pub const ONE_CWND: u64 = 1 << PRAGUE_CWND_SHIFT;
    /// The largest alpha / g: alpha 1.0 at gain `g`.
    pub fn max_upscaled(g: u32) -> u64 {
        (1u64 << (PRAGUE_ALPHA_BITS + 16)) / u64::from(g.clamp(1, DCTCP_ONE))
    }

    /// alpha / g (1/2^24) after a round of `delivered` packets, `ce` of them
    /// marked: `up - g up + F`.
    pub fn ewma(up: u64, delivered: u32, ce: u32, g: u32) -> u64 {
        let g = u64::from(g.clamp(1, DCTCP_ONE));
        let f = if ce > 0 {
            (u64::from(ce) << PRAGUE_ALPHA_BITS) / u64::from(delivered.max(1))
        } else {
            0
        };
        (up - ((up * g) >> 16) + f).min(max_upscaled(g as u32))
    }

    /// alpha, 1/2^24, from alpha / g.
    pub fn alpha(up: u64, g: u32) -> u64 {
        (up * u64::from(g.min(DCTCP_ONE))) >> 16
    }

    /// The window after a cut on marks: frac (1 - alpha / 2), to nearest.
    pub fn cut(frac: u64, alpha: u64) -> u64 {
        frac - ((alpha * frac + (1 << PRAGUE_ALPHA_BITS)) >> (PRAGUE_ALPHA_BITS + 1))
    }

    /// Growth per acked segment (1/2^20 of a segment per segment of
    /// window): (rtt / target)^2 when RTT-independent below the target and
    /// under 100 ms, else one. `srtt8` and `target_us` as the kernel and
    /// the parameter keep them (1/8 us, us).
    pub fn ai_per_ack(srtt8: u32, target_us: u32, rtt_indep: bool) -> u32 {
        let (rtt, target) = (u64::from(srtt8), u64::from(target_us) << 3);
        let max = u64::from(crate::intf::PRAGUE_MAX_SCALED_RTT_US) << 3;
        if !rtt_indep || rtt == 0 || rtt > max || rtt >= target {
            return ONE_CWND as u32;
        }
        let (n, d) = ((rtt << PRAGUE_CWND_SHIFT) * rtt, target * target);
        ((n + d / 2) / d) as u32
    }

    /// Window growth of one ACK of `acked` unmarked segments in window
    /// mode, for segments of `mtu` bytes.
    pub fn increase(frac: u64, acked: u64, ai: u32, mtu: u32) -> u64 {
        let per_ack = acked * u64::from(ai);
        // Per segment of window, rounded to nearest (none yet: per segment).
        let inc = ((per_ack << PRAGUE_CWND_SHIFT) + frac / 2)
            .checked_div(frac)
            .unwrap_or(per_ack);
        (inc * u64::from(crate::intf::PRAGUE_MTU_SYS) / u64::from(mtu)).max(acked)
    }

    /// The kernel's window for `frac`: rounded up, at least 2, at most `clamp`.
    pub fn snd_cwnd(frac: u64, clamp: u32) -> u32 {
        ((frac + ONE_CWND - 1) >> PRAGUE_CWND_SHIFT).clamp(2, u64::from(clamp)) as u32
    }

    /// The classic-ECN evidence (1/2^16) after a marked round whose srtt
    /// (1/8 us, as the kernel keeps it) stood `srtt8 / 8 - min_rtt_us` over
    /// the path's min RTT, against the threshold `qdelay_us`: EWMA at 1/8.
    pub fn classic_score(score: u32, srtt8: u32, min_rtt_us: u32, qdelay_us: u32) -> u32 {
        let classic = srtt8 >> 3 >= min_rtt_us.saturating_add(qdelay_us);
        score - (score >> 3) + if classic { DCTCP_ONE >> 3 } else { 0 }
    }

    /// Whether the fallback is in force at `score`, `was` before: from 3/4
    /// on, until 1/4.
    pub fn classic(score: u32, was: bool) -> bool {
        if score >= DCTCP_ONE * 3 / 4 {
            true
        } else if score <= DCTCP_ONE / 4 {
            false
        } else {
            was
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prague's RTT scaling: (rtt / target)^2 of a segment per window below
    /// the target, to the nearest 1/2^20; one segment when not
    /// RTT-independent, at or over the target, unmeasured, or over 100 ms.
    #[test]
    fn prague_scales_growth_by_rtt_over_target_squared_within_its_limits() {
        use crate::model::prague::{ai_per_ack, ONE_CWND};
        let one = ONE_CWND as u32;
        let max_us = crate::intf::PRAGUE_MAX_SCALED_RTT_US;
        // 5 ms against 25 ms: 1/25 of a segment (41,943.04 / 2^20).
        assert_eq!(ai_per_ack(5_000 << 3, 25_000, true), 41_943);
        assert_eq!(ai_per_ack(5_000 << 3, 25_000, false), one);
        assert_eq!(ai_per_ack(25_000 << 3, 25_000, true), one);
        assert_eq!(ai_per_ack(0, 25_000, true), one);
        // 100 ms against 200 ms still scales (1/4); past 100 ms it does not.
        assert_eq!(ai_per_ack(max_us << 3, 2 * max_us, true), one / 4);
        assert_eq!(ai_per_ack((max_us << 3) + 1, 2 * max_us, true), one);
    }

    /// Window mode's growth: acked x ai spread over the window to the
    /// nearest 1/2^20, scaled by the system's MTU over the flow's, at least
    /// the segments acked.
    #[test]
    fn prague_grows_by_acked_times_ai_over_the_window() {
        use crate::model::prague::{increase, ONE_CWND};
        let sys = crate::intf::PRAGUE_MTU_SYS;
        // 2 acked at full growth over 10 segments: 2^21 / 10 = 209,715.2.
        assert_eq!(increase(10 * ONE_CWND, 2, ONE_CWND as u32, sys), 209_715);
        // 0.7 rounds up: 2^20 / 3 = 349,525.33, and 2^21 / 3 = 699,050.67.
        assert_eq!(increase(3 * ONE_CWND, 1, ONE_CWND as u32, sys), 349_525);
        assert_eq!(increase(3 * ONE_CWND, 2, ONE_CWND as u32, sys), 699_051);
        // Half the MTU: twice the segments for the same bytes.
        assert_eq!(increase(10 * ONE_CWND, 2, ONE_CWND as u32, sys / 2), 2 * 209_715);
        // A quarter of the growth per ACK, 3 acked: 3 x 2^18 per window.
        assert_eq!(increase(ONE_CWND, 3, (ONE_CWND / 4) as u32, sys), 3 << 18);
        // No window yet: the growth per ACK itself; never under `acked`.
        assert_eq!(increase(0, 2, 100, sys), 200);
        assert_eq!(increase(1 << 40, 5, 1, sys), 5);
    }

    /// Prague's cap on alpha / g is alpha 1.0 at any gain; a fully marked
    /// flow reaches it and stays.
    #[test]
    fn prague_alpha_tops_out_at_one() {
        let one = 1u64 << crate::intf::PRAGUE_ALPHA_BITS;
        for g in [1 << 10, 1 << 12, 1 << 15, DCTCP_ONE] {
            assert_eq!(crate::model::prague::alpha(crate::model::prague::max_upscaled(g), g), one, "g {g}");
            let mut up = 0;
            for _ in 0..20_000 {
                up = crate::model::prague::ewma(up, 10, 10, g);
            }
            assert_eq!(up, crate::model::prague::max_upscaled(g), "g {g}");
        }
    }

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

    mod prague {
        use super::super::prague::*;

        /// At the reference's g = 1/16, `up - g up` is its `up - (up >> 4)`.
        #[test]
        fn the_gain_of_a_sixteenth_is_the_references_shift() {
            let g = crate::intf::PRAGUE_DEFAULT_G;
            let mut up = 0u64;
            for (d, ce) in [(10, 10), (100, 3), (7, 0), (1000, 999), (1, 0), (64, 1)] {
                let f = if ce > 0 { (u64::from(ce) << 24) / u64::from(d) } else { 0 };
                let reference = (up - (up >> 4) + f).min(1 << 28);
                up = ewma(up, d, ce, g);
                assert_eq!(up, reference, "d {d} ce {ce}");
            }
            // Every packet marked for long: alpha reaches 1.0 and stays.
            for _ in 0..400 {
                up = ewma(up, 10, 10, g);
            }
            assert_eq!(alpha(up, g), 1 << 24);
        }

        /// alpha / g keeps what a plain EWMA rounds away: a mark in 2^20
        /// packets still moves it.
        #[test]
        fn upscaling_keeps_the_remainder() {
            let g = crate::intf::PRAGUE_DEFAULT_G;
            let mut up = 0;
            for _ in 0..200 {
                up = ewma(up, 1 << 20, 1, g);
            }
            // F = 2^-20 is 16 in 1/2^24; the steady state alpha = F.
            let a = alpha(up, g);
            assert!((15..=16).contains(&a), "{a}");
        }

        #[test]
        fn the_cut_is_alpha_over_two_to_nearest() {
            let one = 1u64 << 24;
            assert_eq!(cut(100 * ONE_CWND, one), 50 * ONE_CWND);
            assert_eq!(cut(100 * ONE_CWND, 0), 100 * ONE_CWND);
            assert_eq!(cut(10 * ONE_CWND, one / 2), 10 * ONE_CWND - ONE_CWND * 10 / 4);
            // Rounded to nearest, not down: frac 3 (units) at alpha 1/2 cuts 0.75 -> 1.
            assert_eq!(cut(3, one / 2), 2);
            for frac in [1u64, 7, ONE_CWND, 3 * ONE_CWND + 5, 1000 * ONE_CWND] {
                for alpha in [0u64, 1, 1 << 20, one / 3, one] {
                    let exact = frac as f64 * alpha as f64 / one as f64 / 2.0;
                    let got = (frac - cut(frac, alpha)) as f64;
                    assert!((got - exact).abs() <= 0.5 + 1e-9, "{frac} {alpha}: {got} {exact}");
                }
            }
        }

        #[test]
        fn rtt_scaling_is_the_square_of_rtt_over_target() {
            let target = 25_000;
            assert_eq!(ai_per_ack(12_500 << 3, target, true), (ONE_CWND / 4) as u32);
            assert_eq!(ai_per_ack(2_500 << 3, target, true), 10_486); // 2^20 / 100, to nearest
            assert_eq!(ai_per_ack(2_500 << 3, target, false), ONE_CWND as u32);
            assert_eq!(ai_per_ack(25_000 << 3, target, true), ONE_CWND as u32);
            assert_eq!(ai_per_ack(0, target, true), ONE_CWND as u32);
            // A 100 ms target: RTTs above 100 ms are never scaled.
            assert_eq!(ai_per_ack(100_001 << 3, 100_000, true), ONE_CWND as u32);
            assert!(ai_per_ack(99_999 << 3, 100_000, true) < ONE_CWND as u32);
        }

        /// A round of unmarked ACKs grows the window by one segment
        /// unscaled, by (rtt / target)^2 scaled.
        #[test]
        fn a_round_of_acks_grows_by_the_scaled_segment() {
            for (ai, want) in [(ONE_CWND as u32, 1.0), (ai_per_ack(5_000 << 3, 25_000, true), 0.04)] {
                let mut frac = 50 * ONE_CWND;
                for _ in 0..50 {
                    frac += increase(frac, 1, ai, 1500);
                }
                let grown = (frac - 50 * ONE_CWND) as f64 / ONE_CWND as f64;
                assert!((grown - want).abs() < want * 0.02 + 0.001, "{grown} vs {want}");
            }
            // Segments smaller than 1500 bytes grow more of them.
            assert!(increase(10 * ONE_CWND, 1, ONE_CWND as u32, 750) > increase(10 * ONE_CWND, 1, ONE_CWND as u32, 1500));
        }

        #[test]
        fn the_kernels_window_rounds_up_and_is_never_below_two() {
            assert_eq!(snd_cwnd(1, 1000), 2);
            assert_eq!(snd_cwnd(2 * ONE_CWND + 1, 1000), 3);
            assert_eq!(snd_cwnd(7 * ONE_CWND, 1000), 7);
            assert_eq!(snd_cwnd(70 * ONE_CWND, 10), 10);
        }

        /// From no evidence, 11 classic rounds in a row put the fallback in
        /// force (10 do not); then it holds until the score falls to 1/4:
        /// 7 L4S rounds from the top (6 do not). 20 ms of path, 3 ms
        /// threshold: 23 ms of srtt is classic, 22.999 ms is not.
        #[test]
        fn the_fallback_takes_eleven_classic_rounds_and_seven_to_leave() {
            use crate::intf::DCTCP_ONE;
            let (deep, shallow) = (23_000 << 3, (23_000 << 3) - 8);
            assert_eq!(classic_score(0, deep, 20_000, 3000), DCTCP_ONE >> 3);
            assert_eq!(classic_score(0, shallow, 20_000, 3000), 0);
            let (mut score, mut on, mut rounds) = (0, false, 0);
            // Bounded: a fallback that never comes fails, not hangs.
            while !on && rounds < 100 {
                score = classic_score(score, deep, 20_000, 3000);
                on = classic(score, on);
                rounds += 1;
            }
            assert_eq!(rounds, 11, "score {score}");
            for _ in 0..100 {
                score = classic_score(score, deep, 20_000, 3000);
            }
            // The EWMA reaches one exactly: nothing rounds away at the top.
            assert_eq!(score, DCTCP_ONE);
            let mut rounds = 0;
            while on && rounds < 100 {
                score = classic_score(score, shallow, 20_000, 3000);
                on = classic(score, on);
                rounds += 1;
            }
            assert_eq!(rounds, 11, "score {score}");
            // Between the two thresholds the state is what it was.
            assert!(classic(DCTCP_ONE / 2, true) && !classic(DCTCP_ONE / 2, false));
        }
    }
}
