// SPDX-License-Identifier: GPL-2.0
/*
 * xDCTCP (Nahar, Kumar, Aduri, UCSD 2015; seed 003): DCTCP whose cut depends
 * on the flow's size. Short flows are latency-sensitive, so they give up
 * less: cwnd (1 - ns alpha) while the flow has sent less than short_bytes,
 * cwnd (1 - nl alpha) after. DCTCP is ns = nl = 1/2. Registered as
 * "bpf_xdctcp"; g, ns, nl and short_bytes are live tunables.
 */
#define DCTCP_ALGO xdctcp
#define DCTCP_ALGO_NAME "bpf_xdctcp"
#define DCTCP_PARAMS                                                          \
	{                                                                     \
		.g = XDCTCP_DEFAULT_G, .alpha_on_init = DCTCP_MAX_ALPHA,      \
		.ns = XDCTCP_DEFAULT_NS, .nl = XDCTCP_DEFAULT_NL,             \
		.short_bytes = XDCTCP_DEFAULT_SHORT_BYTES,                    \
	}
#include "dctcp_ops.h"

/* Classified at each cut by what the flow has sent so far (retransmissions
 * included, as the sender paid for them). */
static __always_inline u32 dctcp_algo_reduction(struct sock *sk)
{
	return tcp_sk(sk)->bytes_sent < params.short_bytes ? params.ns : params.nl;
}
