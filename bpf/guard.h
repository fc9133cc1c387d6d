/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The guard: a workaround for one platform's kernel, not part of DCTCP
 * (README "Known issue", docs/kernels.md). Included by dctcp_core.h, whose
 * window arithmetic it recomputes with.
 */
#ifndef DCTCP_BPF_GUARD_H
#define DCTCP_BPF_GUARD_H

/* No real window comes near this: 16 M segments is 24 GB in flight. */
#define DCTCP_CWND_SANE (1U << 24)
#define TCP_INFINITE_SSTHRESH 0x7fffffffU

/*
 * The cwnd a reduction started from, for recomputing its ssthresh. When the
 * reduction began on an impossible cwnd, prior_cwnd is impossible too (and
 * not writable from BPF): fall back to the cwnd before the last reduction,
 * then to the initial window.
 */
static __always_inline u32 dctcp_core_sane_prior_cwnd(struct sock *sk)
{
	u32 prior = tcp_sk(sk)->prior_cwnd, loss = dctcp_ca(sk)->loss_cwnd;

	if (prior && prior < DCTCP_CWND_SANE)
		return prior;
	return loss && loss < DCTCP_CWND_SANE ? loss : 10;
}

/*
 * Guard against impossible values in the window the kernel keeps for us.
 *
 * On this project's Linux 6.18 machines (x86-64, SRSO "safe RET"
 * mitigation) the kernel occasionally stores as ssthresh a value our
 * .ssthresh program never returned, and did not run for: the low half of a
 * return address inside the SRSO return thunk (0x81104110), or cwnd-sized
 * garbage derived from it. Left alone, that value puts the flow in slow start
 * inside CWR and becomes cwnd when CWR ends: a burst of hundreds of packets.
 *
 * A reduction never raises ssthresh above prior_cwnd (the cwnd when the
 * reduction began) plus what growth in CWR added (kdctcp), so a larger one is
 * recomputed by dctcp_expected_ssthresh(). The guard
 * runs in set_state (right after the kernel stored ssthresh on CWR, Recovery
 * and Loss entry), at CA_EVENT_COMPLETE_CWR (right after the kernel set cwnd
 * = ssthresh, before anything is sent), on every ACK and before every
 * transmission. Each repair is counted in the instance's stats.
 */
/* What the reduction under way should have set: half on loss, cwnd
 * (1 - n alpha) with the flow's last n on marks, plus CWR growth (kdctcp). */
static __always_inline u32 dctcp_expected_ssthresh(struct sock *sk)
{
	u8 state = inet_csk(sk)->icsk_ca_state;
	u32 base = dctcp_core_sane_prior_cwnd(sk);
	struct dctcp_state *ca = dctcp_ca(sk);

	if (state == TCP_CA_Recovery || state == TCP_CA_Loss)
		return max(base >> 1U, 2U);
	return dctcp_reduced(base, ca->alpha, ca->reduction) + ca->grown;
}

/* The most a reduction under way can have set ssthresh to: the window it
 * began from plus CWR growth (kdctcp), or half the window a loss struck at.
 * The second is larger when the loss comes during CWR: tcp_enter_recovery
 * keeps the CWR's prior_cwnd, and PRR may have let cwnd run above it, so
 * the halving in dctcp_react_to_loss is real and must not be "repaired". */
static __always_inline u32 dctcp_max_ssthresh(struct sock *sk)
{
	struct dctcp_state *ca = dctcp_ca(sk);
	u32 bound = tcp_sk(sk)->prior_cwnd + ca->grown;

	if (ca->loss_cwnd < DCTCP_CWND_SANE)
		bound = max(bound, ca->loss_cwnd >> 1U);
	return bound;
}

static __always_inline void dctcp_core_guard(struct sock *sk, struct dctcp_stats *stats)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u8 state = inet_csk(sk)->icsk_ca_state;
	bool reducing = state == TCP_CA_CWR || state == TCP_CA_Recovery || state == TCP_CA_Loss;
	u32 ssthresh = tp->snd_ssthresh;

	/* TCP_INFINITE_SSTHRESH (never reduced, or an undo back to that) is
	 * the one large value that is real. */
	if (ssthresh != TCP_INFINITE_SSTHRESH &&
	    ((reducing && tp->prior_cwnd && ssthresh > dctcp_max_ssthresh(sk)) ||
	     ssthresh >= DCTCP_CWND_SANE)) {
		stats->found_ssthresh = ssthresh;
		tp->snd_ssthresh = ssthresh = dctcp_expected_ssthresh(sk);
		__sync_fetch_and_add(&stats->ssthresh_repairs, 1);
		dctcp_trace_repair(sk, DCTCP_REPAIR_SSTHRESH, stats);
	}
	if (tp->snd_cwnd >= DCTCP_CWND_SANE) {
		stats->found_cwnd = tp->snd_cwnd;
		tp->snd_cwnd = ssthresh < DCTCP_CWND_SANE ? max(ssthresh, 2U) :
							    max(dctcp_expected_ssthresh(sk), 2U);
		__sync_fetch_and_add(&stats->cwnd_repairs, 1);
		dctcp_trace_repair(sk, DCTCP_REPAIR_CWND, stats);
	}
	/* The aftermath of a burst: far more in flight than the window the
	 * reduction started from, which cwnd never allows. PRR would keep
	 * in_flight there (it sends ssthresh / prior_cwnd per packet delivered,
	 * and prior_cwnd is small), holding the queue up for hundreds of RTTs;
	 * send nothing until in_flight is back at ssthresh, as a reduction from
	 * a real window would have. Before a transmission (min_tso_segs) this
	 * stops the next burst; on ACKs it covers the paths where PRR leaves
	 * cwnd alone (checked in min_tso_segs only, 2 of 7 struck runs still
	 * dropped packets). */
	if (reducing && tp->prior_cwnd && tp->prior_cwnd < DCTCP_CWND_SANE) {
		u32 in_flight = tcp_packets_in_flight(tp);
		/* Back-to-back reductions legitimately leave up to about twice
		 * prior_cwnd in flight (the previous window still draining). */
		u32 bound = 2 * tp->prior_cwnd + 2;

		if (in_flight > bound && tp->snd_cwnd > ssthresh && ssthresh < DCTCP_CWND_SANE) {
			tp->snd_cwnd = max(ssthresh, 2U);
			__sync_fetch_and_add(&stats->inflight_holds, 1);
			dctcp_trace_repair(sk, DCTCP_REPAIR_INFLIGHT, stats);
		}
	}
}

/*
 * Fault injection, so the guard can be watched on any kernel: each flow's
 * first p->inject_ssthresh reductions return what the 6.18 issue stores.
 * A test hook, not a feature: fault_injection lives in a read-only section
 * of its own that the loader sets only when an attach asks for injection,
 * so for every other instance the verifier sees it false and removes the
 * hook from the .ssthresh program before it ever runs.
 */
const volatile bool fault_injection SEC(".rodata.test_hooks") = false;

static __always_inline bool dctcp_inject_ssthresh(struct sock *sk, const struct dctcp_params *p)
{
	struct dctcp_state *ca = dctcp_ca(sk);

	if (!fault_injection || ca->injected >= p->inject_ssthresh)
		return false;
	ca->injected++;
	return true;
}

#endif /* DCTCP_BPF_GUARD_H */
