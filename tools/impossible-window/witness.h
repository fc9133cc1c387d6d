/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The witness's records, shared by control.bpf.c (which writes them) and
 * witness.c (which prints them).
 */
#ifndef IMPOSSIBLE_WINDOW_WITNESS_H
#define IMPOSSIBLE_WINDOW_WITNESS_H

/* What .ssthresh last returned for a socket. */
struct returned {
	__u64 ts_ns;
	__u32 value, cpu;
};

/* What a witness hook last saw of a socket (hook 1: tcp_probe, 2:
 * tcp_cong_state_set, with the new state). */
struct seen {
	__u64 ts_ns;
	__u32 ssthresh, cwnd, hook, cpu, state, pid;
	/* The running task's kernel stack (task_struct.stack), so that a
	 * value found can be told apart as an address in that stack. */
	__u64 stack;
	char comm[16];
};

/* The first impossible window of an episode: what was seen of the socket
 * before it, at it, and what .ssthresh last returned. */
struct sighting {
	__u64 sk;
	struct seen before, now;
	struct returned ret;
};

#endif
