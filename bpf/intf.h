/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every struct the algorithms share with the loader, declared once.
 * The BPF side includes this after vmlinux.h; the loader reaches it through
 * bindgen (loader/build.rs), so nothing here is mirrored by hand in Rust.
 * The switch's structs are tc-qdisc's (tc-qdisc/src/bpf/intf.h), the lab's
 * call timer's the lab's (netns-lab/src/bpf/intf.h).
 */
#ifndef DCTCP_BPF_INTF_H
#define DCTCP_BPF_INTF_H

#include "intf_types.h"

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

/*
 * TCP Prague (bpf/prague.bpf.c), with the defaults of L4STeam's reference
 * (tcp_prague.c 0.7): alpha in 1/2^24 kept as alpha / g, the window in
 * 1/2^20 segments, RTT independence at a 25 ms target from 4 rounds after
 * slow start, the rate mode below 4 MTUs of window, pacing on.
 */
#define PRAGUE_ALPHA_BITS 24U
#define PRAGUE_CWND_SHIFT 20U
#define PRAGUE_DEFAULT_G (DCTCP_ONE >> 4)
#define PRAGUE_DEFAULT_RTT_TARGET_US 25000U
#define PRAGUE_MIN_RTT_TARGET_US 100U
#define PRAGUE_MAX_RTT_TARGET_US 100000U
/* Past this RTT the scaled increase is not used (the reference's overflow cap). */
#define PRAGUE_MAX_SCALED_RTT_US 100000U
#define PRAGUE_DEFAULT_RTT_TRANSITION 4U
#define PRAGUE_DEFAULT_MODE_SWITCH_MTUS 4U
/* The classic-ECN fallback: a marked round's queue delay from this on is a
 * classic AQM's (above an L4S step's 1 ms, below CoDel's 5 ms target). */
#define PRAGUE_DEFAULT_CLASSIC_QDELAY_US 3000U
#define PRAGUE_MAX_CLASSIC_QDELAY_US 1000000U
/* ... Reno's response once classic_score reaches ON, Prague's again at OFF. */
#define PRAGUE_CLASSIC_ON  (DCTCP_ONE * 3 / 4)
#define PRAGUE_CLASSIC_OFF (DCTCP_ONE / 4)
/* The slowest pacing rate: 100 kbit/s, in bytes/s. */
#define PRAGUE_MIN_RATE 12500U
/* The MTU the reference's per-packet constants assume. */
#define PRAGUE_MTU_SYS 1500U

