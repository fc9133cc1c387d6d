/* SPDX-License-Identifier: GPL-2.0 */
/*
 * DCTCP machinery shared by every algorithm of this project (bpf_dctcp and its
 * variants, and what of it Prague uses): the alpha estimator, the receiver's
 * CE state machine, the loss reaction, cwnd undo and the non-ECN fallback;
 * the guard against one platform's kernel issue is guard.h. Follows net/ipv4/tcp_dctcp.c;
 * names match it so the two can be read side by side.
 *
 * The including object (through dctcp_ops.h) defines `params` and `stats`;
 * `fallback_name` is defined here and the tracing maps (`trace`, `events`) in
 * trace.h.
 */
#ifndef DCTCP_BPF_CORE_H
#define DCTCP_BPF_CORE_H

#include "trace.h"

char _license[] SEC("license") = "GPL";

/* The name of the Reno fallback registered beside the algorithm; set by the loader. */
const volatile char fallback_name[DCTCP_NAME_MAX] = "";
/* Where a flow goes when fallback_name is refused. */
static const char kernel_reno[] = "reno";

static __always_inline struct dctcp_state *dctcp_ca(const struct sock *sk)
{
	return inet_csk_ca(sk);
}

/* Start a new observation window: it ends when snd_una passes snd_nxt of now. */
static __always_inline void dctcp_reset(const struct tcp_sock *tp, struct dctcp_state *ca)
{
	ca->next_seq = tp->snd_nxt;
	ca->old_delivered = tp->delivered;
	ca->old_delivered_ce = tp->delivered_ce;
}

/* Called from .release: undo the live-socket count taken in init. */
static __always_inline void dctcp_core_release(struct sock *sk, struct dctcp_stats *stats)
{
	struct dctcp_state *ca = dctcp_ca(sk);

	if (ca->flags & DCTCP_FLAG_LIVE) {
		ca->flags &= ~DCTCP_FLAG_LIVE;
		__sync_fetch_and_sub(&stats->sockets, 1);
		dctcp_trace_flow(sk, DCTCP_EV_END, 0, stats);
	}
}

/*
 * Returns false when ECN was not negotiated and the socket was handed to the
 * Reno fallback. Switching congestion control (rather than flagging Reno mode
 * in place) is what clears ECT from the socket: the kernel does that on every
 * switch to an algorithm without TCP_CONG_NEEDS_ECN, and a struct_ops program
 * may not write inet->tos itself. Non-ECN packets carrying ECT would be marked
 * instead of dropped by the switch, and nobody would ever react to the mark.
 */
static __always_inline bool dctcp_core_init(struct sock *sk, const struct dctcp_params *p,
					    struct dctcp_stats *stats)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp_state *ca = dctcp_ca(sk);

	if ((tp->ecn_flags & TCP_ECN_MODE_ANY) ||
	    sk->__sk_common.skc_state == TCP_LISTEN ||
	    sk->__sk_common.skc_state == TCP_CLOSE) {
		ca->prior_rcv_nxt = tp->rcv_nxt;
		ca->alpha = min(p->alpha_on_init, DCTCP_MAX_ALPHA) << (DCTCP_ALPHA_SHIFT - 10);
		ca->loss_cwnd = 0;
		ca->reduction = 0;
		ca->ack_delivered = tp->delivered;
		ca->cwnd_cnt = 0;
		ca->grown = 0;
		ca->ce_state = 0;
		ca->flags = DCTCP_FLAG_LIVE;
		ca->acks = 0;
		ca->injected = 0;
		dctcp_reset(tp, ca);
		__sync_fetch_and_add(&stats->sockets, 1);
		__sync_fetch_and_add(&stats->inits, 1);
		dctcp_trace_flow(sk, DCTCP_EV_START, 0, stats);
		return true;
	}

	/* No ECN: Reno from here on. This runs .release of this algorithm and
	 * .init of the fallback before it returns. A child socket may carry the
	 * listener's flags, so clear them first: this socket was never counted. */
	ca->flags = 0;
	dctcp_trace_flow(sk, DCTCP_EV_FALLBACK, 0, stats);
	if (bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, (void *)fallback_name,
			   sizeof(fallback_name)) == 0) {
		__sync_fetch_and_add(&stats->fallbacks, 1);
		return false;
	}

	/* Refused (the fallback is no longer registered, say). Staying on these
	 * ops is not Reno: once .init returns, the kernel sets ECT on a socket
	 * whose algorithm needs ECN, so this flow would send ECT to a receiver
	 * that never echoes CE, marked by the switch and slowed by nothing.
	 * The kernel's own Reno is always registered. */
	__sync_fetch_and_add(&stats->fallback_refused, 1);
	bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, (void *)kernel_reno, sizeof(kernel_reno));
	return false;
}

