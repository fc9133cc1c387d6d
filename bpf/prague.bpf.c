// SPDX-License-Identifier: GPL-2.0
/*
 * TCP Prague, L4S's scalable sender (RFC 9330; RFC 9331 names what such a
 * sender must do), as a struct_ops congestion control registered as
 * "bpf_prague". It follows L4STeam's tcp_prague.c 0.7, and its names, where
 * a BPF program may do what that module does:
 *
 *  - alpha in 1/2^24, kept as alpha / g so no remainder is lost; updated
 *    once a round, and once RTT-independent at most once per target RTT;
 *  - a fractional window in 1/2^20 segments, cut by alpha / 2 at most once
 *    a round (per target RTT once RTT-independent), grown only by the
 *    unmarked part of each ACK, the growth scaled by (rtt / target)^2 below
 *    the target RTT (RTT independence) from rtt_transition rounds after
 *    slow start;
 *  - below mode_switch_mtus of window, the rate mode: the pacing rate leads
 *    (+3 % the first half of each round, -3 % the second), down to
 *    100 kbit/s, so a flow can send fewer than 2 segments per RTT;
 *  - pacing always on; on loss, halve once, no growth until Open, undo to
 *    the larger of now and before.
 *
 * Where the kernel does not let a BPF congestion control do the same:
 *  - ECT(1). A congestion control cannot write the TOS byte, and stock
 *    kernels send ECT(0) on an established connection. init puts the socket
 *    in `prague_sockets`; prague_ect1, on tcx egress where the loader or the
 *    lab attaches it, rewrites that socket's ECT(0) to ECT(1).
 *  - Feedback. The reference reads the marks of each ACK from AccECN
 *    (rs->ece_delta, a field of the L4S kernel only). Here they are
 *    tp->delivered_ce's step since the previous ACK, which is exact when the
 *    receiver echoes CE as DCTCP's does (dctcp_core.h; this program, or
 *    bpf_dctcp, on the receiving socket).
 *  - No MSS shrinking in the rate mode (a BPF program cannot set the MSS)
 *    and no cap on TSO bursts (min_tso_segs is a floor): the lab's links
 *    have offloads off, so a burst is a packet.
 *  - The rate mode needs only the rounds after slow start here, not RTT
 *    independence as well, so rtt_scaling=0 does not also turn it off.
 *  - The classic-ECN-AQM detection is not here: the reference has it off,
 *    and its 6.x code has none.
 */
#define DCTCP_ALGO prague
#define DCTCP_ALGO_NAME "bpf_prague"
#include "tcp_ca.h"

struct dctcp_event;
static __always_inline void prague_emit(struct sock *sk, struct dctcp_event *e);
#define DCTCP_EMIT_ALGO(sk, e) prague_emit(sk, e)

#include "dctcp_core.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

struct dctcp_params params SEC(".data.params") = {
	.g = PRAGUE_DEFAULT_G,
	.rtt_target_us = PRAGUE_DEFAULT_RTT_TARGET_US,
	.rtt_scaling = 1,
	.rtt_transition = PRAGUE_DEFAULT_RTT_TRANSITION,
	.mode = PRAGUE_MODE_AUTO,
	.mode_switch_mtus = PRAGUE_DEFAULT_MODE_SWITCH_MTUS,
	.pacing = 1,
	.classic_qdelay_us = PRAGUE_DEFAULT_CLASSIC_QDELAY_US,
};
struct dctcp_stats stats SEC(".data.stats");

/* The sockets whose data prague_ect1 sends as ECT(1): 1 from init to release. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u32);
} prague_sockets SEC(".maps");

#define ONE_CWND (1ULL << PRAGUE_CWND_SHIFT)
#define MIN_CWND 2U
/* srtt_us is in 1/8 us: 2^23 of them is a second, near enough (8.4e6 for
 * 8e6), which is what the reference's rate-mode arithmetic takes. */
#define RTT2SEC_SHIFT 23
/* Rate mode: +/- 4/128 (about 3 %) of the rate each half round. */
#define RATE_OFFSET 4
#define OFFSET_UNIT 7
#define USEC_PER_SEC 1000000ULL

static __always_inline struct prague_ext *prague_of(const struct sock *sk)
{
	return &((struct prague_state *)inet_csk_ca(sk))->prague;
}

