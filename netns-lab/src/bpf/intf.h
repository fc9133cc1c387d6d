/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The struct the lab's call timer (calltime.bpf.c) shares with Rust.
 * The BPF side includes this after vmlinux.h; Rust reaches it through
 * bindgen (netns-lab/build.rs), so nothing here is mirrored by hand.
 */
#ifndef NETNS_LAB_INTF_H
#define NETNS_LAB_INTF_H

#include "intf_types.h"

/* `lab bench`: one function's time per call, as a clock read on entry and
 * one on return take it (netns-lab/src/bpf/calltime.bpf.c), per CPU. */
struct call_time {
	u64 entered_ns; /* this CPU's call in progress, 0 when none */
	u64 ns;         /* summed over completed calls */
	u64 calls;
};

#endif /* NETNS_LAB_INTF_H */
