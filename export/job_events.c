/*
 * job_events.c - each collective's call and its one kernel, the compute
 * kernels, ranges, steps and communicators, from a session's records
 * (job_events.h).
 */
#include "export/job_events.h"

#include "collector/analysis.h"
#include "collector/overlap.h"
#include "collector/timeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The latest start of the compute ranges of one thread seen so far: ranges
 * close in order, so one that started at or after a range's start and has
 * already closed lies inside it. */
struct je_thread {
	uint32_t thread;
	uint32_t reserved;
	uint64_t max_start;
};

/* A call waiting for its device interval. */
struct je_pending {
	struct export_call call;
	char comm_name[SOURCE_TEXT_MAX];
	int done;
};

/* Device intervals a source may hold before their call or their correlation
 * record: beyond, the oldest is let go (CUPTI's records come soon after the
 * calls, or not at all). */
#define JE_EARLY_MAX 4096u

/* A device interval of a call not seen yet, or waiting for its correlation. */
struct je_early {
	struct export_kernel k;
	uint64_t seq;
};

struct je_source {
	int device_data; /* the source records GPU intervals (CUPTI, not busy) */
	uint64_t calls;
	uint64_t last_seq;
	uint32_t group_id;    /* the group of the latest call in one, 0 */
	uint64_t group_first; /* its first call's number */
	struct je_thread *threads;
	size_t nthreads, threads_cap;
	struct je_pending *pending; /* [head, n): by seq */
	size_t head, n, cap;
	struct je_early *early;
	size_t nearly, early_cap;
};

struct job_events {
	struct job_events_sink sink;
	const char *step_ranges, *compute_ranges;
	const sources_t *view;
	struct je_source *src; /* by source id */
	size_t nsrc;
	int error;
};

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*v, c * size);
	if (!p)
		return -ENOMEM;
	memset((char *)p + *cap * size, 0, (c - *cap) * size);
	*v = p;
	*cap = c;
	return 0;
}

static struct je_source *je_source(job_events_t *j, uint32_t id)
{
	if (id == FSS_SOURCE_NONE)
		return NULL;
	if (grow((void **)&j->src, &j->nsrc, (size_t)id + 1, sizeof(*j->src)))
		return NULL;
	return &j->src[id];
}

job_events_t *job_events_new(const struct job_events_sink *sink, const char *compute_ranges)
{
	job_events_t *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->sink = *sink;
	j->step_ranges = ANALYSIS_DEFAULT_STEP_RANGES;
	j->compute_ranges = compute_ranges ? compute_ranges : ANALYSIS_DEFAULT_COMPUTE_RANGES;
	return j;
}

static void source_release(struct je_source *s)
{
	free(s->threads);
	free(s->pending);
	free(s->early);
	memset(s, 0, sizeof(*s));
}

void job_events_free(job_events_t *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->nsrc; i++)
		source_release(&j->src[i]);
	free(j->src);
	free(j);
}

int job_events_error(const job_events_t *j)
{
	return j->error;
}

static int fail(job_events_t *j, int rc)
{
	if (rc && !j->error)
		j->error = rc;
	return rc;
}

static int emit(job_events_t *j, uint32_t source, const struct export_kernel *k)
{
	return j->sink.on_kernel ? j->sink.on_kernel(j->sink.ctx, source, k) : 0;
}

/* The kernel of call c at its host interval. */
static int emit_host_call(job_events_t *j, uint32_t source, const struct export_call *c)
{
	struct export_kernel k = {
	    .kind = EXPORT_KERNEL_NCCL,
	    .from = EXPORT_FROM_HOST_CALL,
	    .start_ns = c->rec.enter_ns,
	    .end_ns = c->rec.exit_ns > c->rec.enter_ns ? c->rec.exit_ns : c->rec.enter_ns,
	    .launch_ns = overlap_hta_launch(c->rec.enter_ns, c->rec.enter_ns),
	    .stream = c->rec.stream,
	    .thread = c->rec.thread,
	    .call = c,
	};

	return emit(j, source, &k);
}

