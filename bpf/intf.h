/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every struct that crosses the BPF/user boundary, declared once.
 * The BPF side includes this after vmlinux.h; the loader reaches it through
 * bindgen (loader/build.rs), so nothing here is mirrored by hand in Rust.
 */
#ifndef DCTCP_BPF_INTF_H
#define DCTCP_BPF_INTF_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
#endif

/* User-facing alpha (alpha_on_init) is in 1/1024, as in tcp_dctcp.c. */
#define DCTCP_MAX_ALPHA 1024U
/* Inside the programs and in every event, alpha is in 1/2^20: the finest
 * resolution any variant uses (seed 002). Algorithms at the kernel's 10 bits
 * keep the low 10 bits zero and compute exactly as tcp_dctcp.c does. */
#define DCTCP_ALPHA_SHIFT 20U
#define DCTCP_ALPHA_ONE (1U << DCTCP_ALPHA_SHIFT)
/* Fractional tunables (g, ns, nl) are in 1/DCTCP_ONE. */
#define DCTCP_ONE 65536U
/* Largest shift_g: past 10, g * F rounds to 0 for any F in 10-bit alpha. */
#define DCTCP_MAX_SHIFT_G 10U
/* The kernel's TCP_CA_NAME_MAX. */
#define DCTCP_NAME_MAX 16

/* Defaults. DCTCP: g = 1/16. xDCTCP: seed 003's best setting (g = 0.09,
 * ns = 0.3, nl = 1.0); flows are short until 1 MB (README, xDCTCP). Seed 002's
 * per-ACK alpha: g = 1/2^8. */
#define DCTCP_DEFAULT_G (DCTCP_ONE >> 4)
#define XDCTCP_DEFAULT_G 5898U   /* 0.09 */
#define XDCTCP_DEFAULT_NS 19661U /* 0.3 */
#define XDCTCP_DEFAULT_NL DCTCP_ONE
#define XDCTCP_DEFAULT_SHORT_BYTES (1ULL << 20)
#define KDCTCP_DEFAULT_G_ACK (DCTCP_ONE >> 8)

/* Seed 002's modifications (Kuehlewind et al.), each its own switch in
 * dctcp_params.features of bpf_kdctcp. */
#define DCTCP_F_PER_ACK_ALPHA (1U << 0) /* alpha on every ACK, gain g_ack */
#define DCTCP_F_PROGRESSIVE   (1U << 1) /* reduce further on each ECE in CWR, from cwnd at its start */
#define DCTCP_F_CWR_GROWTH    (1U << 2) /* keep growing during CWR; keep snd_cwnd_cnt if nothing was cut */
#define DCTCP_F_FINE_ALPHA    (1U << 3) /* alpha in 1/2^20 instead of 1/2^10 */

/*
 * Tunables of a loaded instance, one layout for every algorithm (each uses
 * its own subset). Lives in its own data section (".data.params"), pinned as
 * "params", so `loader set` can rewrite it while sockets use the algorithm.
 */
struct dctcp_params {
	u32 g;             /* alpha's EWMA gain per window, 1/DCTCP_ONE (DCTCP: 2^16 >> shift_g) */
	u32 alpha_on_init; /* alpha of a new flow, 0..1024 (1024 = 1.0) */
	u32 ns;            /* xDCTCP: short flows cut to cwnd (1 - ns alpha), 1/DCTCP_ONE */
	u32 nl;            /* xDCTCP: long flows cut to cwnd (1 - nl alpha) */
	u64 short_bytes;   /* xDCTCP: a flow is short until it has sent this many bytes */
	u32 g_ack;         /* kdctcp with DCTCP_F_PER_ACK_ALPHA: gain per ACK, 1/DCTCP_ONE */
	u32 features;      /* kdctcp: DCTCP_F_* */
	u32 inject_ssthresh; /* fault injection: a flow's first N reductions hand the kernel
			      * DCTCP_BOGUS_SSTHRESH, for the guard to repair (0: off) */
	u32 no_guard;        /* 1: dctcp_core_guard off (`guard=0`); 0, the default, on. Stored
			      * inverted so that a zeroed struct means the guard runs */
};

