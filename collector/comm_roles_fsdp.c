/*
 * comm_roles_fsdp.c - which communicators are FSDP groups (see
 * comm_roles_work.h, roles_choose_groups).
 *
 * Several communicators may carry AllGathers and ReduceScatters: FSDP's
 * shard group, an expert group sharded on its own mesh (torchtitan's
 * dp_shard_mod_ep / efsdp), a tensor-parallel group (sequence-parallel
 * activation gathers), a context-parallel group (FlexAttention's k and v
 * gathers, reduce-scattered in backward). Counting never decides: a CP
 * group issues more gathers than the FSDP group and, read alone, looks like
 * FSDP that keeps its units from forward to backward. What tells them
 * apart is how one group's gathers sit among another's:
 *
 *  - activations are gathered inside a unit's compute, on a group whose
 *    ranks can be a subset of the FSDP group's (torchtitan shards FSDP over
 *    dp_shard x cp, so the cp group is inside it): after one of the FSDP
 *    group's unit gathers and before its next event;
 *  - and then at least one of: two or more gathers of one size per unit
 *    (k and v; TP's two per block), no backward re-gather while the FSDP
 *    group re-gathers its units, or sizes that change from one forward to
 *    the next while the other group's stay (they follow the sequence).
 *
 * A group inside another's units without any of that (one gather of fixed
 * size per unit, neither re-gathering) is a nested FSDP group (an MoE's
 * experts); that it could also be activations gathered once per unit is
 * said in out->ambiguity.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collector/comm_roles_work.h"
#include "collector/median.h"

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

/* The slot --fsdp-comm names, -1 when it names none or several. */
static int given_slot(const timeline_t *t, const struct roles_work *w, const char *override, struct comm_roles *out)
{
	const struct tl_source *src = w->src;
	int slot = -1, matches = 0;
	for (size_t c = 0; c < src->ncomms; c++)
		if (override_matches(override, &src->comms[c], timeline_string(t, src->id, src->comms[c].name)) &&
		    matches++ == 0)
			slot = (int)c;
	if (matches != 1)
		slot = -1;
	out->given = slot >= 0;
	out->override_unmatched = matches == 0;
	out->override_ambiguous = matches > 1;
	return slot;
}

/* How b's gathers sit among a's events in the window. */
struct nesting {
	uint32_t inside;   /* b's AllGathers issued while a's latest event was an AllGather (inside a unit) */
	uint32_t per_unit; /* median count of b's gathers after one of a's gathers (those followed by any) */
	int equal_sizes;   /* the b gathers after each of a's gathers are of one size */
};

static int u32_cmp(const void *x, const void *y)
{
	uint32_t p = *(const uint32_t *)x, q = *(const uint32_t *)y;
	return p < q ? -1 : p > q;
}

/* b's gathers among a's events. Returns 0 or -ENOMEM. */
static int nesting_of(const struct roles_work *w, uint32_t b, uint32_t a, struct nesting *out)
{
	memset(out, 0, sizeof *out);
	out->equal_sizes = 1;
	uint32_t *after = malloc((w->st[a].nag + 1) * sizeof *after), nafter = 0, cur = 0;
	if (!after)
		return -ENOMEM;
	uint8_t last_a = 0;
	uint64_t size = 0;
	for (size_t i = 0; i < w->n; i++) {
		const struct tl_event *e = &w->ev[i];
		if (e->comm_slot == a) {
			if (cur && nafter <= w->st[a].nag)
				after[nafter++] = cur;
			cur = 0;
			last_a = e->op;
		} else if (e->comm_slot == b && e->op == FSS_OP_ALLGATHER && last_a == FSS_OP_ALLGATHER) {
			out->inside++;
			if (cur++ == 0)
				size = e->bytes;
			else if (e->bytes != size)
				out->equal_sizes = 0;
		}
	}
	if (cur && nafter <= w->st[a].nag)
		after[nafter++] = cur;
	if (nafter) {
		qsort(after, nafter, sizeof *after, u32_cmp);
		out->per_unit = after[(nafter - 1) / 2];
	}
	free(after);
	return 0;
}

/* A gather group's sizes change from one forward to the next. */
static int sizes_vary(const struct comm_stat *s)
{
	return s->long_runs >= 3 && s->long_runs_differ * 2 >= s->long_runs - 1;
}

/* What says b carries activations inside a's units: the evidence, in words
 * (a phrase per piece, "" none); returns how many pieces there are. */
