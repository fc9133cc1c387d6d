/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every struct the lab switch (switch.bpf.c) and the faulty link
 * (faults.bpf.c) share with Rust, declared once.
 * The BPF side includes this after vmlinux.h; Rust reaches it through
 * bindgen (tc-qdisc/build.rs), so nothing here is mirrored by hand.
 */
#ifndef TC_QDISC_INTF_H
#define TC_QDISC_INTF_H

#include "intf_types.h"

/*
 * The lab switch: tc-qdisc/src/bpf/switch.bpf.c. The marker runs on tcx
 * egress of the bottleneck, before the root qdisc enqueues the packet, so the
 * backlog it reads is the queue this packet joins.
 */
enum marker_mode {
	MARKER_PROBE = 0, /* observe only: a kernel qdisc (or none) marks */
	MARKER_STEP = 1,  /* CE when the backlog is at least K (DCTCP's switch) */
	MARKER_RED = 2,   /* RED on the average queue, marking instead of dropping */
	MARKER_DUAL = 3,  /* two RED profiles over the one queue, by ECN capability */
	MARKER_DUALPI2 = 4, /* RFC 9332's coupled dual queue (dualpi2.h) over two htb leaves */
};

/*
 * DualPI2 (RFC 9332), as tc-dualpi2(8) names its parameters; dualpi2.h is
 * the controller, the coupling and the classifier. Probabilities are
 * fractions of DUALPI2_PROB_ONE (2^32 - 1, sch_dualpi2's MAX_PROB).
 */
#define DUALPI2_PROB_ONE 0xffffffffU
/* The queues, also the index of their counters. */
#define DUALPI2_L 0
#define DUALPI2_C 1
/* Sojourn histogram: buckets of 2^DUALPI2_HIST_SHIFT ns (32.8 us), the
 * last one everything from 67 ms up. */
#define DUALPI2_HIST_SHIFT 15
#define DUALPI2_HIST_BUCKETS 2048

struct dualpi2_config {
	u64 target_ns;       /* PI2's target queue delay (15 ms) */
	u32 tupdate_ns;      /* p' is recomputed this often (16 ms) */
	u32 alpha;           /* integral gain, per ns of delay error, in 2^-6 units of
			      * DUALPI2_PROB_ONE (sch_dualpi2's internal scaling) */
	u32 beta;            /* proportional gain, same units */
	u32 step_ns;         /* L: mark when this packet will wait at least this long
			      * in the L queue ... */
	u32 step_pkts;       /* ... or, when nonzero, finds this many L packets */
	u32 min_qlen_step;   /* no step mark while the L queue holds fewer packets */
	u32 coupling;        /* k: p_L = k p' (2) */
	u32 drop_overload;   /* 1: with k p' > 1, L packets meet the classic drop */
	u32 min_backlog;     /* nothing marked or dropped under this backlog (2 MTU) */
	u32 ecn_mask;        /* L when (ECN & ecn_mask) != 0: 1 ECT(1) and CE, 3 any ECT */
	u32 l_classid;       /* htb leaves: skb->priority of each queue */
	u32 c_classid;
	u32 trace;           /* 1: every decision and update to the `decisions` ring (tests) */
};

/* One arrival's decision, traced with dualpi2_config.trace. */
struct dualpi2_decision {
	u64 ts_ns;
	u32 prob;            /* p' the decision used */
	u32 backlog;         /* bytes in both queues before it */
	u32 l_backlog;       /* bytes in the L queue before it */
	u32 l_qlen;          /* packets in the L queue before it */
	u32 l_wait_ns;       /* its wait in L as the step saw it: l_backlog over
			      * the link's rate then (link_rate) */
	u32 roll1;           /* the random draws it used */
	u32 roll2;
	u32 roll_l;
	u8 queue;            /* DUALPI2_L or DUALPI2_C */
	u8 ecn;              /* ECN field as it arrived */
	u8 action;           /* enum queue_action */
	u8 step;             /* 1: the L step marked it */
};

/* One run of the controller, traced with dualpi2_config.trace. */
struct dualpi2_update {
	u64 ts_ns;
	u64 qdelay_l;        /* sojourn of the L queue's last departure (0: empty) */
	u64 qdelay_c;
	u64 last_qdelay;     /* the larger of the two at the previous update */
	u32 prob_before;
	u32 prob_after;
};

/* What one queue saw, per CPU (arrivals at tcx, departures at the dequeue
 * tracepoint). */
struct dualpi2_queue_stats {
	u64 arrivals;
	u64 bytes;
	u64 marked;          /* CE by the coupled probability (L) or p'^2 (C) */
	u64 step_marked;     /* L: CE by the step */
	u64 dropped;         /* early drops */
	u64 taildrop;        /* at the limit */
	u64 departures;
	u64 stamped;         /* departures that carried their enqueue time (one
			      * in 2^link_rate.stamp_shift): the sums and the
			      * histogram below are over these */
	u64 sojourn_ns;      /* sum of their sojourn */
	u64 est_err_abs_ns;  /* sum of |sojourn - backlog over rate at arrival| */
	s64 est_err_ns;      /* the same, signed: the estimate's bias */
	u64 hist[DUALPI2_HIST_BUCKETS];
};

