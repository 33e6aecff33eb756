/*
 * flight_hang.c - which ranks wait in a collective that others have not
 * entered, for longer than the timeout (flight_hang.h).
 */
#include "collector/flight_hang.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* How one rank waits on one communicator. */
struct fl_wait {
	uint64_t n;	  /* comm_seq it waits in, 0: it does not */
	uint64_t waited;  /* ns, to now, or to its end */
	uint8_t evidence; /* enum analysis_wait_evidence */
	uint8_t ended;	  /* its process ended */
	uint8_t end;	  /* enum analysis_wait_end of the wait in n */
	uint8_t reserved;
	int32_t result;	 /* end ANALYSIS_WAIT_GAVE_UP: the call's ncclResult_t */
	uint64_t end_rt; /* end not ANALYSIS_WAIT_ON: when the wait ended (CLOCK_REALTIME) */
	const struct fl_source *fs;
	const struct fl_rank_comm *rc;
};

/* Call n, or when the ring has moved past it, the oldest call it keeps
 * after n (its enter is later than n's: a wait measured from it is short,
 * never long). NULL when none. */
static const struct fl_call *call_from(const struct fl_rank_comm *rc, uint64_t n)
{
	const struct fl_call *best = fl_call_at(rc, n);

	if (best)
		return best;
	for (unsigned i = 0; i < FL_CALL_RING; i++) {
		const struct fl_call *c = &rc->calls[i];

		if (c->comm_seq > n && (!best || c->comm_seq < best->comm_seq))
			best = c;
	}
	return best;
}

static uint64_t waited_since(const struct fl_source *fs, uint64_t start_mono, uint64_t now)
{
	uint64_t start = fl_to_rt(fs, start_mono);
	uint64_t until = fs->ended && fs->end_ns ? fl_to_rt(fs, fs->end_ns) : now;

	if (!fs->ended && fs->stopped_rt && fs->stopped_rt < until)
		until = fs->stopped_rt;

	return start && until > start ? until - start : 0;
}

/* How fs waits on rc as of now: the lowest comm_seq it waits in. A call
 * that returned an NCCL error after waiting longer than the timeout is a
 * wait too, ended there (end ANALYSIS_WAIT_GAVE_UP): NCCL's or the job's
 * own timeout gave up on it, which is how a hung job usually ends, so the
 * trace still shows the hang. */
static void rank_wait(const struct fl_source *fs, const struct fl_rank_comm *rc, uint64_t timeout, uint64_t now,
		      struct fl_wait *w)
{
	const struct fl_call *c;
	uint64_t start = 0;

	memset(w, 0, sizeof(*w));
	w->fs = fs;
	w->rc = rc;
	w->ended = (uint8_t)(fs->ended || fs->stopped_rt);
	/* host: entered, not returned */
	if (rc->entered > rc->left && (c = call_from(rc, rc->left + 1))) {
		w->n = rc->left + 1;
		w->evidence = ANALYSIS_WAIT_HOST;
		start = c->enter_ns;
	}
	/* GPU: returned at enqueue, its kernel not reported while CUPTI reported
	 * activity after its launch (and no kernel it could not tie since) */
	if (fs->cupti_tied) {
		uint64_t p = rc->gpu_done + 1;

		while (p <= rc->left && (c = fl_call_at(rc, p)) && c->no_kernel)
			p++;
		c = p <= rc->left ? call_from(rc, p) : NULL;
		if (c && (!w->n || p < w->n) && fs->gpu_latest_end > c->enter_ns && fs->untied_start < c->enter_ns) {
			w->n = p;
			w->evidence = ANALYSIS_WAIT_GPU;
			start = c->enter_ns;
		}
	}
	/* a synchronize entered after it, not returned, not known complete */
	if (fs->nsyncs && rc->sync_n && rc->sync_n <= rc->left && (!w->n || rc->sync_n < w->n) &&
	    !(fs->cupti_tied && rc->gpu_done >= rc->sync_n)) {
		uint64_t oldest = fs->syncs[0].enter_ns;

		for (uint32_t i = 1; i < fs->nsyncs; i++)
			if (fs->syncs[i].enter_ns < oldest)
				oldest = fs->syncs[i].enter_ns;
		w->n = rc->sync_n;
		w->evidence = ANALYSIS_WAIT_SYNC;
		start = oldest;
	}
	if (w->n) {
		w->waited = waited_since(fs, start, now);
		w->end = w->ended ? ANALYSIS_WAIT_DIED : ANALYSIS_WAIT_ON;
		w->end_rt = w->ended ? fl_to_rt(fs, start) + w->waited : 0;
	}
	/* the call that failed after the longest wait, as the others: the
	 * lowest N wins (after it the communicator stays failed, and the calls
	 * that fail at once wait for nothing) */
	if (rc->failed && (!w->n || rc->failed < w->n) && rc->failed_exit_ns - rc->failed_enter_ns > timeout) {
		w->n = rc->failed;
		w->evidence = ANALYSIS_WAIT_HOST; /* it blocked in the call until the error */
		w->waited = rc->failed_exit_ns - rc->failed_enter_ns;
		w->end = ANALYSIS_WAIT_GAVE_UP;
		w->result = rc->failed_result;
		w->end_rt = fl_to_rt(fs, rc->failed_exit_ns);
	}
}

