// SPDX-License-Identifier: GPL-2.0
/*
 * The lab switch in BPF.
 *
 * bottleneck_egress (tcx egress of the switch port toward the receiver) sees
 * every packet before the root qdisc enqueues it, reads the qdisc's backlog
 * and, by mode, only records it (a kernel qdisc marks), marks CE at a
 * threshold K on the instantaneous queue (DCTCP's switch), runs RED on the
 * average queue with marking, or runs seed 002's dual AQM: one queue, two RED
 * profiles chosen by the packet's ECN field, ECN-capable packets marked by
 * one, the others dropped by the other. Packets that are not ECN-capable are
 * dropped where they would have been marked, as a switch does. Every arrival
 * (or one in `sample`, at random gaps) goes to a ring buffer, PROBE_BATCH at
 * a time: the queue probe.
 *
 * bottleneck_arrival (tracepoint net_dev_queue) stands in for
 * bottleneck_egress's probe on kernels without tcx: it records, the kernel's
 * qdisc marks.
 *
 * bottleneck_dequeue (tracepoint qdisc_dequeue) records every dequeue from
 * that same root qdisc and the queue it leaves behind: between them the two
 * probes see every change of the queue, so the lab can weigh it by time, as
 * a switch's periodic queue sampling does, and not only by arrival.
 *
 * receiver_ingress (tcx ingress of the receiver) counts, per flow, the bytes
 * and CE-marked bytes that arrived.
 */
#include "vmlinux/vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_tracing.h>

#include <bpf/bpf_core_read.h>

#include "intf.h"
#include "pkt.h"
#include "dualpi2.h"

char _license[] SEC("license") = "GPL";


const volatile struct marker_config cfg = {};

/* The link's rate now (intf.h): written by the lab at start and whenever it
 * changes the bottleneck's rate, read where a backlog becomes a time. */
struct link_rate link_rate SEC(".data.link") = {};

/* The queue at an arrival, for live views (`loader top`): refreshed at the
 * first arrival of each jiffy, not at every one, so that the pass path
 * neither reads the clock nor writes a cache line both CPUs share. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct queue_now);
} queue_now SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);
} departures SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct probe_batches);
} batches SEC(".maps");

/* The root qdisc bottleneck_egress found on its device: the tracepoint fires
 * for every qdisc on the machine and keeps only this one's dequeues. Set at
 * the first arrival, before that qdisc can hold anything. */
u64 bottleneck_qdisc = 0;

/* The jiffy queue_now was last refreshed in. */
u64 queue_now_jiffies = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct marker_stats);
} stats SEC(".maps");

/* RED's average queue, in packets << 16, shared by all CPUs. */
struct red_state {
	struct bpf_spin_lock lock;
	u64 qavg;
	u32 count; /* arrivals since the last mark, for RED's uniform spacing */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct red_state);
} red SEC(".maps");

/* The dual AQM's two averages of the backlog (bytes << DUAL_AVG_SHIFT) and
 * Floyd's counts, index DUAL_ECT or DUAL_NOT_ECT. */
#define DUAL_ECT      0
#define DUAL_NOT_ECT  1
#define DUAL_AVG_SHIFT 8

struct dual_state {
	struct bpf_spin_lock lock;
	u64 avg[2];
	u32 count[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct dual_state);
} dual SEC(".maps");

/* Since when the dual AQM's averages have not been aged for an empty queue:
 * the departure probe sets it when the queue goes empty, each arrival at the
 * empty queue moves it to its own time. */
u64 idle_since_ns = 0;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rx_flow_key);
	__type(value, struct rx_flow_stats);
} rx_flows SEC(".maps");

/* DualPI2 over two htb leaves: p', the delays its controller reads, the
 * controller's timer and the leaves whose queues the decisions read. */
struct dualpi2_state {
	struct bpf_timer timer;
	u64 qdelay[2];    /* sojourn of each queue's last departure; 0 once it empties */
	u64 last_qdelay;  /* the larger of the two at the last update */
	u64 root;         /* the htb qdisc whose leaves these are */
	u64 leaf[2];      /* the L and C leaves' qdiscs */
	u64 started;      /* the timer was set up */
	u32 prob;         /* p', 1/DUALPI2_PROB_ONE */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct dualpi2_state);
} dualpi2 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, struct dualpi2_queue_stats);
} dualpi2_stats SEC(".maps");

