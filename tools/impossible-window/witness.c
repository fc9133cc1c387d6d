// SPDX-License-Identifier: GPL-2.0
/*
 * Registers control.bpf.c (built with -DWITNESS) as "ctl_dctcp", attaches its
 * witness, and on SIGINT or SIGTERM prints what the witness counted and each
 * episode's first impossible window, then unregisters. Used by ./run.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <linux/types.h>
#include "control.skel.h"
#include "witness.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *hook(__u32 h)
{
	return h == 1 ? "tcp_probe" : h == 2 ? "cong_state_set" : "?";
}

int main(void)
{
	struct control *c = control__open_and_load();
	struct bpf_link *ops, *probe, *state;

	if (!c) {
		fprintf(stderr, "witness: loading control.bpf.o failed\n");
		return 1;
	}
	ops = bpf_map__attach_struct_ops(c->maps.ctl_dctcp);
	probe = bpf_program__attach(c->progs.on_probe);
	state = bpf_program__attach(c->progs.on_state);
	if (!ops || !probe || !state) {
		fprintf(stderr, "witness: attaching failed (is ctl_dctcp registered already?)\n");
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "witness: ctl_dctcp registered, watching every TCP socket\n");
	while (!stop)
		pause();

	printf("ssthresh returns %llu, CWR and Recovery entries %llu, observations %llu, episodes %llu\n",
	       (unsigned long long)c->bss->ssthresh_calls, (unsigned long long)c->bss->reductions,
	       (unsigned long long)c->bss->observations,
	       (unsigned long long)c->bss->episodes);
	for (__u32 i = 0; i < c->bss->next_sighting && i < 1024; i++) {
		struct sighting s;

		if (bpf_map__lookup_elem(c->maps.sightings, &i, sizeof(i), &s, sizeof(s), 0))
			break;
		printf("episode: socket %llx, last sane at %s on cpu %u (ssthresh %u, cwnd %u); "
		       "%lld us later at %s on cpu %u: ssthresh %u (0x%x), cwnd %u; "
		       ".ssthresh last returned %u, %lld us before that\n",
		       (unsigned long long)s.sk, hook(s.before.hook), s.before.cpu, s.before.ssthresh,
		       s.before.cwnd, (long long)(s.now.ts_ns - s.before.ts_ns) / 1000, hook(s.now.hook),
		       s.now.cpu, s.now.ssthresh, s.now.ssthresh, s.now.cwnd, s.ret.value,
		       s.ret.ts_ns ? (long long)(s.now.ts_ns - s.ret.ts_ns) / 1000 : -1LL);
		/* Where the value would point if it were the low half of an
		 * address in the kernel stack of the task running then. */
		printf("  tasks: before %s[%u] stack %llx, at it %s[%u] stack %llx; "
		       "value - low half of that stack: before %+lld, at it %+lld\n",
		       s.before.comm, s.before.pid, (unsigned long long)s.before.stack, s.now.comm,
		       s.now.pid, (unsigned long long)s.now.stack,
		       (long long)s.now.ssthresh - (long long)(__u32)s.before.stack,
		       (long long)s.now.ssthresh - (long long)(__u32)s.now.stack);
	}
	bpf_link__destroy(state);
	bpf_link__destroy(probe);
	bpf_link__destroy(ops);
	control__destroy(c);
	return 0;
}
