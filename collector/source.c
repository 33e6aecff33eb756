/*
 * source.c - the per-source view of a trace (see source.h).
 */
#include "collector/source.h"

#include "common/arith.h"

#include "common/strtab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Source ids below this are looked up in a direct index (merged traces
 * number their sources from 0); larger ones by a scan. */
#define SOURCES_DIRECT_MAX (1u << 20)

struct pending_range {
	struct fss_rec_nvtx_range rec;
};

/* The layer's private part of a source; the public view comes first. */
struct source_state {
	struct source pub;
	size_t comms_cap;
	struct pending_range *pending; /* NVTX ranges waiting for strings, arrival order */
	size_t npending, cap_pending;
	uint64_t seen_seqs;            /* collective records with a seq (>= 1) */
};

struct sources {
	const struct source_ops *ops;
	void *ctx;
	strtab_t *strings;
	struct source_state **list; /* arrival order */
	size_t n, cap;
	struct source_state **direct; /* [ndirect] by id, NULL where none */
	size_t ndirect;
	struct source_state *last;  /* records come in runs of one source */
};

static const struct source_ops no_ops;

sources_t *sources_new(const struct source_ops *ops, void *ctx)
{
	sources_t *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->strings = strtab_new();
	if (!s->strings) {
		free(s);
		return NULL;
	}
	s->ops = ops ? ops : &no_ops;
	s->ctx = ctx;
	return s;
}

void sources_free(sources_t *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->list[i]->pub.comms);
		free(s->list[i]->pending);
		free(s->list[i]);
	}
	free(s->list);
	free(s->direct);
	strtab_free(s->strings);
	free(s);
}

size_t sources_count(const sources_t *s)
{
	return s->n;
}

struct source *sources_at(const sources_t *s, size_t i)
{
	return i < s->n ? &s->list[i]->pub : NULL;
}

static struct source_state *state_find(const sources_t *s, uint32_t id)
{
	if (s->last && s->last->pub.id == id)
		return s->last;
	if (id < SOURCES_DIRECT_MAX)
		return id < s->ndirect ? s->direct[id] : NULL;
	for (size_t i = 0; i < s->n; i++)
		if (s->list[i]->pub.id == id)
			return s->list[i];
	return NULL;
}

struct source *sources_find(const sources_t *s, uint32_t id)
{
	struct source_state *st = state_find(s, id);

	return st ? &st->pub : NULL;
}

const char *sources_string(const sources_t *s, uint32_t source, uint32_t id)
{
	return id == FSS_STRING_NONE ? NULL : strtab_get(s->strings, source, id);
}

static struct source_state *state_get(sources_t *s, uint32_t id)
{
	struct source_state *st = state_find(s, id);