/* The kernel of call c, one of a group: the group's interval (ncclGroupEnd
 * entered to returned, or the call's own end if later), launched at the
 * group's first call. */
static int emit_group_call(job_events_t *j, uint32_t source, const struct export_call *c, const struct fss_rec_group *g,
			   uint64_t first_enter)
{
	struct export_kernel k = {
	    .kind = EXPORT_KERNEL_NCCL,
	    .from = EXPORT_FROM_HOST_CALL,
	    .start_ns = g->end_enter_ns,
	    .end_ns = g->end_exit_ns > c->rec.exit_ns ? g->end_exit_ns : c->rec.exit_ns,
	    .launch_ns = overlap_hta_launch(first_enter, first_enter),
	    .stream = c->rec.stream,
	    .thread = c->rec.thread,
	    .call = c,
	};

	if (k.end_ns < k.start_ns)
		k.end_ns = k.start_ns;
	return emit(j, source, &k);
}

/* The kernel of call c at the device interval d, launched at first_enter
 * (the call's enter, or its group's first call's). */
static int emit_device(job_events_t *j, uint32_t source, const struct export_call *c, const struct export_kernel *d,
		       uint64_t first_enter)
{
	struct export_kernel k = *d;

	k.launch_ns = overlap_hta_launch(first_enter, d->start_ns);
	k.kind = EXPORT_KERNEL_NCCL;
	k.from = EXPORT_FROM_DEVICE;
	k.thread = c->rec.thread;
	k.name = NULL;
	k.call = c;
	return emit(j, source, &k);
}

/* The call of p, its name pointing into p (valid until the queue changes). */
static const struct export_call *pending_call(struct je_pending *p)
{
	p->call.comm_name = p->comm_name;
	return &p->call;
}

/* Drop the calls done at the front of the queue. */
static void pending_trim(struct je_source *s)
{
	while (s->head < s->n && s->pending[s->head].done)
		s->head++;
	if (s->head == s->n)
		s->head = s->n = 0;
	else if (s->head > s->cap / 2) {
		memmove(s->pending, s->pending + s->head, (s->n - s->head) * sizeof(*s->pending));
		s->n -= s->head;
		s->head = 0;
	}
}

static struct je_pending *pending_find(struct je_source *s, uint64_t seq)
{
	size_t lo = s->head, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->pending[mid].call.rec.seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->n && s->pending[lo].call.rec.seq == seq && !s->pending[lo].done ? &s->pending[lo] : NULL;
}

/* Every waiting call of s at its host interval. */
static int pending_flush(job_events_t *j, uint32_t id, struct je_source *s)
{
	int rc = 0;

	for (size_t i = s->head; i < s->n && !rc; i++)
		if (!s->pending[i].done) {
			s->pending[i].done = 1;
			rc = emit_host_call(j, id, pending_call(&s->pending[i]));
		}
	s->head = s->n = 0;
	s->nearly = 0; /* device intervals of no call seen: not a collective's kernel */
	return rc;
}

static int pending_push(job_events_t *j, uint32_t id, struct je_source *s, const struct export_call *c)
{
	struct je_pending *p;
	int rc = 0;

	if (s->n - s->head >= JOB_EVENTS_PENDING_MAX) {
		/* no interval came for the oldest: draw it at its host interval */
		s->pending[s->head].done = 1;
		rc = emit_host_call(j, id, pending_call(&s->pending[s->head]));
		pending_trim(s);
		if (rc)
			return rc;
	}
	if (grow((void **)&s->pending, &s->cap, s->n + 1, sizeof(*s->pending)))
		return -ENOMEM;
	p = &s->pending[s->n++];
	p->call = *c;
	snprintf(p->comm_name, sizeof(p->comm_name), "%s", c->comm_name);
	p->call.comm_name = NULL; /* the array moves: pending_call points it at comm_name */
	p->done = 0;
	return 0;
}

