// SPDX-License-Identifier: GPL-2.0
/*
 * DCTCP (Alizadeh et al., SIGCOMM 2010; RFC 8257) as a struct_ops congestion
 * control, registered as "bpf_dctcp" so it never collides with the kernel's
 * "dctcp". Behaves as net/ipv4/tcp_dctcp.c, with its tunables in a map that
 * `loader set` rewrites while sockets use it.
 */
#define DCTCP_ALGO dctcp
#define DCTCP_ALGO_NAME "bpf_dctcp"
#define DCTCP_PARAMS { .g = DCTCP_DEFAULT_G, .alpha_on_init = DCTCP_MAX_ALPHA }
#include "dctcp_ops.h"

/* On a congestion signal: cwnd (1 - alpha / 2). */
static __always_inline u32 dctcp_algo_reduction(struct sock *sk)
{
	return DCTCP_ONE / 2;
}