/* w is a wait of the hang: still waiting, or one that ended (an error, its
 * process's end) after waiting past the timeout; a rank that ended sooner
 * (a crash inside the call) is not waiting for anyone. */
static int wait_counts(const struct fl_wait *w, uint64_t timeout)
{
	return w->n && (w->end == ANALYSIS_WAIT_ON || w->waited > timeout);
}

static void flight_rank_fill(struct analysis_flight_rank *r, const struct fl_wait *w)
{
	memset(r, 0, sizeof(*r));
	r->rank = w->rc->rank;
	r->global_rank = w->fs->src->rank;
	r->source = w->fs->id;
	r->pid = w->fs->src->pid;
}

static int wait_n_cmp(const void *a, const void *b)
{
	const struct fl_wait *x = a, *y = b;

	if (x->n != y->n)
		return (x->n > y->n) - (x->n < y->n);
	return (x->rc->rank > y->rc->rank) - (x->rc->rank < y->rc->rank);
}

static int flight_rank_cmp(const void *a, const void *b)
{
	const struct analysis_flight_rank *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* r: rank w inside collective N (a waiting rank, or one that died in it). */
static void inside_rank_fill(struct analysis_flight_rank *r, const struct fl_wait *w, uint64_t N)
{
	const struct fl_call *call = fl_call_at(w->rc, N);

	flight_rank_fill(r, w);
	r->since_ns = w->waited;
	r->last_seq = N;
	r->last_op = call ? call->op : 0;
	r->evidence = w->evidence;
	r->end = w->end;
	r->result = w->result;
}

/* The members' waits in one collective N: w[i..j) of the sorted waits. */
struct fl_group {
	size_t i, j;
	uint64_t n;	  /* N */
	uint64_t longest; /* the longest wait in it */
	uint64_t over_rt; /* the earliest end of a wait in it that ended past the timeout (an error, a death),
			     0 none: from then on it cannot complete */
};

/* 0: w is in N or entered it in time; 1: it has not entered N; 2: it
 * entered N only once a wait in it had ended (g->over_rt): too late, the
 * collective could not run any more. */
static int misses(const struct fl_wait *w, const struct fl_group *g)
{
	const struct fl_call *call;

	if (w->n == g->n)
		return 0;
	if (w->rc->entered < g->n)
		return 1;
	call = g->over_rt ? fl_call_at(w->rc, g->n) : NULL;
	return call && fl_to_rt(w->fs, call->enter_ns) >= g->over_rt ? 2 : 0;
}

/* Hang h of communicator c at collective g->n; w[0..n) are every member's
 * waits. */
static void hang_fill(const struct fl_comm *c, const struct fl_wait *w, size_t n, const struct fl_group *g,
		      uint64_t timeout, uint64_t now, struct analysis_hang *h)
{
	size_t i = g->i, j = g->j;
	uint64_t N = g->n, longest = g->longest;

	memset(h, 0, sizeof(*h));
	h->comm_id = c->id_hash;
	h->comm_seq = N;
	h->nranks = c->nranks;
	h->waited_ns = longest;
	/* ended once every waiting rank's wait did: gave up when one of them did */
	h->ended = ANALYSIS_WAIT_DIED;
	for (size_t k = i; k < j; k++) {
		const struct fl_call *call;

		if (!wait_counts(&w[k], timeout)) {
			/* its process ended inside it soon (a crash: end DIED, a gave-up
			 * wait is past the timeout): what the others wait for */
			if (h->ndied < ANALYSIS_FLIGHT_RANKS_MAX)
				inside_rank_fill(&h->died[h->ndied], &w[k], N);
			h->ndied++;
			continue;
		}
		if (w[k].end == ANALYSIS_WAIT_ON)
			h->ended = ANALYSIS_WAIT_ON;
		else if (h->ended && w[k].end == ANALYSIS_WAIT_GAVE_UP)
			h->ended = ANALYSIS_WAIT_GAVE_UP;
		if (!h->op && (call = fl_call_at(w[k].rc, N))) {
			h->op = call->op;
			h->dtype = call->dtype;
			h->count = call->count;
		}
		if (h->nwaiting < ANALYSIS_FLIGHT_RANKS_MAX)
			inside_rank_fill(&h->waiting[h->nwaiting], &w[k], N);
		h->nwaiting++;
	}
	for (size_t k = 0; k < n; k++) {
		const struct fl_rank_comm *rc = w[k].rc;
		int miss = misses(&w[k], g);

		if (!miss)
			continue;
		if (h->nmissing < ANALYSIS_FLIGHT_RANKS_MAX) {
			struct analysis_flight_rank *r = &h->missing[h->nmissing];
			uint64_t done = fl_to_rt(w[k].fs, rc->done_exit_ns);
			const struct fl_call *before = fl_call_at(rc, N - 1);

			flight_rank_fill(r, &w[k]);
			if (miss == 2) {
				/* late: what it had done before it came */
				r->late = 1;
				r->last_seq = N - 1;
				r->last_op = before ? before->op : 0;
			} else {
				r->last_seq = rc->left;
				r->last_op = rc->left ? rc->done_op : 0;
				r->since_ns = rc->left && done && now > done ? now - done : 0;
			}
		}
		h->nmissing++;
	}
	qsort(h->waiting, h->nwaiting < ANALYSIS_FLIGHT_RANKS_MAX ? h->nwaiting : ANALYSIS_FLIGHT_RANKS_MAX,
	      sizeof(h->waiting[0]), flight_rank_cmp);
	qsort(h->missing, h->nmissing < ANALYSIS_FLIGHT_RANKS_MAX ? h->nmissing : ANALYSIS_FLIGHT_RANKS_MAX,
	      sizeof(h->missing[0]), flight_rank_cmp);
	qsort(h->died, h->ndied < ANALYSIS_FLIGHT_RANKS_MAX ? h->ndied : ANALYSIS_FLIGHT_RANKS_MAX, sizeof(h->died[0]),
	      flight_rank_cmp);
}

/* The hang of communicator c, if one: the lowest comm_seq some rank waits
 * in for longer than the timeout while others have not entered it (or every
 * rank waits in it, or ended inside it). w[0..n) are its members' waits. */
static int comm_hang(const struct fl_comm *c, struct fl_wait *w, size_t n, uint64_t timeout, uint64_t now,
		     struct analysis_hang *h)
{
	qsort(w, n, sizeof(*w), wait_n_cmp);
	for (size_t i = 0; i < n;) {
		struct fl_group g = {.i = i, .j = i, .n = w[i].n};
		size_t nwait = 0, nmiss = 0, nended = 0;

		if (!g.n) {
			i++;
			continue;
		}
		for (; g.j < n && w[g.j].n == g.n; g.j++)
			if (w[g.j].waited > g.longest)
				g.longest = w[g.j].waited;
		for (size_t k = i; k < g.j; k++) {
			if (!wait_counts(&w[k], timeout)) {
				nended++;
				continue;
			}
			nwait++;
			if (w[k].end != ANALYSIS_WAIT_ON && (!g.over_rt || w[k].end_rt < g.over_rt))
				g.over_rt = w[k].end_rt;
		}
		for (size_t k = 0; k < n; k++)
			nmiss += misses(&w[k], &g) != 0;
		if (g.longest > timeout && nwait && (nmiss || nwait + nended == n)) {
			hang_fill(c, w, n, &g, timeout, now, h);
			return 1;
		}
		i = g.j;
	}
	return 0;
}

static void hang_keep(struct analysis_flight *out, const struct analysis_hang *h)
{
	uint32_t at = out->nhangs;

	out->hangs_total++;
	while (at > 0 && out->hangs[at - 1].waited_ns < h->waited_ns)
		at--;
	if (at >= ANALYSIS_HANGS_MAX)
		return;
	uint32_t n = out->nhangs < ANALYSIS_HANGS_MAX ? out->nhangs : ANALYSIS_HANGS_MAX - 1;

	memmove(&out->hangs[at + 1], &out->hangs[at], (n - at) * sizeof(*h));
	out->hangs[at] = *h;
	if (out->nhangs < ANALYSIS_HANGS_MAX)
		out->nhangs++;
}

/* How source fs is itself waiting in a collective of a communicator other
 * than comm_id, 0 when it is not: a rank blocked there cannot enter the
 * hang's collective, so it is not what that hang waits for. */
static uint8_t waits_elsewhere(const struct fl_source *fs, uint64_t comm_id, uint64_t timeout, uint64_t now)
{
	for (size_t i = 0; i < fs->nrcs; i++) {
		struct fl_wait w;

		if (fs->rcs[i].id_hash == comm_id)
			continue;
		rank_wait(fs, &fs->rcs[i], timeout, now, &w);
		/* as comm_hang counts waits: a rank whose wait there ended past the
		 * timeout (an error, its end) was blocked there as far as the trace tells */
		if (wait_counts(&w, timeout))
			return w.evidence;
	}
	return 0;
}

/* Mark the hangs whose missing ranks all wait in other collectives (the
 * cascade of a hang elsewhere: in an HSDP job a shard group's hang leaves
 * the replicate groups' ranks waiting for ranks that are themselves stuck),
 * and list the hangs that have a free missing rank first. */
void flight_hangs_order(const flight_t *f, struct analysis_flight *out)
{
	for (uint32_t i = 0; i < out->nhangs; i++) {
		struct analysis_hang *h = &out->hangs[i];
		uint32_t listed = h->nmissing < ANALYSIS_FLIGHT_RANKS_MAX ? h->nmissing : ANALYSIS_FLIGHT_RANKS_MAX;
		uint32_t blocked = 0;

		for (uint32_t k = 0; k < listed; k++) {
			struct analysis_flight_rank *r = &h->missing[k];

			r->evidence = 0;
			for (size_t j = 0; j < f->nsrcs; j++)
				if (f->srcs[j]->id == r->source)
					r->evidence = waits_elsewhere(f->srcs[j], h->comm_id, out->timeout_ns,
								      out->now_realtime_ns);
			blocked += r->evidence ? 1u : 0u;
		}
		h->cascade = listed && blocked == listed && listed == h->nmissing;
	}
	/* insertion sort: cause first, then the longest wait (at most ANALYSIS_HANGS_MAX) */
	for (uint32_t i = 1; i < out->nhangs; i++) {
		struct analysis_hang t = out->hangs[i];
		uint32_t j = i;

		while (j > 0 &&
		       (out->hangs[j - 1].cascade > t.cascade ||
			(out->hangs[j - 1].cascade == t.cascade && out->hangs[j - 1].waited_ns < t.waited_ns))) {
			out->hangs[j] = out->hangs[j - 1];
			j--;
		}
		out->hangs[j] = t;
	}
}

int flight_comm_hangs(const flight_t *f, const struct fl_comm *c, struct flight_waits *ws, struct analysis_flight *out)
{
	struct analysis_hang h;
	struct fl_wait *w;
	uint64_t counted = 0;

	if (c->nranks <= 1 || c->nmembers == 0)
		return 0;
	if (c->nmembers > ws->cap) {
		struct fl_wait *v = realloc(ws->v, c->nmembers * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ws->v = v;
		ws->cap = c->nmembers;
	}
	w = ws->v;
	for (size_t k = 0; k < c->nmembers; k++) {
		const struct fl_source *fs = f->srcs[c->members[k].source];

		rank_wait(fs, &fs->rcs[c->members[k].rc], out->timeout_ns, out->now_realtime_ns, &w[k]);
	}
	/* collectives some rank is inside: distinct numbers waited in */
	qsort(w, c->nmembers, sizeof(*w), wait_n_cmp);
	for (size_t k = 0; k < c->nmembers; k++)
		if (w[k].n && w[k].end == ANALYSIS_WAIT_ON && w[k].n != counted) {
			counted = w[k].n;
			out->in_flight++;
		}
	if (comm_hang(c, w, c->nmembers, out->timeout_ns, out->now_realtime_ns, &h))
		hang_keep(out, &h);
	return 0;
}
