/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Live tracing for every algorithm of this project: events into the ring
 * buffer "events", gated by "trace" (see struct dctcp_trace in intf.h).
 *
 * Events are reserved and submitted with BPF_RB_NO_WAKEUP: a wakeup per event
 * costs the producer (the ACK path) microseconds, so the reader drains on a
 * timer instead. A full ring drops the event and counts it, so the reader
 * can report seen + dropped = produced.
 */
#ifndef DCTCP_BPF_TRACE_H
#define DCTCP_BPF_TRACE_H

#include "flow_key.h"

/* 8 MiB: over 40 ms of events at a million per second between drains. */
#define DCTCP_EVENTS_RING_BYTES (8U << 20)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, DCTCP_EVENTS_RING_BYTES);
} events SEC(".maps");

struct dctcp_trace trace SEC(".data.trace");

/* What an algorithm adds to each event (Prague: its window, alpha and mode);
 * an algorithm with nothing to add leaves those fields zero. */
#ifndef DCTCP_EMIT_ALGO
#define DCTCP_EMIT_ALGO(sk, e)                                                \
	do {                                                                  \
		(e)->frac_cwnd = 0;                                           \
		(e)->upscaled_alpha = 0;                                      \
		(e)->ai_per_ack = 0;                                          \
		(e)->srtt8 = 0;                                               \
		(e)->mode = 0;                                                \
		(e)->ect = 0;                                                 \
		(e)->classic = 0;                                             \
		(e)->classic_score = 0;                                       \
		(e)->min_rtt_us = 0;                                          \
	} while (0)
#endif

static __always_inline bool dctcp_tracing(u32 flag)
{
	return trace.flags & flag;
}

static __always_inline void dctcp_emit(struct sock *sk, u8 type, u8 value, u32 win_delivered,
				       u32 win_delivered_ce, struct dctcp_stats *stats)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp_event *e;

	__sync_fetch_and_add(&stats->events, 1);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&stats->events_dropped, 1);
		return;
	}
	e->ts_ns = bpf_ktime_get_ns();
	__builtin_memset(&e->flow, 0, sizeof(e->flow));
	dctcp_flow_key_of(&sk->__sk_common, &e->flow);
	e->type = type;
	e->ca_state = inet_csk(sk)->icsk_ca_state;
	e->value = value;
	e->_pad = 0;
	e->cwnd = tp->snd_cwnd;
	e->ssthresh = tp->snd_ssthresh;
	e->alpha = ((struct dctcp_state *)inet_csk_ca(sk))->alpha;
	e->srtt_us = tp->srtt_us >> 3;
	e->mss = tp->mss_cache;
	e->delivered = tp->delivered;
	e->delivered_ce = tp->delivered_ce;
	e->win_delivered = win_delivered;
	e->win_delivered_ce = win_delivered_ce;
	e->reduction = ((struct dctcp_state *)inet_csk_ca(sk))->reduction;
	e->acks = ((struct dctcp_state *)inet_csk_ca(sk))->acks;
	e->bytes_acked = tp->bytes_acked;
	e->bytes_sent = tp->bytes_sent;
	e->pacing_rate = sk->sk_pacing_rate;
	e->_pad2 = 0;
	e->_pad3 = 0;
	DCTCP_EMIT_ALGO(sk, e);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* Flow start/end, fallback and state changes: traced with the windows. */
static __always_inline void dctcp_trace_flow(struct sock *sk, u8 type, u8 value,
					     struct dctcp_stats *stats)
{
	if (dctcp_tracing(DCTCP_TRACE_WINDOW | DCTCP_TRACE_ACK))
		dctcp_emit(sk, type, value, 0, 0, stats);
}

/* A repair by dctcp_core_guard, with the window as repaired. */
static __always_inline void dctcp_trace_repair(struct sock *sk, u8 what, struct dctcp_stats *stats)
{
	if (dctcp_tracing(DCTCP_TRACE_WINDOW | DCTCP_TRACE_ACK))
		dctcp_emit(sk, DCTCP_EV_REPAIR, what, 0, 0, stats);
}

/* Every ack_every-th ACK of the socket, when per-ACK tracing is on. Counting
 * only then keeps the common path free of it; every event carries the count,
 * so a reader can check the sampling. */
static __always_inline void dctcp_trace_ack(struct sock *sk, u32 *acks, struct dctcp_stats *stats)
{
	u32 every = trace.ack_every;

	if (!dctcp_tracing(DCTCP_TRACE_ACK))
		return;
	if (++*acks % (every ?: 1))
		return;
	dctcp_emit(sk, DCTCP_EV_ACK, 0, 0, 0, stats);
}

#endif /* DCTCP_BPF_TRACE_H */
