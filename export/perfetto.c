/*
 * perfetto.c - the one-file job timeline (perfetto.h).
 */
#include "export/perfetto.h"

#include "export/trace_events.h"
#include "common/out_file.h"
#include "rules/rules.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Track ids inside a rank's process: host threads keep their kernel
 * thread id (below 2^22 on Linux); streams are numbered from here; the
 * rank's counters and findings are on tid 0. */
#define PF_STREAM_TID_BASE (1 << 30)
#define PF_STEPS_TID 0

struct pf_stream {
	uint64_t stream;
	uint32_t device;
	uint32_t reserved;
};

struct pf_source {
	uint32_t *threads; /* host threads named so far */
	size_t nthreads, threads_cap;
	struct pf_stream *streams; /* index + PF_STREAM_TID_BASE is its tid */
	size_t nstreams, streams_cap;
};

struct pf_step {
	uint32_t source;
	uint32_t ordinal;
	uint64_t start_ns;
};

struct perfetto_export {
	char *path;
	out_file_t *of; /* f's: renamed into place once whole */
	FILE *f;
	trace_events_t *te;
	struct pf_source *src; /* by source id */
	size_t nsrc;
	struct pf_step *steps;
	size_t nsteps, steps_cap;
	int finished;
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

int perfetto_export_new(perfetto_export_t **out, const char *path, char *why, size_t whylen)
{
	perfetto_export_t *p = calloc(1, sizeof(*p));
	int err = -ENOMEM;

	*out = NULL;
	if (!p || !(p->path = strdup(path))) {
		snprintf(why, whylen, "%s: %s", path, strerror(ENOMEM));
		goto fail;
	}
	err = out_file_open(path, 0644, &p->of, why, whylen);
	if (err)
		goto fail;
	p->f = out_file_stream(p->of);
	p->te = trace_events_new(p->f);
	if (!p->te) {
		err = -ENOMEM;
		snprintf(why, whylen, "%s: %s", path, strerror(ENOMEM));
		goto fail;
	}
	*out = p;
	return 0;
fail:
	if (p) {
		out_file_free(p->of);
		free(p->path);
	}
	free(p);
	return err;
}

static int64_t pid_of(uint32_t source)
{
	return (int64_t)source + 1;
}

static struct pf_source *pf_source(perfetto_export_t *p, uint32_t id)
{
	if (grow((void **)&p->src, &p->nsrc, (size_t)id + 1, sizeof(*p->src)))
		return NULL;
	return &p->src[id];
}

/* The tid of host thread `thread`, named at its first event. */
static int host_tid(perfetto_export_t *p, uint32_t source, uint32_t thread, int64_t *tid)
{
	struct pf_source *s = pf_source(p, source);
	char name[48];

	if (!s)
		return -ENOMEM;
	*tid = thread ? thread : 1;
	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i] == thread)
			return 0;
	if (grow((void **)&s->threads, &s->threads_cap, s->nthreads + 1, sizeof(*s->threads)))
		return -ENOMEM;
	s->threads[s->nthreads++] = thread;
	snprintf(name, sizeof(name), "host thread %" PRIu32, thread);
	trace_events_metadata(p->te, "thread_name", pid_of(source), *tid, "name", name, 0);
	return 0;
}

/* The tid of a kernel's track (its stream), named at its first kernel. */
static int stream_tid(perfetto_export_t *p, uint32_t source, const struct export_kernel *k, int64_t *tid)
{
	struct pf_source *s = pf_source(p, source);
	char name[64];

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < s->nstreams; i++)
		if (s->streams[i].stream == k->stream && s->streams[i].device == k->device) {
			*tid = PF_STREAM_TID_BASE + (int64_t)i;
			return 0;
		}
	if (grow((void **)&s->streams, &s->streams_cap, s->nstreams + 1, sizeof(*s->streams)))
		return -ENOMEM;
	s->streams[s->nstreams] = (struct pf_stream){.stream = k->stream, .device = k->device};
	*tid = PF_STREAM_TID_BASE + (int64_t)s->nstreams++;
	if (k->stream == EXPORT_STREAM_COMPUTE)
		snprintf(name, sizeof(name), "compute (NVTX leaves)");
	else if (k->from == EXPORT_FROM_DEVICE)
		snprintf(name, sizeof(name), "GPU %" PRIu32 " stream %" PRIu64, k->device, k->stream);
	else
		snprintf(name, sizeof(name), "stream 0x%" PRIx64 " (host timing)", k->stream);
	trace_events_metadata(p->te, "thread_name", pid_of(source), *tid, "name", name, 0);
	trace_events_metadata(p->te, "thread_sort_index", pid_of(source), *tid, "sort_index", NULL, *tid);
	return 0;
}