static __always_inline bool prague_flag(const struct sock *sk, u32 f)
{
	return dctcp_ca(sk)->flags & f;
}

static __always_inline bool prague_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* rtt_transition rounds past slow start: from here on a flow is long-lived. */
static __always_inline bool prague_settled(const struct sock *sk)
{
	return !prague_in_slow_start(tcp_sk(sk)) && prague_of(sk)->round >= params.rtt_transition;
}

/* Behind a classic ECN AQM a flow is Reno's: its RTT is its own. */
static __always_inline bool prague_is_rtt_indep(const struct sock *sk)
{
	return params.rtt_scaling && prague_settled(sk) && !prague_flag(sk, PRAGUE_FLAG_CLASSIC);
}

static __always_inline bool prague_rate_mode(const struct sock *sk)
{
	return prague_settled(sk) && prague_flag(sk, PRAGUE_FLAG_RATE_MODE);
}

/* The target RTT in srtt_us's unit (1/8 us). */
static __always_inline u64 prague_target_rtt(void)
{
	return (u64)params.rtt_target_us << 3;
}

/* The larger of the target and the flow's RTT, 1/8 us. */
static __always_inline u64 prague_virtual_rtt(const struct sock *sk)
{
	return max(prague_target_rtt(), (u64)tcp_sk(sk)->srtt_us);
}

/* Microseconds, wrapping every 71 minutes: only differences are taken. */
static __always_inline u32 prague_now_us(const struct sock *sk)
{
	return (u32)tcp_sk(sk)->tcp_mstamp;
}

static __always_inline u32 prague_since_alpha_update(const struct sock *sk)
{
	return prague_now_us(sk) - prague_of(sk)->alpha_stamp;
}

/* The packet a segment of mss_cache makes: tcp_mss_to_mtu(). */
static __always_inline u32 prague_mtu(const struct sock *sk)
{
	const struct inet_connection_sock *icsk = inet_csk(sk);
	const struct tcp_sock *tp = tcp_sk(sk);

	return tp->mss_cache + tp->tcp_header_len + icsk->icsk_ext_hdr_len +
	       icsk->icsk_af_ops->net_header_len;
}

/* (a b) >> PRAGUE_CWND_SHIFT without the product overflowing for b's high bits. */
static __always_inline u64 prague_mul_cwnd(u64 a, u64 b)
{
	return a * (b >> PRAGUE_CWND_SHIFT) + ((a * (b & (ONE_CWND - 1))) >> PRAGUE_CWND_SHIFT);
}

static __always_inline u64 prague_div_round_closest(u64 n, u64 d)
{
	return (n + d / 2) / d;
}

/* alpha in 1/2^24 from what the EWMA keeps (alpha / g). */
static __always_inline u64 prague_alpha(const struct prague_ext *pr)
{
	return (pr->upscaled_alpha * min(params.g, DCTCP_ONE)) >> 16;
}

/*
 * Growth per acked segment, in 1/2^20 of a segment per segment of window:
 * 1 (a segment per round) unscaled; once RTT-independent and the RTT below
 * the target, (rtt / target)^2, so that a window grows by one segment per
 * target RTT in rate terms whatever the RTT. Past 100 ms the square would
 * overflow the reference's arithmetic: unscaled there too.
 */
static __always_inline void prague_ai_ack_increase(struct sock *sk)
{
	u64 rtt = tcp_sk(sk)->srtt_us, target = prague_target_rtt();
	struct prague_ext *pr = prague_of(sk);

	if (!prague_is_rtt_indep(sk) || !rtt || rtt > ((u64)PRAGUE_MAX_SCALED_RTT_US << 3) ||
	    rtt >= target) {
		pr->ai_per_ack = ONE_CWND;
		return;
	}
	pr->ai_per_ack = prague_div_round_closest((rtt << PRAGUE_CWND_SHIFT) * rtt, target * target);
}

/* The window the kernel is given: the fractional one rounded up, at least 2. */
static __always_inline u32 prague_frac_cwnd_to_snd_cwnd(const struct sock *sk)
{
	u64 cwnd = (prague_of(sk)->frac_cwnd + ONE_CWND - 1) >> PRAGUE_CWND_SHIFT;

	return min(max(cwnd, (u64)MIN_CWND), (u64)tcp_sk(sk)->snd_cwnd_clamp);
}

