/*
 * comm_roles.c - communicator roles from their traffic (see comm_roles.h):
 * the window's figures per communicator, and the roles of the
 * communicators that are no FSDP group (comm_roles_fsdp.c chooses those).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/comm_roles_work.h"
#include "collector/median.h"

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
	return role != ANALYSIS_ROLE_TENSOR_PARALLEL && role != ANALYSIS_ROLE_PIPELINE &&
	       role != ANALYSIS_ROLE_EXPERT && role != ANALYSIS_ROLE_CONTEXT_PARALLEL &&
	       role != ANALYSIS_ROLE_ALL_TO_ALL;
}

/* An all-to-all: ncclAllToAll, or one group of Send / Recv that moves data
 * to and from every peer of the communicator (all_to_all_single over NCCL
 * sends to and receives from each rank, itself included). From NCCL 2.14 on
 * PyTorch issues the zero-count calls too (torch/csrc/cuda/nccl.cpp,
 * _nccl_should_send_recv), so a permute_tensor (CP's ring rotation) is a
 * group to every peer that moves data in two calls: a neighbour exchange. */
static int is_all_to_all(const struct tl_event *e)
{
	if (e->op == FSS_OP_ALLTOALL)
		return 1;
	if ((e->op != FSS_OP_SEND && e->op != FSS_OP_RECV) || e->nranks < 2)
		return 0;
	uint32_t n = (uint32_t)e->nranks, moving = e->moving_calls;
	return moving > 2 && moving >= 2 * (n - 1);
}

/* last_small: [ncomms] scratch, zeroed. */
static void gather_stats(const struct tl_event *ev, size_t n, size_t ncomms, struct comm_stat *st, uint8_t *last_small)
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
			s->ag_bytes[s->nag] = e->bytes;
			s->ag_elements[s->nag++] = e->elements;
			s->gathered_bytes += e->wire_bytes;
			if (e->dtype < 32)
				s->ag_dtypes |= 1u << e->dtype;
		} else if (e->op == FSS_OP_REDUCESCATTER) {
			s->run = 0;
			s->rs_counts[s->nrs++] = e->count;
		} else if (e->op == FSS_OP_ALLREDUCE) {
			s->ar_counts[s->nar++] = e->count;
			if (e->count <= ROLES_SCALAR_ELEMENTS)
				s->scalar_allreduces++;
		}
		if (e->op == FSS_OP_SEND || e->op == FSS_OP_RECV)
			s->p2p++;
		if (is_all_to_all(e)) {
			s->a2a++;
			int small = e->count <= ROLES_COUNTS_ELEMENTS;
			if (!small && last_small[e->comm_slot])
				s->a2a_counts++;
			last_small[e->comm_slot] = (uint8_t)small;
		} else {
			last_small[e->comm_slot] = 0;
		}
	}
}

/* Does the sorted set of a[0..na) equal that of b[0..nb)? tmp holds
 * na + nb. */
static int same_sizes(const uint64_t *a, uint32_t na, const uint64_t *b, uint32_t nb, uint64_t *tmp)
{
	memcpy(tmp, a, na * sizeof *tmp);
	memcpy(tmp + na, b, nb * sizeof *tmp);
	uint32_t ka = set_of(tmp, na), kb = set_of(tmp + na, nb);
	return ka == kb && memcmp(tmp, tmp + na, ka * sizeof *tmp) == 0;
}

/* Each communicator's runs of gathers between two of its reduce-scatters
 * (the first run of the window may have begun before it: left out): the
 * short ones (backward re-gathers), the long ones (forwards) and whether
 * those change their sizes. Returns 0 or -ENOMEM. */