static int activation_evidence(const struct roles_work *w, uint32_t b, uint32_t a, const struct nesting *x, char *why,
			       size_t len)
{
	const struct comm_stat *sb = &w->st[b], *sa = &w->st[a];
	int pieces = 0;
	size_t off = 0;
	why[0] = 0;
	if (x->per_unit >= 2 && x->equal_sizes) {
		off +=
		    (size_t)snprintf(why + off, len - off, "; %u gathers of one size per unit (k and v)", x->per_unit);
		pieces++;
	}
	if (sa->short_runs >= 2 && sb->short_runs == 0 && off < len) {
		off += (size_t)snprintf(why + off, len - off, "; no backward re-gather while that group re-gathers");
		pieces++;
	}
	if (sizes_vary(sb) && !sizes_vary(sa) && off < len) {
		snprintf(why + off, len - off, "; sizes that change from one forward to the next (the sequence)");
		pieces++;
	}
	return pieces;
}

/* The candidates: communicators with AllGathers and ReduceScatters. */
static int candidate(const struct roles_work *w, size_t c)
{
	return w->st[c].ops[FSS_OP_ALLGATHER] && w->st[c].ops[FSS_OP_REDUCESCATTER];
}

/* Mark the gather groups that carry activations inside another
 * candidate's units (w->activation), with their evidence; note a nested
 * group the traffic cannot place. Returns 0 or -ENOMEM. */
static int find_activations(struct roles_work *w, int given, struct comm_roles *out)
{
	size_t nc = w->src->ncomms;
	int *strength = calloc(nc ? nc : 1, sizeof *strength);
	if (!strength)
		return -ENOMEM;
	for (uint32_t b = 0; b < nc; b++) {
		if (!candidate(w, b) || (int)b == given)
			continue;
		for (uint32_t a = 0; a < nc; a++) {
			if (a == b || !candidate(w, a) || !roles_subgroup(&w->src->comms[b], &w->src->comms[a]))
				continue;
			struct nesting x;
			if (nesting_of(w, b, a, &x) < 0) {
				free(strength);
				return -ENOMEM;
			}
			if (x.inside * 5 < w->st[b].nag * 4)
				continue; /* not inside a's units */
			char why[ANALYSIS_NOTE_BYTES];
			int pieces = activation_evidence(w, b, a, &x, why, sizeof why);
			if (pieces > strength[b]) {
				strength[b] = pieces;
				w->activation[b] = 1;
				snprintf(out->evidence[b], ANALYSIS_NOTE_BYTES,
					 "%u AllGathers, %u ReduceScatters inside the units of a %d-rank group%s: "
					 "activations",
					 w->st[b].ops[FSS_OP_ALLGATHER], w->st[b].ops[FSS_OP_REDUCESCATTER],
					 w->src->comms[a].nranks, why);
			} else if (pieces == 0 && !strength[b] && w->ambiguous < 0 && x.per_unit <= 1 &&
				   !(w->st[a].short_runs && w->st[b].short_runs)) {
				w->ambiguous = (int)b;
				w->ambiguous_in = (int)a;
				snprintf(
				    out->ambiguity, sizeof out->ambiguity,
				    "%d-rank group: one gather per unit inside a %d-rank group's units, fixed sizes, "
				    "no re-gathers: taken as nested FSDP (MoE experts), not activations",
				    w->src->comms[b].nranks, w->src->comms[a].nranks);
			}
		}
	}
	/* two groups each inside the other's units: the weaker reading goes */
	for (size_t b = 0; b < nc; b++)
		for (size_t a = b + 1; a < nc; a++)
			if (w->activation[a] && w->activation[b]) {
				size_t keep =
				    strength[a] > strength[b] || (strength[a] == strength[b] &&
								  w->st[a].gathered_bytes > w->st[b].gathered_bytes)
					? a
					: b;
				w->activation[keep] = 0;
				out->evidence[keep][0] = 0;
			}
	free(strength);
	return 0;
}

/* Is candidate c a better primary than the one at slot best? The most
 * gathered bytes (parameter bytes per step); then the longest runs; then
 * fewer events. */
static int better_primary(const struct roles_work *w, size_t c, int best)
{
	if (best < 0)
		return 1;
	const struct comm_stat *s = &w->st[c], *b = &w->st[best];
	if (s->gathered_bytes != b->gathered_bytes)
		return s->gathered_bytes > b->gathered_bytes;
	if (s->max_run != b->max_run)
		return s->max_run > b->max_run;
	return s->events < b->events;
}

