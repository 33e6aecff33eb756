/*
 * merge_scan.c - the first pass of a merge (merge_scan.h).
 */
#include "collector/merge_scan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collector/merge_align.h"
#include "collector/source.h"
#include "common/error.h"
#include "common/record.h"

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
	struct seq_map seqs;	/* sampled collectives, for tying GPU kernels to them */
	struct seq_map corrs;	/* correlation id + 1 -> sample index, from correlation records */
	struct seq_map pending; /* correlation id + 1 -> kernel end (mono), kernels not tied yet */
};

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

static int push_job_rank(struct merge_job_node *j, uint64_t comm, int32_t size, int32_t rank)
{
	if (rank < 0)
		return 0;
	if (j->nranks == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 16;
		struct trace_jobs_rank *grown = realloc(j->ranks, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		j->ranks = grown;
		j->cap = cap;
	}
	j->ranks[j->nranks++] = (struct trace_jobs_rank){.comm = comm, .size = size, .rank = rank};
	return 0;
}

/* What trace_jobs_check needs of the node: each process's ranks in its
 * communicators (those of more than one rank whose id was read, not
 * inferred by attach) and in its world, and the node's time on
 * CLOCK_REALTIME (known with a clock anchor). */
static int scan_job_node(struct scan *s, struct merge_job_node *j, int64_t realtime_offset, int have_anchor)
{
	uint64_t first = 0, last = 0;
	int rc = 0;

	for (size_t i = 0; !rc && i < sources_count(s->layer); i++) {
		const struct source *src = sources_at(s->layer, i);

		if (src->first_ns && (!first || src->first_ns < first))
			first = src->first_ns;
		if (src->last_ns > last)
			last = src->last_ns;
		if (!src->has_hello)
			continue;
		for (size_t c = 0; !rc && c < src->ncomms; c++) {
			const struct source_comm *comm = &src->comms[c];

			if (comm->id_hash && comm->nranks > 1 && !(comm->inferred & FSS_COMM_INFER_ID))
				rc = push_job_rank(j, comm->id_hash, comm->nranks, comm->rank);
		}
		/* its world: its largest communicator, else WORLD_SIZE */
		int32_t world = src->world_size ? src->world_size : src->hint_world_size;

		if (!rc)
			rc = push_job_rank(j, 0, world > 0 ? world : 0, src->rank);
	}
	if (have_anchor && first) {
		j->first_ns = (int64_t)first + realtime_offset;
		j->last_ns = (int64_t)last + realtime_offset;
	}
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
int merge_scan_trace(merge_t *m, uint32_t k, int64_t *realtime_offset, uint32_t *max_source, char *err, size_t errlen)
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
			 S_ISDIR(st.st_mode) ? "a folder inside a folder of traces"
					     : "not a regular file (traces are read twice)");
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	s.layer = sources_new(&sops, &s);
	if (!s.layer)
		return -ENOMEM;
	rc = trace_read_flags(node->path, m->read_flags, &ops, &s, &info);
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
	*realtime_offset = merge_median_i64(s.pairs, s.npairs);
	*max_source = s.any_source ? s.max_source : 0;
	rc = scan_summarize(m, &s, node);
	if (!rc)
		rc = scan_job_node(&s, &m->jobs[k], *realtime_offset, s.npairs > 0);
out:
	scan_free(&s);
	return rc;
}

/* A process in two traces is refused: say which, where. */
int merge_check_duplicates(merge_t *m, char *err, size_t errlen)
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
				same = a->pid == b->pid && strcmp(a->host, b->host) == 0 &&
				       (a->host[0] || a->rank == b->rank);
			if (!same)
				continue;
			snprintf(err, errlen,
				 "%s and %s both hold process %u on %s (rank %d): the same trace given twice, or a "
				 "process whose records went to two collectors; give each node's trace once",
				 m->nodes[a->node].path, m->nodes[b->node].path, a->pid,
				 a->host[0] ? a->host : "an unnamed host", a->rank);
			return -EEXIST;
		}
	return 0;
}
