/*
 * timeline.c - per-rank timelines from a trace's records (see timeline.h).
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/source.h"
#include "collector/steps.h"
#include "collector/timeline.h"

struct timeline {
	sources_t *layer;
	int owns_layer;             /* timeline_new made it; else the view's owner feeds it */
	const char *step_ranges;
	const char *compute_ranges;
	struct tl_source **sources; /* arrival order */
	size_t nsources, sources_cap;
	struct tl_source *last;     /* the source of the previous record: records come in runs */
	struct tl_source *touched;  /* the source of the record being fed, NULL */
	struct timeline_stats stats;
};

/* ---- arrays ------------------------------------------------------------- */

static void tl_array_init(struct tl_array *a, size_t size)
{
	memset(a, 0, sizeof *a);
	a->size = size;
}

static void *tl_array_push(struct tl_array *a)
{
	if (a->n == a->cap) {
		if (a->head > 0 && a->head >= a->n / 2) {
			/* reuse the taken front before growing */
			memmove(a->v, (char *)a->v + a->head * a->size, (a->n - a->head) * a->size);
			a->n -= a->head;
			a->head = 0;
		} else {
			size_t cap = a->cap ? 2 * a->cap : 64;
			void *v = realloc(a->v, cap * a->size);
			if (!v)
				return NULL;
			a->v = v;
			a->cap = cap;
		}
	}
	void *item = (char *)a->v + a->n * a->size;
	a->n++;
	memset(item, 0, a->size);
	return item;
}

void tl_array_take(struct tl_array *a, size_t k)
{
	size_t live = a->n - a->head;
	a->head += k < live ? k : live;
	if (a->head == a->n)
		a->head = a->n = 0;
}

/* ---- names ------------------------------------------------------------- */

struct name_index {
	uint32_t *slot; /* name number + 1, 0 empty */
	size_t cap;
};

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The number of name s in the source's table (from 1), added if new; 0 on ENOMEM. */
static uint32_t name_intern(struct tl_source *src, const char *s)
{
	struct name_index *ix = src->name_index;
	if (!ix) {
		ix = calloc(1, sizeof *ix);
		if (!ix)
			return 0;
		src->name_index = ix;
	}
	if ((src->nnames + 1) * 2 > ix->cap) {
		size_t cap = ix->cap ? 2 * ix->cap : 64;
		uint32_t *slot = calloc(cap, sizeof *slot);
		if (!slot)
			return 0;
		for (size_t i = 0; i < src->nnames; i++) {
			size_t h = name_hash(src->names[i]) & (cap - 1);
			while (slot[h])
				h = (h + 1) & (cap - 1);
			slot[h] = (uint32_t)i + 1;
		}
		free(ix->slot);
		ix->slot = slot;
		ix->cap = cap;
	}
	size_t h = name_hash(s) & (ix->cap - 1);
	while (ix->slot[h]) {
		if (strcmp(src->names[ix->slot[h] - 1], s) == 0)
			return ix->slot[h];
		h = (h + 1) & (ix->cap - 1);
	}
	if (src->nnames == src->names_cap) {
		size_t cap = src->names_cap ? 2 * src->names_cap : 32;
		char **names = realloc(src->names, cap * sizeof *names);
		if (!names)
			return 0;
		src->names = names;
		src->names_cap = cap;
	}
	char *copy = strdup(s);
	if (!copy)
		return 0;
	src->names[src->nnames++] = copy;
	ix->slot[h] = (uint32_t)src->nnames;
	return (uint32_t)src->nnames;
}

const char *timeline_string(const timeline_t *t, uint32_t source, uint32_t id)
{
	const char *s = sources_string(t->layer, source, id);
	return s ? s : "";
}

const sources_t *timeline_layer(const timeline_t *t)
{
	return t->layer;
}

const char *timeline_name(const struct tl_source *s, uint32_t name)
{
	if (name == 0 || name > s->nnames)
		return "";
	return s->names[name - 1];
}

/* ---- patterns ------------------------------------------------------------ */

int timeline_pattern_match(const char *patterns, const char *domain, const char *name)
{
	if (!patterns)
		return 0;
	int result = 0;
	const char *p = patterns;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char item[256];
		if (len < sizeof item) {
			memcpy(item, p, len);
			item[len] = '\0';
			char *it = item;
			int exclude = 0;
			while (*it == ' ')
				it++;
			if (*it == '-') {
				exclude = 1;
				it++;
			}
			char *colon = strchr(it, ':');
			const char *dglob = "*", *nglob = it;
			if (colon) {
				*colon = '\0';
				dglob = it;
				nglob = colon + 1;
			}
			if (*nglob && fnmatch(dglob, domain, 0) == 0 && fnmatch(nglob, name, 0) == 0)
				result = !exclude;
		}
		if (!end)
			break;
		p = end + 1;
	}
	return result;
}