static int on_hello(void *ctx, const struct source *src, const struct fss_rec_process_hello *rec)
{
	job_events_t *j = ctx;
	struct je_source *s = je_source(j, rec->head.source);

	if (!s)
		return fail(j, -ENOMEM);
	s->device_data = (rec->features & FSS_FEATURE_CUPTI) && !(rec->features & FSS_FEATURE_CUPTI_BUSY);
	return src && j->sink.on_source ? fail(j, j->sink.on_source(j->sink.ctx, src)) : 0;
}

static int on_collective(void *ctx, const struct source *src, const struct fss_rec_collective *rec)
{
	job_events_t *j = ctx;
	uint32_t id = rec->head.source;
	struct je_source *s = je_source(j, id);
	const struct source_comm *comm = src ? source_comm_find(src, rec->comm) : NULL;
	const char *name = comm && comm->name && j->view ? sources_string(j->view, id, comm->name) : NULL;
	struct export_call c = {
	    .rec = *rec,
	    .comm_id = comm ? comm->id_hash : 0,
	    .comm_nranks = comm ? comm->nranks : 0,
	    .comm_rank = comm ? comm->rank : -1,
	    .comm_name = name ? name : "",
	};
	int rc = 0;

	if (!s)
		return fail(j, -ENOMEM);
	c.number = ++s->calls;
	if (rec->group_id && rec->group_id != s->group_id) {
		s->group_id = rec->group_id;
		s->group_first = c.number;
	}
	c.group_first = rec->group_id ? s->group_first : c.number;
	if (rec->seq > s->last_seq)
		s->last_seq = rec->seq;
	if (j->sink.on_call)
		rc = j->sink.on_call(j->sink.ctx, src, &c);
	if (rc)
		return fail(j, rc);
	if (!s->device_data && !rec->group_id)
		return fail(j, emit_host_call(j, id, &c));
	if (!s->device_data) /* its group's record says when it ran */
		return fail(j, pending_push(j, id, s, &c));
	for (size_t i = 0; i < s->nearly; i++)
		if (s->early[i].seq == rec->seq) {
			struct export_kernel k = s->early[i].k;

			s->early[i] = s->early[--s->nearly];
			return fail(j, emit_device(j, id, &c, &k, c.rec.enter_ns));
		}
	return fail(j, pending_push(j, id, s, &c));
}

/*
 * A group's calls run in the one kernel ncclGroupEnd launches, which CUPTI
 * ties to the first of them: the others waiting next to p in the queue (the
 * same group id) get its interval too.
 */
static int group_mates(job_events_t *j, uint32_t id, struct je_source *s, struct je_pending *p,
		       const struct export_kernel *k)
{
	size_t at = (size_t)(p - s->pending);
	uint32_t group = p->call.rec.group_id;
	int rc = 0;

	for (size_t i = at + 1; i < s->n && s->pending[i].call.rec.group_id == group && !rc; i++)
		if (!s->pending[i].done) {
			s->pending[i].done = 1;
			rc = emit_device(j, id, pending_call(&s->pending[i]), k, p->call.rec.enter_ns);
		}
	for (size_t i = at; i > s->head && s->pending[i - 1].call.rec.group_id == group && !rc; i--)
		if (!s->pending[i - 1].done) {
			s->pending[i - 1].done = 1;
			rc = emit_device(j, id, pending_call(&s->pending[i - 1]), k, p->call.rec.enter_ns);
		}
	return rc;
}

static int early_push(struct je_source *s, const struct export_kernel *k, uint64_t seq)
{
	if (s->nearly >= JE_EARLY_MAX) {
		memmove(s->early, s->early + 1, (s->nearly - 1) * sizeof(*s->early));
		s->nearly--;
	}
	if (grow((void **)&s->early, &s->early_cap, s->nearly + 1, sizeof(*s->early)))
		return -ENOMEM;
	s->early[s->nearly++] = (struct je_early){.k = *k, .seq = seq};
	return 0;
}

/* A device interval of call seq: its kernel, or kept until the call comes. */
static int device_of_call(job_events_t *j, uint32_t id, struct je_source *s, uint64_t seq,
			  const struct export_kernel *k)
{
	struct je_pending *p = pending_find(s, seq);
	int rc;

	if (p) {
		p->done = 1;
		rc = emit_device(j, id, pending_call(p), k, p->call.rec.enter_ns);
		if (!rc && p->call.rec.group_id)
			rc = group_mates(j, id, s, p, k);
		pending_trim(s);
		return rc;
	}
	if (seq <= s->last_seq)
		return 0; /* a second kernel of one call (or of one drawn already): the call has its one */
	return early_push(s, k, seq);
}

