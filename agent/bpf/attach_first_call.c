/*
 * attach_first_call.c - the calls of a communicator decided by the attach
 * numbered alike on every rank (fss_rec_comm.first_call,
 * attach_first_call.h): each member's calls in order are lined up against
 * those of its instance's first member.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/bpf/attach_first_call.h"
#include "agent/bpf/attach_records_state.h"

/*
 * How far x's calls are from y's: the d for which x[j] is y[j + d] for the
 * most j (as a share of the calls both hold, at least half of the shorter
 * list), the smallest |d| of equals. The ranks of one communicator make
 * the same calls in the same order; the attach only came in at a different
 * call on each, and near one another (a collective holds its ranks
 * together), so the nearest best shift is the true one even where a step
 * repeats itself (per-Linear units: the same 8 sizes, layer after layer).
 */
static uint64_t ns_apart(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

static int64_t order_shift(const uint64_t *x, const uint64_t *xt, size_t nx, const uint64_t *y, const uint64_t *yt,
			   size_t ny)
{
	size_t shorter = nx < ny ? nx : ny, need = shorter / 2 ? shorter / 2 : 1;
	int64_t best_d = 0;
	uint64_t best_m = 0, best_o = 1, best_apart = UINT64_MAX;

	for (int64_t d = -(int64_t)nx + 1; d < (int64_t)ny; d++) {
		uint64_t m = 0, o = 0, apart = 0;

		for (size_t j = 0; j < nx; j++) {
			int64_t k = (int64_t)j + d;

			if (k < 0)
				continue;
			if (k >= (int64_t)ny)
				break;
			o++;
			m += x[j] == y[k];
			if (xt && yt)
				apart += ns_apart(xt[j], yt[k]) / 1024; /* us-ish: a sum of 256 never overflows */
		}
		if (o < need)
			continue;
		apart /= o;
		/* m / o > best_m / best_o; or equal (a step that repeats itself matches at
		 * several shifts), and the calls paired lie closer in time (one collective
		 * is entered at about the same time on every rank), then nearer */
		if (m * best_o > best_m * o ||
		    (m * best_o == best_m * o &&
		     (apart < best_apart ||
		      (apart == best_apart && (d < 0 ? -d : d) < (best_d < 0 ? -best_d : best_d))))) {
			best_d = d;
			best_m = m;
			best_o = o;
			best_apart = apart;
		}
	}
	return best_d;
}

/* first_call of the communicators this decision gives class c: numbered
 * against the instance's first member, so that one call has one number on
 * every rank (flight's and the analysis's per-communicator call numbers). */
int attach_first_call_number(attach_records_t *a, struct cls *c)
{
	for (uint32_t i = 0; i < c->ninstances; i++) {
		struct comm *ref = NULL;
		int64_t lo = 0;

		if (!c->inst_order[i]) {
			/* the instance's first decision: its reference is its first member now */
			for (size_t j = 0; j < c->nmembers && !ref; j++) {
				struct comm *m = &a->procs[c->members[j].proc].comms[c->members[j].comm];

				if (m->state == COMM_OBSERVED && m->instance == i && m->norder)
					ref = m;
			}
			if (!ref)
				continue;
			for (size_t j = 0; j < c->nmembers; j++) {
				struct comm *m = &a->procs[c->members[j].proc].comms[c->members[j].comm];
				int64_t d;

				if (m->state != COMM_OBSERVED || m->instance != i)
					continue;
				d = m == ref ? 0
					     : order_shift(m->order, m->order_ns, m->norder, ref->order, ref->order_ns,
							   ref->norder);
				m->rec.first_call = (uint64_t)d; /* relative for now: signed, read back below */
				if (d < lo)
					lo = d;
			}
			for (size_t j = 0; j < c->nmembers; j++) {
				struct comm *m = &a->procs[c->members[j].proc].comms[c->members[j].comm];

				if (m->state == COMM_OBSERVED && m->instance == i)
					m->rec.first_call = (uint64_t)((int64_t)m->rec.first_call - lo + 1);
			}
			c->inst_order[i] = malloc(2 * ref->norder * sizeof(uint64_t));
			if (!c->inst_order[i])
				return -ENOMEM;
			memcpy(c->inst_order[i], ref->order, ref->norder * sizeof(uint64_t));
			memcpy(c->inst_order[i] + ref->norder, ref->order_ns, ref->norder * sizeof(uint64_t));
			c->inst_norder[i] = ref->norder;
			c->inst_first[i] = ref->rec.first_call;
			continue;
		}
		/* a member that joins a numbered instance: numbered against its reference;
		 * one that came in earlier than the reference cannot be (the numbers out
		 * already start at 1): from 1 */
		for (size_t j = 0; j < c->nmembers; j++) {
			struct comm *m = &a->procs[c->members[j].proc].comms[c->members[j].comm];
			int64_t n;

			if (m->state != COMM_OBSERVED || m->instance != i)
				continue;
			n = (int64_t)c->inst_first[i] +
			    (m->norder ? order_shift(m->order, m->order_ns, m->norder, c->inst_order[i],
						     c->inst_order[i] + c->inst_norder[i], c->inst_norder[i])
				       : 0);
			m->rec.first_call = n >= 1 ? (uint64_t)n : 1;
		}
	}
	return 0;
}
