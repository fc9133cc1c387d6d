/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The struct_ops programs of every algorithm of this project, wrapped around
 * dctcp_core.h, and its Reno fallback. An algorithm is a .bpf.c file that
 * defines, before including this header:
 *
 *   DCTCP_ALGO       identifier of its struct_ops map (which is how the loader
 *                    tells a pinned algorithm's kind) and prefix of its programs
 *   DCTCP_ALGO_NAME  the name registered unless the loader is given another
 *   DCTCP_PARAMS     initial struct dctcp_params (the loader rewrites them)
 *   DCTCP_FEATURES   1 to compile in the switches of params.features (kdctcp)
 *
 * and, after it, dctcp_algo_reduction(): the n of its cut, cwnd (1 - n alpha).
 */
#ifndef DCTCP_BPF_OPS_H
#define DCTCP_BPF_OPS_H

#include "dctcp_core.h"

#ifndef DCTCP_FEATURES
#define DCTCP_FEATURES 0
#endif

struct dctcp_params params SEC(".data.params") = DCTCP_PARAMS;
struct dctcp_stats stats SEC(".data.stats");

/* n of this algorithm's cut for this socket now, in 1/DCTCP_ONE. */
static __always_inline u32 dctcp_algo_reduction(struct sock *sk);

/* The guard (dctcp_core_guard), unless `guard=0`: on a kernel where it
 * never repairs anything, it is pure overhead. */
static __always_inline void dctcp_guard(struct sock *sk)
{
	if (!params.no_guard)
		dctcp_core_guard(sk, &stats);
}

/* A switch of params.features (seed 002's modifications): constant false
 * in algorithms compiled without them. */
static __always_inline bool dctcp_feature(u32 f)
{
	return DCTCP_FEATURES && (params.features & f);
}

/*
 * Progressive reduction and growth during CWR (seed 002), on each ACK
 * inside CWR (before the kernel's PRR step uses
 * ssthresh as the window CWR ends at):
 * (d) progressive reduction: each ECE recomputes the cut from the cwnd CWR
 *     started with (prior_cwnd) and alpha as it is now, and keeps it only if
 *     lower; the paper's kernel set cwnd at once, PRR here walks cwnd down
 *     to ssthresh within the round trip.
 * (b) growth during CWR: Reno's one segment per window of delivered packets,
 *     added to ssthresh, so the window CWR ends at has grown as cwnd would
 *     have. snd_cwnd_cnt, zeroed at CWR entry, counts the way Reno does.
 */
static __always_inline void dctcp_cwr_on_ack(struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp_state *ca = dctcp_ca(sk);
	u32 acked = tp->delivered - ca->ack_delivered;

	ca->ack_delivered = tp->delivered;
	if (inet_csk(sk)->icsk_ca_state != TCP_CA_CWR || tp->snd_ssthresh >= DCTCP_CWND_SANE)
		return;
	if (dctcp_feature(DCTCP_F_PROGRESSIVE) && (flags & CA_ACK_ECE) &&
	    tp->prior_cwnd < DCTCP_CWND_SANE) {
		u32 target = dctcp_reduced(tp->prior_cwnd, ca->alpha, ca->reduction) + ca->grown;

		if (target < tp->snd_ssthresh) {
			tp->snd_ssthresh = target;
			__sync_fetch_and_add(&stats.progressive_cuts, 1);
		}
	}
	if (dctcp_feature(DCTCP_F_CWR_GROWTH) && acked) {
		tp->snd_cwnd_cnt += acked;
		if (tp->snd_cwnd_cnt >= tp->snd_ssthresh) {
			tp->snd_cwnd_cnt -= tp->snd_ssthresh;
			tp->snd_ssthresh++;
			ca->grown++;
			__sync_fetch_and_add(&stats.cwr_growth, 1);
		}
	}
}

SEC("struct_ops")
void DCTCP_BPF_PROG(DCTCP_PROG(init), struct sock *sk)
{
	dctcp_core_init(sk, &params, &stats);
}

SEC("struct_ops")
void DCTCP_BPF_PROG(DCTCP_PROG(release), struct sock *sk)
{
	dctcp_core_release(sk, &stats);
}

SEC("struct_ops")
u32 DCTCP_BPF_PROG(DCTCP_PROG(ssthresh), struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd = tp->snd_cwnd, ssthresh = dctcp_core_ssthresh(sk, dctcp_algo_reduction(sk));

	__sync_fetch_and_add(&stats.reductions, 1);

	/* The guard, in set_state right after, repairs it where anyone can watch. */
	if (dctcp_inject_ssthresh(sk, &params))
		return DCTCP_BOGUS_SSTHRESH;

	/* Seed 002 (b): a "reduction" that cut nothing keeps the growth
	 * counter tcp_init_cwnd_reduction() just zeroed, so growth stays linear. */
	if (dctcp_feature(DCTCP_F_CWR_GROWTH) && ssthresh >= cwnd)
		tp->snd_cwnd_cnt = dctcp_ca(sk)->cwnd_cnt;
	return ssthresh;
}

SEC("struct_ops")
void DCTCP_BPF_PROG(DCTCP_PROG(in_ack_event), struct sock *sk, u32 flags)
{
	u32 bits = dctcp_feature(DCTCP_F_FINE_ALPHA) ? DCTCP_ALPHA_SHIFT : 10;

	/* The SYN-ACK reaches an active opener's in_ack_event before .init has
	 * run: nothing here is set up yet, and a window "ended" on zeroed state
	 * would be traced as alpha 0. */
	if (!(dctcp_ca(sk)->flags & DCTCP_FLAG_LIVE))
		return;
	dctcp_guard(sk);
	dctcp_trace_ack(sk, &dctcp_ca(sk)->acks, &stats);
	if (dctcp_feature(DCTCP_F_PER_ACK_ALPHA))
		dctcp_core_update_alpha(sk, params.g_ack, bits, true, &stats);
	else
		dctcp_core_update_alpha(sk, params.g, bits, false, &stats);
	if (DCTCP_FEATURES)
		dctcp_cwr_on_ack(sk, flags);
}

SEC("struct_ops")
void DCTCP_BPF_PROG(DCTCP_PROG(cwnd_event), struct sock *sk, enum tcp_ca_event ev)
{
	dctcp_core_cwnd_event(sk, ev, &stats);
	if (ev == CA_EVENT_COMPLETE_CWR)
		dctcp_guard(sk);
}

SEC("struct_ops")
void DCTCP_BPF_PROG(DCTCP_PROG(set_state), struct sock *sk, u8 new_state)
{
	dctcp_core_set_state(sk, new_state, &stats);
	dctcp_guard(sk);
}

/* Growth is Reno's: slow start, then one segment per window. */
SEC("struct_ops")
void DCTCP_BPF_PROG(DCTCP_PROG(cong_avoid), struct sock *sk, u32 ack, u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
	if (DCTCP_FEATURES)
		dctcp_ca(sk)->cwnd_cnt = tcp_sk(sk)->snd_cwnd_cnt;
}

SEC("struct_ops")
u32 DCTCP_BPF_PROG(DCTCP_PROG(undo_cwnd), struct sock *sk)
{
	return dctcp_core_undo_cwnd(sk);
}

/* Called by tcp_write_xmit before every transmission burst: the last point
 * to catch an impossible cwnd before it turns into packets. Returns what
 * the kernel would without this callback: the socket's namespace's
 * net.ipv4.tcp_min_tso_segs. */
SEC("struct_ops")
u32 DCTCP_BPF_PROG(DCTCP_PROG(min_tso_segs), struct sock *sk)
{
	dctcp_guard(sk);
	return sk->__sk_common.skc_net.net->ipv4.sysctl_tcp_min_tso_segs;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops DCTCP_ALGO = {
	.min_tso_segs = (void *)DCTCP_PROG(min_tso_segs),
	.init = (void *)DCTCP_PROG(init),
	.release = (void *)DCTCP_PROG(release),
	.in_ack_event = (void *)DCTCP_PROG(in_ack_event),
	.cwnd_event = (void *)DCTCP_PROG(cwnd_event),
	.ssthresh = (void *)DCTCP_PROG(ssthresh),
	.cong_avoid = (void *)DCTCP_PROG(cong_avoid),
	.undo_cwnd = (void *)DCTCP_PROG(undo_cwnd),
	.set_state = (void *)DCTCP_PROG(set_state),
	.flags = TCP_CONG_NEEDS_ECN,
	.name = DCTCP_ALGO_NAME,
};

#include "reno_fallback.h"

#endif /* DCTCP_BPF_OPS_H */