/* Every decision and every controller update, with dualpi2_config.trace. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} decisions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} updates SEC(".maps");

/* Record i of a batch of `size` bytes at `recs` is written: returns the
 * batch's next free slot, handing the ring the whole batch when it is full
 * (no wakeup: the reader drains on a timer) and counting it in *lost when
 * the ring has no room. */
static __always_inline u32 batch_add(void *ring, void *recs, u32 size, u32 i, u64 *lost)
{
	if (++i < PROBE_BATCH)
		return i;
	if (bpf_ringbuf_output(ring, recs, size, BPF_RB_NO_WAKEUP) && lost)
		*lost += PROBE_BATCH;
	return 0;
}

/* (1 - 2^-wlog)^m applied to avg, by squaring in Q30: RED's aging of the
 * average over m packet times of idle link, as if m arrivals found it empty.
 * Past 2^15 packet times any weight above 2^-12 has taken it to nothing. */
#define Q30 (1ULL << 30)
static __always_inline u64 red_age(u64 avg, u32 wlog, u64 m)
{
	u64 f = Q30 - (Q30 >> wlog), r = Q30;
	int i;

	if (wlog == 0 || m == 0)
		return avg;
	if (m >= (1 << 15))
		return 0;
	for (i = 0; i < 15; i++) {
		if (m & (1ULL << i))
			r = (r * f) >> 30;
		f = (f * f) >> 30;
	}
	/* avg < 2^40 (bytes << 8, or packets << 16) and r <= 2^30: no
	 * overflow in 64 bits. */
	return (avg >> 8) * r >> 22;
}

/* Packet times the link sat idle before an arrival that finds the queue
 * empty (the departure probe stamps when it went empty), 0 otherwise; the
 * idle time then counts on from now: if this packet is dropped the queue
 * stays empty and the next arrival ages the average by what came after it.
 * RED's idle-period rule: without it an average left above max by a burst
 * only decays by w per arrival, so a sender that backs off (a retransmission
 * in timeout, a scalable flow in its fractional window) finds every packet
 * hit for as long as its few arrivals take to bring the average down. */
static __always_inline u64 idle_packet_times(u32 qlen)
{
	u64 since = idle_since_ns, now;

	if (qlen || !since || !link_rate.pkt_ns)
		return 0;
	/* The clock is read only here, not for every arrival. */
	now = bpf_ktime_get_ns();
	idle_since_ns = now;
	return (now > since ? now - since : 0) / link_rate.pkt_ns;
}

/* RED: update the average with this arrival's queue and decide. */
static __always_inline bool red_decide(u32 qlen)
{
	/* Drawn before the lock: no helper calls while holding it. */
	u64 rnd = bpf_get_prandom_u32() & (MARKER_PROB_ONE - 1);
	u64 idle = idle_packet_times(qlen);
	u32 zero = 0, min = cfg.red_min, max = cfg.red_max;
	struct red_state *st = bpf_map_lookup_elem(&red, &zero);
	bool mark = false;
	u64 avg, pb;

	if (!st || max <= min)
		return false;
	bpf_spin_lock(&st->lock);
	/* avg += w (q - avg), w = 2^-wlog, avg in packets << 16, first aged
	 * over the idle link as if that many arrivals had found it empty. */
	avg = red_age(st->qavg, cfg.red_wlog, idle);
	avg = avg - (avg >> cfg.red_wlog) + (((u64)qlen << 16) >> cfg.red_wlog);
	st->qavg = avg;
	if (avg < ((u64)min << 16)) {
		st->count = 0;
	} else if (avg >= ((u64)max << 16)) {
		mark = true;
		st->count = 0;
	} else {
		/* pb = max_p (avg - min) / (max - min), then Floyd's uniform
		 * spacing: pa = pb / (1 - count pb). In units of 1/65536. */
		u64 cpb;

		pb = (u64)cfg.red_max_p * (avg - ((u64)min << 16)) / ((u64)(max - min) << 16);
		st->count++;
		cpb = pb * st->count;
		if (cpb >= MARKER_PROB_ONE ||
		    rnd * (MARKER_PROB_ONE - cpb) <
			    pb * MARKER_PROB_ONE) {
			mark = true;
			st->count = 0;
		}
	}
	bpf_spin_unlock(&st->lock);
	return mark;
}