/*
 * alpha = (1 - g) alpha + g F, F = delivered_ce / delivered over a window:
 * once per window of data (snd_una crossing next_seq), or on every ACK that
 * delivers something when per_ack (seed 002). Counting delivered packets
 * (SACKed ones too) rather than acked bytes is what the kernel does since 4.20.
 *
 * The arithmetic is done at `bits` of resolution (10 as in tcp_dctcp.c, or 20)
 * with g in 1/2^16. For g = 2^-shift_g at 10 bits every step equals the
 * kernel's: (a g) >> 16 is a >> shift_g, and the floor of
 * ce 2^10 g / (d 2^16) is that of (ce << (10 - shift_g)) / d.
 */
static __always_inline void dctcp_core_update_alpha(struct sock *sk, u32 g, u32 bits, bool per_ack,
						    struct dctcp_stats *stats)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp_state *ca = dctcp_ca(sk);
	u32 delivered_ce, delivered, shift = DCTCP_ALPHA_SHIFT - bits;
	u64 alpha, decay;

	if (!per_ack && before(tp->snd_una, ca->next_seq))
		return;
	delivered_ce = tp->delivered_ce - ca->old_delivered_ce;
	delivered = tp->delivered - ca->old_delivered;
	if (per_ack && !delivered)
		return;

	g = min(g, DCTCP_ONE);
	alpha = ca->alpha >> shift;
	/* (1 - g) alpha, and decay all the way to 0 once alpha g rounds to 0
	 * (the kernel's min_not_zero), or alpha would stick above 0 forever. */
	decay = (alpha * g) >> 16;
	alpha -= decay ? decay : alpha;
	if (delivered_ce) {
		/* g F at `bits`: delivered_ce < 2^22 per window, so u64 holds it. */
		u64 g_f = (((u64)delivered_ce * g) << bits) / ((u64)max(1U, delivered) << 16);

		alpha = min(alpha + g_f, 1ULL << bits);
	}
	ca->alpha = (u32)alpha << shift;
	dctcp_reset(tp, ca);
	__sync_fetch_and_add(&stats->alpha_updates, 1);
	if (dctcp_tracing(DCTCP_TRACE_WINDOW | DCTCP_TRACE_ACK))
		dctcp_emit(sk, DCTCP_EV_WINDOW, 0, delivered, delivered_ce, stats);
}

/*
 * cwnd (1 - n alpha), at least 2 segments; n in 1/2^16, alpha in 1/2^20.
 * DCTCP's cwnd (1 - alpha / 2) is n = 1/2: cwnd - (cwnd alpha10 >> 11),
 * exactly as tcp_dctcp.c rounds it. cwnd < 2^24, so the product fits u64.
 */
static __always_inline u32 dctcp_reduced(u32 cwnd, u32 alpha, u32 n)
{
	u64 cut = ((u64)cwnd * alpha * min(n, DCTCP_ONE)) >> (DCTCP_ALPHA_SHIFT + 16);

	return max(cwnd - (u32)cut, 2U);
}

/* .ssthresh on a congestion signal: cut by n, remembering cwnd for undo. */
static __always_inline u32 dctcp_core_ssthresh(struct sock *sk, u32 n)
{
	struct dctcp_state *ca = dctcp_ca(sk);
	u32 cwnd = tcp_sk(sk)->snd_cwnd;

	ca->loss_cwnd = cwnd;
	ca->reduction = n;
	ca->grown = 0;
	return dctcp_reduced(cwnd, ca->alpha, n);
}

