/*
 * merge.c - several traces as one job's record stream (merge.h).
 */
#include "collector/merge.h"

#include "collector/source.h"
#include "common/error.h"
#include "common/record.h"
#include "common/record_fields.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A process of one node, for the check that no process is in two. */
struct merge_process {
	uint64_t process_id; /* the sink record's, 0 without one */
	uint32_t pid;
	uint32_t node;
	int32_t rank;
	char host[MERGE_HOST_MAX];
};

/* The collective number a source has reached on one communicator. */
struct scan_comm {
	uint64_t id_hash;
	uint64_t count;
};

/* Open addressing, u64 -> u64: a source's collective seq -> its sample's
 * index, and CUPTI correlation ids (+ 1) -> a sample or a kernel end. */
struct seq_map {
	uint64_t *keys; /* 0: empty (seq counts from 1; correlation ids are stored + 1) */
	uint64_t *vals;
	size_t cap, used;
};

/* What the first pass keeps per source of a trace. */
struct scan_source {
	uint64_t process_id;
	struct scan_comm *comms;
	size_t ncomms;
	struct seq_map seqs;    /* sampled collectives, for tying GPU kernels to them */
	struct seq_map corrs;   /* correlation id + 1 -> sample index, from correlation records */
	struct seq_map pending; /* correlation id + 1 -> kernel end (mono), kernels not tied yet */
};

/* Records waiting in one node's stream, each as [u32 len, u32 0, bytes]. */
struct queue {
	unsigned char *buf;
	size_t len, pos, cap;
};

struct stream {
	int fd;
	trace_parser_t *parser;
	struct queue q;
	int eof;
	uint64_t last_key; /* shifted time of the last record delivered */
};

struct merge {
	struct merge_node *nodes;
	size_t nnodes;
	struct merge_sample *samples;
	size_t nsamples, samples_cap;
	struct merge_process *procs;
	size_t nprocs, procs_cap;
	size_t current;
	/* merge_read's state */
	struct stream *streams;
	const struct trace_parser_ops *ops;
	void *ctx;
	int stop_rc;
};

const char *merge_basis_name(enum merge_basis basis)
{
	switch (basis) {
	case MERGE_BASIS_REFERENCE: return "reference";
	case MERGE_BASIS_ANCHORS: return "anchors";
	case MERGE_BASIS_HOST_EXIT: return "host-exit";
	case MERGE_BASIS_GPU_END: return "gpu-end";
	}
	return "unknown";
}

/* ---- small helpers ------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* median_i64 - the median of v[0..n) (sorts v); the lower middle for even n. */
static int64_t median_i64(int64_t *v, size_t n)
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

/* Whether collective comm_seq of a communicator is in the sample: every one
 * of the first MERGE_SAMPLE_FULL, then one in 2, one in 4 from twice as
 * many, ... A function of comm_seq alone, so every rank samples the same. */
static int sampled(uint64_t comm_seq)
{
	uint64_t stride = 1;

	for (uint64_t t = comm_seq / MERGE_SAMPLE_FULL; t; t >>= 1)
		stride <<= 1;
	return comm_seq % stride == 0;
}

static uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static int seq_map_put(struct seq_map *m, uint64_t key, uint64_t val)
{
	if ((m->used + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		uint64_t *keys = calloc(cap, sizeof(*keys));
		uint64_t *vals = calloc(cap, sizeof(*vals));

		if (!keys || !vals) {
			free(keys);
			free(vals);
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->keys[i])
				continue;
			size_t j = hash_u64(m->keys[i]) & (cap - 1);
			while (keys[j])
				j = (j + 1) & (cap - 1);
			keys[j] = m->keys[i];
			vals[j] = m->vals[i];
		}
		free(m->keys);
		free(m->vals);
		m->keys = keys;
		m->vals = vals;
		m->cap = cap;
	}
	size_t j = hash_u64(key) & (m->cap - 1);
	while (m->keys[j] && m->keys[j] != key)
		j = (j + 1) & (m->cap - 1);
	if (!m->keys[j])
		m->used++;
	m->keys[j] = key;
	m->vals[j] = val;
	return 0;
}

