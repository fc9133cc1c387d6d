/* SPDX-License-Identifier: GPL-2.0 */
/*
 * DualPI2, RFC 9332's coupled dual-queue AQM: the PI2 controller, the
 * coupling between the queues and the classifier, for every front end of
 * the switch (the tcx marker over two htb leaves in switch.bpf.c; a BPF
 * qdisc on kernels that have one). Follows net/sched/sch_dualpi2.c, whose
 * names it keeps. Each function is a pure function of its arguments, the
 * random draws included, so that tc-qdisc's Rust model replays every
 * traced decision and update exactly.
 *
 * p' is the base probability the PI2 controller steers so that the queue
 * delay sits at the target. A classic (C) packet is dropped, or marked if
 * ECN-capable, with p'^2: what a Reno-like flow's rate, which goes as
 * 1/sqrt(p), needs to match a scalable flow's, which goes as 1/p, under
 * p_L = k p'. A scalable (L) packet is marked with k p', or by the step
 * when its own queue is already deep; when k p' passes 1 the link is
 * overloaded and L packets meet the classic drop too.
 */
#ifndef TC_QDISC_DUALPI2_H
#define TC_QDISC_DUALPI2_H

/* sch_dualpi2's alpha and beta are per ns of delay in units of 2^-6 of
 * DUALPI2_PROB_ONE: the product is scaled down by this. */
#define DUALPI2_GAIN_SHIFT 6

/*
 * One controller step: p' moves by alpha times the delay's error against
 * the target (integral) plus beta times its change since the last step
 * (proportional), and stays within [0, 1]. Without drop_overload p' is
 * capped where k p' reaches 1.
 */
static __always_inline u32 dualpi2_calculate_probability(const volatile struct dualpi2_config *c,
							 u32 prob, u64 qdelay, u64 last_qdelay)
{
	s64 delta = ((s64)qdelay - (s64)c->target_ns) * (s64)c->alpha +
		    ((s64)qdelay - (s64)last_qdelay) * (s64)c->beta;
	u32 new_prob;

	if (delta > 0) {
		new_prob = (u32)(((u64)delta >> DUALPI2_GAIN_SHIFT) + prob);
		if (new_prob < prob)
			new_prob = DUALPI2_PROB_ONE;
	} else {
		new_prob = prob - (u32)((u64)(-delta) >> DUALPI2_GAIN_SHIFT);
		if (new_prob > prob)
			new_prob = 0;
	}
	if (!c->drop_overload && c->coupling && new_prob > DUALPI2_PROB_ONE / c->coupling)
		return DUALPI2_PROB_ONE / c->coupling;
	return new_prob;
}

/* The queue a packet joins: L when its ECN field meets the mask (by
 * default ECT(1), and CE, which an L packet may carry already). */
static __always_inline u8 dualpi2_classify(const volatile struct dualpi2_config *c, u8 ecn)
{
	return (ecn & c->ecn_mask) ? DUALPI2_L : DUALPI2_C;
}

/* A draw under p, as sch_dualpi2 rolls it. */
static __always_inline bool dualpi2_roll(u32 roll, u64 prob)
{
	return roll <= prob;
}

/* Hit with p'^2: two draws, each under p'. */
static __always_inline bool dualpi2_classic_hit(u32 prob, u32 roll1, u32 roll2)
{
	return dualpi2_roll(roll1, prob) && dualpi2_roll(roll2, prob);
}

/* What to do with a hit packet: mark it if it can carry CE, else drop. */
static __always_inline u8 dualpi2_hit(bool ect)
{
	return ect ? QA_MARK : QA_DROP;
}

/*
 * The decision on one arrival (enum queue_action), before it joins
 * `queue`. backlog is both queues' bytes, l_qlen the L queue's packets and
 * l_wait how long this packet will wait in L, as the front end knows it (a
 * tcx marker estimates it from the L backlog and the link's rate; a qdisc
 * can read its head's sojourn); *step is set when the L step, not the
 * probability, marked it. Nothing is hit while the whole backlog is under
 * min_backlog (2 MTU).
 */
static __always_inline u8 dualpi2_decide(const volatile struct dualpi2_config *c, u8 queue,
					 bool ect, u32 prob, u32 backlog, u64 l_wait,
					 u32 l_qlen, u32 roll1, u32 roll2, u32 roll_l, u8 *step)
{
	u64 l_prob = (u64)prob * c->coupling;
	bool deep;

	*step = 0;
	if (queue == DUALPI2_C)
		return backlog >= c->min_backlog && dualpi2_classic_hit(prob, roll1, roll2) ?
			       dualpi2_hit(ect) : QA_PASS;
	if (backlog >= c->min_backlog) {
		/* Overload: k p' > 1, every L packet is marked, and with
		 * drop_overload the classic drop thins them as it does C. */
		if (l_prob > DUALPI2_PROB_ONE)
			return c->drop_overload && dualpi2_classic_hit(prob, roll1, roll2) ?
				       QA_DROP : dualpi2_hit(ect);
		if (dualpi2_roll(roll_l, l_prob))
			return dualpi2_hit(ect);
	}
	/* The step: this packet will wait l_wait (or behind l_qlen packets). */
	deep = c->step_pkts ? l_qlen >= c->step_pkts : l_wait >= c->step_ns;
	if (deep && l_qlen >= c->min_qlen_step) {
		*step = 1;
		return dualpi2_hit(ect);
	}
	return QA_PASS;
}

#endif /* TC_QDISC_DUALPI2_H */