/* RFC 8257 3.5: on loss, halve as Reno does, remembering cwnd for undo. */
static __always_inline void dctcp_react_to_loss(struct sock *sk, struct dctcp_stats *stats)
{
	struct dctcp_state *ca = dctcp_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	ca->loss_cwnd = tp->snd_cwnd;
	tp->snd_ssthresh = max(tp->snd_cwnd >> 1U, 2U);
	__sync_fetch_and_add(&stats->loss_reactions, 1);
}

/*
 * Fast recovery: once on entering Recovery, so at most once per window. An
 * RTO arrives as CA_EVENT_LOSS in cwnd_event instead, so Loss is not handled
 * here, which keeps it to one reduction per round trip.
 */
static __always_inline void dctcp_core_set_state(struct sock *sk, u8 new_state,
						 struct dctcp_stats *stats)
{
	if (new_state != inet_csk(sk)->icsk_ca_state)
		dctcp_trace_flow(sk, DCTCP_EV_STATE, new_state, stats);
	if (new_state == TCP_CA_Recovery && new_state != inet_csk(sk)->icsk_ca_state)
		dctcp_react_to_loss(sk, stats);
}

static __always_inline void dctcp_ece_ack_cwr(struct sock *sk, u32 ce_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ce_state == 1)
		tp->ecn_flags |= TCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
}

/*
 * Receiver side: echo CE exactly despite delayed ACKs. ce_state remembers
 * whether the last segment was CE. When it flips, an ACK still pending for
 * the segments before the flip goes out first with the old ECE value (for
 * rcv_nxt as it was), then the new state is acknowledged at once.
 */
static __always_inline void dctcp_ece_ack_update(struct sock *sk, enum tcp_ca_event ev,
						 struct dctcp_state *ca)
{
	u32 new_ce_state = ev == CA_EVENT_ECN_IS_CE ? 1 : 0;

	if (ca->ce_state != new_ce_state) {
		if (inet_csk(sk)->icsk_ack.pending & ICSK_ACK_TIMER) {
			dctcp_ece_ack_cwr(sk, ca->ce_state);
			bpf_tcp_send_ack(sk, ca->prior_rcv_nxt);
		}
		inet_csk(sk)->icsk_ack.pending |= ICSK_ACK_NOW;
	}
	ca->prior_rcv_nxt = tcp_sk(sk)->rcv_nxt;
	ca->ce_state = new_ce_state;
	dctcp_ece_ack_cwr(sk, new_ce_state);
}

static __always_inline void dctcp_core_cwnd_event(struct sock *sk, enum tcp_ca_event ev,
						  struct dctcp_stats *stats)
{
	switch (ev) {
	case CA_EVENT_ECN_IS_CE:
	case CA_EVENT_ECN_NO_CE:
		dctcp_ece_ack_update(sk, ev, dctcp_ca(sk));
		break;
	case CA_EVENT_LOSS:
		dctcp_react_to_loss(sk, stats);
		break;
	default:
		break;
	}
}

/* Undo a reduction found spurious: back to the cwnd before it. */
static __always_inline u32 dctcp_core_undo_cwnd(struct sock *sk)
{
	return max(tcp_sk(sk)->snd_cwnd, dctcp_ca(sk)->loss_cwnd);
}

static __always_inline void dctcp_fallback_init(struct sock *sk, struct dctcp_stats *stats)
{
	dctcp_ca(sk)->flags = DCTCP_FLAG_FALLBACK | DCTCP_FLAG_LIVE;
	__sync_fetch_and_add(&stats->fallback_sockets, 1);
}

static __always_inline void dctcp_fallback_release(struct sock *sk, struct dctcp_stats *stats)
{
	struct dctcp_state *ca = dctcp_ca(sk);

	if (ca->flags & DCTCP_FLAG_LIVE) {
		ca->flags &= ~DCTCP_FLAG_LIVE;
		__sync_fetch_and_sub(&stats->fallback_sockets, 1);
	}
}

#include "guard.h"

#endif /* DCTCP_BPF_CORE_H */