/* dctcp_params.mode of Prague: what limits the sending rate. */
enum prague_mode {
	PRAGUE_MODE_WINDOW = 0, /* the fractional window (at least 2 segments) */
	PRAGUE_MODE_RATE = 1,   /* the pacing rate, below 2 segments per RTT if need be */
	PRAGUE_MODE_AUTO = 2,   /* rate at or below mode_switch_mtus of window, else window */
};

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
	u32 rtt_target_us;   /* Prague: the RTT below which growth is scaled as if it were this */
	u32 rtt_scaling;     /* Prague: 1, RTT independence on (after rtt_transition rounds) */
	u32 rtt_transition;  /* Prague: rounds after slow start before RTT independence and the rate mode */
	u32 mode;            /* Prague: enum prague_mode */
	u32 mode_switch_mtus; /* Prague: PRAGUE_MODE_AUTO goes to rate mode at this window, in MTUs */
	u32 pacing;          /* Prague: 1, pace at the window's (or the rate mode's) rate */
	u32 classic_ecn;     /* Prague: 1, detect a classic ECN AQM and respond as Reno there */
	u32 classic_qdelay_us; /* Prague: a marked round's srtt - min_rtt from this on is classic */
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
	u64 reductions;      /* window reductions: .ssthresh calls, on ECE or on loss */
	u64 ssthresh_repairs; /* impossible ssthresh seen and recomputed, see dctcp_core_guard */
	u64 cwnd_repairs;     /* impossible cwnd seen and reset */
	u64 inflight_holds;   /* sending held: in flight far above the reduction's start, see dctcp_core_guard */
	u64 progressive_cuts; /* kdctcp: ssthresh lowered again inside CWR on an ECE */
	u64 cwr_growth;       /* kdctcp: ssthresh raised by one segment inside CWR */
	u64 events;           /* trace events the programs tried to emit */
	u64 events_dropped;   /* of those, lost because the ring was full */
	u64 found_ssthresh;   /* the impossible ssthresh the guard last repaired, as found (0: none) */
	u64 found_cwnd;       /* the impossible cwnd the guard last reset, as found (0: none) */
	u64 ect1_packets;     /* Prague: packets prague_ect1 rewrote from ECT(0) to ECT(1) */
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
	DCTCP_EV_CUT = 8,      /* Prague: the window (or rate) cut on marks, as cut */
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
	u64 pacing_rate;  /* sk->sk_pacing_rate, bytes/s */
	/* Prague only (0 for the others): */
	u64 frac_cwnd;      /* the fractional window, 1/2^PRAGUE_CWND_SHIFT segments */
	u64 upscaled_alpha; /* alpha / g in 1/2^PRAGUE_ALPHA_BITS, as its EWMA keeps it */
	u32 ai_per_ack;     /* increase per acked segment, 1/2^PRAGUE_CWND_SHIFT of 1/cwnd (RTT scaling) */
	u32 srtt8;          /* tp->srtt_us as the kernel keeps it (1/8 us): what the scaling used */
	u8 mode;            /* enum prague_mode in force: window or rate */
	u8 ect;             /* ECN codepoint its data leaves with: 1 (ECT(1) program), 2 (ECT(0)) */
	u8 classic;         /* 1: the classic-ECN fallback in force (Reno's response) */
	u8 _pad2;
	u32 classic_score;  /* its evidence, 1/DCTCP_ONE, after this event's round */
	u32 min_rtt_us;     /* tp->rtt_min: what the queue delay srtt - min_rtt was taken from */
	u32 _pad3;
};

/* dctcp_state.flags */
#define DCTCP_FLAG_LIVE     (1U << 0) /* init ran; release must count down */
#define DCTCP_FLAG_FALLBACK (1U << 1) /* ECN not negotiated: Reno behaviour */
/* ... and Prague's */
#define PRAGUE_FLAG_SAW_CE    (1U << 8)  /* a mark arrived: there is an AQM on the path */
#define PRAGUE_FLAG_IN_LOSS   (1U << 9)  /* reducing for a loss: no growth until Open */
#define PRAGUE_FLAG_RATE_MODE (1U << 10) /* the pacing rate leads, the window follows */
#define PRAGUE_FLAG_ECT1      (1U << 11) /* its data leaves ECT(1) (socket storage set) */
#define PRAGUE_FLAG_CLASSIC   (1U << 12) /* a classic ECN AQM found on the path: Reno's response */

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

/*
 * Prague's per-flow state in icsk_ca_priv: DCTCP's (the receiver's CE echo,
 * the round's counters, loss_cwnd, flags; alpha there in 1/2^20 for the
 * readers every algorithm shares), then what Prague adds. 104 bytes, all of
 * ICSK_CA_PRIV_SIZE.
 */
struct prague_ext {
	u64 frac_cwnd;         /* window, 1/2^PRAGUE_CWND_SHIFT segments */
	u64 rate_bytes;        /* pacing rate, bytes/s */
	u64 upscaled_alpha;    /* alpha / g, 1/2^PRAGUE_ALPHA_BITS */
	u32 ai_per_ack;        /* additive increase per acked segment this round */
	u32 round;             /* rounds since slow start ended */
	u32 alpha_stamp;       /* tcp_mstamp (us, low 32 bits) of the last alpha update */
	u32 cwr_stamp;         /* ... of the last cut */
	u32 prior_delivered_ce; /* tp->delivered_ce at the previous ACK */
	u32 classic_score;     /* evidence of a classic ECN AQM, 1/DCTCP_ONE (classic_ecn) */
};

struct prague_state {
	struct dctcp_state dctcp;
	struct prague_ext prague;
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
	u64 pacing_rate;      /* sk_pacing_rate, bytes/s */
	struct dctcp_state ca; /* raw icsk_ca_priv, meaningful for our algorithms */
	struct prague_ext prague; /* the rest of icsk_ca_priv, meaningful for Prague */
};

#endif /* DCTCP_BPF_INTF_H */