/* One profile's update and decision, with its state's lock held: RED on the
 * profile's own average of the backlog (bytes), Floyd's count for evenly
 * spaced hits between the thresholds. rnd is in [0, MARKER_PROB_ONE). */
static __always_inline bool red_profile_hit(const volatile struct red_profile *p, u64 *avg,
					    u32 *count, u32 backlog, u64 rnd)
{
	u64 a = *avg, q = (u64)backlog << DUAL_AVG_SHIFT;
	u64 min = (u64)p->min_bytes << DUAL_AVG_SHIFT, max = (u64)p->max_bytes << DUAL_AVG_SHIFT;
	u64 pb, cpb;

	/* avg += w (q - avg), w = 2^-wlog; wlog 0 is the instantaneous queue. */
	a = a - (a >> p->wlog) + (q >> p->wlog);
	*avg = a;
	if (a < min) {
		*count = 0;
		return false;
	}
	if (a >= max) {
		*count = 0;
		return true;
	}
	pb = (u64)p->max_p * (a - min) / (max - min);
	*count += 1;
	cpb = pb * *count;
	if (cpb >= MARKER_PROB_ONE || rnd * (MARKER_PROB_ONE - cpb) < pb * MARKER_PROB_ONE) {
		*count = 0;
		return true;
	}
	return false;
}

/* The dual AQM: both averages follow the shared queue at every arrival; the
 * packet's class picks the profile that decides (mark or drop). */
static __always_inline bool dual_decide(u32 qlen, u32 backlog, bool ect)
{
	u64 rnd = bpf_get_prandom_u32() & (MARKER_PROB_ONE - 1);
	/* An arrival at an empty queue first ages the averages. */
	u64 idle = idle_packet_times(qlen);
	struct dual_state *st;
	u32 zero = 0;
	bool hit_ect, hit_not_ect;

	st = bpf_map_lookup_elem(&dual, &zero);
	if (!st)
		return false;
	bpf_spin_lock(&st->lock);
	if (idle) {
		st->avg[DUAL_ECT] = red_age(st->avg[DUAL_ECT], cfg.ect.wlog, idle);
		st->avg[DUAL_NOT_ECT] = red_age(st->avg[DUAL_NOT_ECT], cfg.not_ect.wlog, idle);
	}
	hit_ect = red_profile_hit(&cfg.ect, &st->avg[DUAL_ECT], &st->count[DUAL_ECT],
				  backlog, rnd);
	hit_not_ect = red_profile_hit(&cfg.not_ect, &st->avg[DUAL_NOT_ECT],
				      &st->count[DUAL_NOT_ECT], backlog, rnd);
	bpf_spin_unlock(&st->lock);
	return ect ? hit_ect : hit_not_ect;
}

/* The enqueue time a DualPI2 packet carries to the dequeue tracepoint in
 * skb->mark (ns >> 10: wraps after 73 minutes), and its sojourn estimate
 * in the qdisc's control block (cb[0], qdisc_skb_cb's data, which htb and
 * pfifo leave alone; units of 2^12 ns). Nothing reads either between the
 * bottleneck and the receiver's namespace, where the crossing clears the
 * mark. (skb->tc_index does not survive to the dequeue on 6.18.) */
#define DUALPI2_TS_SHIFT 10
#define CLOCK_MONOTONIC 1
#define DUALPI2_EST_SHIFT 12

/* A roll not drawn: above every p' short of 1, it hits nothing. */
#define NO_DRAW 0xffffffffU

/* Whether a queue's arrival number n carries a stamp: one in 2^shift, where
 * n times the golden ratio (mod 1) falls under 2^-shift. Spaced evenly over
 * the count but without a fixed stride, so a periodic arrival pattern (a
 * sender's bursts of four) cannot put every stamp on the same place in it. */
static __always_inline bool dualpi2_stamp_due(u64 n, u32 shift)
{
	return !shift || !((n * 0x9e3779b97f4a7c15ULL) >> (64 - (shift & 63)));
}