static int gather_runs(struct roles_work *w)
{
	size_t nc = w->src->ncomms;
	uint64_t *tmp = malloc(2 * (w->n ? w->n : 1) * sizeof *tmp);
	if (!tmp)
		return -ENOMEM;
	for (size_t c = 0; c < nc; c++) {
		struct comm_stat *s = &w->st[c];
		if (!s->nag || !s->nrs)
			continue;
		uint32_t ag = 0, start = 0, len = 0, prev_start = 0, prev_len = 0;
		int after_rs = 0, have_prev = 0;
		for (size_t i = 0; i < w->n; i++) {
			const struct tl_event *e = &w->ev[i];
			if (e->comm_slot != c)
				continue;
			if (e->op == FSS_OP_ALLGATHER) {
				if (len++ == 0)
					start = ag;
				ag++;
				continue;
			}
			if (e->op != FSS_OP_REDUCESCATTER)
				continue;
			if (len && after_rs) {
				if (len * 2 < s->max_run) {
					s->short_runs++;
				} else {
					s->long_runs++;
					if (have_prev && !same_sizes(s->ag_bytes + prev_start, prev_len,
								     s->ag_bytes + start, len, tmp))
						s->long_runs_differ++;
					prev_start = start;
					prev_len = len;
					have_prev = 1;
				}
			}
			len = 0;
			after_rs = 1;
		}
	}
	free(tmp);
	return 0;
}

void roles_neighbour_ops(const struct roles_work *w, int slot, uint8_t *prev, uint8_t *next)
{
	uint8_t op = 0;
	for (size_t i = 0; i < w->n; i++) {
		prev[i] = op;
		if (w->ev[i].comm_slot == (uint32_t)slot)
			op = w->ev[i].op;
	}
	op = 0;
	for (size_t i = w->n; i-- > 0;) {
		next[i] = op;
		if (w->ev[i].comm_slot == (uint32_t)slot)
			op = w->ev[i].op;
	}
}

static void roles_work_free(struct roles_work *w)
{
	free(w->st);
	free(w->pool);
	free(w->activation);
	free(w->rsset);
}

/* Each communicator's figures over the window; their size lists point into
 * one pool: n events in all. Returns 0 or -ENOMEM. */
static int window_stats(struct roles_work *w)
{
	size_t nc = w->src->ncomms, n = w->n;
	w->st = calloc(nc ? nc : 1, sizeof *w->st);
	w->pool = calloc(4 * (n ? n : 1), sizeof *w->pool);
	w->activation = calloc(nc ? nc : 1, 1);
	uint32_t *per = calloc(nc ? nc : 1, sizeof *per);
	uint8_t *scratch = calloc(nc ? nc : 1, 1);
	if (!w->st || !w->pool || !w->activation || !per || !scratch) {
		free(per);
		free(scratch);
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
		w->st[c].ag_bytes = w->pool + 3 * n + off;
		off += per[c];
	}
	free(per);
	gather_stats(w->ev, n, nc, w->st, scratch);
	free(scratch);
	return gather_runs(w);
}

/* The per-rank reduced counts of every FSDP group, as one sorted set.
 * Returns 0 or -ENOMEM. */
static int groups_rsset(struct roles_work *w)
{
	uint32_t total = 0;
	for (uint32_t g = 0; g < w->ngroups; g++)
		total += w->st[w->groups[g]].nrs;
	w->rsset = malloc((total ? total : 1) * sizeof *w->rsset);
	if (!w->rsset)
		return -ENOMEM;
	for (uint32_t g = 0; g < w->ngroups; g++) {
		const struct comm_stat *f = &w->st[w->groups[g]];
		memcpy(w->rsset + w->nrsset, f->rs_counts, f->nrs * sizeof *w->rsset);
		w->nrsset += f->nrs;
	}
	w->nrsset = set_of(w->rsset, w->nrsset);
	return 0;
}

/* The evidence of an FSDP group. */
static void fsdp_evidence(const struct roles_work *w, size_t c, char *why)
{
	const struct comm_stat *s = &w->st[c];
	uint32_t ag = s->ops[FSS_OP_ALLGATHER], rs = s->ops[FSS_OP_REDUCESCATTER];
	uint8_t g = w->group[c];
	if (w->given && (int)c == w->fsdp) {
		snprintf(why, ANALYSIS_NOTE_BYTES, "named by --fsdp-comm; %u AllGathers, %u ReduceScatters", ag, rs);
		return;
	}
	if (w->ngroups > 1) {
		snprintf(why, ANALYSIS_NOTE_BYTES,
			 "FSDP group %u of %u (%s): %u AllGathers, %u ReduceScatters, up to %u gathers in a row",
			 (unsigned)g + 1, w->ngroups, g == 0 ? "primary: gathers the most bytes" : "beside the primary",
			 ag, rs, s->max_run);
		return;
	}
	snprintf(why, ANALYSIS_NOTE_BYTES,
		 "%u AllGathers and %u ReduceScatters; up to %u gathers in a row before a reduce-scatter (a "
		 "forward over the units)",
		 ag, rs, s->max_run);
}

