// SPDX-License-Identifier: GPL-2.0
/*
 * A function's time per call, taken as kernel.bpf_stats_enabled takes a BPF
 * program's: one clock read as it is entered, one as it returns. The pair
 * attaches to a kernel function (the kernel's tcp_dctcp) or to a BPF program
 * (bpf_dctcp's struct_ops programs) alike, so `lab bench` times both by one
 * method, with the same overhead in each figure. The target is set before
 * loading: one object per function.
 *
 * A call that a softirq interrupts on the same CPU with a call of its own
 * loses its entry time and is not counted (entered_ns is per CPU, one deep).
 */
#include "vmlinux/vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "intf.h"

char _license[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct call_time);
} times SEC(".maps");

SEC("fentry")
int BPF_PROG(call_enter)
{
	u32 zero = 0;
	struct call_time *t = bpf_map_lookup_elem(&times, &zero);

	/* The clock last: what comes after it is the call. */
	if (t)
		t->entered_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("fexit")
int BPF_PROG(call_leave)
{
	/* The clock first: what came before it was the call. */
	u64 now = bpf_ktime_get_ns();
	u32 zero = 0;
	struct call_time *t = bpf_map_lookup_elem(&times, &zero);

	if (t && t->entered_ns) {
		t->ns += now - t->entered_ns;
		t->calls++;
		t->entered_ns = 0;
	}
	return 0;
}
