/* SPDX-License-Identifier: GPL-2.0 */
/* How every BPF object of this project names a socket's flow. */
#ifndef DCTCP_BPF_FLOW_KEY_H
#define DCTCP_BPF_FLOW_KEY_H

#include "tcp_ca.h"

#define AF_INET  2
#define AF_INET6 10

/* The socket's own view: s* is the local end. Ports in host order. */
static __always_inline void dctcp_flow_key_of(const struct sock_common *skc,
					      struct dctcp_flow_key *k)
{
	k->family = skc->skc_family;
	k->sport = skc->skc_num;
	k->dport = __builtin_bswap16(skc->skc_dport);
	if (k->family == AF_INET) {
		__builtin_memcpy(k->saddr, &skc->skc_rcv_saddr, 4);
		__builtin_memcpy(k->daddr, &skc->skc_daddr, 4);
	} else if (k->family == AF_INET6) {
		bpf_probe_read_kernel(k->saddr, 16, &skc->skc_v6_rcv_saddr);
		bpf_probe_read_kernel(k->daddr, 16, &skc->skc_v6_daddr);
	}
	k->netns_ino = skc->skc_net.net->ns.inum;
}

#endif /* DCTCP_BPF_FLOW_KEY_H */