/* The rate a window of frac_cwnd sends at over srtt, bytes/s, at least 100 kbit/s. */
static __always_inline u64 prague_frac_cwnd_to_pacing_rate(const struct sock *sk)
{
	u64 rate = (USEC_PER_SEC << 3) * prague_mtu(sk);
	u32 srtt = tcp_sk(sk)->srtt_us;

	if (srtt)
		rate /= srtt;
	return max(prague_mul_cwnd(rate, prague_of(sk)->frac_cwnd), (u64)PRAGUE_MIN_RATE);
}

/* The window that sends rate_bytes over srtt, 1/2^20 segments. */
static __always_inline u64 prague_pacing_rate_to_frac_cwnd(const struct sock *sk)
{
	u64 bytes = (prague_of(sk)->rate_bytes * tcp_sk(sk)->srtt_us) >>
		    (RTT2SEC_SHIFT - PRAGUE_CWND_SHIFT);
	u32 mtu = prague_mtu(sk);

	return (bytes + mtu - 1) / mtu;
}

/* A new round: it ends when snd_una passes snd_nxt of now. */
static __always_inline void prague_new_round(struct sock *sk)
{
	struct prague_ext *pr = prague_of(sk);

	dctcp_reset(tcp_sk(sk), dctcp_ca(sk));
	if (!prague_in_slow_start(tcp_sk(sk))) {
		/* After a wrap a flow stays settled. */
		if (!++pr->round)
			pr->round = params.rtt_transition;
	}
	prague_ai_ack_increase(sk);
}

/* A round ended, and once RTT-independent a target RTT has passed too: on a
 * step AQM flows of different RTTs then converge to the same alpha. */
static __always_inline bool prague_should_update_ewma(const struct sock *sk)
{
	if (before(tcp_sk(sk)->snd_una, dctcp_ca(sk)->next_seq))
		return false;
	return !prague_is_rtt_indep(sk) || prague_since_alpha_update(sk) >= params.rtt_target_us;
}

/*
 * The classic-ECN fallback (RFC 9331 section 4.3): an L4S AQM marks at a
 * shallow queue (DualPI2's step: 1 ms of sojourn), an RFC 3168 AQM only once
 * its queue is deep (RED past min_th, CoDel's 5 ms target, PIE's 15 ms), and
 * there a flow cut by alpha / 2 takes the link from every classic flow in
 * the queue. A round that brought marks is evidence: its queue delay, srtt
 * less the path's min RTT, at or above classic_qdelay_us counts for a
 * classic AQM, under it against. classic_score is the evidence's EWMA at
 * gain 1/8: Reno's response from 3/4 (11 classic rounds in a row from 0),
 * Prague's again at 1/4. Unmarked rounds say nothing: a deep queue that
 * never marks is a drop-tail one, met by the loss response anyway.
 */
static __always_inline void prague_classic_detect(struct sock *sk, u32 delivered_ce)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp_state *ca = dctcp_ca(sk);
	struct prague_ext *pr = prague_of(sk);
	u32 srtt = tp->srtt_us >> 3, min_rtt = tp->rtt_min.s[0].v;
	u32 sample;

	if (!params.classic_ecn) {
		ca->flags &= ~PRAGUE_FLAG_CLASSIC;
		return;
	}
	if (!delivered_ce)
		return;
	sample = srtt >= min_rtt + params.classic_qdelay_us ? DCTCP_ONE : 0;
	pr->classic_score = pr->classic_score - (pr->classic_score >> 3) + (sample >> 3);
	if (pr->classic_score >= PRAGUE_CLASSIC_ON)
		ca->flags |= PRAGUE_FLAG_CLASSIC;
	else if (pr->classic_score <= PRAGUE_CLASSIC_OFF)
		ca->flags &= ~PRAGUE_FLAG_CLASSIC;
}

/*
 * upscaled_alpha = alpha / g, so alpha = (1 - g) alpha + g F becomes
 * upscaled_alpha += F - g upscaled_alpha: the part g would round away stays
 * in. Nothing changes before the first mark (no AQM seen on the path yet).
 */