static int seq_map_get(const struct seq_map *m, uint64_t key, uint64_t *val)
{
	if (!m->cap)
		return 0;
	for (size_t j = hash_u64(key) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == key) {
			*val = m->vals[j];
			return 1;
		}
	return 0;
}

/* ---- the first pass ----------------------------------------------------- */

/* Sample flags during the scan: a host exit on a communicator with a GPU
 * returns at enqueue and says nothing of when the collective ended. */
#define SAMPLE_HOST 0
#define SAMPLE_GPU 1
#define SAMPLE_HOST_NONBLOCKING 2

struct scan {
	merge_t *m;
	uint32_t node;
	sources_t *layer;
	struct scan_source *src; /* by source id */
	size_t nsrc;
	uint32_t max_source;
	int any_source;
	int64_t *pairs; /* realtime - mono of every anchor pair */
	size_t npairs, pairs_cap;
	uint32_t keep_flags;
};

static struct scan_source *scan_source(struct scan *s, uint32_t id)
{
	if (id >= s->nsrc) {
		size_t n = s->nsrc ? s->nsrc : 16;
		while (n <= id)
			n *= 2;
		struct scan_source *grown = realloc(s->src, n * sizeof(*grown));
		if (!grown)
			return NULL;
		memset(grown + s->nsrc, 0, (n - s->nsrc) * sizeof(*grown));
		s->src = grown;
		s->nsrc = n;
	}
	return &s->src[id];
}

