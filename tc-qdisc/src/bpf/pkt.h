/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the lab's tc programs read of a packet: Ethernet + IPv4, then TCP or
 * UDP. Lab links carry no VLAN tags and have offloads off, so a packet is one
 * segment and its IPv4 header starts right after the Ethernet header.
 */
#ifndef __LAB_PKT_H
#define __LAB_PKT_H

#define TC_ACT_OK       0
#define TC_ACT_SHOT     2
#define TC_ACT_REDIRECT 7
#define ETH_HLEN        14
#define ETH_P_IP        0x0800
#define IPPROTO_TCP     6
#define IPPROTO_UDP     17
#define INET_ECN_MASK   3
#define INET_ECN_CE     3

/* TCP flags, byte 13 of the header. */
#define TCPF_FIN 0x01
#define TCPF_SYN 0x02
#define TCPF_RST 0x04
#define TCPF_ACK 0x10
#define TCPF_ECE 0x40
#define TCPF_CWR 0x80

struct pkt {
	u8 ecn;
	u8 tcp_flags;
	u16 sport, dport;
	u32 saddr, daddr;
	u32 ihl;         /* IPv4 header, bytes: the TCP header is at ETH_HLEN + ihl */
	u32 tcp_payload;
	u32 l4_bytes;
	bool tcp;
};

/* Parses Ethernet + IPv4 (+ TCP or UDP ports). Returns false for non-IPv4. */
static __always_inline bool parse(struct __sk_buff *skb, struct pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *tcp;
	u32 ihl, tot;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return false;
	ihl = ip->ihl * 4;
	tot = bpf_ntohs(ip->tot_len);
	p->ecn = ip->tos & INET_ECN_MASK;
	p->saddr = ip->saddr;
	p->daddr = ip->daddr;
	p->ihl = ihl;
	p->tcp = false;
	p->sport = p->dport = 0;
	p->tcp_payload = 0;
	p->tcp_flags = 0;
	p->l4_bytes = tot > ihl ? tot - ihl : 0;
	if (ihl < 20)
		return true;
	if (ip->protocol == IPPROTO_UDP) {
		struct udphdr *udp = (void *)ip + ihl;

		if ((void *)(udp + 1) <= end) {
			p->sport = bpf_ntohs(udp->source);
			p->dport = bpf_ntohs(udp->dest);
		}
		return true;
	}
	if (ip->protocol != IPPROTO_TCP)
		return true;
	tcp = (void *)ip + ihl;
	if ((void *)(tcp + 1) > end)
		return true;
	p->tcp = true;
	p->sport = bpf_ntohs(tcp->source);
	p->dport = bpf_ntohs(tcp->dest);
	p->tcp_flags = ((u8 *)tcp)[13];
	if (p->l4_bytes > tcp->doff * 4U)
		p->tcp_payload = p->l4_bytes - tcp->doff * 4U;
	return true;
}

/* The same from a kernel sk_buff (a tracepoint's), whose bytes can only be
 * copied out, at the Ethernet header when the root qdisc is about to take
 * it. The copy is of fixed size: a header with IPv4 options (none on lab
 * links) keeps its addresses and ECN but not its ports. */
static __always_inline bool parse_kernel(struct sk_buff *skb, struct pkt *p)
{
	struct {
		struct ethhdr eth;
		struct iphdr ip;
		struct tcphdr tcp; /* or a UDP header's ports: the same first 4 bytes */
	} __attribute__((packed)) h;
	u32 tot;

	if (bpf_probe_read_kernel(&h, sizeof(h), skb->data) ||
	    h.eth.h_proto != bpf_htons(ETH_P_IP))
		return false;
	tot = bpf_ntohs(h.ip.tot_len);
	p->ecn = h.ip.tos & INET_ECN_MASK;
	p->saddr = h.ip.saddr;
	p->daddr = h.ip.daddr;
	p->ihl = h.ip.ihl * 4;
	p->tcp = false;
	p->sport = p->dport = 0;
	p->tcp_payload = 0;
	p->tcp_flags = 0;
	p->l4_bytes = tot > p->ihl ? tot - p->ihl : 0;
	if (p->ihl != sizeof(h.ip))
		return true;
	if (h.ip.protocol == IPPROTO_UDP || h.ip.protocol == IPPROTO_TCP) {
		p->sport = bpf_ntohs(h.tcp.source);
		p->dport = bpf_ntohs(h.tcp.dest);
	}
	if (h.ip.protocol == IPPROTO_TCP) {
		p->tcp = true;
		p->tcp_flags = ((u8 *)&h.tcp)[13];
		if (p->l4_bytes > h.tcp.doff * 4U)
			p->tcp_payload = p->l4_bytes - h.tcp.doff * 4U;
	}
	return true;
}

#endif /* __LAB_PKT_H */