static __always_inline void prague_update_alpha(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp_state *ca = dctcp_ca(sk);
	struct prague_ext *pr = prague_of(sk);
	u32 delivered = tp->delivered - ca->old_delivered;
	u32 delivered_ce = tp->delivered_ce - ca->old_delivered_ce;
	u64 g = max(min(params.g, DCTCP_ONE), 1U);

	if (prague_flag(sk, PRAGUE_FLAG_SAW_CE)) {
		u64 up = pr->upscaled_alpha, f = 0;

		if (delivered_ce)
			f = ((u64)delivered_ce << PRAGUE_ALPHA_BITS) / max(1U, delivered);
		up = up - ((up * g) >> 16) + f;
		pr->upscaled_alpha = min(up, ((u64)1 << (PRAGUE_ALPHA_BITS + 16)) / g);
		pr->alpha_stamp = prague_now_us(sk);
		ca->alpha = prague_alpha(pr) >> (PRAGUE_ALPHA_BITS - DCTCP_ALPHA_SHIFT);
		__sync_fetch_and_add(&stats.alpha_updates, 1);
	}
	prague_classic_detect(sk, delivered_ce);
	prague_new_round(sk);
	if (dctcp_tracing(DCTCP_TRACE_WINDOW | DCTCP_TRACE_ACK))
		dctcp_emit(sk, DCTCP_EV_WINDOW, 0, delivered, delivered_ce, &stats);
}

/* tcp_is_cwnd_limited(): growth only when the window is what holds the flow back. */
static __always_inline bool prague_cwnd_limited(const struct tcp_sock *tp)
{
	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return true;
	return prague_in_slow_start(tp) && tp->snd_cwnd < 2 * tp->max_packets_out;
}

/* Step the kernel's window one segment toward the fractional one: a burst
 * of either sign is what Prague avoids. */
static __always_inline void prague_adjust_snd_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 target = prague_frac_cwnd_to_snd_cwnd(sk);

	if (tp->snd_cwnd > target) {
		tp->snd_cwnd = tp->snd_cwnd - 1;
		tp->snd_ssthresh = tp->snd_cwnd;
		prague_ai_ack_increase(sk);
	} else if (tp->snd_cwnd < target) {
		tp->snd_cwnd = tp->snd_cwnd + 1;
		prague_ai_ack_increase(sk);
	}
}

/* Per ACK: slow start, or additive increase by the unmarked segments. */
static __always_inline void prague_update_cwnd(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp_state *ca = dctcp_ca(sk);
	struct prague_ext *pr = prague_of(sk);
	u32 marked = tp->delivered_ce - pr->prior_delivered_ce;
	s64 acked = rs->acked_sacked;

	pr->prior_delivered_ce = tp->delivered_ce;
	if (marked) {
		/* With alpha starting at 0, the first mark halves (the
		 * reference's alpha_mode 0). */
		if (!(ca->flags & PRAGUE_FLAG_SAW_CE) && !params.alpha_on_init)
			pr->frac_cwnd = (pr->frac_cwnd + 1) >> 1;
		ca->flags |= PRAGUE_FLAG_SAW_CE;
		acked -= marked;
	}
	/* Growth only where the window (or, in the rate mode, the pacing rate)
	 * is what holds the flow back. The reference asks tcp_is_cwnd_limited()
	 * in both modes, but a flow paced below 2 segments per RTT never fills
	 * its window of 2: it never grew again (20 flows at 10 Mbit/s, 1 ms:
	 * 17 stuck at 100 kbit/s). In the rate mode the question is whether the
	 * application ran out of data. */
	if (acked <= 0 || (ca->flags & PRAGUE_FLAG_IN_LOSS) ||
	    (prague_rate_mode(sk) ? rs->is_app_limited : !prague_cwnd_limited(tp)))
		goto adjust;

	if (prague_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		pr->frac_cwnd = (u64)tp->snd_cwnd << PRAGUE_CWND_SHIFT;
		if (!acked) {
			prague_ai_ack_increase(sk);
			return;
		}
	}

	if (prague_rate_mode(sk)) {
		/* One MTU_SYS more per virtual RTT, shared by the window's segments. */
		u64 vrtt = prague_virtual_rtt(sk), mtu = prague_mtu(sk);
		u64 increase = ((u64)acked * PRAGUE_MTU_SYS << RTT2SEC_SHIFT) / vrtt;
		u64 segs = (pr->rate_bytes * vrtt + (mtu << RTT2SEC_SHIFT) - 1) / (mtu << RTT2SEC_SHIFT);
		u64 frac;

		if (segs)
			pr->rate_bytes += prague_div_round_closest(increase, segs);
		frac = prague_pacing_rate_to_frac_cwnd(sk);
		pr->frac_cwnd = max(pr->frac_cwnd + acked, frac);
	} else {
		/* ai_per_ack / cwnd per acked segment, in MTU_SYS-sized segments. */
		u64 increase = (u64)acked * pr->ai_per_ack;
		u64 rate;

		if (pr->frac_cwnd)
			increase = prague_div_round_closest(increase << PRAGUE_CWND_SHIFT,
							    pr->frac_cwnd);
		increase = increase * PRAGUE_MTU_SYS / prague_mtu(sk);
		pr->frac_cwnd += max((u64)acked, increase);
		rate = prague_frac_cwnd_to_pacing_rate(sk);
		pr->rate_bytes = max(pr->rate_bytes + acked, rate);
	}
adjust:
	prague_adjust_snd_cwnd(sk);
}