/* The qdisc of htb class `classid` under htb `root`: htb's class hash,
 * read as sch_htb's htb_find() does. */
static __always_inline u64 htb_leaf_qdisc(u64 root, u32 classid)
{
	struct htb_sched *sch = (void *)(root + bpf_core_field_offset(struct Qdisc, privdata));
	struct hlist_head *hash = BPF_CORE_READ(sch, clhash.hash);
	u32 h = classid, mask = BPF_CORE_READ(sch, clhash.hashmask);
	struct hlist_node *n = NULL;
	int i;

	h ^= h >> 8;
	h ^= h >> 4;
	bpf_probe_read_kernel(&n, sizeof(n), &hash[h & mask].first);
	for (i = 0; i < 16 && n; i++) {
		struct htb_class *cl = (void *)n - bpf_core_field_offset(struct htb_class, common.hnode);

		if (BPF_CORE_READ(cl, common.classid) == classid)
			return (u64)BPF_CORE_READ(cl, leaf.q);
		n = BPF_CORE_READ(n, next);
	}
	return 0;
}

/* The same from tcx (6.6+, where bpf_rdonly_cast is there too): plain
 * loads of the leaf, not two helper calls; a third of DualPI2's cost per
 * packet in situ when it read them so. */
static __always_inline void leaf_queue_tcx(u64 leaf, u32 *qlen, u32 *backlog)
{
	struct Qdisc *q;

	*qlen = 0;
	*backlog = 0;
	if (!leaf)
		return;
	q = bpf_core_cast((void *)leaf, struct Qdisc);
	*qlen = q->q.qlen;
	*backlog = q->qstats.backlog;
}

/* Packets and bytes in a leaf's queue (0 for a leaf not found). */
static __always_inline void leaf_queue(u64 leaf, u32 *qlen, u32 *backlog)
{
	struct Qdisc *q = (void *)leaf;

	*qlen = 0;
	*backlog = 0;
	if (!leaf)
		return;
	*qlen = BPF_CORE_READ(q, q.qlen);
	*backlog = BPF_CORE_READ(q, qstats.backlog);
}

/* One controller step, every tupdate (the timer re-arms itself). */
static int dualpi2_tick(void *map, int *key, struct dualpi2_state *st)
{
	u64 ql = st->qdelay[DUALPI2_L], qc = st->qdelay[DUALPI2_C];
	u64 qdelay = ql > qc ? ql : qc;
	u32 before = st->prob;
	u32 after = dualpi2_calculate_probability(&cfg.dualpi2, before, qdelay, st->last_qdelay);

	if (cfg.dualpi2.trace) {
		struct dualpi2_update u = {
			.ts_ns = bpf_ktime_get_ns(),
			.qdelay_l = ql,
			.qdelay_c = qc,
			.last_qdelay = st->last_qdelay,
			.prob_before = before,
			.prob_after = after,
		};

		bpf_ringbuf_output(&updates, &u, sizeof(u), 0);
	}
	st->prob = after;
	st->last_qdelay = qdelay;
	bpf_timer_start(&st->timer, cfg.dualpi2.tupdate_ns, 0);
	return 0;
}

/*
 * DualPI2's enqueue on tcx: classify, decide on the state of both leaves,
 * mark (a drop is the caller's verdict), and steer the packet into its leaf (skb->priority is the
 * htb class). Marks and drops happen here, at enqueue, where sch_dualpi2
 * drops at dequeue by default; the L step decides on the packet's own
 * coming sojourn, estimated as the L backlog over the link rate.
 */
