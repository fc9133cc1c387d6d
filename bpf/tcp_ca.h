/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a BPF congestion control needs from the kernel that BTF does not carry:
 * #defines of include/net/tcp.h and the accessors tcp.h inlines.
 */
#ifndef DCTCP_BPF_TCP_CA_H
#define DCTCP_BPF_TCP_CA_H

#include "vmlinux/vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "intf.h"

/* tp->ecn_flags (include/net/tcp.h; bit 4 is AccECN from 6.18 on, unused before) */
#define TCP_ECN_MODE_RFC3168 (1U << 0)
#define TCP_ECN_DEMAND_CWR   (1U << 2)
#define TCP_ECN_MODE_ACCECN  (1U << 4)
#define TCP_ECN_MODE_ANY     (TCP_ECN_MODE_RFC3168 | TCP_ECN_MODE_ACCECN)

/* tcp_congestion_ops.flags */
#define TCP_CONG_NEEDS_ECN (1U << 1)

#define SOL_TCP        6
#define TCP_CONGESTION 13

#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void *inet_csk_ca(const struct sock *sk)
{
	return (void *)inet_csk(sk)->icsk_ca_priv;
}

/* tcp_packets_in_flight(): sent, less what left the network, plus retransmissions. */
static __always_inline u32 tcp_packets_in_flight(const struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

/* seq1 is before seq2 in sequence space (wrap-safe). */
static __always_inline bool before(u32 seq1, u32 seq2)
{
	return (s32)(seq1 - seq2) < 0;
}

/* An algorithm's programs are named <DCTCP_ALGO>_<op>, so that every object
 * of this project can share the headers that define them. */
#define DCTCP_CAT_(a, b) a##_##b
#define DCTCP_CAT(a, b) DCTCP_CAT_(a, b)
#define DCTCP_PROG(op) DCTCP_CAT(DCTCP_ALGO, op)
/* BPF_PROG pastes the name it is given: expand DCTCP_PROG() first. */
#define DCTCP_BPF_PROG(name, args...) BPF_PROG(name, ##args)

#endif /* DCTCP_BPF_TCP_CA_H */
