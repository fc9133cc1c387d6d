// SPDX-License-Identifier: GPL-2.0
/*
 * DCTCP with the sender modifications of Kuehlewind, Wagner, Reyes Espinosa
 * and Briscoe, "Using Data Center TCP (DCTCP) in the Internet" (seed 002),
 * each behind its own bit of params.features so that instances attached
 * under different names compare them one at a time:
 *   DCTCP_F_PER_ACK_ALPHA  alpha updated on every ACK, with its own gain g_ack
 *   DCTCP_F_PROGRESSIVE    the cut recomputed on each ECE during CWR
 *   DCTCP_F_CWR_GROWTH     the window keeps growing during CWR
 *   DCTCP_F_FINE_ALPHA     alpha resolution 1/2^20 instead of 1/2^10
 * With no bit set it is DCTCP. Registered as "bpf_kdctcp".
 */
#define DCTCP_ALGO kdctcp
#define DCTCP_ALGO_NAME "bpf_kdctcp"
#define DCTCP_FEATURES 1
#define DCTCP_PARAMS                                                          \
	{                                                                     \
		.g = DCTCP_DEFAULT_G, .alpha_on_init = DCTCP_MAX_ALPHA,       \
		.g_ack = KDCTCP_DEFAULT_G_ACK,                                \
	}
#include "dctcp_ops.h"

static __always_inline u32 dctcp_algo_reduction(struct sock *sk)
{
	return DCTCP_ONE / 2;
}