static int on_kernel(void *ctx, const struct source *src, const struct fss_rec_gpu_interval *g)
{
	job_events_t *j = ctx;
	uint32_t id = g->head.source;
	struct je_source *s = je_source(j, id);
	uint64_t shift = src && src->have_cupti_anchor ? (uint64_t)src->cupti_offset : 0;
	const char *name = g->name && j->view ? sources_string(j->view, id, g->name) : NULL;
	struct export_kernel k = {
	    .from = EXPORT_FROM_DEVICE,
	    .start_ns = g->start_ns + shift, /* two's complement: a negative offset moves back */
	    .end_ns = g->end_ns + shift,
	    .launch_ns = overlap_hta_launch(0, g->start_ns + shift),
	    .stream = g->stream,
	    .device = g->device,
	    .correlation = g->correlation_id,
	    .name = name ? name : "kernel",
	};

	if (!s)
		return fail(j, -ENOMEM);
	if (k.end_ns < k.start_ns)
		k.end_ns = k.start_ns;
	switch (g->kind) {
	case FSS_GPU_COMM:
		if (!g->collective_seq) /* its correlation record is still to come */
			return fail(j, early_push(s, &k, 0));
		return fail(j, device_of_call(j, id, s, g->collective_seq, &k));
	case FSS_GPU_MEMCPY:
		k.kind = EXPORT_KERNEL_MEMCPY;
		k.name = "Memcpy";
		break;
	case FSS_GPU_MEMSET:
		k.kind = EXPORT_KERNEL_MEMSET;
		k.name = "Memset";
		break;
	default:
		k.kind = EXPORT_KERNEL_COMPUTE;
	}
	return fail(j, emit(j, id, &k));
}

/* The correlation record of a device interval that came without its call's seq. */
static int on_correlation(job_events_t *j, uint32_t id, const struct fss_rec_correlation *c)
{
	struct je_source *s = je_source(j, id);

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < s->nearly; i++)
		if (s->early[i].seq == 0 && s->early[i].k.correlation == c->correlation_id) {
			struct export_kernel k = s->early[i].k;

			s->early[i] = s->early[--s->nearly];
			return device_of_call(j, id, s, c->collective_seq, &k);
		}
	return 0;
}

/* A group's record on a source without GPU intervals: its calls' kernels. */
static int on_group(job_events_t *j, uint32_t id, const struct fss_rec_group *g)
{
	struct je_source *s = je_source(j, id);
	uint64_t first = UINT64_MAX;
	int rc = 0;

	if (!s)
		return -ENOMEM;
	if (s->device_data)
		return 0;
	for (size_t i = s->head; i < s->n; i++)
		if (!s->pending[i].done && s->pending[i].call.rec.group_id == g->group_id &&
		    s->pending[i].call.rec.enter_ns < first)
			first = s->pending[i].call.rec.enter_ns;
	for (size_t i = s->head; i < s->n && !rc; i++)
		if (!s->pending[i].done && s->pending[i].call.rec.group_id == g->group_id) {
			s->pending[i].done = 1;
			rc = emit_group_call(j, id, pending_call(&s->pending[i]), g, first);
		}
	pending_trim(s);
	return rc;
}