/* Send / Recv and all-to-all traffic: all-to-all groups (expert parallel
 * beside an expert FSDP group or after a router's count exchange,
 * all-to-all otherwise), ring rotations (context parallel: on a group that
 * also gathers, or inside the primary's forward), the rest a pipeline. */
static uint8_t role_point_to_point(const struct roles_work *w, size_t c, const uint8_t *prev, const uint8_t *next,
				   char *why)
{
	const struct comm_stat *s = &w->st[c];
	uint32_t a2a = s->a2a, p2p = s->p2p + s->ops[FSS_OP_ALLTOALL], ag = s->ops[FSS_OP_ALLGATHER];
	if (a2a * 2 >= p2p) {
		/* a router exchanges counts once per dispatch, a few elements per
		 * peer, before the tokens (torchtitan's _token_count_exchange);
		 * ZeRO++'s qgZ follows each tensor's values by its scales: half
		 * its all-to-alls small, after a large one */
		int router = s->a2a_counts && s->a2a_counts * 3 <= a2a;
		if (w->ngroups >= 2 || router) {
			snprintf(why, ANALYSIS_NOTE_BYTES,
				 "%u all-to-alls of %u events (every peer in one call)%s: token dispatch and combine",
				 a2a, s->events,
				 w->ngroups >= 2 ? ", beside an expert FSDP group"
						 : ", each after a count exchange (a router)");
			return ANALYSIS_ROLE_EXPERT;
		}
		snprintf(why, ANALYSIS_NOTE_BYTES,
			 "%u all-to-alls of %u events (every peer in one call), with no expert group and no router's "
			 "count exchange beside them",
			 a2a, s->events);
		return ANALYSIS_ROLE_ALL_TO_ALL;
	}
	/* between two of the FSDP group's gathers: per unit (a ring rotation
	 * in every attention: several per forward, a good part of the gaps) or
	 * per pass (a pipeline stage's forward handing over to its backward:
	 * one per micro-batch); count the gaps between gathers that hold one */
	uint32_t gaps = 0, gap = 0, counted = UINT32_MAX;
	for (size_t i = 0; prev && i < w->n; i++) {
		const struct tl_event *e = &w->ev[i];
		if ((int)e->comm_slot == w->fsdp && e->op == FSS_OP_ALLGATHER)
			gap++;
		if (e->comm_slot == c && (e->op == FSS_OP_SEND || e->op == FSS_OP_RECV) &&
		    prev[i] == FSS_OP_ALLGATHER && next[i] == FSS_OP_ALLGATHER && counted != gap) {
			counted = gap;
			gaps++;
		}
	}
	int per_unit = w->fsdp >= 0 && gaps * 4 >= w->st[w->fsdp].nag && gaps >= 2 * (w->st[w->fsdp].long_runs + 1);
	if (ag || per_unit) {
		snprintf(why, ANALYSIS_NOTE_BYTES,
			 "%u neighbour Send / Recv of %u events%s%s: a ring rotation of k / v and their gradients",
			 s->p2p, s->events, ag ? ", on a group that also gathers" : "",
			 per_unit ? ", between the FSDP group's unit gathers" : "");
		return ANALYSIS_ROLE_CONTEXT_PARALLEL;
	}
	snprintf(why, ANALYSIS_NOTE_BYTES, "%u Send / Recv of %u events, between units: stages exchanging activations",
		 s->p2p, s->events);
	return ANALYSIS_ROLE_PIPELINE;
}

/* The roles the mix of ops tells: an FSDP group, idle, tensor or context
 * parallel, point to point, set-up before the FSDP group; else unknown. */
