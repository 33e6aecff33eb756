/*
 * comm_roles.c - communicator roles from their traffic (see comm_roles.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collector/comm_roles.h"
#include "collector/median.h"
#include "common/record.h"

/* AllReduces of at most this many elements are scalars (loss, norm). */
#define ROLES_SCALAR_ELEMENTS 16u

/* What one communicator carried in the window. */
struct comm_stat {
	uint32_t ops[FSS_OP_MAX];
	uint32_t events;
	uint32_t run, max_run;	    /* AllGathers since this communicator's last ReduceScatter */
	uint32_t scalar_allreduces; /* AllReduces of at most ROLES_SCALAR_ELEMENTS */
	size_t first, last;	    /* window positions of its first and last event */
	uint64_t *ag_elements;	    /* gathered elements of each AllGather event */
	uint64_t *rs_counts;	    /* per-rank count of each ReduceScatter (what it leaves on a rank) */
	uint64_t *ar_counts;
	uint32_t nag, nrs, nar;
};

/* Is v in the sorted set s[0..n)? */
static int in_set(const uint64_t *s, uint32_t n, uint64_t v)
{
	return n && bsearch(&v, s, n, sizeof *s, median_u64_cmp) != NULL;
}

/* Sort and drop repeats; returns the new length. */
static uint32_t set_of(uint64_t *v, uint32_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof *v, median_u64_cmp);
	uint32_t k = 1;
	for (uint32_t i = 1; i < n; i++)
		if (v[i] != v[k - 1])
			v[k++] = v[i];
	return k;
}

int comm_roles_in_steps(uint8_t role)
{
	return role != ANALYSIS_ROLE_TENSOR_PARALLEL && role != ANALYSIS_ROLE_PIPELINE && role != ANALYSIS_ROLE_EXPERT;
}

/* Does --fsdp-comm name this communicator? A name exactly, or the start of
 * its id or dimension in hex (at least 4 digits, an optional 0x). */
static int override_matches(const char *o, const struct tl_comm *c, const char *name)
{
	if (name[0] && strcmp(o, name) == 0)
		return 1;
	if (strncasecmp(o, "0x", 2) == 0)
		o += 2;
	size_t len = strlen(o);
	if (len < 4 || len > 16 || strspn(o, "0123456789abcdefABCDEF") != len)
		return 0;
	char id[17], dim[17];
	snprintf(id, sizeof id, "%016" PRIx64, c->id_hash);
	snprintf(dim, sizeof dim, "%016" PRIx64, c->dimension);
	return strncasecmp(o, id, len) == 0 || strncasecmp(o, dim, len) == 0;
}

static int gather_stats(const struct tl_event *ev, size_t n, size_t ncomms, struct comm_stat *st)
{
	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = &ev[i];
		if (e->comm_slot >= ncomms)
			continue;
		struct comm_stat *s = &st[e->comm_slot];
		if (s->events++ == 0)
			s->first = i;
		s->last = i;
		if (e->op < FSS_OP_MAX)
			s->ops[e->op]++;
		if (e->op == FSS_OP_ALLGATHER) {
			if (++s->run > s->max_run)
				s->max_run = s->run;
			s->ag_elements[s->nag++] = e->elements;
		} else if (e->op == FSS_OP_REDUCESCATTER) {
			s->run = 0;
			s->rs_counts[s->nrs++] = e->count;
		} else if (e->op == FSS_OP_ALLREDUCE) {
			s->ar_counts[s->nar++] = e->count;
			if (e->count <= ROLES_SCALAR_ELEMENTS)
				s->scalar_allreduces++;
		}
	}
	return 0;
}

/* What the decision works from: the window's figures per communicator and
 * the FSDP group's sizes. */
struct roles_work {
	const struct tl_source *src;
	const struct tl_event *ev; /* [n] the window */
	size_t n;
	struct comm_stat *st;	 /* [src->ncomms] */
	uint64_t *pool;		 /* the size lists of every st[] */
	int fsdp;		 /* the FSDP shard group's slot, -1 none */
	int given;		 /* it was named by --fsdp-comm */
	uint64_t *agset, *rsset; /* sets of its gathered sizes and per-rank reduced counts */
	uint32_t nagset, nrsset;
};

static void roles_work_free(struct roles_work *w)
{
	free(w->st);
	free(w->pool);
	free(w->agset);
	free(w->rsset);
}

/* Each communicator's figures over the window; their size lists point into
 * one pool: n events in all. Returns 0 or -ENOMEM. */