static int on_record(void *ctx, const struct source *src, const struct fss_record_head *rec)
{
	job_events_t *j = ctx;

	if (!src)
		return 0;
	if (rec->type == FSS_REC_CORRELATION)
		return fail(j, on_correlation(j, rec->source, (const struct fss_rec_correlation *)rec));
	if (rec->type == FSS_REC_GROUP)
		return fail(j, on_group(j, rec->source, (const struct fss_rec_group *)rec));
	if (rec->type == FSS_REC_COMM && j->sink.on_comm) {
		const struct fss_rec_comm *c = (const struct fss_rec_comm *)rec;
		const struct source_comm *sc;
		const char *name;

		if (c->event != FSS_COMM_INIT && c->event != FSS_COMM_SPLIT && c->event != FSS_COMM_OBSERVED)
			return 0;
		sc = source_comm_find(src, c->comm);
		if (!sc)
			return 0;
		name = sc->name && j->view ? sources_string(j->view, src->id, sc->name) : NULL;
		return fail(j, j->sink.on_comm(j->sink.ctx, src, sc, name ? name : ""));
	}
	return 0;
}

/* Is the compute range r of thread a leaf? (it closed after every range that
 * started inside it) */
static int leaf_of(struct je_source *s, const struct fss_rec_nvtx_range *r, int *leaf)
{
	struct je_thread *t = NULL;

	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i].thread == r->thread) {
			t = &s->threads[i];
			break;
		}
	if (!t) {
		if (grow((void **)&s->threads, &s->threads_cap, s->nthreads + 1, sizeof(*s->threads)))
			return -ENOMEM;
		t = &s->threads[s->nthreads++];
		t->thread = r->thread;
		*leaf = 1;
		t->max_start = r->start_ns;
		return 0;
	}
	*leaf = t->max_start < r->start_ns || r->end_ns <= r->start_ns;
	if (r->start_ns > t->max_start)
		t->max_start = r->start_ns;
	return 0;
}

static int on_nvtx_range(void *ctx, const struct source *src, const struct fss_rec_nvtx_range *r, const char *domain,
			 const char *name)
{
	job_events_t *j = ctx;
	struct je_source *s = je_source(j, r->head.source);
	int rc = 0, leaf = 0;

	if (!s)
		return fail(j, -ENOMEM);
	if (j->sink.on_range)
		rc = j->sink.on_range(j->sink.ctx, src, r, domain, name);
	if (rc || s->device_data || timeline_pattern_match(j->step_ranges, domain, name) ||
	    !timeline_pattern_match(j->compute_ranges, domain, name))
		return fail(j, rc);
	rc = leaf_of(s, r, &leaf);
	if (rc || !leaf || r->end_ns <= r->start_ns)
		return fail(j, rc);
	struct export_kernel k = {
	    .kind = EXPORT_KERNEL_COMPUTE,
	    .from = EXPORT_FROM_NVTX_LEAF,
	    .start_ns = r->start_ns,
	    .end_ns = r->end_ns,
	    .launch_ns = overlap_hta_launch(0, r->start_ns),
	    .stream = EXPORT_STREAM_COMPUTE,
	    .thread = r->thread,
	    .name = name,
	};
	return fail(j, emit(j, r->head.source, &k));
}

static int on_source_end(void *ctx, const struct source *src, const struct fss_record_head *rec)
{
	job_events_t *j = ctx;
	struct je_source *s = je_source(j, rec->source);

	(void)src;
	if (!s)
		return fail(j, -ENOMEM);
	return fail(j, pending_flush(j, rec->source, s));
}

static void on_step(void *ctx, const struct analysis_step_info *step)
{
	job_events_t *j = ctx;

	if (j->sink.on_step)
		j->sink.on_step(j->sink.ctx, step);
}

static void on_view(void *ctx, const sources_t *view)
{
	job_events_t *j = ctx;

	j->view = view;
}

void job_events_tool(job_events_t *j, struct fss_session_tool *out)
{
	memset(out, 0, sizeof(*out));
	out->ctx = j;
	out->on_hello = on_hello;
	out->on_collective = on_collective;
	out->on_kernel = on_kernel;
	out->on_source_end = on_source_end;
	out->on_record = on_record;
	out->on_nvtx_range = on_nvtx_range;
	out->on_step = on_step;
	out->on_view = on_view;
}

int job_events_finish(job_events_t *j)
{
	int rc = j->error;

	for (size_t i = 0; i < j->nsrc && !rc; i++)
		rc = pending_flush(j, (uint32_t)i, &j->src[i]);
	j->view = NULL; /* the session is gone */
	return rc;
}