/* One run of equal sizes inside a forward run of gathers. */
struct size_block {
	uint64_t bytes;
	uint32_t len;
};

/* Is v among s[0..n)? */
static int has_key(const uint64_t *s, size_t n, uint64_t v)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == v)
			return 1;
	return 0;
}

/* Activations on communicator c itself (CP over the whole job runs on the
 * FSDP group's world): sizes that in its forwards (long runs of gathers)
 * only come two or more in a row, between other sizes, that are never
 * gathered in its backward while other sizes are re-gathered there, and
 * that it also reduce-scatters (the k / v gathers, their dk / dv). Units
 * all of one size, and a policy with no re-gathers, cannot show it.
 * Returns 0 or -ENOMEM. */
static int shared_activations(const struct roles_work *w, int c, struct comm_roles *out)
{
	const struct comm_stat *s = &w->st[c];
	if (s->short_runs < 2 || s->max_run < 4)
		return 0;
	size_t n = w->n, nblk = 0, nback = 0, nrs = 0;
	struct size_block *blk = calloc(n ? n : 1, sizeof *blk);
	uint64_t *back = malloc((n ? n : 1) * sizeof *back), *rs = malloc((n ? n : 1) * sizeof *rs);
	if (!blk || !back || !rs) {
		free(blk);
		free(back);
		free(rs);
		return -ENOMEM;
	}
	/* the window's gathers of c, run by run */
	size_t run_start = 0;
	uint32_t len = 0;
	int after_rs = 0;
	for (size_t i = 0; i <= n; i++) {
		const struct tl_event *e = i < n ? &w->ev[i] : NULL;
		if (e && (int)e->comm_slot != c)
			continue;
		if (e && e->op == FSS_OP_ALLGATHER) {
			if (len++ == 0)
				run_start = i;
			continue;
		}
		if (e && e->op != FSS_OP_REDUCESCATTER)
			continue;
		if (e)
			rs[nrs++] = e->bytes;
		if (len && after_rs && e) {
			int forward = len * 2 >= s->max_run;
			for (size_t j = run_start; j < i; j++) {
				const struct tl_event *g = &w->ev[j];
				if ((int)g->comm_slot != c || g->op != FSS_OP_ALLGATHER)
					continue;
				if (!forward)
					back[nback++] = g->bytes;
				else if (nblk && blk[nblk - 1].bytes == g->bytes)
					blk[nblk - 1].len++;
				else
					blk[nblk++] = (struct size_block){g->bytes, 1};
			}
		}
		len = 0;
		after_rs = 1;
	}
	for (size_t i = 0; i < nblk && out->nshared_keys < COMM_ROLES_SHARED_KEYS; i++) {
		uint64_t key = blk[i].bytes;
		int ok = !has_key(back, nback, key) && has_key(rs, nrs, key) &&
			 !has_key(out->shared_keys, out->nshared_keys, key);
		for (size_t j = 0; ok && j < nblk; j++)
			ok = blk[j].bytes != key || (blk[j].len >= 2 && blk[j].len * 2 <= s->max_run);
		if (ok)
			out->shared_keys[out->nshared_keys++] = key;
	}
	if (out->nshared_keys)
		snprintf(
		    out->shared, sizeof out->shared,
		    "FSDP communicator also carries activations (context parallel on its ranks): %u size%s in pairs "
		    "in its units, never re-gathered, reduced",
		    out->nshared_keys, out->nshared_keys == 1 ? "" : "s");
	free(blk);
	free(back);
	free(rs);
	return 0;
}

/* Activations of a ring on communicator c itself (SDPA context parallel
 * over the whole job, torch's _RingRotater / _AllToAllRotater): a size
 * that c never reduce-scatters and whose gathers in the backward are each
 * followed at once, on c, by a point-to-point group (the rotation of dK /
 * dV), at least half of its gathers so (the forward's are not). A unit's
 * parameter gather is followed by the next unit's gather or a reduction,
 * never by a ring's rotation. Returns 0 or -ENOMEM. */
