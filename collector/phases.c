/*
 * phases.c - forward, backward and micro-batches from the FSDP group's
 * structure (see phases.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analysis.h"
#include "collector/phases.h"
#include "common/record.h"

struct parse {
	const struct phases_event *ev;
	size_t n;
	const size_t *ag;       /* event index of each AllGather */
	const uint64_t *ag_el;  /* its elements */
	size_t nag;
	const size_t *rs;       /* event index of each ReduceScatter */
	const uint64_t *rs_el;
	size_t nrs;
	const uint32_t *rs_before; /* [nag] ReduceScatters before each AllGather */
};

/* Parse the gathers into cycles that each begin with the forward sequence
 * s[0..u): a new cycle wherever the sequence begins again, or, with
 * uniform > 0, exactly every `uniform` gathers (units all alike, where the
 * backward's gathers look like a forward). Returns 1 when every gather and
 * reduce-scatter fits, 0 when not (g and out then hold a partial parse). */
static int parse_with(const struct parse *p, const uint64_t *s, uint32_t u, size_t uniform, int direct,
		      uint8_t *used, size_t *cycle_start, struct phases_gather *g, struct phases_result *out)
{
	memset(out, 0, sizeof *out);
	int32_t cycle = -1;
	size_t ncycles = 0;
	for (size_t pos = 0; pos < p->nag;) {
		/* a new forward cannot begin while this cycle is reducing its units
		 * (some of its reduce-scatters seen, not all) */
		uint32_t reducing = cycle >= 0 ? p->rs_before[pos] - p->rs_before[cycle_start[ncycles - 1] + u - 1] : 0;
		int begins = uniform ? pos % uniform == 0
				     : (reducing == 0 || reducing >= u) && pos + u <= p->nag &&
					   memcmp(p->ag_el + pos, s, u * sizeof *s) == 0;
		if (uniform && begins && (pos + u > p->nag || memcmp(p->ag_el + pos, s, u * sizeof *s) != 0))
			return 0;
		if (begins) {
			cycle_start[ncycles++] = pos;
			cycle++;
			memset(used, 0, u);
			for (uint32_t j = 0; j < u; j++)
				g[pos + j] = (struct phases_gather){cycle, (int32_t)j, ANALYSIS_PHASE_FORWARD, 0, {0}};
			pos += u;
			continue;
		}
		if (cycle < 0)
			return 0; /* the step does not begin with a forward */
		/* a backward gather: the last unit of its size not yet gathered
		 * again in this cycle (a recomputation gathers it twice) */
		int32_t j = -1;
		uint8_t recompute = 0;
		for (int pass = 0; pass < 2 && j < 0; pass++)
			for (uint32_t k = u; k-- > 0;)
				if (s[k] == p->ag_el[pos] && used[k] == pass) {
					j = (int32_t)k;
					recompute = (uint8_t)pass;
					break;
				}
		if (j < 0)
			return 0;
		used[j]++;
		g[pos] = (struct phases_gather){cycle, j, ANALYSIS_PHASE_BACKWARD, recompute, {0}};
		pos++;
	}
	out->units = u;
	out->cycles = (uint32_t)ncycles;
	/* reduce-scatters: each belongs to the cycle whose forward began before
	 * it, and comes after that forward; a cycle reduces every unit or none,
	 * in mirrored order */
	uint32_t *rs_in = calloc(ncycles ? ncycles : 1, sizeof *rs_in);
	if (!rs_in)
		return -ENOMEM;
	int ok = 1;
	size_t c = 0;
	for (size_t r = 0; r < p->nrs && ok; r++) {
		while (c + 1 < ncycles && p->ag[cycle_start[c + 1]] < p->rs[r])
			c++;
		size_t fwd_end = p->ag[cycle_start[c] + u - 1];
		if (p->rs[r] < p->ag[cycle_start[c]] || p->rs[r] < fwd_end)
			ok = 0;
		else if (rs_in[c] >= u || p->rs_el[r] != s[direct ? rs_in[c] : u - 1 - rs_in[c]])
			ok = 0;
		else
			rs_in[c]++;
	}
	uint32_t bwd_in_sync = 0;
	for (size_t k = 0; k < ncycles && ok; k++) {
		if (rs_in[k] != 0 && rs_in[k] != u)
			ok = 0;
		if (rs_in[k] == u) {
			out->sync_cycles++;
			size_t end = k + 1 < ncycles ? cycle_start[k + 1] : p->nag;
			bwd_in_sync += (uint32_t)(end - cycle_start[k] - u);
		}
	}
	if (ok && out->sync_cycles == 0)
		ok = 0;
	int first_training = -1;
	for (size_t k = 0; k < ncycles && ok; k++) {
		size_t end = k + 1 < ncycles ? cycle_start[k + 1] : p->nag;
		uint32_t bwd = (uint32_t)(end - cycle_start[k] - u);
		if (bwd == 0 && rs_in[k] == 0 && bwd_in_sync > 0) {
			out->forward_only++;
			continue;
		}
		if (first_training < 0) {
			first_training = (int)k;
			out->backward_allgathers = bwd;
			for (size_t i = cycle_start[k] + u; i < end; i++)
				out->recompute_allgathers += g[i].recompute;
		}
	}
	free(rs_in);
	out->forward_allgathers = u;
	out->reductions_per_sync = u;
	return ok;
}

