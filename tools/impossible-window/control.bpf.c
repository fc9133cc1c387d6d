// SPDX-License-Identifier: GPL-2.0
/*
 * The impossible window's control: DCTCP with nothing of this project's (no
 * guard, no trace ring, no parameter or stats maps, no fallback, no
 * min_tso_segs), the operations net/ipv4/tcp_dctcp.c performs written out
 * plainly, registered as "ctl_dctcp". Its .ssthresh can only return a value
 * between 2 and cwnd.
 *
 * Built with -DWITNESS it also carries the witness (docs/kernels.md, "Known
 * issue"): .ssthresh records each value it returns, per socket, and two
 * programs on the kernel's own tracepoints read every socket's ssthresh and
 * cwnd, on each segment it receives (tcp:tcp_probe, before the segment is
 * processed) and on each congestion state change (tcp:tcp_cong_state_set,
 * right after the kernel stored .ssthresh's value on CWR and Recovery entry).
 * The first impossible value of an episode (ssthresh or cwnd of 2^24 or
 * more) is kept with what was seen of the socket before it and what
 * .ssthresh last returned. Everything lives in maps: nothing can be lost.
 */
#include "vmlinux/vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

#define SHIFT 10U
#define MAXA (1U << SHIFT)
#define GSHIFT 4U
#define ECN_DEMAND_CWR 4

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

#ifdef WITNESS
#include "witness.h"

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct returned);
} last SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct seen);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct sighting);
} sightings SEC(".maps");
__u64 ssthresh_calls, reductions, observations, episodes, gaps_2ms, gaps_2ms_cpu0, max_gap_ns;
__u32 next_sighting;

static __always_inline bool sane(__u32 ssthresh, __u32 cwnd)
{
	return cwnd < (1U << 24) && (ssthresh < (1U << 24) || ssthresh == 0x7fffffffU);
}

static __always_inline void observe(struct sock *sk, __u32 hook, __u32 state)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	struct seen now = {}, *before;
	struct returned *r;
	struct sighting *s;
	__u64 key = (__u64)sk;
	__u32 i;

	if (!tp)
		return;
	now.ts_ns = bpf_ktime_get_ns();
	now.ssthresh = tp->snd_ssthresh;
	now.cwnd = tp->snd_cwnd;
	now.hook = hook;
	now.cpu = bpf_get_smp_processor_id();
	now.state = state;
	now.pid = bpf_get_current_pid_tgid();
	now.stack = (__u64)bpf_get_current_task_btf()->stack;
	bpf_get_current_comm(now.comm, sizeof(now.comm));
	__sync_fetch_and_add(&observations, 1);
	before = bpf_map_lookup_elem(&seen, &key);
	if (before && now.ts_ns - before->ts_ns > 2000000 && hook == 1) {
		__sync_fetch_and_add(&gaps_2ms, 1);
		if (now.cpu == 0)
			__sync_fetch_and_add(&gaps_2ms_cpu0, 1);
		if (now.ts_ns - before->ts_ns > max_gap_ns)
			max_gap_ns = now.ts_ns - before->ts_ns;
	}
	if (before && sane(before->ssthresh, before->cwnd) && !sane(now.ssthresh, now.cwnd)) {
		__sync_fetch_and_add(&episodes, 1);
		i = __sync_fetch_and_add(&next_sighting, 1);
		s = bpf_map_lookup_elem(&sightings, &i);
		if (s) {
			s->sk = key;
			s->before = *before;
			s->now = now;
			r = bpf_map_lookup_elem(&last, &key);
			if (r)
				s->ret = *r;
		}
	}
	bpf_map_update_elem(&seen, &key, &now, BPF_ANY);
}

/* Every segment a socket receives, before it is processed. */
SEC("tp_btf/tcp_probe")
int BPF_PROG(on_probe, struct sock *sk, const struct sk_buff *skb)
{
	observe(sk, 1, 0xff);
	return 0;
}

/* After the kernel stored .ssthresh's value on CWR and Recovery entry,
 * before .set_state runs. */
SEC("tp_btf/tcp_cong_state_set")
int BPF_PROG(on_state, struct sock *sk, __u8 state)
{
	/* Entries into CWR or Recovery, whatever the socket's algorithm:
	 * the reductions a kernel congestion control makes, where
	 * ssthresh_calls counts only ctl_dctcp's. */
	if (state == TCP_CA_CWR || state == TCP_CA_Recovery)
		__sync_fetch_and_add(&reductions, 1);
	observe(sk, 2, state);
	return 0;
}
#endif

