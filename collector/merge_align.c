/*
 * merge_align.c - the offsets that put every node on the first node's
 * CLOCK_MONOTONIC, from the collectives they share (merge.h, merge_align).
 */
#include "collector/merge_align.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/merge_state.h"

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int64_t merge_median_i64(int64_t *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_i64);
	return v[(n - 1) / 2];
}

static uint64_t abs_diff(int64_t a, int64_t b)
{
	return a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
}

static int cmp_sample(const void *a, const void *b)
{
	const struct merge_sample *x = a, *y = b;

	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	if (x->comm_seq != y->comm_seq)
		return x->comm_seq < y->comm_seq ? -1 : 1;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);
}

/*
 * One collective (samples [first, last)) seen from node k and from the
 * aligned nodes: the difference of their median ends, aligned minus k (k's
 * on its anchor offset), into *d; which aligned node holds most of it in
 * *ref. 0 when the collective does not join k to an aligned node or mixes
 * kernel ends with host exits.
 */
static int collective_difference(const struct merge_node *nodes, const unsigned char *aligned,
				 const struct merge_sample *s, size_t first, size_t last, uint32_t k, int64_t *scratch,
				 int64_t *d, uint32_t *ref, int *gpu)
{
	size_t nk = 0, na = 0;
	uint32_t best = 0, best_count = 0, run_node = UINT32_MAX, run = 0;

	for (size_t i = first; i < last; i++)
		if (s[i].gpu != s[first].gpu)
			return 0;
	for (size_t i = first; i < last; i++)
		if (s[i].node == k)
			scratch[nk++] = (int64_t)s[i].end_ns + nodes[k].anchor_offset_ns;
	if (!nk)
		return 0;
	int64_t mk = merge_median_i64(scratch, nk);
	for (size_t i = first; i < last; i++) {
		if (s[i].node == k || !aligned[s[i].node])
			continue;
		scratch[na++] = (int64_t)s[i].end_ns + nodes[s[i].node].offset_ns;
		run = s[i].node == run_node ? run + 1 : 1;
		run_node = s[i].node;
		if (run > best_count) {
			best_count = run;
			best = run_node;
		}
	}
	if (!na)
		return 0;
	*d = merge_median_i64(scratch, na) - mk;
	*ref = best;
	*gpu = s[first].gpu == SAMPLE_GPU;
	return 1;
}

/* The collectives (samples sorted by cmp_sample) that join node k to the
 * aligned nodes: their number; with diffs, each one's difference in diffs[],
 * a vote for the aligned node that holds most of it in votes[], and in
 * *ngpu how many of them rest on kernel ends. */
static size_t shared_collectives(const struct merge_node *nodes, const unsigned char *aligned,
				 const struct merge_sample *samples, size_t nsamples, uint32_t k, int64_t *scratch,
				 int64_t *diffs, uint32_t *votes, size_t *ngpu)
{
	size_t n = 0;

	for (size_t i = 0, j; i < nsamples; i = j) {
		int64_t d;
		uint32_t ref;
		int gpu;

		for (j = i + 1;
		     j < nsamples && samples[j].comm == samples[i].comm && samples[j].comm_seq == samples[i].comm_seq;
		     j++) {
		}
		if (!collective_difference(nodes, aligned, samples, i, j, k, scratch, &d, &ref, &gpu))
			continue;
		if (diffs) {
			diffs[n] = d;
			votes[ref]++;
			*ngpu += (size_t)gpu;
		}
		n++;
	}
	return n;
}

int merge_align(struct merge_node *nodes, size_t nnodes, struct merge_sample *samples, size_t nsamples)
{
	unsigned char *aligned = calloc(nnodes ? nnodes : 1, 1);
	int64_t *diffs = malloc((nsamples ? nsamples : 1) * sizeof(*diffs));
	int64_t *scratch = malloc((nsamples ? nsamples : 1) * sizeof(*scratch));
	uint32_t *votes = calloc(nnodes ? nnodes : 1, sizeof(*votes));
	int rc = 0;

	if (!aligned || !diffs || !scratch || !votes) {
		rc = -ENOMEM;
		goto out;
	}
	qsort(samples, nsamples, sizeof(*samples), cmp_sample);
	for (size_t k = 0; k < nnodes; k++) {
		nodes[k].offset_ns = nodes[k].anchor_offset_ns;
		nodes[k].collective_offset_ns = 0;
		nodes[k].residual_ns = nodes[k].residual_max_ns = 0;
		nodes[k].collectives = 0;
		nodes[k].aligned_to = -1;
		nodes[k].basis = k ? MERGE_BASIS_ANCHORS : MERGE_BASIS_REFERENCE;
	}
	if (!nnodes)
		goto out;
	nodes[0].anchor_offset_ns = nodes[0].offset_ns = 0;
	aligned[0] = 1;
	/* Each round aligns the node that shares most collectives with the
	 * nodes already aligned, so a chain of nodes (A-B, B-C) is followed. */
	for (;;) {
		size_t best = nnodes, best_n = 0;

		for (size_t k = 1; k < nnodes; k++) {
			size_t n;

			if (aligned[k])
				continue;
			n = shared_collectives(nodes, aligned, samples, nsamples, (uint32_t)k, scratch, NULL, NULL,
					       NULL);
			if (n > best_n) {
				best_n = n;
				best = k;
			}
		}
		if (best == nnodes)
			break; /* the rest share nothing with the aligned nodes: anchors only */
		size_t n, ngpu = 0;
		memset(votes, 0, nnodes * sizeof(*votes));
		n = shared_collectives(nodes, aligned, samples, nsamples, (uint32_t)best, scratch, diffs, votes, &ngpu);
		struct merge_node *node = &nodes[best];
		int64_t refine = merge_median_i64(diffs, n);
		uint64_t *dev = (uint64_t *)scratch;
		for (size_t i = 0; i < n; i++) {
			dev[i] = abs_diff(diffs[i], refine);
			if (dev[i] > node->residual_max_ns)
				node->residual_max_ns = dev[i];
		}
		/* the median deviation: dev as int64 (all >= 0, far below 2^63) */
		node->residual_ns = (uint64_t)merge_median_i64(scratch, n);
		node->collective_offset_ns = refine;
		node->offset_ns = node->anchor_offset_ns + refine;
		node->collectives = n;
		node->basis = ngpu * 2 > n ? MERGE_BASIS_GPU_END : MERGE_BASIS_HOST_EXIT;
		uint32_t most = 0;
		for (size_t r = 0; r < nnodes; r++)
			if (votes[r] > most) {
				most = votes[r];
				node->aligned_to = (int32_t)r;
			}
		aligned[best] = 1;
	}
out:
	free(aligned);
	free(diffs);
	free(scratch);
	free(votes);
	return rc;
}
