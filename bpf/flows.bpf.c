// SPDX-License-Identifier: GPL-2.0
/*
 * `loader flows`: one flow_record per TCP socket of the iterating task's
 * network namespace. struct_ops cannot implement get_info, so `ss -ti` shows
 * nothing for BPF algorithms; this reads the same fields straight from the
 * socket, and icsk_ca_priv raw for the loader to decode.
 */
#include "flow_key.h"

char _license[] SEC("license") = "GPL";

SEC("iter/tcp")
int dump_tcp(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct flow_record r = {};
	const struct inet_connection_sock *icsk;
	struct tcp_sock *tp;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp) /* request and time-wait sockets carry no congestion control */
		return 0;
	if (skc->skc_state == TCP_LISTEN)
		return 0;
	icsk = &tp->inet_conn;

	dctcp_flow_key_of(skc, &r.key);
	r.tcp_state = skc->skc_state;
	r.ca_state = icsk->icsk_ca_state;
	r.ecn_flags = tp->ecn_flags;
	bpf_probe_read_kernel_str(r.ca_name, sizeof(r.ca_name), icsk->icsk_ca_ops->name);
	r.snd_cwnd = tp->snd_cwnd;
	r.snd_ssthresh = tp->snd_ssthresh;
	r.srtt_us = tp->srtt_us >> 3;
	r.mss_cache = tp->mss_cache;
	r.delivered = tp->delivered;
	r.delivered_ce = tp->delivered_ce;
	r.bytes_acked = tp->bytes_acked;
	r.bytes_received = tp->bytes_received;
	r.sock_cookie = bpf_get_socket_cookie(tp);
	r.pacing_rate = tp->inet_conn.icsk_inet.sk.sk_pacing_rate;
	bpf_probe_read_kernel(&r.ca, sizeof(r.ca), (void *)icsk->icsk_ca_priv);
	bpf_probe_read_kernel(&r.prague, sizeof(r.prague),
			      (void *)icsk->icsk_ca_priv + sizeof(r.ca));

	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