/* ---- sources ------------------------------------------------------------- */

static struct tl_source *source_get(timeline_t *t, uint32_t id)
{
	if (t->last && t->last->id == id)
		return t->last;
	for (size_t i = 0; i < t->nsources; i++) {
		if (t->sources[i]->id == id) {
			t->last = t->sources[i];
			return t->last;
		}
	}
	if (t->nsources == t->sources_cap) {
		size_t cap = t->sources_cap ? 2 * t->sources_cap : 8;
		struct tl_source **v = realloc(t->sources, cap * sizeof *v);
		if (!v)
			return NULL;
		t->sources = v;
		t->sources_cap = cap;
	}
	struct tl_source *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->id = id;
	s->hello_rank = FSS_RANK_UNKNOWN;
	s->rank = FSS_RANK_UNKNOWN;
	tl_array_init(&s->events, sizeof(struct tl_event));
	tl_array_init(&s->ranges, sizeof(struct tl_range));
	tl_array_init(&s->gpu, sizeof(struct tl_gpu));
	t->sources[t->nsources++] = s;
	t->last = s;
	return s;
}

static void source_free(struct tl_source *s)
{
	free(s->comms);
	free(s->events.v);
	free(s->ranges.v);
	free(s->gpu.v);
	for (size_t i = 0; i < s->nnames; i++)
		free(s->names[i]);
	free(s->names);
	struct name_index *ix = s->name_index;
	if (ix)
		free(ix->slot);
	free(ix);
	free(s);
}

static const struct source_ops timeline_layer_ops;

timeline_t *timeline_new_on(sources_t *view, const char *step_ranges, const char *compute_ranges)
{
	timeline_t *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->layer = view;
	t->step_ranges = step_ranges;
	t->compute_ranges = compute_ranges;
	return t;
}

timeline_t *timeline_new(const char *step_ranges, const char *compute_ranges)
{
	timeline_t *t = timeline_new_on(NULL, step_ranges, compute_ranges);
	if (!t)
		return NULL;
	t->layer = sources_new(&timeline_layer_ops, t);
	if (!t->layer) {
		free(t);
		return NULL;
	}
	t->owns_layer = 1;
	return t;
}

void timeline_free(timeline_t *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nsources; i++)
		source_free(t->sources[i]);
	free(t->sources);
	if (t->owns_layer)
		sources_free(t->layer);
	free(t);
}

size_t timeline_sources(const timeline_t *t)
{
	return t->nsources;
}

struct tl_source *timeline_source(const timeline_t *t, size_t i)
{
	return i < t->nsources ? t->sources[i] : NULL;
}

void timeline_stats(const timeline_t *t, struct timeline_stats *out)
{
	*out = t->stats;
}

static struct tl_comm *comm_find(struct tl_source *s, uint64_t handle)
{
	for (size_t i = s->ncomms; i-- > 0;)
		if (s->comms[i].handle == handle)
			return &s->comms[i];
	return NULL;
}

/* The layer's communicator `index` of src, mirrored with its call count. */
static int comm_mirror(struct tl_source *s, const struct source *src, size_t index)
{
	const struct source_comm *c = &src->comms[index];
	if (index >= s->ncomms) {
		if (index >= s->comms_cap) {
			size_t cap = s->comms_cap ? 2 * s->comms_cap : 8;
			while (cap <= index)
				cap *= 2;
			struct tl_comm *v = realloc(s->comms, cap * sizeof *v);
			if (!v)
				return -ENOMEM;
			s->comms = v;
			s->comms_cap = cap;
		}
		s->ncomms = index + 1;
	}
	s->comms[index] = (struct tl_comm){.handle = c->handle,
					   .id_hash = c->id_hash,
					   .nranks = c->nranks,
					   .rank = c->rank,
					   .device = c->device,
					   .dimension = c->dimension,
					   .parent = c->parent,
					   .splits = c->splits,
					   .name = c->name,
					   .color = c->color,
					   /* an observed communicator's calls are numbered as its first call's
					      number says, so that the same call has the same number on every rank */
					   .calls = c->first_call > 1 ? (uint32_t)(c->first_call - 1) : 0};
	/* a split counts on its parent: keep the parents' counters in step */
	for (size_t i = 0; i < s->ncomms && i < src->ncomms; i++)
		s->comms[i].splits = src->comms[i].splits;
	return 0;
}