static __always_inline u8 dualpi2_enqueue(struct __sk_buff *ctx, struct Qdisc *q,
					  const struct pkt *p, bool ipv4, u32 backlog)
{
	const volatile struct dualpi2_config *c = &cfg.dualpi2;
	u32 zero = 0, l_qlen, l_backlog, c_backlog, key, ns_per_kbyte;
	u32 r1 = NO_DRAW, r2 = NO_DRAW, rl = NO_DRAW;
	struct dualpi2_queue_stats *qs;
	struct dualpi2_state *st;
	u8 queue, action, step = 0;
	u64 now, est, l_wait;
	bool stamp;
	u32 prob;

	st = bpf_map_lookup_elem(&dualpi2, &zero);
	if (!st)
		return QA_PASS;
	if (st->root != (u64)q) {
		st->leaf[DUALPI2_L] = htb_leaf_qdisc((u64)q, c->l_classid);
		st->leaf[DUALPI2_C] = htb_leaf_qdisc((u64)q, c->c_classid);
		st->root = (u64)q;
	}
	if (!st->started && !__sync_val_compare_and_swap(&st->started, 0, 1)) {
		bpf_timer_init(&st->timer, &dualpi2, CLOCK_MONOTONIC);
		bpf_timer_set_callback(&st->timer, dualpi2_tick);
		bpf_timer_start(&st->timer, c->tupdate_ns, 0);
	}
	/* Read once: the timer may move it on another CPU meanwhile. */
	prob = st->prob;
	queue = ipv4 ? dualpi2_classify(c, p->ecn) : DUALPI2_C;
	leaf_queue_tcx(st->leaf[DUALPI2_L], &l_qlen, &l_backlog);
	/* Only the draws the decision reads (dualpi2_decide): C two, L one,
	 * and two more in overload; none under the minimum backlog, none while
	 * p' is 0, and the second of p'^2's only when the first hit: two draws
	 * a packet were 15 % of the marker's time in situ (perf). */
	if (ipv4 && backlog >= c->min_backlog && prob) {
		if (queue == DUALPI2_C || (u64)prob * c->coupling > DUALPI2_PROB_ONE) {
			r1 = bpf_get_prandom_u32();
			if (dualpi2_roll(r1, prob))
				r2 = bpf_get_prandom_u32();
		}
		if (queue == DUALPI2_L)
			rl = bpf_get_prandom_u32();
	}
	/* The wait ahead of a packet if its queue drains at the link's rate. */
	ns_per_kbyte = link_rate.ns_per_kbyte;
	l_wait = (u64)l_backlog * ns_per_kbyte >> 10;
	action = ipv4 ? dualpi2_decide(c, queue, p->ecn != 0, prob, backlog, l_wait,
				       l_qlen, r1, r2, rl, &step) : QA_PASS;
	key = queue;
	qs = bpf_map_lookup_elem(&dualpi2_stats, &key);
	/* The clock only for a packet that carries a stamp (or a trace). */
	stamp = dualpi2_stamp_due(qs ? qs->arrivals : 0, link_rate.stamp_shift);
	now = stamp || c->trace ? bpf_ktime_get_ns() : 0;
	if (c->trace) {
		struct dualpi2_decision d = {
			.ts_ns = now,
			.prob = prob,
			.backlog = backlog,
			.l_backlog = l_backlog,
			.l_qlen = l_qlen,
			.l_wait_ns = l_wait > 0xffffffff ? 0xffffffff : l_wait,
			.roll1 = r1,
			.roll2 = r2,
			.roll_l = rl,
			.queue = queue,
			.ecn = p->ecn,
			.action = action,
			.step = step,
		};

		bpf_ringbuf_output(&decisions, &d, sizeof(d), 0);
	}
	if (qs) {
		qs->arrivals++;
		qs->bytes += ctx->len;
		qs->marked += action == QA_MARK && !step;
		qs->step_marked += action == QA_MARK && step;
		qs->dropped += action == QA_DROP;
	}
	if (action == QA_DROP)
		return action;
	if (action == QA_MARK)
		bpf_skb_ecn_set_ce(ctx);
	/* The low bit set: a stamp is never 0, the mark of a packet without.
	 * Only a stamped packet's estimate is read at its departure. */
	ctx->mark = stamp ? (u32)(now >> DUALPI2_TS_SHIFT) | 1 : 0;
	if (stamp) {
		c_backlog = backlog > l_backlog ? backlog - l_backlog : 0;
		est = queue == DUALPI2_L ? l_wait : (u64)c_backlog * ns_per_kbyte >> 10;
		est >>= DUALPI2_EST_SHIFT;
		ctx->cb[0] = est > 0xffffffff ? 0xffffffff : est;
	}
	ctx->priority = queue == DUALPI2_L ? c->l_classid : c->c_classid;
	return action;
}

/* The queue's count of a DualPI2 tail drop (the leaves never drop: the
 * limit is both queues', held here). */