struct st {
	__u32 win_end, d0, ce0, prior_rcv_nxt, alpha, loss_cwnd, ce;
};

static __always_inline struct st *st_of(struct sock *sk)
{
	return (struct st *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void new_window(struct tcp_sock *tp, struct st *s)
{
	s->win_end = tp->snd_nxt;
	s->d0 = tp->delivered;
	s->ce0 = tp->delivered_ce;
}

SEC("struct_ops")
void BPF_PROG(ctl_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct st *s = st_of(sk);

	s->prior_rcv_nxt = tp->rcv_nxt;
	s->alpha = MAXA;
	s->loss_cwnd = 0;
	s->ce = 0;
	new_window(tp, s);
}

SEC("struct_ops")
__u32 BPF_PROG(ctl_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct st *s = st_of(sk);
	__u32 w = tp->snd_cwnd, cut = (w * s->alpha) >> (SHIFT + 1);

	__u32 ret = w - cut > 2 ? w - cut : 2;

	s->loss_cwnd = w;
#ifdef WITNESS
	{
		struct returned r = { .ts_ns = bpf_ktime_get_ns(), .value = ret,
				      .cpu = bpf_get_smp_processor_id() };
		__u64 key = (__u64)sk;

		__sync_fetch_and_add(&ssthresh_calls, 1);
		bpf_map_update_elem(&last, &key, &r, BPF_ANY);
	}
#endif
	return ret;
}

SEC("struct_ops")
void BPF_PROG(ctl_in_ack_event, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct st *s = st_of(sk);
	__u32 a = s->alpha, d, ce, dec;

	if ((__s32)(tp->snd_una - s->win_end) < 0)
		return;
	d = tp->delivered - s->d0;
	ce = tp->delivered_ce - s->ce0;
	dec = a >> GSHIFT;
	a = dec ? a - dec : 0;
	if (ce) {
		a += (ce << (SHIFT - GSHIFT)) / (d ? d : 1);
		if (a > MAXA)
			a = MAXA;
	}
	s->alpha = a;
	new_window(tp, s);
}

static __always_inline void set_demand_cwr(struct tcp_sock *tp, __u32 on)
{
	if (on)
		tp->ecn_flags |= ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~ECN_DEMAND_CWR;
}

SEC("struct_ops")
void BPF_PROG(ctl_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct st *s = st_of(sk);
	__u32 now;

	if (ev == CA_EVENT_ECN_IS_CE || ev == CA_EVENT_ECN_NO_CE) {
		now = ev == CA_EVENT_ECN_IS_CE;
		if (s->ce != now) {
			if (icsk->icsk_ack.pending & ICSK_ACK_TIMER) {
				set_demand_cwr(tp, s->ce);
				bpf_tcp_send_ack(sk, s->prior_rcv_nxt);
			}
			icsk->icsk_ack.pending |= ICSK_ACK_NOW;
		}
		s->prior_rcv_nxt = tp->rcv_nxt;
		s->ce = now;
		set_demand_cwr(tp, now);
	} else if (ev == CA_EVENT_LOSS) {
		s->loss_cwnd = tp->snd_cwnd;
		tp->snd_ssthresh = tp->snd_cwnd / 2 > 2 ? tp->snd_cwnd / 2 : 2;
	}
}

SEC("struct_ops")
void BPF_PROG(ctl_set_state, struct sock *sk, __u8 st)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	if (st == TCP_CA_Recovery && st != ((struct inet_connection_sock *)sk)->icsk_ca_state) {
		st_of(sk)->loss_cwnd = tp->snd_cwnd;
		tp->snd_ssthresh = tp->snd_cwnd / 2 > 2 ? tp->snd_cwnd / 2 : 2;
	}
}

SEC("struct_ops")
void BPF_PROG(ctl_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(ctl_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 l = st_of(sk)->loss_cwnd;

	return tp->snd_cwnd > l ? tp->snd_cwnd : l;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ctl_dctcp = {
	.init = (void *)ctl_init,
	.ssthresh = (void *)ctl_ssthresh,
	.in_ack_event = (void *)ctl_in_ack_event,
	.cwnd_event = (void *)ctl_cwnd_event,
	.set_state = (void *)ctl_set_state,
	.cong_avoid = (void *)ctl_cong_avoid,
	.undo_cwnd = (void *)ctl_undo_cwnd,
	.flags = 2 /* TCP_CONG_NEEDS_ECN */,
	.name = "ctl_dctcp",
};