/* The pacing rate: the window's over srtt, or the rate mode's +/- 3 %;
 * doubled in slow start. */
static __always_inline void prague_update_pacing_rate(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague_ext *pr = prague_of(sk);
	u64 rate;

	if (prague_rate_mode(sk)) {
		u64 offset = (pr->rate_bytes * RATE_OFFSET) >> OFFSET_UNIT;

		if ((prague_virtual_rtt(sk) >> (3 + 1)) <= prague_since_alpha_update(sk))
			rate = pr->rate_bytes - offset;
		else
			rate = pr->rate_bytes + offset;
	} else {
		u32 in_flight = tcp_packets_in_flight(tp);
		u64 segs = max(pr->frac_cwnd >> PRAGUE_CWND_SHIFT, (u64)in_flight);

		rate = (USEC_PER_SEC << 3) * prague_mtu(sk);
		if (tp->srtt_us)
			rate /= tp->srtt_us;
		rate = max(rate * segs, (u64)PRAGUE_MIN_RATE);
		pr->rate_bytes = rate;
	}
	if (tp->snd_cwnd < tp->snd_ssthresh / 2)
		rate <<= 1;
	if (params.pacing)
		sk->sk_pacing_rate = min(rate, sk->sk_max_pacing_rate);
}

/* PRAGUE_MODE_AUTO: the rate leads at or below mode_switch_mtus of window
 * once an AQM has marked; the other side follows whichever leads. */
static __always_inline void prague_choose_mode(struct sock *sk)
{
	struct dctcp_state *ca = dctcp_ca(sk);
	struct prague_ext *pr = prague_of(sk);
	bool rate;

	if (params.mode == PRAGUE_MODE_AUTO) {
		u64 window = (u64)tcp_sk(sk)->snd_cwnd * prague_mtu(sk);

		rate = (ca->flags & PRAGUE_FLAG_SAW_CE) &&
		       window <= (u64)params.mode_switch_mtus * PRAGUE_MTU_SYS;
	} else {
		rate = params.mode == PRAGUE_MODE_RATE;
	}
	if (rate) {
		ca->flags |= PRAGUE_FLAG_RATE_MODE;
		pr->frac_cwnd = prague_pacing_rate_to_frac_cwnd(sk);
	} else {
		ca->flags &= ~PRAGUE_FLAG_RATE_MODE;
		pr->rate_bytes = prague_frac_cwnd_to_pacing_rate(sk);
	}
}

/* The cut on marks: by alpha / 2, rounded to nearest (behind a classic ECN
 * AQM by half, as Reno's); once RTT-independent at most once per target RTT.
 * Entered through the kernel's CWR, which comes at most once a round. */
