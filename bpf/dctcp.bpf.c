// SPDX-License-Identifier: GPL-2.0
/*
 * DCTCP (Alizadeh et al., SIGCOMM 2010; RFC 8257) as a struct_ops congestion
 * control, registered as "bpf_dctcp" so it never collides with the kernel's
 * "dctcp". Behaves as net/ipv4/tcp_dctcp.c, with its tunables in a map that
 * `loader set` rewrites while sockets use it.
 */
#include "dctcp_core.h"

struct dctcp_params params SEC(".data.params") = {
	.shift_g = 4,
	.alpha_on_init = DCTCP_MAX_ALPHA,
};

struct dctcp_stats stats SEC(".data.stats");

SEC("struct_ops")
void BPF_PROG(dctcp_init, struct sock *sk)
{
	dctcp_core_init(sk, &params, &stats);
}

SEC("struct_ops")
void BPF_PROG(dctcp_release, struct sock *sk)
{
	dctcp_core_release(sk, &stats);
}

/* On a congestion signal: cwnd (1 - alpha / 2), at least 2 segments. */
static __always_inline u32 dctcp_reduced(u32 cwnd, u32 alpha)
{
	return max(cwnd - ((cwnd * alpha) >> 11U), 2U);
}

SEC("struct_ops")
u32 BPF_PROG(dctcp_ssthresh, struct sock *sk)
{
	struct dctcp_state *ca = dctcp_ca(sk);
	u32 cwnd = tcp_sk(sk)->snd_cwnd;

	ca->loss_cwnd = cwnd;
	return dctcp_reduced(cwnd, ca->alpha);
}

/* What the reduction under way should have set (see dctcp_core_guard):
 * half on loss, cwnd (1 - alpha / 2) on marks. */
static __always_inline u32 dctcp_expected_ssthresh(struct sock *sk)
{
	u8 state = inet_csk(sk)->icsk_ca_state;
	u32 base = dctcp_core_sane_prior_cwnd(sk);

	return state == TCP_CA_Recovery || state == TCP_CA_Loss ? max(base >> 1U, 2U) :
								  dctcp_reduced(base, dctcp_ca(sk)->alpha);
}

SEC("struct_ops")
void BPF_PROG(dctcp_update_alpha, struct sock *sk, u32 flags)
{
	dctcp_core_guard(sk, &stats);
	dctcp_trace_ack(sk, &dctcp_ca(sk)->acks, &stats);
	dctcp_core_update_alpha(sk, params.shift_g, &stats);
}

SEC("struct_ops")
void BPF_PROG(dctcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	dctcp_core_cwnd_event(sk, ev, &stats);
	if (ev == CA_EVENT_COMPLETE_CWR)
		dctcp_core_guard(sk, &stats);
}

SEC("struct_ops")
void BPF_PROG(dctcp_state, struct sock *sk, u8 new_state)
{
	dctcp_core_set_state(sk, new_state, &stats);
	dctcp_core_guard(sk, &stats);
}

/* Growth is Reno's: slow start, then one segment per window. */
SEC("struct_ops")
void BPF_PROG(dctcp_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
u32 BPF_PROG(dctcp_cwnd_undo, struct sock *sk)
{
	return dctcp_core_undo_cwnd(sk);
}

/* Called by tcp_write_xmit before every transmission burst: the last point
 * to catch an impossible cwnd before it turns into packets. Returns the
 * kernel's default (net.ipv4.tcp_min_tso_segs). */
SEC("struct_ops")
u32 BPF_PROG(dctcp_min_tso_segs, struct sock *sk)
{
	dctcp_core_guard(sk, &stats);
	return 2;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops dctcp = {
	.min_tso_segs = (void *)dctcp_min_tso_segs,
	.init = (void *)dctcp_init,
	.release = (void *)dctcp_release,
	.in_ack_event = (void *)dctcp_update_alpha,
	.cwnd_event = (void *)dctcp_cwnd_event,
	.ssthresh = (void *)dctcp_ssthresh,
	.cong_avoid = (void *)dctcp_cong_avoid,
	.undo_cwnd = (void *)dctcp_cwnd_undo,
	.set_state = (void *)dctcp_state,
	.flags = TCP_CONG_NEEDS_ECN,
	.name = "bpf_dctcp",
};

DCTCP_DEFINE_RENO_FALLBACK(dctcp);