static const char *op_call_name(int op)
{
	static const char *const names[] = {
	    [FSS_OP_ALLGATHER] = "ncclAllGather", [FSS_OP_REDUCESCATTER] = "ncclReduceScatter",
	    [FSS_OP_ALLREDUCE] = "ncclAllReduce", [FSS_OP_BROADCAST] = "ncclBroadcast",
	    [FSS_OP_REDUCE] = "ncclReduce",	  [FSS_OP_SEND] = "ncclSend",
	    [FSS_OP_RECV] = "ncclRecv",		  [FSS_OP_ALLTOALL] = "ncclAllToAll",
	    [FSS_OP_GATHER] = "ncclGather",	  [FSS_OP_SCATTER] = "ncclScatter",
	};

	return op > 0 && op < FSS_OP_MAX ? names[op] : "ncclCall";
}

/* A flow from a call to its kernel: one id per call of the job. */
static uint64_t flow_id(uint32_t source, uint64_t number)
{
	return ((uint64_t)source + 1) << 32 | (number & 0xffffffffu);
}

/* The call's args, the object left open for more. */
static void call_args(struct jw *w, const struct export_call *c)
{
	uint64_t in, out;

	export_in_out_nelems(c->rec.op, c->rec.count, c->comm_nranks, &in, &out);
	jw_open(w, "args", '{');
	jw_u64(w, "seq", c->rec.seq);
	jw_str(w, "Collective name", export_pytorch_collective(c->rec.op));
	jw_u64(w, "count", c->rec.count);
	jw_u64(w, "bytes", c->rec.bytes);
	jw_u64(w, "In msg nelems", in);
	jw_u64(w, "Out msg nelems", out);
	jw_str(w, "dtype", export_pytorch_dtype(c->rec.dtype));
	jw_hex(w, "comm", c->comm_id);
	jw_str(w, "comm_name", c->comm_name);
	jw_i64(w, "comm_rank", c->comm_rank);
	jw_i64(w, "Group size", c->comm_nranks);
	if (c->rec.peer >= 0)
		jw_i64(w, "peer", c->rec.peer);
	if (c->rec.group_id)
		jw_u64(w, "group_id", c->rec.group_id);
}

static int pf_on_call(void *ctx, const struct source *src, const struct export_call *c)
{
	perfetto_export_t *p = ctx;
	uint32_t source = c->rec.head.source;
	uint64_t end = c->rec.exit_ns > c->rec.enter_ns ? c->rec.exit_ns : c->rec.enter_ns;
	int64_t tid;
	struct jw *w;

	(void)src;
	if (host_tid(p, source, c->rec.thread, &tid))
		return -ENOMEM;
	w = trace_events_begin_event(p->te, "X", op_call_name(c->rec.op), "nccl_call", c->rec.enter_ns, pid_of(source),
				     tid);
	trace_events_time(w, "dur", end - c->rec.enter_ns);
	call_args(w, c);
	jw_close(w, '}');
	trace_events_end_event(p->te);
	/* flows bind to the slice enclosing their ts: the middle of it, never an edge */
	w = trace_events_begin_event(p->te, "s", "launch", "nccl_flow", c->rec.enter_ns + (end - c->rec.enter_ns) / 2,
				     pid_of(source), tid);
	jw_u64(w, "id", flow_id(source, c->number));
	trace_events_end_event(p->te);
	return 0;
}

static const char *kernel_from_name(int from)
{
	switch (from) {
	case EXPORT_FROM_DEVICE:
		return "device";
	case EXPORT_FROM_HOST_CALL:
		return "host call (no GPU interval)";
	default:
		return "NVTX compute range (leaf)";
	}
}