int phases_parse(const struct phases_event *ev, size_t n, struct phases_gather *g, struct phases_result *out)
{
	memset(out, 0, sizeof *out);
	size_t nag = 0, nrs = 0;
	for (size_t i = 0; i < n; i++) {
		nag += ev[i].op == FSS_OP_ALLGATHER;
		nrs += ev[i].op == FSS_OP_REDUCESCATTER;
	}
	for (size_t i = 0; i < nag; i++)
		g[i] = (struct phases_gather){-1, -1, 0, 0, {0}};
	if (nag == 0) {
		out->status = PHASES_NO_GATHERS;
		return 0;
	}
	if (nrs == 0) {
		out->status = PHASES_NO_REDUCTION;
		return 0;
	}
	int rc = -ENOMEM;
	size_t *ag = malloc(nag * sizeof *ag), *rs = malloc(nrs * sizeof *rs), *starts = malloc(nag * sizeof *starts);
	uint64_t *ag_el = malloc(nag * sizeof *ag_el), *rs_el = malloc(nrs * sizeof *rs_el);
	uint64_t *s = malloc(nrs * sizeof *s);
	uint8_t *used = malloc(nrs);
	uint32_t *rs_before = malloc(nag * sizeof *rs_before);
	if (!ag || !rs || !starts || !ag_el || !rs_el || !s || !used || !rs_before)
		goto out;
	size_t a = 0, r = 0;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op == FSS_OP_ALLGATHER) {
			rs_before[a] = (uint32_t)r;
			ag[a] = i;
			ag_el[a++] = ev[i].elements;
		} else if (ev[i].op == FSS_OP_REDUCESCATTER) {
			rs[r] = i;
			rs_el[r++] = ev[i].elements;
		}
	}
	struct parse p = {ev, n, ag, ag_el, nag, rs, rs_el, nrs, rs_before};
	int found = 0;
	/* the smallest group of reduce-scatters, repeated, whose mirror image
	 * is a forward the whole step parses with */
	for (size_t q = 1; q <= nrs; q++) {
		if (nrs % q != 0 || q > nag)
			continue;
		size_t k = q;
		while (k < nrs && rs_el[k] == rs_el[k - q])
			k++;
		if (k < nrs)
			continue;
		/* mirrored (post-backward hooks), else in forward order (a
		 * pipeline schedule reducing every unit after its last micro-batch,
		 * in module order) */
		int ok = 0;
		for (int direct = 0; direct <= 1 && ok == 0; direct++) {
			for (size_t j = 0; j < q; j++)
				s[j] = direct ? rs_el[j] : rs_el[q - 1 - j];
			ok = parse_with(&p, s, (uint32_t)q, 0, direct, used, starts, g, out);
			/* equal cycles, one per reduce-scatter group */
			size_t groups = nrs / q;
			if (ok == 0 && nag % groups == 0 && nag / groups >= q)
				ok = parse_with(&p, s, (uint32_t)q, nag / groups, direct, used, starts, g, out);
		}
		if (ok < 0)
			goto out;
		if (ok) {
			found = 1;
			break;
		}
	}
	if (found) {
		out->status = PHASES_OK;
	} else {
		memset(out, 0, sizeof *out);
		out->status = PHASES_NO_MIRROR;
		for (size_t i = 0; i < nag; i++)
			g[i] = (struct phases_gather){-1, -1, 0, 0, {0}};
	}
	rc = 0;
out:
	free(ag);
	free(rs);
	free(starts);
	free(ag_el);
	free(rs_el);
	free(s);
	free(used);
	free(rs_before);
	return rc;
}