static __always_inline void prague_enter_cwr(struct sock *sk)
{
	struct prague_ext *pr = prague_of(sk);
	u64 alpha = prague_flag(sk, PRAGUE_FLAG_CLASSIC) ? 1ULL << PRAGUE_ALPHA_BITS
							  : prague_alpha(pr);

	if (prague_is_rtt_indep(sk) && prague_now_us(sk) - pr->cwr_stamp < params.rtt_target_us)
		return;
	pr->cwr_stamp = prague_now_us(sk);
	if (prague_rate_mode(sk)) {
		u64 cut = (pr->rate_bytes * alpha) >> (PRAGUE_ALPHA_BITS + 1);

		pr->rate_bytes = max(pr->rate_bytes - cut, (u64)PRAGUE_MIN_RATE);
		pr->frac_cwnd = prague_pacing_rate_to_frac_cwnd(sk);
	} else {
		u64 cut = (alpha * pr->frac_cwnd + (1ULL << PRAGUE_ALPHA_BITS)) >>
			  (PRAGUE_ALPHA_BITS + 1);

		pr->frac_cwnd -= cut;
		pr->rate_bytes = prague_frac_cwnd_to_pacing_rate(sk);
	}
	dctcp_ca(sk)->reduction = DCTCP_ONE / 2;
	__sync_fetch_and_add(&stats.reductions, 1);
	if (dctcp_tracing(DCTCP_TRACE_WINDOW | DCTCP_TRACE_ACK))
		dctcp_emit(sk, DCTCP_EV_CUT, 0, 0, 0, &stats);
}

/* Loss (Recovery entry or RTO): halve, and grow no more until Open. */
static __always_inline void prague_enter_loss(struct sock *sk)
{
	struct prague_ext *pr = prague_of(sk);

	dctcp_ca(sk)->loss_cwnd = tcp_sk(sk)->snd_cwnd;
	if (prague_rate_mode(sk)) {
		pr->rate_bytes -= pr->rate_bytes >> 1;
		pr->frac_cwnd = prague_pacing_rate_to_frac_cwnd(sk);
	} else {
		pr->frac_cwnd -= pr->frac_cwnd >> 1;
		pr->rate_bytes = prague_frac_cwnd_to_pacing_rate(sk);
	}
	dctcp_ca(sk)->flags |= PRAGUE_FLAG_IN_LOSS;
	/* Where slow start after an RTO stops (the reference leaves ssthresh
	 * as it was, often infinite, and slow start doubles past the loss). */
	tcp_sk(sk)->snd_ssthresh = prague_frac_cwnd_to_snd_cwnd(sk);
	__sync_fetch_and_add(&stats.loss_reactions, 1);
}

/*
 * The guard, as Prague needs it: the kernel never writes its window but on
 * RTO and undo, so an impossible value can only be the 6.18 issue's
 * (README, Known issue). ssthresh decides slow start here, cwnd what is sent.
 */
static __always_inline void prague_guard(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (params.no_guard)
		return;
	if (tp->snd_ssthresh != TCP_INFINITE_SSTHRESH && tp->snd_ssthresh >= DCTCP_CWND_SANE) {
		stats.found_ssthresh = tp->snd_ssthresh;
		tp->snd_ssthresh = prague_frac_cwnd_to_snd_cwnd(sk);
		__sync_fetch_and_add(&stats.ssthresh_repairs, 1);
		dctcp_trace_repair(sk, DCTCP_REPAIR_SSTHRESH, &stats);
	}
	if (tp->snd_cwnd >= DCTCP_CWND_SANE) {
		stats.found_cwnd = tp->snd_cwnd;
		tp->snd_cwnd = prague_frac_cwnd_to_snd_cwnd(sk);
		__sync_fetch_and_add(&stats.cwnd_repairs, 1);
		dctcp_trace_repair(sk, DCTCP_REPAIR_CWND, &stats);
	}
}

static __always_inline void prague_emit(struct sock *sk, struct dctcp_event *e)
{
	const struct prague_ext *pr = prague_of(sk);

	e->frac_cwnd = pr->frac_cwnd;
	e->upscaled_alpha = pr->upscaled_alpha;
	e->ai_per_ack = pr->ai_per_ack;
	e->srtt8 = tcp_sk(sk)->srtt_us;
	e->mode = prague_rate_mode(sk) ? PRAGUE_MODE_RATE : PRAGUE_MODE_WINDOW;
	e->ect = prague_flag(sk, PRAGUE_FLAG_ECT1) ? 1 : 2;
	e->classic = prague_flag(sk, PRAGUE_FLAG_CLASSIC);
	e->classic_score = pr->classic_score;
	e->min_rtt_us = tcp_sk(sk)->rtt_min.s[0].v;
}