/* What this project's 6.18 guests were seen to store as ssthresh (the low
 * half of a return address in the SRSO thunk; README, Known issue). */
#define DCTCP_BOGUS_SSTHRESH 0x81104110U

/* Counters of a loaded instance, section ".data.stats", pinned as "stats". */
struct dctcp_stats {
	u64 sockets;    /* sockets currently initialised with the algorithm */
	u64 inits;      /* sockets ever initialised with DCTCP */
	u64 fallbacks;  /* sockets ever switched to the Reno fallback (no ECN) */
	u64 fallback_sockets; /* sockets currently running the Reno fallback */
	u64 fallback_refused; /* fallback refused by the kernel: sent to its reno */
	u64 alpha_updates;   /* per-window alpha updates */
	u64 loss_reactions;  /* halvings on loss (recovery entry or RTO) */
	u64 ssthresh_repairs; /* impossible ssthresh seen and recomputed, see dctcp_core_guard */
	u64 cwnd_repairs;     /* impossible cwnd seen and reset */
	u64 inflight_holds;   /* sending held: in flight far above the reduction's start, see dctcp_core_guard */
	u64 progressive_cuts; /* kdctcp: ssthresh lowered again inside CWR on an ECE */
	u64 cwr_growth;       /* kdctcp: ssthresh raised by one segment inside CWR */
	u64 events;           /* trace events the programs tried to emit */
	u64 events_dropped;   /* of those, lost because the ring was full */
	u64 found_ssthresh;   /* the impossible ssthresh the guard last repaired, as found (0: none) */
	u64 found_cwnd;       /* the impossible cwnd the guard last reset, as found (0: none) */
};

/*
 * Live tracing (`loader trace`, the lab's recordings). Events go to the ring
 * buffer "events", pinned beside params; what is produced is set by "trace"
 * (section ".data.trace"), all zero (nothing produced) unless a tracer runs.
 * The programs count events in dctcp_stats.
 */
#define DCTCP_TRACE_WINDOW (1U << 0) /* flow start/end, state changes, one event per alpha window */
#define DCTCP_TRACE_ACK    (1U << 1) /* also cwnd on every ack_every-th ACK */

struct dctcp_trace {
	u32 flags;     /* DCTCP_TRACE_* */
	u32 ack_every; /* DCTCP_TRACE_ACK: sample one ACK in ack_every (0 or 1: all) */
};

enum dctcp_event_type {
	DCTCP_EV_START = 1,    /* a socket started using the algorithm */
	DCTCP_EV_END = 2,      /* ... and stopped (closed, or switched away) */
	DCTCP_EV_WINDOW = 3,   /* alpha updated at the end of an observation window */
	DCTCP_EV_ACK = 4,      /* cwnd sample on an ACK */
	DCTCP_EV_STATE = 5,    /* congestion state change (value: the new TCP_CA_* state) */
	DCTCP_EV_FALLBACK = 6, /* no ECN: handed to the Reno fallback */
	DCTCP_EV_REPAIR = 7,   /* the guard repaired the window (value: enum dctcp_repair) */
};

/* What dctcp_core_guard repaired, in DCTCP_EV_REPAIR's value. */
enum dctcp_repair {
	DCTCP_REPAIR_SSTHRESH = 1, /* impossible ssthresh recomputed */
	DCTCP_REPAIR_CWND = 2,     /* impossible cwnd reset */
	DCTCP_REPAIR_INFLIGHT = 3, /* sending held: far more in flight than the reduction began with */
};

/* A flow, as every event names it: the socket's own view (local = s*). */
struct dctcp_flow_key {
	u8 saddr[16];  /* IPv4 in the first 4 bytes */
	u8 daddr[16];
	u16 sport;     /* host order */
	u16 dport;
	u8 family;     /* AF_INET or AF_INET6 */
	u8 _pad[3];
	u32 netns_ino; /* inode of the socket's network namespace */
};