/*
 * What the switch's programs need of the link's rate, in a writable section
 * of its own: the lab rewrites it when the bottleneck's rate changes
 * mid-run (`lab l4s --rate-schedule`), beside htb's class.
 */
struct link_rate {
	u64 rate_bps;
	u32 ns_per_kbyte;    /* the link's time for 1024 bytes: a backlog's wait */
	u32 pkt_ns;          /* one MTU packet's time on the link: the dual AQM's
			      * averages decay by one empty-queue arrival per
			      * packet time over an idle queue */
	u32 stamp_shift;     /* DualPI2 stamps one arrival in 2^stamp_shift with
			      * its enqueue time: the most whose packets span
			      * DUALPI2_STAMP_SPAN_NS on the link, at most
			      * 2^DUALPI2_STAMP_SHIFT_MAX */
	u32 _pad;
};
/* A clock read per packet is most of DualPI2's cost in situ (docs/
 * performance.md); the controller needs one sojourn per tupdate, so one
 * packet per 1 ms of the link's time is stamped, and each queue's delay is
 * never older than that at an update. */
#define DUALPI2_STAMP_SPAN_NS 1000000
#define DUALPI2_STAMP_SHIFT_MAX 6

/*
 * One RED profile of the dual AQM (seed 002: WRED keyed on ECT). Each profile
 * keeps its own weighted average of the shared backlog, in bytes, updated at
 * every arrival of either class. Below min nothing happens, between min and
 * max the probability rises linearly to max_p (with Floyd's uniform spacing
 * of marks), at or above max every packet of the class is hit. min == max
 * with wlog 0 is DCTCP's step at K on the instantaneous queue.
 */
struct red_profile {
	u32 min_bytes;
	u32 max_bytes;
	u32 max_p;      /* probability at max_bytes, 1/MARKER_PROB_ONE */
	u32 wlog;       /* the average's weight per arrival, 2^-wlog (0: none) */
};

/* RED's max_p in units of 1/MARKER_PROB_ONE. */
#define MARKER_PROB_ONE 65536U

struct marker_config {
	u32 mode;       /* enum marker_mode */
	u32 k_pkts;     /* step: mark when qlen >= k_pkts (0: not by packets) */
	u32 k_bytes;    /* step: mark when backlog >= k_bytes (0: not by bytes) */
	u32 red_min;    /* RED: thresholds on the average queue, packets */
	u32 red_max;
	u32 red_max_p;  /* RED: marking probability at red_max, 1/65536 */
	u32 red_wlog;   /* RED: EWMA weight 2^-red_wlog per arrival */
	u32 limit_pkts; /* the queue's packet limit: an arrival at it is tail-dropped */
	u32 sample;     /* probe: one arrival in `sample` on average to the ring (0: none) */
	/* dual: ECT(0), ECT(1) and CE packets are marked by `ect`, Not-ECT
	 * packets dropped by `not_ect`. */
	struct red_profile ect;
	struct red_profile not_ect;
	/* Kernels without tcx (before 6.6): the probe runs on the tracepoint
	 * net_dev_queue instead, which fires for every device on the machine;
	 * it keeps the packets of this interface in this namespace (its
	 * inode number). */
	u32 probe_ifindex;
	u32 probe_netns;
	struct dualpi2_config dualpi2;
};

/* What happened to an arriving packet. */
enum queue_action {
	QA_PASS = 0,
	QA_MARK = 1,      /* CE set */
	QA_DROP = 2,      /* not ECN-capable where it would have been marked */
	QA_TAILDROP = 3,  /* queue full: the qdisc will drop it */
};

/* One arrival at the bottleneck, as the queue probe saw it. */
struct queue_sample {
	u64 ts_ns;    /* CLOCK_MONOTONIC */
	u32 qlen;     /* packets queued before this one */
	u32 backlog;  /* bytes queued before this one */
	u32 len;      /* this packet, bytes on the wire */
	u16 sport;    /* TCP ports, host order: the flow */
	u16 dport;
	u8 action;    /* enum queue_action */
	u8 ecn;       /* ECN field as it arrived */
	u16 _pad;
	u32 _pad2;
};

/* One dequeue from the bottleneck's root qdisc, as the departure probe saw
 * it (tracepoint qdisc_dequeue): with the arrivals, the queue over time. */
struct queue_departure {
	u64 ts_ns;    /* CLOCK_MONOTONIC */
	u32 qlen;     /* packets still queued after it */
	u32 packets;  /* packets it took out (bulk dequeue takes several) */
};