static int pf_on_kernel(void *ctx, uint32_t source, const struct export_kernel *k)
{
	perfetto_export_t *p = ctx;
	char name[128];
	const char *cat = k->kind == EXPORT_KERNEL_MEMCPY   ? "gpu_memcpy"
			  : k->kind == EXPORT_KERNEL_MEMSET ? "gpu_memset"
							    : "kernel";
	int64_t tid;
	struct jw *w;

	if (stream_tid(p, source, k, &tid))
		return -ENOMEM;
	if (k->call)
		export_nccl_kernel_name(k->call->rec.op, k->call->rec.dtype, k->call->rec.redop, name, sizeof(name));
	w = trace_events_begin_event(p->te, "X", k->call ? name : k->name, cat, k->start_ns, pid_of(source), tid);
	trace_events_time(w, "dur", k->end_ns - k->start_ns);
	if (k->call)
		call_args(w, k->call);
	else
		jw_open(w, "args", '{');
	jw_str(w, "interval", kernel_from_name(k->from));
	if (k->from == EXPORT_FROM_DEVICE) {
		jw_u64(w, "device", k->device);
		jw_u64(w, "stream", k->stream);
		jw_u64(w, "correlation", k->correlation);
	}
	jw_close(w, '}');
	trace_events_end_event(p->te);
	if (k->call) {
		w = trace_events_begin_event(p->te, "f", "launch", "nccl_flow",
					     k->start_ns + (k->end_ns - k->start_ns) / 2, pid_of(source), tid);
		jw_str(w, "bp", "e");
		jw_u64(w, "id", flow_id(source, k->call->number));
		trace_events_end_event(p->te);
	}
	return 0;
}

static int pf_on_range(void *ctx, const struct source *src, const struct fss_rec_nvtx_range *r, const char *domain,
		       const char *name)
{
	perfetto_export_t *p = ctx;
	uint32_t source = r->head.source;
	int64_t tid;
	struct jw *w;

	(void)src;
	if (host_tid(p, source, r->thread, &tid))
		return -ENOMEM;
	w = trace_events_begin_event(p->te, "X", name, "nvtx", r->start_ns, pid_of(source), tid);
	trace_events_time(w, "dur", r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0);
	jw_open(w, "args", '{');
	jw_str(w, "domain", domain);
	jw_close(w, '}');
	trace_events_end_event(p->te);
	return 0;
}

static void counter(perfetto_export_t *p, const struct analysis_step_info *s, const char *name, const char *key,
		    double v)
{
	struct jw *w = trace_events_begin_event(p->te, "C", name, "step", s->start_ns, pid_of(s->source), PF_STEPS_TID);

	jw_open(w, "args", '{');
	trace_events_double(w, key, v);
	jw_close(w, '}');
	trace_events_end_event(p->te);
}

static void pf_on_step(void *ctx, const struct analysis_step_info *s)
{
	perfetto_export_t *p = ctx;

	counter(p, s, "step time", "ms", (double)s->step_ns / 1e6);
	counter(p, s, "AllGathers per step", "count", s->allgathers);
	if (!s->excluded)
		counter(p, s, "exposed AllGather time", "ms", (double)s->exposed_allgather_ns / 1e6);
	if (!grow((void **)&p->steps, &p->steps_cap, p->nsteps + 1, sizeof(*p->steps)))
		p->steps[p->nsteps++] =
		    (struct pf_step){.source = s->source, .ordinal = s->ordinal, .start_ns = s->start_ns};
}

void perfetto_export_sink(perfetto_export_t *p, struct job_events_sink *out)
{
	memset(out, 0, sizeof(*out));
	out->ctx = p;
	out->on_call = pf_on_call;
	out->on_kernel = pf_on_kernel;
	out->on_range = pf_on_range;
	out->on_step = pf_on_step;
}