static int push_pair(struct scan *s, uint64_t mono, uint64_t realtime)
{
	if (!mono || !realtime)
		return 0;
	if (s->npairs == s->pairs_cap) {
		size_t cap = s->pairs_cap ? s->pairs_cap * 2 : 64;
		int64_t *grown = realloc(s->pairs, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		s->pairs = grown;
		s->pairs_cap = cap;
	}
	s->pairs[s->npairs++] = (int64_t)(realtime - mono);
	return 0;
}

static int push_sample(merge_t *m, const struct merge_sample *sample)
{
	if (m->nsamples == m->samples_cap) {
		size_t cap = m->samples_cap ? m->samples_cap * 2 : 1024;
		struct merge_sample *grown = realloc(m->samples, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		m->samples = grown;
		m->samples_cap = cap;
	}
	m->samples[m->nsamples++] = *sample;
	return 0;
}

static int scan_collective(struct scan *s, struct source *src, struct scan_source *ss,
			   const struct fss_rec_collective *c)
{
	const struct source_comm *comm;
	struct scan_comm *sc = NULL;

	/* Send and Recv are not shared by every rank: their numbers differ. */
	if (c->op == FSS_OP_SEND || c->op == FSS_OP_RECV)
		return 0;
	comm = source_comm_find(src, c->comm);
	if (!comm)
		return 0;
	for (size_t i = 0; i < ss->ncomms; i++)
		if (ss->comms[i].id_hash == comm->id_hash)
			sc = &ss->comms[i];
	if (!sc) {
		struct scan_comm *grown = realloc(ss->comms, (ss->ncomms + 1) * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		ss->comms = grown;
		sc = &ss->comms[ss->ncomms++];
		sc->id_hash = comm->id_hash;
		sc->count = 0;
	}
	sc->count++;
	/* A grouped call returns at enqueue; its group's end is the sync
	 * point, and it ends with the group's other calls: not sampled. */
	if (comm->nranks <= 1 || c->group_id || !c->exit_ns || c->result != 0 || !sampled(sc->count))
		return 0;
	struct merge_sample sample = {
		.comm = comm->id_hash,
		.comm_seq = sc->count,
		.end_ns = c->exit_ns,
		.node = s->node,
		.gpu = comm->device < 0 ? SAMPLE_HOST : SAMPLE_HOST_NONBLOCKING,
	};
	int rc = push_sample(s->m, &sample);
	if (!rc && (src->features & FSS_FEATURE_CUPTI) && c->seq)
		rc = seq_map_put(&ss->seqs, c->seq, s->m->nsamples - 1);
	return rc;
}

/* A kernel of the sampled collective idx ended at end (CLOCK_MONOTONIC):
 * the collective ended with the latest of its kernels. */
static void sample_kernel_end(merge_t *m, uint64_t idx, uint64_t end)
{
	struct merge_sample *sample;

	if (idx >= m->nsamples)
		return;
	sample = &m->samples[idx];
	if (sample->gpu != SAMPLE_GPU || end > sample->end_ns)
		sample->end_ns = end;
	sample->gpu = SAMPLE_GPU;
}

static int scan_record(void *ctx, struct source *src, const struct fss_record_head *rec)
{
	struct scan *s = ctx;
	struct scan_source *ss;

	if (!src || rec->source == FSS_SOURCE_NONE)
		return 0;
	if (!s->any_source || rec->source > s->max_source)
		s->max_source = rec->source;
	s->any_source = 1;
	ss = scan_source(s, rec->source);
	if (!ss)
		return -ENOMEM;
	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO: {
		const struct fss_rec_process_hello *h = (const void *)rec;
		return push_pair(s, h->mono_ns, h->realtime_ns);
	}
	case FSS_REC_CLOCK_ANCHOR: {
		const struct fss_rec_clock_anchor *a = (const void *)rec;
		return a->domain == FSS_CLOCK_REALTIME ? push_pair(s, a->mono_ns, a->other_ns) : 0;
	}
	case FSS_REC_SINK: {
		const struct fss_rec_sink *k = (const void *)rec;
		if (!ss->process_id)
			ss->process_id = k->process_id;
		return 0;
	}
	case FSS_REC_COLLECTIVE:
		return scan_collective(s, src, ss, (const void *)rec);
	case FSS_REC_GPU_INTERVAL: {
		const struct fss_rec_gpu_interval *g = (const void *)rec;
		uint64_t idx, end;

		if (g->kind != FSS_GPU_COMM || !src->have_cupti_anchor || !g->end_ns)
			return 0;
		/* The kernel's end on the host's CLOCK_MONOTONIC. */
		end = (uint64_t)((int64_t)g->end_ns + src->cupti_offset);
		if (g->collective_seq) {
			if (seq_map_get(&ss->seqs, g->collective_seq, &idx))
				sample_kernel_end(s->m, idx, end);
			return 0;
		}
		/* Not tied yet: its correlation record comes before or after it. */
		if (seq_map_get(&ss->corrs, (uint64_t)g->correlation_id + 1, &idx)) {
			sample_kernel_end(s->m, idx, end);
			return 0;
		}
		if (seq_map_get(&ss->pending, (uint64_t)g->correlation_id + 1, &idx) && idx >= end)
			return 0;
		return seq_map_put(&ss->pending, (uint64_t)g->correlation_id + 1, end);
	}
	case FSS_REC_CORRELATION: {
		const struct fss_rec_correlation *c = (const void *)rec;
		uint64_t idx, end;

		if (!seq_map_get(&ss->seqs, c->collective_seq, &idx))
			return 0;
		if (seq_map_get(&ss->pending, (uint64_t)c->correlation_id + 1, &end))
			sample_kernel_end(s->m, idx, end);
		return seq_map_put(&ss->corrs, (uint64_t)c->correlation_id + 1, idx);
	}
	default:
		return 0;
	}
}

static int scan_header(void *ctx, const struct fss_file_header *h)
{
	struct scan *s = ctx;

	s->keep_flags = h->flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY);
	return 0;
}

static int scan_feed(void *ctx, const struct fss_record_head *rec)
{
	return sources_feed(((struct scan *)ctx)->layer, rec);
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

static int push_process(merge_t *m, const struct merge_process *p)
{
	if (m->nprocs == m->procs_cap) {
		size_t cap = m->procs_cap ? m->procs_cap * 2 : 64;
		struct merge_process *grown = realloc(m->procs, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		m->procs = grown;
		m->procs_cap = cap;
	}
	m->procs[m->nprocs++] = *p;
	return 0;
}

/* What the layer learnt of the node's processes: ranks, hosts, processes. */
static int scan_summarize(merge_t *m, struct scan *s, struct merge_node *node)
{
	int32_t *ranks = NULL;
	size_t nranks = 0;
	int rc = 0;

	for (size_t i = 0; i < sources_count(s->layer); i++) {
		const struct source *src = sources_at(s->layer, i);
		const char *host;

		if (!src->has_hello)
			continue;
		node->sources++;
		if (src->world_size > node->world_size)
			node->world_size = src->world_size;
		host = sources_string(s->layer, src->id, src->host);
		if (!host)
			host = "";
		if (host[0]) {
			uint32_t h;
			for (h = 0; h < node->nhosts && h < MERGE_NODE_HOSTS_MAX; h++)
				if (strncmp(node->hosts[h], host, MERGE_HOST_MAX - 1) == 0)
					break;
			if (h == node->nhosts || h == MERGE_NODE_HOSTS_MAX) {
				if (node->nhosts < MERGE_NODE_HOSTS_MAX)
					snprintf(node->hosts[node->nhosts], MERGE_HOST_MAX, "%s", host);
				if (h == node->nhosts)
					node->nhosts++;
			}
		}
		struct merge_process p = {
			.process_id = src->id < s->nsrc ? s->src[src->id].process_id : 0,
			.pid = src->pid,
			.node = s->node,
			.rank = src->rank,
		};
		snprintf(p.host, sizeof(p.host), "%s", host);
		if ((rc = push_process(m, &p)) < 0)
			goto out;
		if (src->rank >= 0) {
			int32_t *grown = realloc(ranks, (nranks + 1) * sizeof(*grown));
			if (!grown) {
				rc = -ENOMEM;
				goto out;
			}
			ranks = grown;
			ranks[nranks++] = src->rank;
		}
	}
	qsort(ranks, nranks, sizeof(*ranks), cmp_i32);
	for (size_t i = 0; i < nranks; i++) {
		if (i && ranks[i] == ranks[i - 1])
			continue;
		if (node->nranks < MERGE_NODE_RANKS_MAX)
			node->ranks[node->nranks] = ranks[i];
		node->nranks++;
	}
out:
	free(ranks);
	return rc;
}

static void scan_free(struct scan *s)
{
	for (size_t i = 0; i < s->nsrc; i++) {
		free(s->src[i].comms);
		free(s->src[i].seqs.keys);
		free(s->src[i].seqs.vals);
		free(s->src[i].corrs.keys);
		free(s->src[i].corrs.vals);
		free(s->src[i].pending.keys);
		free(s->src[i].pending.vals);
	}
	free(s->src);
	free(s->pairs);
	sources_free(s->layer);
}

/* One trace's first pass; its realtime - mono offset in *realtime_offset. */
static int scan_trace(merge_t *m, uint32_t k, int64_t *realtime_offset, uint32_t *max_source, char *err,
		      size_t errlen)
{
	struct merge_node *node = &m->nodes[k];
	struct source_ops sops = {.on_record = scan_record};
	struct scan s = {.m = m, .node = k};
	struct trace_parser_ops ops = {.on_header = scan_header, .on_record = scan_feed};
	struct trace_read_info info;
	struct stat st;
	size_t first_sample = m->nsamples;
	int rc;

	if (stat(node->path, &st) == 0 && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: %s", node->path,
			 S_ISDIR(st.st_mode) ? "a folder inside a folder of traces" : "not a regular file (traces are read twice)");
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	s.layer = sources_new(&sops, &s);
	if (!s.layer)
		return -ENOMEM;
	rc = trace_read(node->path, &ops, &s, &info);
	if (info.input != TRACE_INPUT_TRACE) {
		if (rc >= 0)
			rc = FSS_E_NOT_TRACE;
		snprintf(err, errlen, "%s: %s", node->path, info.message[0] ? info.message : fss_strerror(rc));
		goto out;
	}
	if (rc == FSS_E_TRUNCATED || rc == FSS_E_CORRUPT)
		rc = 0; /* read up to the damage: merge_read says so */
	if (rc) {
		snprintf(err, errlen, "%s: %s", node->path, info.message[0] ? info.message : fss_strerror(rc));
		goto out;
	}
	sources_finish(s.layer);
	/* Host exits of communicators with a GPU that no kernel end replaced
	 * say nothing of when the collective ended. */
	size_t kept = first_sample;
	for (size_t i = first_sample; i < m->nsamples; i++)
		if (m->samples[i].gpu != SAMPLE_HOST_NONBLOCKING)
			m->samples[kept++] = m->samples[i];
	m->nsamples = kept;
	node->keep_flags = s.keep_flags;
	if (s.keep_flags) /* steps left out: its collective numbers cannot be matched */
		m->nsamples = first_sample;
	node->anchors = s.npairs;
	*realtime_offset = median_i64(s.pairs, s.npairs);
	*max_source = s.any_source ? s.max_source : 0;
	rc = scan_summarize(m, &s, node);
out:
	scan_free(&s);
	return rc;
}

/* A process in two traces is refused: say which, where. */
static int check_duplicates(merge_t *m, char *err, size_t errlen)
{
	for (size_t i = 0; i < m->nprocs; i++)
		for (size_t j = i + 1; j < m->nprocs; j++) {
			const struct merge_process *a = &m->procs[i], *b = &m->procs[j];
			int same;

			if (a->node == b->node)
				continue;
			if (a->process_id && b->process_id)
				same = a->process_id == b->process_id;
			else /* without a process id: pid and host, and the rank where no host is named */
				same = a->pid == b->pid && strcmp(a->host, b->host) == 0 && (a->host[0] || a->rank == b->rank);
			if (!same)
				continue;
			snprintf(err, errlen,
				 "%s and %s both hold process %u on %s (rank %d): the same trace given twice, or a "
				 "process whose records went to two collectors; give each node's trace once",
				 m->nodes[a->node].path, m->nodes[b->node].path, a->pid, a->host[0] ? a->host : "an unnamed host",
				 a->rank);
			return -EEXIST;
		}
	return 0;
}

/* ---- alignment ---------------------------------------------------------- */

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
	int64_t mk = median_i64(scratch, nk);
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
	*d = median_i64(scratch, na) - mk;
	*ref = best;
	*gpu = s[first].gpu == SAMPLE_GPU;
	return 1;
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
			size_t n = 0;

			if (aligned[k])
				continue;
			for (size_t i = 0, j; i < nsamples; i = j) {
				int64_t d;
				uint32_t ref;
				int gpu;

				for (j = i + 1; j < nsamples && samples[j].comm == samples[i].comm &&
						samples[j].comm_seq == samples[i].comm_seq;
				     j++) {
				}
				n += collective_difference(nodes, aligned, samples, i, j, (uint32_t)k, scratch, &d, &ref, &gpu);
			}
			if (n > best_n) {
				best_n = n;
				best = k;
			}
		}
		if (best == nnodes)
			break; /* the rest share nothing with the aligned nodes: anchors only */
		size_t n = 0, ngpu = 0;
		memset(votes, 0, nnodes * sizeof(*votes));
		for (size_t i = 0, j; i < nsamples; i = j) {
			int64_t d;
			uint32_t ref;
			int gpu;

			for (j = i + 1;
			     j < nsamples && samples[j].comm == samples[i].comm && samples[j].comm_seq == samples[i].comm_seq;
			     j++) {
			}
			if (collective_difference(nodes, aligned, samples, i, j, (uint32_t)best, scratch, &d, &ref, &gpu)) {
				diffs[n++] = d;
				votes[ref]++;
				ngpu += (size_t)gpu;
			}
		}
		struct merge_node *node = &nodes[best];
		int64_t refine = median_i64(diffs, n);
		uint64_t *dev = (uint64_t *)scratch;
		for (size_t i = 0; i < n; i++) {
			dev[i] = abs_diff(diffs[i], refine);
			if (dev[i] > node->residual_max_ns)
				node->residual_max_ns = dev[i];
		}
		/* the median deviation: dev as int64 (all >= 0, far below 2^63) */
		node->residual_ns = (uint64_t)median_i64(scratch, n);
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

/* ---- open ----------------------------------------------------------------- */

int merge_open(merge_t **out, const char *const *paths, size_t n, char *err, size_t errlen)
{
	merge_t *m;
	int64_t *offsets = NULL;
	uint64_t base = 0;
	int rc = 0;

	*out = NULL;
	if (errlen)
		err[0] = 0;
	if (!n)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m || !(m->nodes = calloc(n, sizeof(*m->nodes))) || !(offsets = calloc(n, sizeof(*offsets)))) {
		rc = -ENOMEM;
		goto fail;
	}
	m->nnodes = n;
	for (size_t k = 0; k < n; k++) {
		uint32_t max_source = 0;

		m->nodes[k].path = paths[k];
		rc = scan_trace(m, (uint32_t)k, &offsets[k], &max_source, err, errlen);
		if (rc)
			goto fail;
		if (base + max_source >= FSS_SOURCE_NONE) {
			snprintf(err, errlen, "%s: too many sources in the traces together", paths[k]);
			rc = -E2BIG;
			goto fail;
		}
		m->nodes[k].source_base = (uint32_t)base;
		base += (uint64_t)max_source + 1;
		/* On node k, t_realtime = t_mono + offsets[k]: its t_mono + offsets[k] - offsets[0]
		 * is the first node's CLOCK_MONOTONIC of the same instant. */
		m->nodes[k].anchor_offset_ns = offsets[k] - offsets[0];
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			struct stat a, b;

			if (stat(paths[i], &a) == 0 && stat(paths[j], &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
				snprintf(err, errlen, "%s and %s are the same file: give each node's trace once", paths[i],
					 paths[j]);
				rc = -EEXIST;
				goto fail;
			}
		}
	if ((rc = check_duplicates(m, err, errlen)))
		goto fail;
	if ((rc = merge_align(m->nodes, m->nnodes, m->samples, m->nsamples)))
		goto fail;
	free(offsets);
	/* The samples have done their work. */
	free(m->samples);
	m->samples = NULL;
	m->nsamples = m->samples_cap = 0;
	*out = m;
	return 0;
fail:
	if (rc == -ENOMEM && errlen && !err[0])
		snprintf(err, errlen, "out of memory");
	free(offsets);
	merge_free(m);
	return rc;
}

const struct merge_node *merge_nodes(const merge_t *m, size_t *n)
{
	*n = m->nnodes;
	return m->nodes;
}

size_t merge_current(const merge_t *m)
{
	return m->current;
}

/* ---- the merged read -------------------------------------------------------- */

struct feed_ctx {
	merge_t *m;
	size_t node;
};

static int stream_on_header(void *ctx, const struct fss_file_header *h);
static int stream_on_record(void *ctx, const struct fss_record_head *rec);
static int stream_on_gap(void *ctx, const struct trace_gap *gap);
/* The parsers' callbacks: they queue records, merge_read hands them on. */
static const struct trace_parser_ops stream_ops = {
	.on_header = stream_on_header, .on_record = stream_on_record, .on_gap = stream_on_gap};

static int stream_on_header(void *ctx, const struct fss_file_header *h)
{
	struct feed_ctx *f = ctx;

	f->m->current = f->node;
	return f->m->ops->on_header ? f->m->ops->on_header(f->m->ctx, h) : 0;
}

static int stream_on_gap(void *ctx, const struct trace_gap *gap)
{
	struct feed_ctx *f = ctx;

	f->m->current = f->node;
	return f->m->ops->on_gap ? f->m->ops->on_gap(f->m->ctx, gap) : 0;
}

static int stream_on_record(void *ctx, const struct fss_record_head *rec)
{
	struct feed_ctx *f = ctx;
	struct queue *q = &f->m->streams[f->node].q;
	size_t known = record_known_size(rec->type);
	size_t len = rec->size > known ? rec->size : known;
	size_t need = 8 + ((len + 7) & ~(size_t)7);

	if (q->len + need > q->cap) {
		size_t cap = q->cap ? q->cap : 1 << 16;
		while (q->len + need > cap)
			cap *= 2;
		unsigned char *grown = realloc(q->buf, cap);
		if (!grown)
			return -ENOMEM;
		q->buf = grown;
		q->cap = cap;
	}
	uint32_t hdr[2] = {(uint32_t)len, 0};
	memcpy(q->buf + q->len, hdr, 8);
	memcpy(q->buf + q->len + 8, rec, len);
	q->len += need;
	return 0;
}

/* Read on in node k's file until a record waits or the file ends. How the
 * file ended goes to the node's read_rc; a non-zero return (a callback's
 * value, -ENOMEM) stops the merged read. */
static int stream_refill(merge_t *m, size_t k)
{
	struct stream *st = &m->streams[k];
	unsigned char block[64 << 10];

	while (st->q.pos == st->q.len && !st->eof) {
		ssize_t n;
		int rc;

		st->q.pos = st->q.len = 0;
		n = read(st->fd, block, sizeof(block));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			st->eof = 1;
			m->nodes[k].read_rc = -errno;
			return 0;
		}
		if (n == 0) {
			st->eof = 1;
			m->nodes[k].read_rc = trace_parser_finish(st->parser);
			return 0;
		}
		rc = trace_parser_feed(st->parser, block, (size_t)n);
		if (rc) {
			st->eof = 1;
			m->nodes[k].read_rc = rc;
			return rc;
		}
	}
	return 0;
}

static void stream_info(merge_t *m, size_t k)
{
	struct stream *st = &m->streams[k];
	struct trace_read_info *info = &m->nodes[k].info;
	const struct trace_gap *gaps;
	trace_parser_t *p = st->parser;

	memset(info, 0, sizeof(*info));
	info->input = trace_parser_input(p);
	info->end = trace_parser_end(p);
	info->chunks = trace_parser_chunks(p);
	info->records = trace_parser_records(p);
	trace_parser_damage(p, &info->damage);
	info->ngaps = trace_parser_gaps(p, &gaps);
	memcpy(info->gaps, gaps, info->ngaps * sizeof(gaps[0]));
	if (trace_parser_header(p)) {
		info->version_major = trace_parser_header(p)->version_major;
		info->version_minor = trace_parser_header(p)->version_minor;
	}
	if (trace_parser_error(p)[0])
		snprintf(info->message, sizeof(info->message), "%s", trace_parser_error(p));
	else if (m->nodes[k].read_rc)
		snprintf(info->message, sizeof(info->message), "%s", fss_strerror(m->nodes[k].read_rc));
}

/* The order of merge_read's outcomes, worst last. */
static int rc_rank(int rc)
{
	if (rc == 0)
		return 0;
	if (rc == FSS_E_CORRUPT)
		return 1;
	if (rc == FSS_E_TRUNCATED)
		return 2;
	return 3;
}

int merge_read(merge_t *m, const struct trace_parser_ops *ops, void *ctx)
{
	struct feed_ctx *feeds = NULL;
	_Alignas(8) unsigned char rec[1 << 16];
	int rc = 0, worst = 0;

	m->ops = ops;
	m->ctx = ctx;
	m->streams = calloc(m->nnodes, sizeof(*m->streams));
	feeds = calloc(m->nnodes, sizeof(*feeds));
	if (!m->streams || !feeds) {
		free(feeds);
		return -ENOMEM;
	}
	for (size_t k = 0; k < m->nnodes; k++) {
		feeds[k] = (struct feed_ctx){.m = m, .node = k};
		m->streams[k].fd = -1;
	}
	for (size_t k = 0; k < m->nnodes; k++) {
		m->streams[k].fd = open(m->nodes[k].path, O_RDONLY | O_CLOEXEC);
		if (m->streams[k].fd < 0) {
			rc = -errno;
			m->streams[k].eof = 1;
			m->nodes[k].read_rc = rc;
			continue;
		}
		m->streams[k].parser = trace_parser_new(&stream_ops, &feeds[k]);
		if (!m->streams[k].parser) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (rc)
		goto out;
	for (;;) {
		size_t pick = m->nnodes;
		uint64_t pick_key = 0;

		for (size_t k = 0; k < m->nnodes; k++) {
			struct stream *st = &m->streams[k];
			uint64_t t, key;

			if ((rc = stream_refill(m, k)))
				goto out;
			if (st->q.pos == st->q.len)
				continue;
			t = record_latest_time(st->q.buf + st->q.pos + 8, FIELD_CLOCK_MONO);
			/* Untimed records (strings, sink records) go with what
			 * comes before them in their own trace. */
			key = t ? (uint64_t)((int64_t)t + m->nodes[k].offset_ns) : st->last_key;
			if (pick == m->nnodes || key < pick_key) {
				pick = k;
				pick_key = key;
			}
		}
		if (pick == m->nnodes)
			break;
		struct stream *st = &m->streams[pick];
		uint32_t len;
		memcpy(&len, st->q.buf + st->q.pos, 4);
		if (len > sizeof(rec)) {
			rc = -EOVERFLOW;
			goto out;
		}
		memcpy(rec, st->q.buf + st->q.pos + 8, len);
		st->q.pos += 8 + ((len + 7) & ~(size_t)7);
		st->last_key = pick_key;
		struct fss_record_head *head = (void *)rec;
		if (head->source != FSS_SOURCE_NONE)
			head->source += m->nodes[pick].source_base;
		if (m->nodes[pick].offset_ns)
			record_shift_clock(rec, FIELD_CLOCK_MONO, m->nodes[pick].offset_ns);
		m->current = pick;
		if (ops->on_record && (rc = ops->on_record(ctx, head)))
			goto out;
	}
out:
	for (size_t k = 0; k < m->nnodes; k++) {
		struct stream *st = &m->streams[k];

		if (st->parser) {
			if (!st->eof)
				m->nodes[k].read_rc = trace_parser_finish(st->parser);
			stream_info(m, k);
			trace_parser_free(st->parser);
		} else if (m->nodes[k].read_rc) {
			snprintf(m->nodes[k].info.message, sizeof(m->nodes[k].info.message), "%s",
				 fss_strerror(m->nodes[k].read_rc));
			m->nodes[k].info.end = TRACE_END_NONE;
		}
		if (rc_rank(m->nodes[k].read_rc) > rc_rank(worst))
			worst = m->nodes[k].read_rc;
		if (st->fd >= 0)
			close(st->fd);
		free(st->q.buf);
	}
	free(m->streams);
	m->streams = NULL;
	free(feeds);
	return rc ? rc : worst;
}

void merge_free(merge_t *m)
{
	if (!m)
		return;
	free(m->nodes);
	free(m->samples);
	free(m->procs);
	free(m);
}