static __always_inline void dualpi2_taildrop(u8 ecn, bool ipv4)
{
	u32 key = ipv4 ? dualpi2_classify(&cfg.dualpi2, ecn) : DUALPI2_C;
	struct dualpi2_queue_stats *qs = bpf_map_lookup_elem(&dualpi2_stats, &key);

	if (qs) {
		qs->arrivals++;
		qs->taildrop++;
	}
}

/* __sk_buff's cb[0] as the kernel keeps it: qdisc_skb_cb's data. */
static __always_inline u32 cb_word(struct sk_buff *skb)
{
	u32 w = 0;

	bpf_probe_read_kernel(&w, sizeof(w),
			      (void *)skb->cb + bpf_core_field_offset(struct qdisc_skb_cb, data));
	return w;
}

/* DualPI2 at the dequeue tracepoint: each stamped packet's sojourn (its
 * enqueue time in skb->mark) into its queue's histogram, beside the
 * estimate made at its arrival; the controller's delay of each queue is its
 * last stamped departure's sojourn, or 0 once the queue is empty. */
static __always_inline void dualpi2_departed(struct sk_buff *skb, int packets, u64 now)
{
	const volatile struct dualpi2_config *c = &cfg.dualpi2;
	u32 zero = 0, key, qlen, backlog, i;
	struct dualpi2_queue_stats *qs;
	struct dualpi2_state *st;
	u64 last[2] = {}, seen[2] = {};

	st = bpf_map_lookup_elem(&dualpi2, &zero);
	if (!st)
		return;
	for (i = 0; i < 8 && skb && i < packets; i++) {
		u32 prio = skb->priority;
		u64 sojourn, est, bucket;
		s64 err;

		key = prio == c->l_classid ? DUALPI2_L : DUALPI2_C;
		if (prio != c->l_classid && prio != c->c_classid) {
			skb = skb->next;
			continue;
		}
		seen[key & 1] = 1;
		qs = bpf_map_lookup_elem(&dualpi2_stats, &key);
		if (qs)
			qs->departures++;
		if (skb->mark) {
			u32 stamp = skb->mark & ~1U;

			sojourn = (u64)((u32)(now >> DUALPI2_TS_SHIFT) - stamp) << DUALPI2_TS_SHIFT;
			est = (u64)cb_word(skb) << DUALPI2_EST_SHIFT;
			err = (s64)sojourn - (s64)est;
			if (qs) {
				bucket = sojourn >> DUALPI2_HIST_SHIFT;
				if (bucket >= DUALPI2_HIST_BUCKETS)
					bucket = DUALPI2_HIST_BUCKETS - 1;
				qs->stamped++;
				qs->sojourn_ns += sojourn;
				qs->est_err_ns += err;
				qs->est_err_abs_ns += err < 0 ? -err : err;
				qs->hist[bucket & (DUALPI2_HIST_BUCKETS - 1)]++;
			}
			last[key & 1] = sojourn;
			seen[key & 1] = 2;
		}
		skb = skb->next;
	}
	/* A queue left empty has no delay; one that is not keeps its last
	 * stamped departure's, the newest if one left just now. */
	for (i = 0; i < 2; i++) {
		if (!seen[i])
			continue;
		leaf_queue(st->leaf[i], &qlen, &backlog);
		if (!qlen)
			st->qdelay[i] = 0;
		else if (seen[i] == 2)
			st->qdelay[i] = last[i];
	}
}

/* What every arrival at the bottleneck leaves behind, whichever hook saw it:
 * the qdisc it found (for the departure probe), the queue for live views,
 * the marker's counters and, one arrival in `sample`, the probe's record. */
