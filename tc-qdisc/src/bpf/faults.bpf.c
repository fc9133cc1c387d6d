// SPDX-License-Identifier: GPL-2.0
/*
 * A faulty link: what real networks do to a flow's packets, done to the lab's
 * on the receiver's interface (tcx; before 6.6, clsact's BPF filters).
 *
 * fault_ingress (the data path, before the receiver) and fault_egress (the
 * ACK path, as the receiver sends) act on one kind of segment each
 * (cfg.segments): they drop it or send it on a detour that returns it late,
 * behind the segments sent after it; each fault drawn on its own, for every
 * segment of the kind. ECN bleaching, as a middlebox does it, clears the ECN
 * field of any TCP segment that crosses. SYNs that ask for ECN can lose ECE
 * and CWR (syn_bleach): the receiver then never agrees to ECN, and the sender
 * falls back to running without it.
 *
 * detour_return (tcx ingress of the detour's way back) hands a late segment
 * to the receiver's interface as if it had just arrived there, marked so
 * that the fault lets it pass this time.
 *
 * Both hand the packet on with TCX_NEXT (TC_ACT_UNSPEC to cls_bpf: the next
 * filter runs): the receiver's per-flow counter
 * (switch.bpf.c), attached after them, sees what the receiver gets.
 */
#include "vmlinux/vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "intf.h"
#include "pkt.h"

char _license[] SEC("license") = "GPL";

const volatile struct fault_config cfg = {};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct fault_stats);
} stats SEC(".maps");

/* True with probability p / FAULT_PROB_ONE: a draw of 32 random bits is
 * below p (FAULT_PROB_ONE is above every draw). */
static __always_inline bool chance(u64 p)
{
	return p && (u64)bpf_get_prandom_u32() < p;
}

/* Clears bits `clear` of the 16-bit word at `off` (network order) and puts
 * the checksum at `csum_off` right: the IPv4 header's (l4 false) or TCP's. */
static __always_inline void clear_bits(struct __sk_buff *ctx, u32 off, u16 clear,
				       u32 csum_off, bool l4)
{
	u16 old, new;

	if (bpf_skb_load_bytes(ctx, off, &old, sizeof(old)))
		return;
	new = old & ~clear;
	if (l4)
		bpf_l4_csum_replace(ctx, csum_off, old, new, sizeof(new));
	else
		bpf_l3_csum_replace(ctx, csum_off, old, new, sizeof(new));
	bpf_skb_store_bytes(ctx, off, &new, sizeof(new), 0);
}

static __always_inline int fault(struct __sk_buff *ctx)
{
	u32 zero = 0, tcp_off;
	struct fault_stats *s;
	struct pkt p = {};
	bool data;

	if (ctx->mark == FAULT_DETOUR_MARK)
		return TCX_NEXT;
	if (!parse(ctx, &p) || !p.tcp)
		return TCX_NEXT;
	s = bpf_map_lookup_elem(&stats, &zero);
	if (!s)
		return TCX_NEXT;
	s->crossed++;
	tcp_off = ETH_HLEN + p.ihl;

	/* A middlebox that bleaches ECN clears it on whatever crosses. */
	if (p.ecn && chance(cfg.ecn_bleach)) {
		/* tos is the second byte of the IPv4 header's first word. */
		clear_bits(ctx, ETH_HLEN, bpf_htons(INET_ECN_MASK),
			   ETH_HLEN + offsetof(struct iphdr, check), false);
		if (p.ecn == INET_ECN_CE)
			s->ce_bleached++;
		else
			s->ect_bleached++;
	}
	if ((p.tcp_flags & (TCPF_SYN | TCPF_ACK)) == TCPF_SYN) {
		/* RFC 3168 6.1.1: an ECN-setup SYN has ECE and CWR set. */
		if ((p.tcp_flags & (TCPF_ECE | TCPF_CWR)) != (TCPF_ECE | TCPF_CWR))
			return TCX_NEXT;
		s->syns++;
		if (cfg.syn_bleach) {
			/* Flags are the second byte of the header's fourth word. */
			clear_bits(ctx, tcp_off + 12, bpf_htons(TCPF_ECE | TCPF_CWR),
				   tcp_off + offsetof(struct tcphdr, check), true);
			s->syn_bleached++;
		}
		return TCX_NEXT;
	}
	if (p.tcp_flags & (TCPF_SYN | TCPF_FIN | TCPF_RST))
		return TCX_NEXT;
	data = p.tcp_payload > 0;
	if (data != (cfg.segments == FAULT_DATA))
		return TCX_NEXT;
	s->seen++;

	if (chance(cfg.loss)) {
		s->dropped++;
		return TC_ACT_SHOT;
	}
	if (chance(cfg.reorder)) {
		long r = bpf_redirect(cfg.detour_ifindex, 0);

		if (r == TC_ACT_REDIRECT) {
			s->reordered++;
			return r;
		}
		s->detour_failed++;
	}
	return TCX_NEXT;
}

SEC("tcx/ingress")
int fault_ingress(struct __sk_buff *ctx)
{
	return fault(ctx);
}

SEC("tcx/egress")
int fault_egress(struct __sk_buff *ctx)
{
	return fault(ctx);
}

SEC("tcx/ingress")
int detour_return(struct __sk_buff *ctx)
{
	struct fault_stats *s;
	u32 zero = 0;

	s = bpf_map_lookup_elem(&stats, &zero);
	if (s)
		s->returned++;
	ctx->mark = FAULT_DETOUR_MARK;
	return bpf_redirect(cfg.return_ifindex, BPF_F_INGRESS);
}