static int ring_activations(const struct roles_work *w, int c, struct comm_roles *out)
{
	size_t n = w->n, nk = 0;
	struct ring_key {
		uint64_t bytes, elements;
		uint32_t gathers, rotated;
	} *k = calloc(n ? n : 1, sizeof *k);
	uint64_t *rs = malloc((n ? n : 1) * sizeof *rs);
	if (!k || !rs) {
		free(k);
		free(rs);
		return -ENOMEM;
	}
	size_t nrs = 0;
	int64_t last = -1; /* the key of c's previous event when it was a gather */
	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = &w->ev[i];
		if ((int)e->comm_slot != c)
			continue;
		if ((e->op == FSS_OP_SEND || e->op == FSS_OP_RECV) && last >= 0)
			k[last].rotated++;
		last = -1;
		if (e->op == FSS_OP_REDUCESCATTER) {
			rs[nrs++] = e->elements; /* a reduction has its gather's elements, in another dtype */
		} else if (e->op == FSS_OP_ALLGATHER) {
			size_t j = 0;
			while (j < nk && k[j].bytes != e->bytes)
				j++;
			if (j == nk)
				k[nk++] = (struct ring_key){e->bytes, e->elements, 0, 0};
			k[j].gathers++;
			last = (int64_t)j;
		}
	}
	uint32_t found = 0;
	for (size_t j = 0; j < nk && out->nshared_keys < COMM_ROLES_SHARED_KEYS; j++)
		if (k[j].rotated >= 2 && k[j].rotated * 2 >= k[j].gathers && !has_key(rs, nrs, k[j].elements) &&
		    !has_key(out->shared_keys, out->nshared_keys, k[j].bytes)) {
			out->shared_keys[out->nshared_keys++] = k[j].bytes;
			found++;
		}
	if (found && !out->shared[0])
		snprintf(out->shared, sizeof out->shared,
			 "FSDP communicator also carries activations (context parallel on its ranks): %u size%s "
			 "gathered before each ring rotation in the backward, never reduced",
			 found, found == 1 ? "" : "s");
	free(k);
	free(rs);
	return 0;
}

int roles_choose_groups(const timeline_t *t, struct roles_work *w, const char *override, struct comm_roles *out)
{
	size_t nc = w->src->ncomms;
	int given = override ? given_slot(t, w, override, out) : -1;
	if (find_activations(w, given, out) < 0)
		return -ENOMEM;
	/* parameter groups: the candidates left; a tensor-parallel pattern only
	 * when nothing else carries gathers and reductions (one unit per step
	 * alternates too) */
	int any_plain = 0, primary = given;
	for (size_t c = 0; c < nc; c++)
		any_plain |= candidate(w, c) && !w->activation[c] && !roles_alternating(&w->st[c]);
	for (size_t c = 0; c < nc && given < 0; c++) {
		if (!candidate(w, c) || w->activation[c] || (any_plain && roles_alternating(&w->st[c])))
			continue;
		if (better_primary(w, c, primary))
			primary = (int)c;
	}
	if (primary < 0) /* every candidate inside another's units: the old reading, the longest runs */
		for (size_t c = 0; c < nc; c++)
			if (candidate(w, c) && (primary < 0 || w->st[c].max_run > w->st[primary].max_run))
				primary = (int)c;
	w->fsdp = out->fsdp = primary;
	w->given = out->given;
	if (primary < 0)
		return 0;
	w->activation[primary] = 0;
	w->groups[w->ngroups++] = primary;
	if (shared_activations(w, primary, out) < 0 || ring_activations(w, primary, out) < 0)
		return -ENOMEM;
	/* the other parameter groups, most bytes first */
	for (;;) {
		int next = -1;
		for (size_t c = 0; c < nc; c++) {
			int taken = 0;
			for (uint32_t g = 0; g < w->ngroups; g++)
				taken |= w->groups[g] == (int)c;
			if (taken || !candidate(w, c) || w->activation[c] || roles_alternating(&w->st[c]))
				continue;
			if (better_primary(w, c, next))
				next = (int)c;
		}
		if (next < 0 || w->ngroups == COMM_ROLES_GROUPS_MAX)
			break;
		w->groups[w->ngroups++] = next;
	}
	for (uint32_t g = 0; g < w->ngroups; g++)
		w->group[w->groups[g]] = (uint8_t)g;
	/* the nested group it spoke of was not taken as one */
	if (w->ambiguous < 0 || w->group[w->ambiguous] == COMM_ROLES_NO_GROUP || w->activation[w->ambiguous_in])
		out->ambiguity[0] = 0;
	return 0;
}