/* Each CPU's probe records wait in a batch until PROBE_BATCH of one kind go
 * to their ring as one record. A ring reservation takes a spinlock both CPUs
 * share: per record, it and the commit were a third of the probe's cost per
 * arrival (perf at 1 Gbit/s); per batch, they are spread over 32 records.
 * The lab reads what is left in the batches when the run ends. */
#define PROBE_BATCH 32

struct probe_batches {
	u32 samples;     /* records waiting in sample[] */
	u32 departures;  /* records waiting in departure[] */
	u32 skip;        /* arrivals to let pass before the next sample */
	u32 _pad;
	struct queue_sample sample[PROBE_BATCH];
	struct queue_departure departure[PROBE_BATCH];
};

/* What the marker did to one class of arrivals (by ECN capability). */
struct class_counts {
	u64 pkts;
	u64 marked;
	u64 dropped;   /* QA_DROP */
	u64 taildrop;  /* QA_TAILDROP */
};

/* Counters of the marker, per CPU. */
struct marker_stats {
	u64 pkts;
	u64 bytes;
	u64 marked;
	u64 dropped;   /* QA_DROP */
	u64 taildrop;  /* QA_TAILDROP, as predicted at arrival */
	u64 ce_in;     /* arrived already CE */
	u64 ring_full; /* samples lost: ring buffer full (a batch at a time) */
	u64 departed;  /* packets the root qdisc dequeued (departure probe) */
	u64 departures_lost; /* departure records lost: ring buffer full (a batch at a time) */
	struct class_counts ect;     /* IPv4 arrivals with ECT(0), ECT(1) or CE */
	struct class_counts not_ect; /* IPv4 arrivals without ECN */
};

/* The switch's queue right now, for live views (`loader top`): one entry,
 * written by the marker at the first arrival of each jiffy. */
struct queue_now {
	u64 ts_ns;    /* CLOCK_MONOTONIC of the arrival: the first of each jiffy */
	u32 qlen;     /* packets queued before it */
	u32 backlog;  /* bytes queued before it */
};

/* Receiver-side count of one flow (tcx ingress of the receiver). */
struct rx_flow_key {
	u32 saddr;    /* network order */
	u32 daddr;
	u16 sport;    /* host order */
	u16 dport;
};

struct rx_flow_stats {
	u64 pkts;
	u64 bytes;     /* IP payload bytes (TCP header + data) */
	u64 data_bytes;/* TCP payload bytes */
	u64 ce_pkts;
	u64 ce_bytes;  /* TCP payload bytes of CE-marked packets */
	u64 ect_pkts;
};

/*
 * A faulty link in the lab: tc-qdisc/src/bpf/faults.bpf.c, on tcx of the
 * receiver's interface, ingress for the data path, egress for the ACK path.
 * Loss and reordering act on the segments of established flows of one kind
 * (data on the data path, pure ACKs on the ACK path); handshakes and closes
 * pass. ECN bleaching clears any TCP segment's ECN field, syn_bleach the
 * ECN negotiation of SYNs.
 */
enum fault_segments {
	FAULT_DATA = 0, /* segments that carry payload */
	FAULT_ACKS = 1, /* pure ACKs: no payload, no SYN, FIN or RST */
};

/* A probability p as p * FAULT_PROB_ONE, compared with a 32-bit random draw:
 * 0 never, FAULT_PROB_ONE always. */
#define FAULT_PROB_ONE (1ULL << 32)

/* skb->mark of a packet back from the reordering detour, so the fault that
 * sent it there lets it pass the second time. */
#define FAULT_DETOUR_MARK 0x0dc7c9f1U

struct fault_config {
	u32 segments;         /* enum fault_segments */
	u32 syn_bleach;       /* clear ECE and CWR on SYNs: ECN never negotiated */
	u64 loss;             /* drop, 1/FAULT_PROB_ONE */
	u64 ecn_bleach;       /* clear the ECN field (CE or ECT to Not-ECT), any segment */
	u64 reorder;          /* send on the detour, which returns it late */
	u32 detour_ifindex;   /* where reordered segments leave (egress) */
	u32 return_ifindex;   /* where the detour delivers them (ingress) */
};

/* Counters of one faulty link, per CPU. */
struct fault_stats {
	u64 crossed;       /* every TCP segment, of any kind (once, not again
			    * back from the detour) */
	u64 seen;          /* segments of the kind the faults act on */
	u64 dropped;
	u64 ce_bleached;   /* arrived CE, left Not-ECT */
	u64 ect_bleached;  /* arrived ECT(0) or ECT(1), left Not-ECT */
	u64 syns;          /* SYNs that asked for ECN (ECE and CWR set) */
	u64 syn_bleached;  /* ... of them, with both flags cleared */
	u64 reordered;     /* sent on the detour */
	u64 returned;      /* back from the detour */
	u64 detour_failed; /* the redirect refused: passed in order */
};

#endif /* TC_QDISC_INTF_H */