/* Append the assembled group (or single call) as an event. */
static int event_close(struct tl_source *s, struct tl_event *e)
{
	if (e->calls == 0)
		return 0;
	struct tl_event *slot = tl_array_push(&s->events);
	if (!slot)
		return -ENOMEM;
	e->sig = steps_signature(e->op, e->bytes, e->calls, e->nranks);
	*slot = *e;
	memset(e, 0, sizeof *e);
	return 0;
}

static int on_collective(struct tl_source *s, const struct fss_rec_collective *c)
{
	s->collectives++;
	s->op_calls[c->op < FSS_OP_MAX ? c->op : 0]++;
	struct tl_comm *m = comm_find(s, c->comm);
	int32_t nranks = m ? m->nranks : 1;
	size_t dsize = record_dtype_bytes(c->dtype);
	struct tl_event e = {0};
	e.seq_first = e.seq_last = c->seq;
	e.enter_ns = c->enter_ns;
	e.exit_ns = c->exit_ns;
	e.launch_ns = c->enter_ns;
	e.bytes = c->bytes;
	e.elements = c->count;
	if (c->op == FSS_OP_ALLGATHER || c->op == FSS_OP_REDUCESCATTER)
		e.elements = c->count * (uint64_t)(nranks > 0 ? nranks : 1);
	e.wire_bytes = c->op == FSS_OP_ALLREDUCE ? 2 * c->bytes : e.elements * dsize;
	if (c->op != FSS_OP_ALLGATHER && c->op != FSS_OP_REDUCESCATTER && c->op != FSS_OP_ALLREDUCE)
		e.wire_bytes = c->bytes;
	e.comm_hash = m ? m->id_hash : 0;
	e.comm_slot = m ? (uint32_t)(m - s->comms) : UINT32_MAX;
	e.count = c->count;
	e.stream = c->stream;
	e.calls = 1;
	e.moving_calls = c->count > 0;
	e.nranks = nranks;
	e.comm_index = m ? m->calls++ : 0;
	e.thread = c->thread;
	e.group_id = c->group_id;
	e.op = c->op;
	e.dtype = c->dtype;
	if (c->exit_ns > s->last_ns)
		s->last_ns = c->exit_ns;

	struct tl_event *o = &s->open;
	if (o->calls && (c->group_id == 0 || c->group_id != o->group_id)) {
		int rc = event_close(s, o);
		if (rc < 0)
			return rc;
	}
	if (c->group_id == 0)
		return event_close(s, &e);
	if (!o->calls) {
		*o = e;
		return 0;
	}
	o->seq_last = c->seq;
	if (c->exit_ns > o->exit_ns)
		o->exit_ns = c->exit_ns;
	o->bytes += e.bytes;
	o->elements += e.elements;
	o->wire_bytes += e.wire_bytes;
	o->calls++;
	o->moving_calls += e.moving_calls;
	return 0;
}

static int on_group(struct tl_source *s, const struct fss_rec_group *g)
{
	struct tl_event *o = &s->open;
	if (!o->calls || o->group_id != g->group_id)
		return 0;
	/* a group runs at ncclGroupEnd: that is its interval */
	o->launch_ns = g->end_enter_ns;
	if (g->end_exit_ns > o->exit_ns)
		o->exit_ns = g->end_exit_ns;
	if (g->end_exit_ns > s->last_ns)
		s->last_ns = g->end_exit_ns;
	return event_close(s, o);
}

static int on_range(timeline_t *t, struct tl_source *s, const struct fss_rec_nvtx_range *r, const char *domain,
		    const char *name)
{
	int is_step = timeline_pattern_match(t->step_ranges, domain, name);
	int is_compute = !is_step && timeline_pattern_match(t->compute_ranges, domain, name);
	if (!is_step && !is_compute)
		return 0;
	uint32_t id = 0;
	if (is_compute && !(id = name_intern(s, name)))
		return -ENOMEM;
	struct tl_range *slot = tl_array_push(&s->ranges);
	if (!slot)
		return -ENOMEM;
	slot->start = r->start_ns;
	slot->end = r->end_ns;
	slot->thread = r->thread;
	slot->name = id;
	slot->is_step = (uint8_t)is_step;
	slot->is_compute = (uint8_t)is_compute;
	if (is_step) {
		s->step_ranges++;
		snprintf(s->step_name, sizeof s->step_name, "%s", name);
	}
	return 0;
}

static int on_gpu(struct tl_source *s, const struct fss_rec_gpu_interval *g)
{
	struct tl_gpu *slot = tl_array_push(&s->gpu);
	if (!slot)
		return -ENOMEM;
	slot->start = g->start_ns + (uint64_t)s->cupti_offset; /* wraps: two's complement */
	slot->end = g->end_ns + (uint64_t)s->cupti_offset;
	slot->collective_seq = g->collective_seq;
	slot->device = g->device;
	slot->kind = g->kind;
	if (slot->end > s->gpu_seen_end)
		s->gpu_seen_end = slot->end;
	if (g->kind == FSS_GPU_COMM)
		s->gpu_comm_seen++;
	return 0;
}