static uint8_t role_by_ops(const struct roles_work *w, size_t c, const uint8_t *prev, const uint8_t *next, char *why)
{
	const struct comm_stat *s = &w->st[c];
	int fsdp = w->fsdp;
	uint32_t ag = s->ops[FSS_OP_ALLGATHER], rs = s->ops[FSS_OP_REDUCESCATTER], ar = s->ops[FSS_OP_ALLREDUCE],
		 bc = s->ops[FSS_OP_BROADCAST], p2p = s->p2p + s->ops[FSS_OP_ALLTOALL];
	if (w->group[c] != COMM_ROLES_NO_GROUP) {
		fsdp_evidence(w, c, why);
		return ANALYSIS_ROLE_FSDP;
	}
	if (s->events == 0) {
		snprintf(why, ANALYSIS_NOTE_BYTES, "no collective in the first %zu events of the rank", w->n);
		return ANALYSIS_ROLE_IDLE;
	}
	if (roles_alternating(s)) {
		snprintf(why, ANALYSIS_NOTE_BYTES,
			 "%u AllGathers and %u ReduceScatters that alternate (at most %u gathers in a row): "
			 "activation collectives",
			 ag, rs, s->max_run);
		return ANALYSIS_ROLE_TENSOR_PARALLEL;
	}
	if (w->activation[c])
		return ANALYSIS_ROLE_CONTEXT_PARALLEL; /* its evidence is find_activations' */
	if (p2p * 2 >= s->events || (p2p && ag && !rs && (p2p + ag) * 2 >= s->events))
		return role_point_to_point(w, c, prev, next, why);
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

static uint64_t largest(const uint64_t *v, uint32_t n)
{
	uint64_t m = 0;
	for (uint32_t i = 0; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

/* Re-gathers of FSDP group g on communicator c (only AllGathers, on a
 * group dividing g's): of the sizes g gathers (reshard_after_forward = G),
 * or of g's dtypes and never in the middle of g's forward (ZeRO++'s hpZ
 * fetches from the secondary partition, in backward, of buckets other than
 * the forward's; with one node its group has the world's ranks). Returns 1
 * with the evidence, 0. */
static int regathers_of(const struct roles_work *w, size_t c, uint32_t g, uint8_t *prev, uint8_t *next, char *why)
{
	const struct comm_stat *s = &w->st[c], *f = &w->st[w->groups[g]];
	const struct tl_comm *m = &w->src->comms[c], *fm = &w->src->comms[w->groups[g]];
	if (!s->nag || s->ops[FSS_OP_REDUCESCATTER] || (int)c == w->groups[g] || !roles_subgroup(m, fm))
		return 0;
	uint32_t match = 0, inside = 0;
	for (uint32_t i = 0; i < s->nag; i++)
		for (uint32_t k = 0; k < f->nag; k++)
			if (f->ag_elements[k] == s->ag_elements[i]) {
				match++;
				break;
			}
	if (match == s->nag && m->nranks < fm->nranks) {
		snprintf(why, ANALYSIS_NOTE_BYTES,
			 "%u AllGathers on %d of the FSDP group's %d ranks, of sizes it gathers: re-gathers of units "
			 "resharded to groups",
			 s->nag, m->nranks, fm->nranks);
		return 1;
	}
	if (s->nag < 2 || (s->ag_dtypes & ~f->ag_dtypes) || s->p2p || s->ops[FSS_OP_ALLTOALL] ||
	    largest(s->ag_elements, s->nag) * 8 < largest(f->ag_elements, f->nag))
		return 0; /* parameter fetches, not a few metrics gathered on a group of the same ranks */
	roles_neighbour_ops(w, w->groups[g], prev, next);
	for (size_t i = 0; i < w->n; i++)
		inside += w->ev[i].comm_slot == c && w->ev[i].op == FSS_OP_ALLGATHER && prev[i] == FSS_OP_ALLGATHER &&
			  next[i] == FSS_OP_ALLGATHER;
	if (inside)
		return 0;
	snprintf(why, ANALYSIS_NOTE_BYTES,
		 "%u AllGathers on %d of the FSDP group's %d ranks, in its dtypes, never amid its forward gathers: "
		 "backward fetches from a secondary partition (ZeRO++ hpZ)",
		 s->nag, m->nranks, fm->nranks);
	return 1;
}

/* The roles the sizes tell, for a communicator the ops left unknown:
 * re-gathers of an FSDP group, replicas reducing what its reduce-scatters
 * leave, scalar all-reduces, other all-reduces, broadcasts. */
static uint8_t role_by_sizes(struct roles_work *w, size_t c, uint8_t *prev, uint8_t *next, char *why)
{
	const struct comm_stat *s = &w->st[c];
	uint32_t ag = s->ops[FSS_OP_ALLGATHER], rs = s->ops[FSS_OP_REDUCESCATTER], ar = s->ops[FSS_OP_ALLREDUCE],
		 bc = s->ops[FSS_OP_BROADCAST];
	for (uint32_t g = 0; g < w->ngroups; g++)
		if (regathers_of(w, c, g, prev, next, why)) {
			w->group[c] = (uint8_t)g;
			return ANALYSIS_ROLE_FSDP_REGATHER;
		}
	if (ar) {
		uint32_t match = 0;
		for (uint32_t i = 0; i < s->nar; i++)
			match +=
			    in_set(w->rsset, w->nrsset, s->ar_counts[i]) && s->ar_counts[i] > ROLES_SCALAR_ELEMENTS;
		if (w->fsdp >= 0 && match * 2 >= s->nar && match > 0) {
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

/* Every communicator's role, once the FSDP groups are known. Returns 0 or
 * -ENOMEM. */
static int decide_each(struct roles_work *w, struct comm_roles *out)
{
	size_t nc = w->src->ncomms;
	uint8_t *prev = malloc(w->n ? w->n : 1), *next = malloc(w->n ? w->n : 1);
	uint8_t *tmp_prev = malloc(w->n ? w->n : 1), *tmp_next = malloc(w->n ? w->n : 1);
	if (!prev || !next || !tmp_prev || !tmp_next) {
		free(prev);
		free(next);
		free(tmp_prev);
		free(tmp_next);
		return -ENOMEM;
	}
	if (w->fsdp >= 0)
		roles_neighbour_ops(w, w->fsdp, prev, next);
	for (size_t c = 0; c < nc; c++) {
		uint8_t role = role_by_ops(w, c, w->fsdp >= 0 ? prev : NULL, next, out->evidence[c]);
		if (role == ANALYSIS_ROLE_UNKNOWN && w->st[c].events)
			role = role_by_sizes(w, c, tmp_prev, tmp_next, out->evidence[c]);
		out->role[c] = role;
	}
	free(prev);
	free(next);
	free(tmp_prev);
	free(tmp_next);
	return 0;
}

int comm_roles_decide(const timeline_t *t, const struct tl_source *src, const struct tl_event *ev, size_t n,
		      const char *override, struct comm_roles *out)
{
	struct roles_work w = {.src = src, .ev = ev, .n = n, .fsdp = -1, .ambiguous = -1};
	size_t nc = src->ncomms;
	memset(out, 0, sizeof *out);
	out->fsdp = -1;
	out->ncomms = nc;
	out->role = calloc(nc ? nc : 1, 1);
	out->group = malloc(nc ? nc : 1);
	out->evidence = calloc(nc ? nc : 1, sizeof *out->evidence);
	if (!out->role || !out->group || !out->evidence)
		goto fail;
	memset(out->group, COMM_ROLES_NO_GROUP, nc ? nc : 1);
	w.group = out->group;
	if (window_stats(&w) < 0 || roles_choose_groups(t, &w, override, out) < 0 || groups_rsset(&w) < 0 ||
	    decide_each(&w, out) < 0)
		goto fail;
	out->ngroups = w.ngroups;
	memcpy(out->groups, w.groups, sizeof out->groups);
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
	free(r->group);
	free(r->evidence);
	r->role = NULL;
	r->group = NULL;
	r->evidence = NULL;
	r->ncomms = 0;
}
