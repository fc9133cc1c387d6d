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

/* alpha is a fraction in units of 1/DCTCP_MAX_ALPHA, as in tcp_dctcp.c. */
#define DCTCP_MAX_ALPHA 1024U
/* Largest shift_g: past 10, g * F rounds to 0 for any F in 10-bit alpha. */
#define DCTCP_MAX_SHIFT_G 10U
/* The kernel's TCP_CA_NAME_MAX. */
#define DCTCP_NAME_MAX 16

/*
 * Tunables of a loaded DCTCP instance. Lives in its own data section
 * (".data.params"), pinned as "params", so `loader set` can rewrite it while
 * sockets use the algorithm.
 */
struct dctcp_params {
	u32 shift_g;       /* g = 1 / 2^shift_g, 0..10 (kernel default 4) */
	u32 alpha_on_init; /* alpha of a new flow, 0..1024 (1024 = 1.0) */
};

/* Counters of a loaded instance, section ".data.stats", pinned as "stats". */
struct dctcp_stats {
	u64 sockets;    /* sockets currently initialised with the algorithm */
	u64 inits;      /* sockets ever initialised with DCTCP */
	u64 fallbacks;  /* sockets ever switched to the Reno fallback (no ECN) */
	u64 fallback_sockets; /* sockets currently running the Reno fallback */
	u64 fallback_failed; /* fallback switch refused by the kernel */
	u64 alpha_updates;   /* per-window alpha updates */
	u64 loss_reactions;  /* halvings on loss (recovery entry or RTO) */
	u64 ssthresh_repairs; /* impossible ssthresh seen and recomputed, see dctcp_core_guard */
	u64 cwnd_repairs;     /* impossible cwnd seen and reset */
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
	u32 alpha;            /* EWMA of the marked fraction, 0..1024 */
	u32 next_seq;         /* snd_nxt that ends the current window */
	u32 ce_state;         /* receiver: was the last segment CE-marked */
	u32 loss_cwnd;        /* cwnd before the last reduction, for undo */
	u32 flags;            /* DCTCP_FLAG_* */
};

/* One socket as seen by the flows iterator (bpf/flows.bpf.c). */
struct flow_record {
	u8 family;            /* AF_INET or AF_INET6 */
	u8 tcp_state;         /* TCP_ESTABLISHED, ... */
	u8 ca_state;          /* TCP_CA_Open, CWR, Recovery, Loss */
	u8 ecn_flags;         /* tp->ecn_flags */
	u16 sport;            /* host order */
	u16 dport;            /* host order */
	u8 saddr[16];         /* IPv4 in the first 4 bytes */
	u8 daddr[16];
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
	u32 netns_ino;        /* inode of the socket's network namespace */
	u32 _pad;
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
	u32 sample;     /* probe: send every sample-th arrival to the ring (0: none) */
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

/* Counters of the marker, per CPU. */
struct marker_stats {
	u64 pkts;
	u64 bytes;
	u64 marked;
	u64 dropped;   /* QA_DROP */
	u64 taildrop;  /* QA_TAILDROP, as predicted at arrival */
	u64 ce_in;     /* arrived already CE */
	u64 ring_full; /* samples lost: ring buffer full */
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

#endif /* DCTCP_BPF_INTF_H */
