/*
 * report_nodes.c - the "nodes" section of the report (report_nodes.h).
 */
#include "cli/report_nodes.h"

#include "common/json_writer.h"

#include "collector/merge.h"
#include "common/json.h"
#include "rules/rules.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* The one node of a single trace, from the analysis' sources. */
struct single {
	int32_t ranks[MERGE_NODE_RANKS_MAX];
	uint32_t nranks;
	const char *hosts[MERGE_NODE_HOSTS_MAX];
	uint32_t nhosts;
};

static void single_node(const struct analysis_result *a, struct single *s)
{
	int32_t all[MERGE_NODE_RANKS_MAX];
	uint32_t n = 0;

	memset(s, 0, sizeof(*s));
	for (uint32_t i = 0; i < a->nsources; i++) {
		const struct source_summary *src = &a->sources[i];
		uint32_t h;

		if (src->rank >= 0 && n < MERGE_NODE_RANKS_MAX)
			all[n++] = src->rank;
		if (!src->host[0])
			continue;
		for (h = 0; h < s->nhosts; h++)
			if (strcmp(s->hosts[h], src->host) == 0)
				break;
		if (h == s->nhosts && s->nhosts < MERGE_NODE_HOSTS_MAX)
			s->hosts[s->nhosts++] = src->host;
	}
	qsort(all, n, sizeof(*all), cmp_i32);
	for (uint32_t i = 0; i < n; i++)
		if (!i || all[i] != all[i - 1])
			s->ranks[s->nranks++] = all[i];
}

static const char *end_name(enum trace_end end)
{
	switch (end) {
	case TRACE_END_CLEAN: return "clean";
	case TRACE_END_NOT_MARKED: return "not-marked";
	case TRACE_END_MISSING: return "not-closed";
	case TRACE_END_CUT: return "cut";
	default: return NULL;
	}
}

void report_nodes_json(struct jw *w, const struct diagnosis *d)
{
	const struct analysis_result *a = d->result;
	const struct merge_node *nodes = NULL;
	size_t nnodes = 1;

	if (d->merge)
		nodes = merge_nodes(d->merge, &nnodes);
	jw_open(w, "nodes", '{');
	jw_i64(w, "traces", (int64_t)nnodes);
	jw_i64(w, "ranks", a->ranks);
	jw_i64(w, "world_size", a->world_size);
	jw_bool(w, "partial", a->world_size > 0 && a->ranks < (uint32_t)a->world_size);
	jw_str(w, "time_base", "CLOCK_MONOTONIC of the first trace");
	jw_open(w, "per_node", '[');
	for (size_t k = 0; k < nnodes; k++) {
		const struct merge_node *n = nodes ? &nodes[k] : NULL;
		struct single s;
		int refined = n && (n->basis == MERGE_BASIS_HOST_EXIT || n->basis == MERGE_BASIS_GPU_END);

		if (!n)
			single_node(a, &s);
		jw_open(w, NULL, '{');
		jw_i64(w, "node", (int64_t)k);
		jw_str(w, "trace", n ? n->path : d->trace_path);
		jw_open(w, "hosts", '[');
		for (uint32_t h = 0; h < (n ? n->nhosts : s.nhosts) && h < MERGE_NODE_HOSTS_MAX; h++)
			jw_str(w, NULL, n ? n->hosts[h] : s.hosts[h]);
		jw_close(w, ']');
		jw_open(w, "ranks", '[');
		for (uint32_t r = 0; r < (n ? n->nranks : s.nranks) && r < MERGE_NODE_RANKS_MAX; r++)
			jw_i64(w, NULL, n ? n->ranks[r] : s.ranks[r]);
		jw_close(w, ']');
		jw_i64(w, "sources", n ? n->sources : a->nsources);
		jw_str(w, "basis", merge_basis_name(n ? n->basis : MERGE_BASIS_REFERENCE));
		jw_i64(w, "offset_ns", n ? n->offset_ns : 0);
		jw_i64(w, "from_anchors_ns", n ? n->anchor_offset_ns : 0);
		jw_i64(w, "from_collectives_ns", n ? n->collective_offset_ns : 0);
		jw_u64_or_null(w, "residual_ns", refined ? n->residual_ns : 0, refined);
		jw_u64_or_null(w, "residual_max_ns", refined ? n->residual_max_ns : 0, refined);
		jw_i64(w, "collectives", n ? (int64_t)n->collectives : 0);
		jw_u64_or_null(w, "anchors", n ? n->anchors : 0, n != NULL);
		if (n && n->aligned_to >= 0)
			jw_i64(w, "aligned_to", n->aligned_to);
		else
			jw_str(w, "aligned_to", NULL);
		jw_str(w, "end", n ? end_name(n->info.end) : a->trace.end);
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_close(w, '}');
}

/* "0..3", "0, 2, 5..7" */
static void format_ranks(const int32_t *r, uint32_t n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (uint32_t i = 0; i < n && off < len;) {
		uint32_t j = i;

		while (j + 1 < n && r[j + 1] == r[j] + 1)
			j++;
		if (j == i)
			off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "", r[i]);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s%d..%d", off ? ", " : "", r[i], r[j]);
		i = j + 1;
	}
	if (!n)
		snprintf(buf, len, "none");
}