/* Each source's process: "rank R", its host and pid. */
static void name_processes(perfetto_export_t *p, const struct analysis_result *r)
{
	for (uint32_t i = 0; i < r->nsources; i++) {
		const struct source_summary *s = &r->sources[i];
		char name[64];
		struct jw *w;

		if (s->rank >= 0)
			snprintf(name, sizeof(name), "rank %" PRId32, s->rank);
		else
			snprintf(name, sizeof(name), "process %" PRIu32 " (no rank)", s->pid);
		w = trace_events_begin_metadata(p->te, "process_name", pid_of(s->source), 0);
		jw_open(w, "args", '{');
		jw_str(w, "name", name);
		jw_str(w, "host", s->host);
		jw_u64(w, "pid", s->pid);
		jw_i64(w, "rank", s->rank);
		jw_close(w, '}');
		trace_events_end_event(p->te);
		trace_events_metadata(p->te, "process_sort_index", pid_of(s->source), 0, "sort_index", NULL,
				      s->rank >= 0 ? s->rank : (int64_t)1000000 + i);
		trace_events_metadata(p->te, "thread_name", pid_of(s->source), PF_STEPS_TID, "name",
				      "steps and findings", 0);
	}
}

/* Where the findings go: the headline rank's representative step. */
static int finding_place(const perfetto_export_t *p, const struct analysis_result *r, uint32_t *source, uint64_t *ts)
{
	for (uint32_t i = 0; i < r->nsources; i++) {
		if (r->sources[i].rank != r->headline_rank)
			continue;
		*source = r->sources[i].source;
		*ts = r->sources[i].first_ns;
		for (size_t k = 0; k < p->nsteps; k++)
			if (p->steps[k].source == *source && p->steps[k].ordinal == r->exposure.step) {
				*ts = p->steps[k].start_ns;
				return 1;
			}
		return 0;
	}
	*source = r->nsources ? r->sources[0].source : 0;
	*ts = r->nsources ? r->sources[0].first_ns : 0;
	return 0;
}

static void write_findings(perfetto_export_t *p, const struct analysis_result *r, const findings_t *findings)
{
	uint32_t source;
	uint64_t ts;
	int at_step = finding_place(p, r, &source, &ts);

	for (size_t i = 0; findings && i < findings_count(findings); i++) {
		const struct finding *f = findings_get(findings, i);
		struct jw *w = trace_events_begin_event(p->te, "i", f->rule ? f->rule->id : "finding", "finding", ts,
							pid_of(source), PF_STEPS_TID);

		jw_str(w, "s", "p");
		jw_open(w, "args", '{');
		jw_str(w, "severity", rule_severity_name(f->severity));
		jw_str(w, "message", f->message);
		jw_str(w, "evidence", f->evidence);
		if (at_step)
			jw_u64(w, "step", r->exposure.step);
		jw_str(w, "at",
		       at_step ? "the start of the representative step of the headline rank, whose figures "
				 "the findings give"
			       : "the headline rank's first record (no representative step)");
		jw_close(w, '}');
		trace_events_end_event(p->te);
	}
}

int perfetto_export_finish(perfetto_export_t *p, const struct analysis_result *r, const findings_t *findings,
			   char *why, size_t whylen)
{
	struct jw *w;
	int rc;

	name_processes(p, r);
	write_findings(p, r, findings);
	w = trace_events_end_events(p->te);
	jw_str(w, "displayTimeUnit", "ms");
	jw_open(w, "otherData", '{');
	jw_str(w, "exporter", "fsdpscope export --perfetto");
	jw_str(w, "time", "host CLOCK_MONOTONIC of each rank, microseconds (ns as three decimals)");
	jw_close(w, '}');
	rc = trace_events_finish(p->te);
	if (rc) {
		snprintf(why, whylen, "%s: %s", p->path, strerror(-rc));
		return rc;
	}
	rc = out_file_commit(p->of, why, whylen);
	p->of = NULL;
	p->f = NULL;
	p->finished = !rc;
	return rc;
}

uint64_t perfetto_export_events(const perfetto_export_t *p)
{
	return trace_events_count(p->te);
}

void perfetto_export_free(perfetto_export_t *p)
{
	if (!p)
		return;
	out_file_free(p->of); /* an unfinished file never replaces what was there */
	trace_events_free(p->te);
	for (size_t i = 0; i < p->nsrc; i++) {
		free(p->src[i].threads);
		free(p->src[i].streams);
	}
	free(p->src);
	free(p->steps);
	free(p->path);
	free(p);
}