/* Marks the socket for prague_ect1 (1) or unmarks it (0). */
static __always_inline bool prague_set_ect1(struct sock *sk, u32 on)
{
	u32 *v = bpf_sk_storage_get(&prague_sockets, sk, 0, on ? BPF_SK_STORAGE_GET_F_CREATE : 0);

	if (!v)
		return false;
	*v = on;
	return true;
}

SEC("struct_ops")
void BPF_PROG(prague_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct prague_ext *pr = prague_of(sk);

	if (!dctcp_core_init(sk, &params, &stats))
		return;
	__builtin_memset(pr, 0, sizeof(*pr));
	dctcp_ca(sk)->alpha = min(params.alpha_on_init, DCTCP_MAX_ALPHA) << (DCTCP_ALPHA_SHIFT - 10);
	/* alpha_on_init in 1/1024, kept as alpha / g in 1/2^24. */
	pr->upscaled_alpha = (((u64)min(params.alpha_on_init, DCTCP_MAX_ALPHA)
			       << (PRAGUE_ALPHA_BITS - 10)) << 16) / max(min(params.g, DCTCP_ONE), 1U);
	pr->frac_cwnd = (u64)tp->snd_cwnd << PRAGUE_CWND_SHIFT;
	pr->alpha_stamp = prague_now_us(sk);
	pr->prior_delivered_ce = tp->delivered_ce;
	if (tp->delivered_ce)
		dctcp_ca(sk)->flags |= PRAGUE_FLAG_SAW_CE;
	if (params.mode == PRAGUE_MODE_RATE)
		dctcp_ca(sk)->flags |= PRAGUE_FLAG_RATE_MODE;
	if (tp->srtt_us) {
		u32 in_flight = tcp_packets_in_flight(tp);

		pr->rate_bytes = (USEC_PER_SEC << 3) * prague_mtu(sk) / tp->srtt_us *
				 max(tp->snd_cwnd, in_flight);
	}
	pr->rate_bytes = max(pr->rate_bytes, (u64)PRAGUE_MIN_RATE);
	if (params.pacing && sk->sk_pacing_status == SK_PACING_NONE)
		sk->sk_pacing_status = SK_PACING_NEEDED;
	if (prague_set_ect1(sk, 1))
		dctcp_ca(sk)->flags |= PRAGUE_FLAG_ECT1;
	prague_new_round(sk);
	prague_update_pacing_rate(sk);
}

SEC("struct_ops")
void BPF_PROG(prague_release, struct sock *sk)
{
	if (dctcp_ca(sk)->flags & DCTCP_FLAG_LIVE) {
		if (sk->sk_pacing_status == SK_PACING_NEEDED)
			sk->sk_pacing_status = SK_PACING_NONE;
		prague_set_ect1(sk, 0);
		dctcp_ca(sk)->flags &= ~PRAGUE_FLAG_ECT1;
	}
	dctcp_core_release(sk, &stats);
}

SEC("struct_ops")
void BPF_PROG(prague_cong_control, struct sock *sk, u32 ack, int flag, const struct rate_sample *rs)
{
	/* An active opener's SYN-ACK arrives before init. */
	if (!(dctcp_ca(sk)->flags & DCTCP_FLAG_LIVE))
		return;
	prague_guard(sk);
	dctcp_trace_ack(sk, &dctcp_ca(sk)->acks, &stats);
	prague_update_cwnd(sk, rs);
	if (prague_should_update_ewma(sk))
		prague_update_alpha(sk);
	prague_update_pacing_rate(sk);
	prague_choose_mode(sk);
}

/* The kernel keeps ssthresh as it is: the window's cuts are prague_enter_*. */
SEC("struct_ops")
u32 BPF_PROG(prague_ssthresh, struct sock *sk)
{
	/* prague_guard repairs it on the next ACK. */
	if (dctcp_inject_ssthresh(sk, &params))
		return DCTCP_BOGUS_SSTHRESH;
	return tcp_sk(sk)->snd_ssthresh;
}