/* An offset with its sign; seconds to the microsecond from a second up
 * (an offset of 1000 s refined by microseconds must show them). */
static void format_offset(int64_t ns, char *buf, size_t len)
{
	char mag[32];

	if (ns <= -1000000000 || ns >= 1000000000) {
		snprintf(buf, len, "%+.6f s", (double)ns / 1e9);
		return;
	}
	rule_format_ns((double)(ns < 0 ? -ns : ns), mag, sizeof(mag));
	snprintf(buf, len, "%s%s", ns < 0 ? "-" : ns > 0 ? "+" : "", mag);
}

void report_nodes_text(FILE *out, const struct diagnosis *d)
{
	const struct analysis_result *a = d->result;
	const struct merge_node *nodes;
	size_t nnodes;
	char ranks[160], b1[40], b2[40], b3[40], b4[40], b5[40];

	if (!d->merge) {
		if (a->world_size > 0 && a->ranks < (uint32_t)a->world_size)
			fprintf(out, "nodes       a partial job: %u of the %d ranks of its largest communicator are in this "
				     "trace (read the other ranks' traces with it: fsdpscope report TRACE...)\n",
				a->ranks, a->world_size);
		return;
	}
	nodes = merge_nodes(d->merge, &nnodes);
	fprintf(out, "nodes       %zu traces read as one job, each node's clock moved onto node 0's%s\n", nnodes,
		a->world_size > 0 && a->ranks < (uint32_t)a->world_size ? " (still a partial job: ranks are missing)" : "");
	for (size_t k = 0; k < nnodes; k++) {
		const struct merge_node *n = &nodes[k];

		format_ranks(n->ranks, n->nranks < MERGE_NODE_RANKS_MAX ? n->nranks : MERGE_NODE_RANKS_MAX, ranks,
			     sizeof(ranks));
		fprintf(out, "  node %zu    %s: host%s", k, n->path, n->nhosts == 1 ? "" : "s");
		for (uint32_t h = 0; h < n->nhosts && h < MERGE_NODE_HOSTS_MAX; h++)
			fprintf(out, "%s %s", h ? "," : "", n->hosts[h]);
		fprintf(out, "%s, ranks %s", n->nhosts ? "" : " unknown", ranks);
		switch (n->basis) {
		case MERGE_BASIS_REFERENCE:
			fprintf(out, ": the time base\n");
			break;
		case MERGE_BASIS_ANCHORS:
			format_offset(n->offset_ns, b1, sizeof(b1));
			fprintf(out, ": offset %s from the clock anchors only (no communicator shared with an aligned node)\n",
				b1);
			break;
		default:
			format_offset(n->offset_ns, b1, sizeof(b1));
			format_offset(n->anchor_offset_ns, b2, sizeof(b2));
			format_offset(n->collective_offset_ns, b3, sizeof(b3));
			rule_format_ns((double)n->residual_ns, b4, sizeof(b4));
			rule_format_ns((double)n->residual_max_ns, b5, sizeof(b5));
			fprintf(out, ": offset %s = anchors %s + collectives %s (%" PRIu64 " %s shared with node %d; "
				     "residual %s, at most %s)\n",
				b1, b2, b3, n->collectives, n->basis == MERGE_BASIS_GPU_END ? "NCCL kernel ends" : "host exits",
				n->aligned_to, b4, b5);
		}
	}
}