static __always_inline void arrival_seen(struct Qdisc *q, u32 qlen, u32 backlog, u32 len,
					 const struct pkt *p, bool ipv4, u8 action)
{
	struct marker_stats *s;
	struct queue_now *now;
	struct queue_sample *smp;
	struct probe_batches *b;
	u64 jiffies = bpf_jiffies64();
	u32 zero = 0, i;

	if (bottleneck_qdisc != (u64)q)
		bottleneck_qdisc = (u64)q;
	now = bpf_map_lookup_elem(&queue_now, &zero);
	if (now && queue_now_jiffies != jiffies) {
		queue_now_jiffies = jiffies;
		now->ts_ns = bpf_ktime_get_ns();
		now->qlen = qlen;
		now->backlog = backlog;
	}
	s = bpf_map_lookup_elem(&stats, &zero);
	if (s) {
		s->pkts++;
		s->bytes += len;
		s->marked += action == QA_MARK;
		s->dropped += action == QA_DROP;
		s->taildrop += action == QA_TAILDROP;
		s->ce_in += p->ecn == INET_ECN_CE;
		if (ipv4) {
			struct class_counts *c = p->ecn ? &s->ect : &s->not_ect;

			c->pkts++;
			c->marked += action == QA_MARK;
			c->dropped += action == QA_DROP;
			c->taildrop += action == QA_TAILDROP;
		}
	}

	if (!cfg.sample)
		return;
	b = bpf_map_lookup_elem(&batches, &zero);
	if (!b)
		return;
	if (b->skip) {
		b->skip--;
		return;
	}
	/* Gaps drawn uniformly from [0, 2 (sample - 1)] arrivals: one in
	 * `sample` on average, without a fixed stride that could beat against
	 * a periodic arrival pattern, and the draw and its division (a 64-bit
	 * div, most of the probe's cost at one in 16 when it came with every
	 * arrival) paid once per sample. */
	if (cfg.sample > 1)
		b->skip = bpf_get_prandom_u32() % (2 * cfg.sample - 1);
	i = b->samples;
	if (i >= PROBE_BATCH)
		i = 0;
	smp = &b->sample[i];
	smp->ts_ns = bpf_ktime_get_ns();
	smp->qlen = qlen;
	smp->backlog = backlog;
	smp->len = len;
	smp->sport = p->sport;
	smp->dport = p->dport;
	smp->action = action;
	smp->ecn = p->ecn;
	smp->_pad = 0;
	smp->_pad2 = 0;
	b->samples = batch_add(&samples, b->sample, sizeof(b->sample), i,
			       s ? &s->ring_full : NULL);
}

SEC("tcx/egress")
int bottleneck_egress(struct __sk_buff *ctx)
{
	struct sk_buff *skb = bpf_cast_to_kern_ctx(ctx);
	struct Qdisc *q = skb->dev->qdisc;
	u32 qlen = q->q.qlen, backlog = q->qstats.backlog;
	u8 action = QA_PASS;
	bool congested = false;
	struct pkt p = {};
	int verdict = TC_ACT_OK;

	/* Non-IPv4 (ARP) is counted and recorded but never marked or dropped. */
	bool ipv4 = parse(ctx, &p);

	if (cfg.limit_pkts && qlen >= cfg.limit_pkts) {
		action = QA_TAILDROP;
		if (cfg.mode == MARKER_DUALPI2) {
			dualpi2_taildrop(p.ecn, ipv4);
			verdict = TC_ACT_SHOT;
		}
	} else if (cfg.mode == MARKER_DUALPI2) {
		action = dualpi2_enqueue(ctx, q, &p, ipv4, backlog);
		if (action == QA_DROP)
			verdict = TC_ACT_SHOT;
	} else if (cfg.mode == MARKER_STEP) {
		congested = (cfg.k_pkts && qlen >= cfg.k_pkts) ||
			    (cfg.k_bytes && backlog >= cfg.k_bytes);
	} else if (cfg.mode == MARKER_RED) {
		congested = red_decide(qlen);
	} else if (cfg.mode == MARKER_DUAL && ipv4) {
		congested = dual_decide(qlen, backlog, p.ecn != 0);
	}
	if (congested && ipv4) {
		if (p.ecn == 0) {
			action = QA_DROP;
			verdict = TC_ACT_SHOT;
		} else {
			bpf_skb_ecn_set_ce(ctx);
			action = QA_MARK;
		}
	}
	arrival_seen(q, qlen, backlog, ctx->len, &p, ipv4, action);
	return verdict;
}

/* The probe where tcx is missing (before 6.6; bpf_cast_to_kern_ctx came in
 * 6.3): the tracepoint net_dev_queue fires in __dev_queue_xmit right before
 * the root qdisc enqueues, where tcx egress would have run. It only watches:
 * a kernel qdisc (red, fq_codel) or pfifo's limit decides. */