SEC("struct_ops")
void BPF_PROG(prague_set_state, struct sock *sk, u8 new_state)
{
	if (!(dctcp_ca(sk)->flags & DCTCP_FLAG_LIVE) || new_state == inet_csk(sk)->icsk_ca_state)
		return;
	dctcp_trace_flow(sk, DCTCP_EV_STATE, new_state, &stats);
	switch (new_state) {
	case TCP_CA_Recovery:
		prague_enter_loss(sk);
		break;
	case TCP_CA_CWR:
		prague_enter_cwr(sk);
		break;
	case TCP_CA_Open:
		dctcp_ca(sk)->flags &= ~PRAGUE_FLAG_IN_LOSS;
		break;
	}
}

SEC("struct_ops")
void BPF_PROG(prague_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	/* An RTO: the window is Prague's to halve, not the core's. */
	if (ev == CA_EVENT_LOSS) {
		if (dctcp_ca(sk)->flags & DCTCP_FLAG_LIVE)
			prague_enter_loss(sk);
		return;
	}
	/* The receiver's exact CE echo, as DCTCP's. */
	dctcp_core_cwnd_event(sk, ev, &stats);
}

/* A loss found spurious: back to the larger of now and before it. */
SEC("struct_ops")
u32 BPF_PROG(prague_undo_cwnd, struct sock *sk)
{
	struct prague_ext *pr = prague_of(sk);
	u32 loss_cwnd = dctcp_ca(sk)->loss_cwnd;

	dctcp_ca(sk)->flags &= ~PRAGUE_FLAG_IN_LOSS;
	pr->frac_cwnd = max(pr->frac_cwnd, (u64)loss_cwnd << PRAGUE_CWND_SHIFT);
	pr->rate_bytes = prague_frac_cwnd_to_pacing_rate(sk);
	return max(loss_cwnd, tcp_sk(sk)->snd_cwnd);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops prague = {
	.init = (void *)prague_init,
	.release = (void *)prague_release,
	.cong_control = (void *)prague_cong_control,
	.cwnd_event = (void *)prague_cwnd_event,
	.ssthresh = (void *)prague_ssthresh,
	.undo_cwnd = (void *)prague_undo_cwnd,
	.set_state = (void *)prague_set_state,
	.flags = TCP_CONG_NEEDS_ECN,
	.name = DCTCP_ALGO_NAME,
};

#include "reno_fallback.h"

/*
 * ECT(1) on the wire (tcx egress of the sender's interfaces): the data of a
 * socket prague_init marked leaves ECT(1) instead of the ECT(0) the stack
 * gave it. Not-ECT (the SYN, a retransmission) and CE stay as they are, and
 * no other socket's packet is touched.
 */
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define INET_ECN_MASK 3
#define INET_ECN_ECT_1 1
#define INET_ECN_ECT_0 2
#define TCX_NEXT -1

SEC("tcx/egress")
int prague_ect1(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct bpf_sock *sk = skb->sk;
	u32 *on;

	if (!sk || !(sk = bpf_sk_fullsock(sk)))
		return TCX_NEXT;
	on = bpf_sk_storage_get(&prague_sockets, sk, 0, 0);
	if (!on || !*on || (void *)(eth + 1) > end)
		return TCX_NEXT;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		u32 sum;

		if ((void *)(ip + 1) > end || (ip->tos & INET_ECN_MASK) != INET_ECN_ECT_0)
			return TCX_NEXT;
		/* ECT(0) -> ECT(1) takes 1 off the header's first 16-bit word
		 * (tos is its low byte), so the checksum, the ones' complement
		 * of the sum, gains 1 (RFC 1624, folding the carry). */
		ip->tos = (ip->tos & ~INET_ECN_MASK) | INET_ECN_ECT_1;
		sum = bpf_ntohs(ip->check) + 1;
		ip->check = bpf_htons((u16)(sum + (sum >> 16)));
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		/* ECN is bits 4-5 of the second byte (the traffic class's low two). */
		u8 *b = (void *)(eth + 1);

		if ((void *)(b + 2) > end || ((b[1] >> 4) & INET_ECN_MASK) != INET_ECN_ECT_0)
			return TCX_NEXT;
		b[1] = (b[1] & ~(INET_ECN_MASK << 4)) | (INET_ECN_ECT_1 << 4);
	} else {
		return TCX_NEXT;
	}
	__sync_fetch_and_add(&stats.ect1_packets, 1);
	return TCX_NEXT;
}
