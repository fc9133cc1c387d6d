/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Reno fallback every algorithm of this project registers beside itself
 * (as "<name>_reno"): where dctcp_core_init() sends a socket that did not
 * negotiate ECN. Included after the algorithm has defined DCTCP_ALGO,
 * DCTCP_ALGO_NAME, DCTCP_PROG() and `stats`.
 */
#ifndef DCTCP_BPF_RENO_FALLBACK_H
#define DCTCP_BPF_RENO_FALLBACK_H

/*
 * The Reno fallback: Reno with a flag in the per-flow state, so `loader
 * flows` can tell a fallen-back flow from a kernel reno one, and a live count
 * for `loader list`. Registered without TCP_CONG_NEEDS_ECN.
 */
SEC("struct_ops")
void DCTCP_BPF_PROG(DCTCP_PROG(reno_init), struct sock *sk)
{
	dctcp_fallback_init(sk, &stats);
}

SEC("struct_ops")
void DCTCP_BPF_PROG(DCTCP_PROG(reno_release), struct sock *sk)
{
	dctcp_fallback_release(sk, &stats);
}

SEC("struct_ops")
u32 DCTCP_BPF_PROG(DCTCP_PROG(reno_ssthresh), struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
void DCTCP_BPF_PROG(DCTCP_PROG(reno_cong_avoid), struct sock *sk, u32 ack, u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
u32 DCTCP_BPF_PROG(DCTCP_PROG(reno_undo_cwnd), struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops DCTCP_PROG(reno) = {
	.init = (void *)DCTCP_PROG(reno_init),
	.release = (void *)DCTCP_PROG(reno_release),
	.ssthresh = (void *)DCTCP_PROG(reno_ssthresh),
	.cong_avoid = (void *)DCTCP_PROG(reno_cong_avoid),
	.undo_cwnd = (void *)DCTCP_PROG(reno_undo_cwnd),
	.name = DCTCP_ALGO_NAME "_reno",
};

#endif /* DCTCP_BPF_RENO_FALLBACK_H */