SEC("tp_btf/net_dev_queue")
int BPF_PROG(bottleneck_arrival, struct sk_buff *skb)
{
	struct net_device *dev = skb->dev;
	struct Qdisc *q;
	struct pkt p = {};
	u32 qlen, backlog;
	u8 action = QA_PASS;
	bool ipv4;

	if (!dev || dev->ifindex != cfg.probe_ifindex ||
	    dev->nd_net.net->ns.inum != cfg.probe_netns)
		return 0;
	q = dev->qdisc;
	qlen = q->q.qlen;
	backlog = q->qstats.backlog;
	ipv4 = parse_kernel(skb, &p);
	if (cfg.limit_pkts && qlen >= cfg.limit_pkts)
		action = QA_TAILDROP;
	arrival_seen(q, qlen, backlog, skb->len, &p, ipv4, action);
	return 0;
}

/* The floor `lab bench` measures the marker against: the cheapest program
 * the same hook can run. */
SEC("tcx/egress")
int floor_egress(struct __sk_buff *ctx)
{
	return TC_ACT_OK;
}

/* The floor plus what no marker can do without: reading the queue it
 * decides on. The qdisc's length and backlog share a cache line that the
 * CPU dequeuing keeps writing; `lab bench` sets this beside the marker to
 * tell that line's cost from the marker's own. */
SEC("tcx/egress")
int queue_read_egress(struct __sk_buff *ctx)
{
	struct sk_buff *skb = bpf_cast_to_kern_ctx(ctx);
	struct Qdisc *q = skb->dev->qdisc;

	/* TCX_NEXT passes as TC_ACT_OK does: the loads stay, the verdict does
	 * not change. */
	return (q->q.qlen | q->qstats.backlog) == ~0U ? -1 : TC_ACT_OK;
}

SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(bottleneck_dequeue, struct Qdisc *q, const struct netdev_queue *txq,
	     int packets, struct sk_buff *skb)
{
	struct queue_departure *d;
	struct probe_batches *b;
	struct marker_stats *s;
	u32 zero = 0, i, qlen;
	u64 ts;

	/* packets is 1 even when the qdisc had nothing to give (skb NULL). */
	if (!skb || (u64)q != bottleneck_qdisc)
		return 0;
	ts = bpf_ktime_get_ns();
	qlen = q->q.qlen;
	if (qlen == 0)
		idle_since_ns = ts;
	s = bpf_map_lookup_elem(&stats, &zero);
	if (s)
		s->departed += packets;
	if (cfg.mode == MARKER_DUALPI2)
		dualpi2_departed(skb, packets, ts);
	b = bpf_map_lookup_elem(&batches, &zero);
	if (!b)
		return 0;
	i = b->departures;
	if (i >= PROBE_BATCH)
		i = 0;
	d = &b->departure[i];
	d->ts_ns = ts;
	d->qlen = qlen;
	d->packets = packets;
	b->departures = batch_add(&departures, b->departure, sizeof(b->departure), i,
				  s ? &s->departures_lost : NULL);
	return 0;
}

SEC("tcx/ingress")
int receiver_ingress(struct __sk_buff *ctx)
{
	struct rx_flow_stats *st, init = {};
	struct rx_flow_key key = {};
	struct pkt p = {};

	if (!parse(ctx, &p) || !p.tcp)
		return TC_ACT_OK;
	key.saddr = p.saddr;
	key.daddr = p.daddr;
	key.sport = p.sport;
	key.dport = p.dport;
	st = bpf_map_lookup_elem(&rx_flows, &key);
	if (!st) {
		bpf_map_update_elem(&rx_flows, &key, &init, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&rx_flows, &key);
		if (!st)
			return TC_ACT_OK;
	}
	__sync_fetch_and_add(&st->pkts, 1);
	__sync_fetch_and_add(&st->bytes, p.l4_bytes);
	__sync_fetch_and_add(&st->data_bytes, p.tcp_payload);
	if (p.ecn != 0)
		__sync_fetch_and_add(&st->ect_pkts, 1);
	if (p.ecn == INET_ECN_CE) {
		__sync_fetch_and_add(&st->ce_pkts, 1);
		__sync_fetch_and_add(&st->ce_bytes, p.tcp_payload);
	}
	return TC_ACT_OK;
}