/* The layer has taken in a record: the timeline's part of it. */
static int layer_on_record(void *ctx, struct source *src, const struct fss_record_head *rec)
{
	timeline_t *t = ctx;
	if (!src || rec->type == FSS_REC_STRING || rec->type >= FSS_REC_TYPE_MAX || rec->type == 0)
		return 0;
	struct tl_source *s = source_get(t, rec->source);
	if (!s)
		return -ENOMEM;
	t->touched = s;
	if (s->view && rec->type != FSS_REC_PROCESS_HELLO && rec->type != FSS_REC_COMM &&
	    rec->type != FSS_REC_CLOCK_ANCHOR && rec->type != FSS_REC_DROPS && rec->type != FSS_REC_NVTX_RANGE)
		goto timeline_part; /* nothing the analysis reads of the source changed */
	/* the facts the analysis reads, as the layer decided them */
	s->view = src;
	s->pid = src->pid;
	s->hello_rank = src->hint_rank >= 0 ? src->hint_rank
			: src->hint_slurm_procid >= 0 ? src->hint_slurm_procid
						       : src->hint_ompi_rank;
	s->rank = src->rank;
	s->world_size = src->world_size;
	s->features = src->features;
	s->realtime_offset = src->realtime_offset;
	s->cupti_offset = src->cupti_offset;
	s->have_cupti_anchor = src->have_cupti_anchor;
	s->dropped = src->dropped;
timeline_part:
	switch (rec->type) {
	case FSS_REC_COLLECTIVE:
		t->stats.collectives++;
		return on_collective(s, (const void *)rec);
	case FSS_REC_GROUP:
		return on_group(s, (const void *)rec);
	case FSS_REC_GPU_INTERVAL:
		t->stats.gpu_intervals++;
		return on_gpu(s, (const void *)rec);
	case FSS_REC_NVTX_RANGE:
		t->stats.nvtx_ranges++;
		if (((const struct fss_rec_nvtx_range *)rec)->end_ns > s->last_ns)
			s->last_ns = ((const struct fss_rec_nvtx_range *)rec)->end_ns;
		return 0; /* the range itself comes through layer_on_nvtx_range once named */
	case FSS_REC_PROCESS_END:
	case FSS_REC_PROCESS_EXIT:
		s->ended = 1;
		return event_close(s, &s->open);
	default:
		return 0;
	}
}

static int layer_on_nvtx_range(void *ctx, struct source *src, const struct fss_rec_nvtx_range *r,
			       const char *domain, const char *name)
{
	timeline_t *t = ctx;
	struct tl_source *s = source_get(t, src->id);
	if (!s)
		return -ENOMEM;
	return on_range(t, s, r, domain, name);
}

static int layer_on_comm(void *ctx, struct source *src, size_t index)
{
	timeline_t *t = ctx;
	struct tl_source *s = source_get(t, src->id);
	if (!s)
		return -ENOMEM;
	return comm_mirror(s, src, index);
}

static const struct source_ops timeline_layer_ops = {
	.on_record = layer_on_record,
	.on_nvtx_range = layer_on_nvtx_range,
	.on_comm = layer_on_comm,
};

const struct source_ops *timeline_view_ops(void)
{
	return &timeline_layer_ops;
}

int timeline_feed(timeline_t *t, const struct fss_record_head *rec, struct tl_source **touched)
{
	int rc = 0;
	*touched = NULL;
	if (rec->source == FSS_SOURCE_NONE)
		return 0; /* trace_end: the file's, no process's */
	t->stats.records++;
	if (t->owns_layer) {
		t->touched = NULL;
		rc = sources_feed(t->layer, rec);
	}
	/* a borrowed view has taken the record in already: its owner passed
	 * the callbacks on (timeline_view_ops), which noted the source */
	*touched = t->touched;
	t->touched = NULL;
	return rc == -ENOMEM ? -ENOMEM : 0;
}

int timeline_flush_groups(timeline_t *t)
{
	sources_finish(t->layer);
	for (size_t i = 0; i < t->nsources; i++)
		t->sources[i]->dropped = t->sources[i]->view ? t->sources[i]->view->dropped : 0;
	for (size_t i = 0; i < t->nsources; i++) {
		int rc = event_close(t->sources[i], &t->sources[i]->open);
		if (rc < 0)
			return rc;
	}
	return 0;
}