static int window_stats(struct roles_work *w)
{
	size_t nc = w->src->ncomms, n = w->n;
	w->st = calloc(nc ? nc : 1, sizeof *w->st);
	w->pool = calloc(3 * (n ? n : 1), sizeof *w->pool);
	uint32_t *per = calloc(nc ? nc : 1, sizeof *per);
	if (!w->st || !w->pool || !per) {
		free(per);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (w->ev[i].comm_slot < nc)
			per[w->ev[i].comm_slot]++;
	size_t off = 0;
	for (size_t c = 0; c < nc; c++) {
		w->st[c].ag_elements = w->pool + off;
		w->st[c].rs_counts = w->pool + n + off;
		w->st[c].ar_counts = w->pool + 2 * n + off;
		off += per[c];
	}
	free(per);
	gather_stats(w->ev, n, nc, w->st);
	return 0;
}

/* The FSDP group: the user's, or among the communicators with gathers and
 * reduce-scatters the one with the longest runs of gathers; equal runs (one
 * unit), the one with fewer events (a TP group has several per block). */
static void choose_fsdp(const timeline_t *t, struct roles_work *w, const char *override, struct comm_roles *out)
{
	const struct tl_source *src = w->src;
	size_t nc = src->ncomms;
	int fsdp = -1;
	if (override) {
		/* exactly one communicator must answer to it */
		int matches = 0;
		for (size_t c = 0; c < nc; c++)
			if (override_matches(override, &src->comms[c],
					     timeline_string(t, src->id, src->comms[c].name))) {
				if (matches++ == 0)
					fsdp = (int)c;
			}
		if (matches != 1)
			fsdp = -1;
		out->given = fsdp >= 0;
		out->override_unmatched = matches == 0;
		out->override_ambiguous = matches > 1;
	}
	for (size_t c = 0; c < nc && !out->given; c++) {
		const struct comm_stat *s = &w->st[c];
		if (!s->ops[FSS_OP_ALLGATHER] || !s->ops[FSS_OP_REDUCESCATTER])
			continue;
		if (fsdp < 0 || s->max_run > w->st[fsdp].max_run ||
		    (s->max_run == w->st[fsdp].max_run && s->events < w->st[fsdp].events))
			fsdp = (int)c;
	}
	out->fsdp = w->fsdp = fsdp;
	w->given = out->given;
}

/* Sets of the FSDP group's gathered sizes and per-rank reduced counts.
 * Returns 0 or -ENOMEM. */
static int fsdp_sets(struct roles_work *w)
{
	if (w->fsdp < 0)
		return 0;
	const struct comm_stat *f = &w->st[w->fsdp];
	w->agset = malloc((f->nag ? f->nag : 1) * sizeof *w->agset);
	w->rsset = malloc((f->nrs ? f->nrs : 1) * sizeof *w->rsset);
	if (!w->agset || !w->rsset)
		return -ENOMEM;
	memcpy(w->agset, f->ag_elements, f->nag * sizeof *w->agset);
	memcpy(w->rsset, f->rs_counts, f->nrs * sizeof *w->rsset);
	w->nagset = set_of(w->agset, f->nag);
	w->nrsset = set_of(w->rsset, f->nrs);
	return 0;
}

/* The roles the mix of ops tells: the FSDP group, idle, tensor parallel,
 * pipeline, expert, set-up before the FSDP group; else unknown. */
static uint8_t role_by_ops(const struct roles_work *w, size_t c, char *why)
{
	const struct comm_stat *s = &w->st[c];
	int fsdp = w->fsdp;
	uint32_t ag = s->ops[FSS_OP_ALLGATHER], rs = s->ops[FSS_OP_REDUCESCATTER], ar = s->ops[FSS_OP_ALLREDUCE],
		 bc = s->ops[FSS_OP_BROADCAST], p2p = s->ops[FSS_OP_SEND] + s->ops[FSS_OP_RECV],
		 a2a = s->ops[FSS_OP_ALLTOALL];
	if ((int)c == fsdp) {
		if (w->given)
			snprintf(why, ANALYSIS_NOTE_BYTES, "named by --fsdp-comm; %u AllGathers, %u ReduceScatters", ag,
				 rs);
		else
			snprintf(why, ANALYSIS_NOTE_BYTES,
				 "%u AllGathers and %u ReduceScatters; up to %u gathers in a row before a "
				 "reduce-scatter (a forward over the units)",
				 ag, rs, s->max_run);
		return ANALYSIS_ROLE_FSDP;
	}
	if (s->events == 0) {
		snprintf(why, ANALYSIS_NOTE_BYTES, "no collective in the first %zu events of the rank", w->n);
		return ANALYSIS_ROLE_IDLE;
	}
	if (ag && rs && rs * 2 >= ag && ag * 2 >= rs && s->max_run <= 2) {
		snprintf(why, ANALYSIS_NOTE_BYTES,
			 "%u AllGathers and %u ReduceScatters that alternate (at most %u gathers in a row): "
			 "activation collectives",
			 ag, rs, s->max_run);
		return ANALYSIS_ROLE_TENSOR_PARALLEL;
	}
	if (p2p * 2 >= s->events) {
		snprintf(why, ANALYSIS_NOTE_BYTES, "%u Send / Recv of %u events", p2p, s->events);
		return ANALYSIS_ROLE_PIPELINE;
	}
	if (a2a * 2 >= s->events) {
		snprintf(why, ANALYSIS_NOTE_BYTES, "%u AllToAll of %u events", a2a, s->events);
		return ANALYSIS_ROLE_EXPERT;
	}
	if (fsdp >= 0 && s->first < w->st[fsdp].first) {
		/* before FSDP's first gather: set-up (and whatever else this
		 * communicator does later, now and then) */
		uint32_t after = 0;
		for (size_t i = 0; i < w->n; i++)
			after += w->ev[i].comm_slot == c && i > w->st[fsdp].first;
		if (after == 0 || (ar == 0 && ag == 0 && rs == 0)) {
			snprintf(why, ANALYSIS_NOTE_BYTES,
				 "%u events (%u Broadcasts), %u of them after the FSDP group's first gather", s->events,
				 bc, after);
			return ANALYSIS_ROLE_ONE_OFF;
		}
	}
	return ANALYSIS_ROLE_UNKNOWN;
}

/* The roles the sizes tell, for a communicator the ops left unknown:
 * re-gathers of the FSDP group's sizes, replicas reducing what its
 * reduce-scatters leave, scalar all-reduces, other all-reduces, broadcasts. */
static uint8_t role_by_sizes(const struct roles_work *w, size_t c, char *why)
{
	const struct comm_stat *s = &w->st[c];
	const struct tl_comm *m = &w->src->comms[c];
	int fsdp = w->fsdp;
	uint32_t ag = s->ops[FSS_OP_ALLGATHER], rs = s->ops[FSS_OP_REDUCESCATTER], ar = s->ops[FSS_OP_ALLREDUCE],
		 bc = s->ops[FSS_OP_BROADCAST];
	if (fsdp >= 0 && ag && !rs && m->nranks > 0 && m->nranks < w->src->comms[fsdp].nranks &&
	    w->src->comms[fsdp].nranks % m->nranks == 0) {
		uint32_t match = 0;
		for (uint32_t i = 0; i < s->nag; i++)
			match += in_set(w->agset, w->nagset, s->ag_elements[i]);
		if (match == s->nag) {
			snprintf(why, ANALYSIS_NOTE_BYTES,
				 "%u AllGathers on %d of the FSDP group's %d ranks, of sizes it gathers: re-gathers "
				 "of units resharded to groups",
				 ag, m->nranks, w->src->comms[fsdp].nranks);
			return ANALYSIS_ROLE_FSDP_REGATHER;
		}
	}
	if (ar) {
		uint32_t match = 0;
		for (uint32_t i = 0; i < s->nar; i++)
			match +=
			    in_set(w->rsset, w->nrsset, s->ar_counts[i]) && s->ar_counts[i] > ROLES_SCALAR_ELEMENTS;
		if (fsdp >= 0 && match * 2 >= s->nar && match > 0) {
			snprintf(why, ANALYSIS_NOTE_BYTES,
				 "%u of its %u AllReduces have the sizes the FSDP group's ReduceScatters leave on "
				 "a rank: HSDP replicas",
				 match, s->nar);
			return ANALYSIS_ROLE_REPLICATE;
		}
		if (s->scalar_allreduces * 2 >= s->events) {
			snprintf(why, ANALYSIS_NOTE_BYTES,
				 "%u scalar AllReduces (at most %u elements) of %u events: loss, gradient norm",
				 s->scalar_allreduces, ROLES_SCALAR_ELEMENTS, s->events);
			return ANALYSIS_ROLE_STEP;
		}
		snprintf(why, ANALYSIS_NOTE_BYTES, "%u AllReduces of %u events", ar, s->events);
		return ANALYSIS_ROLE_ALLREDUCE;
	}
	if (bc == s->events) {
		snprintf(why, ANALYSIS_NOTE_BYTES, "only Broadcasts (%u)", bc);
		return ANALYSIS_ROLE_ONE_OFF;
	}
	snprintf(why, ANALYSIS_NOTE_BYTES, "%u AllGathers, %u ReduceScatters, %u AllReduces, %u others", ag, rs, ar,
		 s->events - ag - rs - ar);
	return ANALYSIS_ROLE_UNKNOWN;
}

int comm_roles_decide(const timeline_t *t, const struct tl_source *src, const struct tl_event *ev, size_t n,
		      const char *override, struct comm_roles *out)
{
	struct roles_work w = {.src = src, .ev = ev, .n = n, .fsdp = -1};
	size_t nc = src->ncomms;
	memset(out, 0, sizeof *out);
	out->fsdp = -1;
	out->ncomms = nc;
	out->role = calloc(nc ? nc : 1, 1);
	out->evidence = calloc(nc ? nc : 1, sizeof *out->evidence);
	if (!out->role || !out->evidence || window_stats(&w) < 0)
		goto fail;
	choose_fsdp(t, &w, override, out);
	if (fsdp_sets(&w) < 0)
		goto fail;
	for (size_t c = 0; c < nc; c++) {
		uint8_t role = role_by_ops(&w, c, out->evidence[c]);
		if (role == ANALYSIS_ROLE_UNKNOWN && w.st[c].events)
			role = role_by_sizes(&w, c, out->evidence[c]);
		out->role[c] = role;
	}
	roles_work_free(&w);
	return 0;
fail:
	roles_work_free(&w);
	comm_roles_release(out);
	return -ENOMEM;
}

void comm_roles_release(struct comm_roles *r)
{
	free(r->role);
	free(r->evidence);
	r->role = NULL;
	r->evidence = NULL;
	r->ncomms = 0;
}