	if (st)
		return s->last = st;
	if (id < SOURCES_DIRECT_MAX && id >= s->ndirect) {
		size_t n = s->ndirect ? s->ndirect : 16;
		struct source_state **v;

		while (n <= id)
			n *= 2;
		v = realloc(s->direct, n * sizeof(*v));
		if (!v)
			return NULL;
		memset(v + s->ndirect, 0, (n - s->ndirect) * sizeof(*v));
		s->direct = v;
		s->ndirect = n;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct source_state **v = realloc(s->list, cap * sizeof(*v));

		if (!v)
			return NULL;
		s->list = v;
		s->cap = cap;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->pub.id = id;
	st->pub.rank = FSS_RANK_UNKNOWN;
	st->pub.hint_rank = st->pub.hint_local_rank = st->pub.hint_world_size = FSS_RANK_UNKNOWN;
	st->pub.hint_slurm_procid = st->pub.hint_ompi_rank = FSS_RANK_UNKNOWN;
	st->pub.end_exit_code = -1;
	s->list[s->n++] = st;
	if (id < SOURCES_DIRECT_MAX)
		s->direct[id] = st;
	return s->last = st;
}

/* ---- rank ------------------------------------------------------------- */

static void rank_decide(struct source *src)
{
	int32_t best = 0;

	src->rank = FSS_RANK_UNKNOWN;
	src->rank_from = SOURCE_RANK_UNKNOWN;
	src->world_size = 0;
	for (size_t i = 0; i < src->ncomms; i++) {
		const struct source_comm *c = &src->comms[i];

		if (c->nranks > best) {
			best = c->nranks;
			src->rank = c->rank;
			src->world_size = c->nranks;
			src->rank_from = SOURCE_RANK_COMMUNICATOR;
			/* the strongest evidence attach had says where it came from */
			if (c->inferred & FSS_COMM_INFER_RANK_INPLACE)
				src->rank_from = SOURCE_RANK_INFERRED_INPLACE;
			else if (c->inferred & FSS_COMM_INFER_RANK_ENV)
				src->rank_from = SOURCE_RANK_INFERRED_ENV;
			else if (c->inferred & FSS_COMM_INFER_RANK_ORDER)
				src->rank_from = SOURCE_RANK_GUESSED_ORDER;
		}
	}
	if (src->rank_from != SOURCE_RANK_UNKNOWN)
		return;
	if (src->hint_rank >= 0) {
		src->rank = src->hint_rank;
		src->rank_from = SOURCE_RANK_ENV_RANK;
	} else if (src->hint_slurm_procid >= 0) {
		src->rank = src->hint_slurm_procid;
		src->rank_from = SOURCE_RANK_SLURM_PROCID;
	} else if (src->hint_ompi_rank >= 0) {
		src->rank = src->hint_ompi_rank;
		src->rank_from = SOURCE_RANK_OMPI_RANK;
	}
}

/* ---- records ----------------------------------------------------------- */

static void note_time(struct source *src, uint64_t ns)
{
	if (!ns)
		return;
	if (!src->first_ns || ns < src->first_ns)
		src->first_ns = ns;
	if (ns > src->last_ns)
		src->last_ns = ns;
}

static void on_hello(struct source *src, const struct fss_rec_process_hello *h)
{
	src->has_hello = 1;
	src->pid = h->pid;
	src->ppid = h->ppid;
	src->host = h->host;
	src->command = h->command;
	src->hint_rank = h->rank;
	src->hint_local_rank = h->local_rank;
	src->hint_world_size = h->world_size;
	src->hint_slurm_procid = h->slurm_procid;
	src->hint_ompi_rank = h->ompi_rank;
	src->path = h->path;
	src->agent_version = h->agent_version;
	src->features = h->features;
	src->realtime_offset = (int64_t)(h->realtime_ns - h->mono_ns);
	note_time(src, h->mono_ns);
	rank_decide(src);
}

static struct source_comm *comm_find(struct source *src, uint64_t handle)
{
	for (size_t i = src->ncomms; i-- > 0;)
		if (src->comms[i].handle == handle)
			return &src->comms[i];
	return NULL;
}

const struct source_comm *source_comm_find(const struct source *src, uint64_t handle)
{
	return comm_find((struct source *)src, handle);
}

/* An init, split or observed communicator: add it (or replace one whose
 * handle was reused); *index gets where, SIZE_MAX when nothing changed. An
 * observed one (attach saw it first in use) is a communicator like an init:
 * its dimension is its id_hash, what was inferred is kept beside it. */
static int on_comm(struct source_state *st, const struct fss_rec_comm *c, size_t *index)
{
	struct source *src = &st->pub;
	struct source_comm *m, *parent;
	uint64_t dimension = c->id_hash;

	*index = SIZE_MAX;
	note_time(src, c->exit_ns);
	if (c->event != FSS_COMM_INIT && c->event != FSS_COMM_SPLIT && c->event != FSS_COMM_OBSERVED)
		return 0;
	m = c->comm ? comm_find(src, c->comm) : NULL;
	if (m && m->id_hash == c->id_hash && m->inferred == (c->event == FSS_COMM_OBSERVED ? c->inferred : 0u))
		return 0; /* a replay (the agent sends its communicators again on a new sink) */
	/* Every rank of the parent makes the same splits in the same order, a
	 * rank left out of the new group (no color, no communicator) included:
	 * count them all, so that later splits agree on their number. */
	parent = c->event == FSS_COMM_SPLIT && c->parent_comm ? comm_find(src, c->parent_comm) : NULL;
	if (parent) {
		/* splitmix64's finaliser: neighbouring split numbers differ in every
		 * digit, so that a few leading hex digits name one (--fsdp-comm) */
		uint64_t x = parent->dimension ^ (0x9e3779b97f4a7c15ull * (parent->splits++ + 1));

		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
		x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
		dimension = x ^ (x >> 31);
	}
	/* a communicator that cannot be (damaged record) is ignored */
	if (c->result != 0 || c->comm == 0 || c->nranks <= 0 || c->nranks > (1 << 24) || c->rank < 0 ||
	    c->rank >= c->nranks)
		return 0;
	if (!m) {
		if (src->ncomms == st->comms_cap) {
			size_t cap = st->comms_cap ? 2 * st->comms_cap : 8;
			struct source_comm *v = realloc(src->comms, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			src->comms = v;
			st->comms_cap = cap;
		}
		m = &src->comms[src->ncomms++];
	}
	*m = (struct source_comm){.handle = c->comm,
				  .id_hash = c->id_hash,
				  .dimension = dimension,
				  .parent = c->event == FSS_COMM_SPLIT ? c->parent_comm : 0,
				  .nranks = c->nranks,
				  .rank = c->rank,
				  .device = c->device,
				  .color = c->event == FSS_COMM_SPLIT ? c->color : -1,
				  .name = c->name,
				  .inferred = c->event == FSS_COMM_OBSERVED ? c->inferred : 0,
				  .observed = c->event == FSS_COMM_OBSERVED,
				  .first_call = c->event == FSS_COMM_OBSERVED ? c->first_call : 0};
	*index = (size_t)(m - src->comms);
	rank_decide(src);
	return 0;
}

static void drops_sum(struct source *src)
{
	const struct source_drops *d = &src->drops;

	const uint64_t parts[] = {d->ring, d->sink, d->cupti, d->nvtx, d->nvtx_unnamed};

	src->dropped = 0;
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		src->dropped = u64_add_sat(src->dropped, parts[i]);
}

/* The strings of a range, NULL when one has not arrived. */
static int range_strings(const sources_t *s, const struct fss_rec_nvtx_range *r, const char **domain,
			 const char **name)
{
	*name = strtab_get(s->strings, r->head.source, r->name);
	*domain = r->domain ? strtab_get(s->strings, r->head.source, r->domain) : "";
	return *name && *domain;
}

static int on_range(sources_t *s, struct source_state *st, const struct fss_rec_nvtx_range *r)
{
	const char *domain, *name;

	note_time(&st->pub, r->end_ns);
	if (range_strings(s, r, &domain, &name))
		return s->ops->on_nvtx_range ? s->ops->on_nvtx_range(s->ctx, &st->pub, r, domain, name) : 0;
	if (r->name == FSS_STRING_NONE || st->npending >= SOURCE_NVTX_PENDING_MAX) {
		/* no name will ever come, or too many wait: the range is lost */
		st->pub.drops.nvtx_unnamed++;
		drops_sum(&st->pub);
		return 0;
	}
	if (st->npending == st->cap_pending) {
		size_t cap = st->cap_pending ? 2 * st->cap_pending : 16;
		struct pending_range *v = realloc(st->pending, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		st->pending = v;
		st->cap_pending = cap;
	}
	memcpy(&st->pending[st->npending++].rec, r, sizeof(*r));
	st->pub.nvtx_pending = st->npending;
	return 0;
}

/* A string of the source completed: hand over the waiting ranges it named
 * (in their order), keep the others. */
static int pending_release(sources_t *s, struct source_state *st)
{
	size_t kept = 0, i;
	int rc = 0;

	for (i = 0; i < st->npending && rc == 0; i++) {
		const struct fss_rec_nvtx_range *r = &st->pending[i].rec;
		const char *domain, *name;

		if (!range_strings(s, r, &domain, &name)) {
			st->pending[kept++] = st->pending[i];
			continue;
		}
		if (s->ops->on_nvtx_range)
			rc = s->ops->on_nvtx_range(s->ctx, &st->pub, r, domain, name);
	}
	for (; i < st->npending; i++)
		st->pending[kept++] = st->pending[i];
	st->npending = kept;
	st->pub.nvtx_pending = kept;
	return rc;
}

static int on_string(sources_t *s, struct source_state *st, const struct fss_rec_string *part)
{
	int rc = strtab_add_part(s->strings, part);

	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return 0; /* a part that does not fit its string: ignored, as the reader's table does */
	if (st->npending && strtab_get(s->strings, part->head.source, part->id))
		return pending_release(s, st);
	return 0;
}

static void on_collective(struct source_state *st, const struct fss_rec_collective *c)
{
	struct source *src = &st->pub;

	src->collectives++;
	note_time(src, c->exit_ns);
	if (c->seq == 0)
		return;
	st->seen_seqs++;
	if (c->seq > src->max_seq)
		src->max_seq = c->seq;
}

static void on_device(struct source *src, const struct fss_rec_device *d)
{
	size_t i = 0;

	while (i < src->ndevices && src->devices[i].device != d->device)
		i++;
	if (i == SOURCE_DEVICES_MAX)
		return;
	src->devices[i] = *d;
	if (i == src->ndevices)
		src->ndevices++;
}

const struct fss_rec_device *source_device_first(const struct source *src)
{
	return src && src->ndevices ? &src->devices[0] : NULL;
}

int sources_feed(sources_t *s, const struct fss_record_head *rec)
{
	struct source_state *st;
	struct source *src;
	size_t comm_index = SIZE_MAX;
	int rc = 0;

	if (rec->type == FSS_REC_TRACE_END || rec->source == FSS_SOURCE_NONE)
		return s->ops->on_record ? s->ops->on_record(s->ctx, NULL, rec) : 0;
	st = state_get(s, rec->source);
	if (!st)
		return -ENOMEM;
	src = &st->pub;
	src->records++;
	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO:
		on_hello(src, (const void *)rec);
		break;
	case FSS_REC_STRING:
		rc = on_string(s, st, (const void *)rec);
		break;
	case FSS_REC_COMM:
		rc = on_comm(st, (const void *)rec, &comm_index);
		break;
	case FSS_REC_COLLECTIVE:
		on_collective(st, (const void *)rec);
		break;
	case FSS_REC_GROUP:
		note_time(src, ((const struct fss_rec_group *)rec)->end_exit_ns);
		break;
	case FSS_REC_ENTER:
		/* a call entered: while it blocks, the source's latest time */
		note_time(src, ((const struct fss_rec_enter *)rec)->enter_ns);
		break;
	case FSS_REC_SYNC_EXIT:
		note_time(src, ((const struct fss_rec_sync_exit *)rec)->exit_ns);
		break;
	case FSS_REC_CLOCK_ANCHOR: {
		const struct fss_rec_clock_anchor *a = (const void *)rec;

		if (a->domain == FSS_CLOCK_CUPTI) {
			src->cupti_offset = (int64_t)(a->mono_ns - a->other_ns);
			src->have_cupti_anchor = 1;
		}
		break;
	}
	case FSS_REC_DROPS: {
		/* cumulative counters: the latest record has the totals */
		const struct fss_rec_drops *d = (const void *)rec;

		src->drops.ring = d->ring_dropped;
		src->drops.sink = d->sink_dropped;
		src->drops.cupti = d->cupti_dropped;
		src->drops.nvtx = d->nvtx_dropped;
		drops_sum(src);
		note_time(src, d->at_ns);
		break;
	}
	case FSS_REC_PROCESS_END: {
		const struct fss_rec_process_end *e = (const void *)rec;

		src->has_process_end = 1;
		src->end_exit_code = e->exit_code;
		src->end_collectives = e->collectives;
		note_time(src, e->at_ns);
		break;
	}
	case FSS_REC_PROCESS_EXIT: {
		/* the session's clock, not the process's: not a record time of it */
		const struct fss_rec_process_exit *x = (const void *)rec;

		src->has_exit = 1;
		src->wait_status = x->wait_status;
		src->exit_at_ns = x->at_ns;
		break;
	}
	case FSS_REC_DEVICE:
		on_device(src, (const void *)rec);
		break;
	case FSS_REC_SOURCE_FIGURES:
		/* the whole file's figures, sent once at the source's end */
		src->have_figures = 1;
		src->figures = *(const struct fss_rec_source_figures *)rec;
		break;
	default:
		break;
	}
	if (rc)
		return rc;
	if (comm_index != SIZE_MAX && s->ops->on_comm && (rc = s->ops->on_comm(s->ctx, src, comm_index)))
		return rc;
	if (s->ops->on_record && (rc = s->ops->on_record(s->ctx, src, rec)))
		return rc;
	if (rec->type == FSS_REC_NVTX_RANGE)
		rc = on_range(s, st, (const void *)rec);
	return rc;
}

int sources_finish(sources_t *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct source_state *st = s->list[i];

		st->pub.drops.nvtx_unnamed += st->npending;
		st->npending = 0;
		st->pub.nvtx_pending = 0;
		drops_sum(&st->pub);
	}
	return 0;
}

/* ---- how it ended -------------------------------------------------------- */

int source_is_attached(const struct source *src)
{
	return src->has_hello && src->path == FSS_PATH_UPROBE;
}

enum source_end source_end_of(const struct source *src)
{
	/* attach writes no process_end: its process_exit (the kernel saw the
	 * process go) is the whole end, and without one the process was
	 * still running when attach let it go */
	int whole = src->has_process_end || source_is_attached(src);