struct dctcp_event {
	u64 ts_ns;        /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	struct dctcp_flow_key flow;
	u8 type;          /* enum dctcp_event_type */
	u8 ca_state;      /* TCP_CA_* when the event was taken */
	u8 value;         /* DCTCP_EV_STATE: the new state */
	u8 _pad;
	u32 cwnd;
	u32 ssthresh;
	u32 alpha;        /* 1/2^20 (DCTCP_ALPHA_ONE = 1.0), after this window's update */
	u32 srtt_us;
	u32 mss;
	u32 delivered;    /* tp->delivered, packets */
	u32 delivered_ce; /* tp->delivered_ce: delivered with ECE */
	u32 win_delivered;    /* DCTCP_EV_WINDOW: packets in the window just ended */
	u32 win_delivered_ce; /* ... of them ECE-echoed: F = win_delivered_ce / win_delivered */
	u32 reduction;    /* n of the flow's last reduction, cwnd (1 - n alpha), 1/DCTCP_ONE; 0: none yet */
	u32 acks;         /* ACKs of this socket counted while per-ACK tracing was on */
	u64 bytes_acked;
	u64 bytes_sent;   /* tp->bytes_sent: what xDCTCP classifies flows by */
};

/* dctcp_state.flags */
#define DCTCP_FLAG_LIVE     (1U << 0) /* init ran; release must count down */
#define DCTCP_FLAG_FALLBACK (1U << 1) /* ECN not negotiated: Reno behaviour */

/*
 * Per-flow state in icsk_ca_priv; the same names as tcp_dctcp.c's struct dctcp
 * so the two read alike. The flows iterator copies it out raw.
 */
struct dctcp_state {
	u32 old_delivered;    /* tp->delivered at the start of this window */
	u32 old_delivered_ce; /* tp->delivered_ce at the start of this window */
	u32 prior_rcv_nxt;    /* receiver: rcv_nxt when ce_state last changed */
	u32 alpha;            /* EWMA of the marked fraction, 1/2^20 */
	u32 next_seq;         /* snd_nxt that ends the current window */
	u32 ce_state;         /* receiver: was the last segment CE-marked */
	u32 loss_cwnd;        /* cwnd before the last reduction, for undo */
	u32 flags;            /* DCTCP_FLAG_* */
	u32 acks;             /* ACKs seen while DCTCP_TRACE_ACK was on: its sampling */
	u32 reduction;        /* n of the last reduction, 1/DCTCP_ONE (0: none yet) */
	u32 ack_delivered;    /* kdctcp: tp->delivered at the previous ACK */
	u32 cwnd_cnt;         /* kdctcp: snd_cwnd_cnt after the last growth step */
	u32 grown;            /* kdctcp: segments added to ssthresh in this CWR */
	u32 injected;         /* reductions given DCTCP_BOGUS_SSTHRESH (inject_ssthresh) */
};

/* One socket as seen by the flows iterator (bpf/flows.bpf.c). */
struct flow_record {
	struct dctcp_flow_key key;
	u8 tcp_state;         /* TCP_ESTABLISHED, ... */
	u8 ca_state;          /* TCP_CA_Open, CWR, Recovery, Loss */
	u8 ecn_flags;         /* tp->ecn_flags */
	u8 _pad0;
	char ca_name[DCTCP_NAME_MAX];
	u32 snd_cwnd;
	u32 snd_ssthresh;
	u32 srtt_us;          /* smoothed RTT in microseconds */
	u32 mss_cache;
	u32 delivered;
	u32 delivered_ce;
	u64 bytes_acked;
	u64 bytes_received;
	u64 sock_cookie;
	struct dctcp_state ca; /* raw icsk_ca_priv, meaningful for our algorithms */
};

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
};

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
	/* dual: one MTU packet's time on the link; over an idle queue the
	 * averages decay as if one empty-queue arrival came per packet time. */
	u32 idle_pkt_ns;
	/* Kernels without tcx (before 6.6): the probe runs on the tracepoint
	 * net_dev_queue instead, which fires for every device on the machine;
	 * it keeps the packets of this interface in this namespace (its
	 * inode number). */
	u32 probe_ifindex;
	u32 probe_netns;
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

/* `lab bench`: one function's time per call, as a clock read on entry and
 * one on return take it (netns-lab/src/bpf/calltime.bpf.c), per CPU. */
struct call_time {
	u64 entered_ns; /* this CPU's call in progress, 0 when none */
	u64 ns;         /* summed over completed calls */
	u64 calls;
};

#endif /* DCTCP_BPF_INTF_H */