	if (src->has_exit) {
		if (WIFSIGNALED(src->wait_status))
			return SOURCE_END_SIGNALED;
		if (WIFEXITED(src->wait_status))
			return WEXITSTATUS(src->wait_status) == 0 && whole ? SOURCE_END_CLEAN : SOURCE_END_EXITED;
	}
	if (src->has_process_end)
		return src->end_exit_code > 0 ? SOURCE_END_EXITED : SOURCE_END_CLEAN;
	if (src->has_hello && src->path == FSS_PATH_KINETO)
		return SOURCE_END_NOT_KNOWN;
	return source_is_attached(src) ? SOURCE_END_DETACHED : SOURCE_END_CUT_OFF;
}

int source_end_whole(enum source_end end)
{
	return end == SOURCE_END_CLEAN || end == SOURCE_END_DETACHED || end == SOURCE_END_NOT_KNOWN;
}

int32_t source_exit_code(const struct source *src)
{
	if (src->has_exit)
		return WIFEXITED(src->wait_status) ? WEXITSTATUS(src->wait_status) : -1;
	return src->has_process_end ? src->end_exit_code : -1;
}

int source_signal(const struct source *src)
{
	return src->has_exit && WIFSIGNALED(src->wait_status) ? WTERMSIG(src->wait_status) : 0;
}

uint64_t source_collectives_missing(const struct source *src)
{
	/* the public view is the first member of the layer's state */
	const struct source_state *st = (const struct source_state *)src;
	uint64_t made = src->max_seq > src->end_collectives ? src->max_seq : src->end_collectives;

	return made > st->seen_seqs ? made - st->seen_seqs : 0;
}

const char *source_end_name(enum source_end end)
{
	switch (end) {
	case SOURCE_END_CUT_OFF:
		return "cut-off";
	case SOURCE_END_CLEAN:
		return "clean";
	case SOURCE_END_EXITED:
		return "exited";
	case SOURCE_END_SIGNALED:
		return "signaled";
	case SOURCE_END_DETACHED:
		return "detached";
	case SOURCE_END_NOT_KNOWN:
		return "not-known";
	}
	return "unknown";
}

const char *source_rank_from_name(enum source_rank_from from)
{
	switch (from) {
	case SOURCE_RANK_COMMUNICATOR:
		return "communicator";
	case SOURCE_RANK_ENV_RANK:
		return "RANK";
	case SOURCE_RANK_SLURM_PROCID:
		return "SLURM_PROCID";
	case SOURCE_RANK_OMPI_RANK:
		return "OMPI_COMM_WORLD_RANK";
	case SOURCE_RANK_INFERRED_INPLACE:
		return "inferred:in-place-allgather";
	case SOURCE_RANK_INFERRED_ENV:
		return "inferred:environment";
	case SOURCE_RANK_GUESSED_ORDER:
		return "guessed:pid-order";
	case SOURCE_RANK_UNKNOWN:
		break;
	}
	return "unknown";
}

int source_rank_is_guess(enum source_rank_from from)
{
	return from == SOURCE_RANK_GUESSED_ORDER;
}

static void copy_text(char *dst, const char *s)
{
	snprintf(dst, SOURCE_TEXT_MAX, "%s", s ? s : "");
}

static void summarize_device(const sources_t *s, const struct source *src, struct source_summary *e)
{
	const struct fss_rec_device *d = source_device_first(src);

	e->device = -1;
	if (!d)
		return;
	copy_text(e->device_name, sources_string(s, src->id, d->name));
	e->device_memory_bytes = d->memory_bytes;
	e->device_sm_count = d->sm_count;
	e->device = (int32_t)d->device;
	e->device_origin = d->origin;
	e->device_compute_major = d->compute_major;
	e->device_compute_minor = d->compute_minor;
}

int sources_summarize(const sources_t *s, struct source_summary **out, size_t *n)
{
	struct source_summary *v = calloc(s->n ? s->n : 1, sizeof(*v));
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++) {
		const struct source *src = &s->list[i]->pub;
		struct source_summary *e = &v[k++];

		e->source = src->id;
		e->pid = src->pid;
		e->rank = src->rank;
		e->rank_from = src->rank_from;
		e->end = source_end_of(src);
		e->exit_code = source_exit_code(src);
		e->signal = source_signal(src);
		e->has_process_end = src->has_process_end;
		e->first_ns = src->first_ns;
		e->last_ns = src->last_ns;
		e->last_realtime_ns = src->has_hello && src->last_ns ? src->last_ns + (uint64_t)src->realtime_offset : 0;
		e->records = src->records;
		e->collectives = src->collectives;
		e->collectives_missing = source_collectives_missing(src);
		e->drops = src->drops;
		e->dropped = src->dropped;
		copy_text(e->host, sources_string(s, src->id, src->host));
		copy_text(e->command, sources_string(s, src->id, src->command));
		e->path = src->path;
		summarize_device(s, src, e);
		for (size_t c = 0; c < src->ncomms; c++) {
			e->comms++;
			e->comms_observed += src->comms[c].observed != 0;
		}
		if (src->rank_from >= SOURCE_RANK_INFERRED_INPLACE) {
			/* the communicator rank_decide took: the first largest */
			int32_t best = 0;

			for (size_t c = 0; c < src->ncomms; c++)
				if (src->comms[c].nranks > best) {
					best = src->comms[c].nranks;
					e->rank_inferred = src->comms[c].inferred;
				}
		}
	}
	*out = v;
	*n = k;
	return 0;
}
