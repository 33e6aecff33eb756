/*
 * kineto_emit.c - one Kineto file's records, handed out in host-time order
 * (kineto_map.h): the items to emit, sorted, and each made a record when
 * its turn comes, with the strings it names defined just before it.
 */
#include "collector/kineto_map_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int cmp_items(const void *a, const void *b)
{
	const struct kmap_item *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->order > y->order) - (x->order < y->order);
}

static void item_add(kineto_map_t *m, uint32_t kind, uint32_t index, int64_t key)
{
	struct kmap_item *it = &m->items[m->nitems];

	it->key = key;
	it->order = (uint32_t)m->nitems;
	it->index = index;
	it->kind = kind;
	it->reserved = 0;
	m->nitems++;
}

/* A GPU event that becomes a gpu_interval: a kernel, a copy, a set, or
 * another GPU event HTA counts as computation. */
static int gpu_kept(const kineto_map_t *m, const struct kineto_event *e)
{
	if (e->cat == KINETO_CAT_KERNEL || e->cat == KINETO_CAT_GPU_MEMCPY || e->cat == KINETO_CAT_GPU_MEMSET)
		return 1;
	return e->cat == KINETO_CAT_GPU_OTHER &&
	       kineto_kernel_class_of(kineto_file_string(m->f, e->name)) == KINETO_KERNEL_COMPUTATION;
}

int kmap_items(kineto_map_t *m)
{
	const struct kineto_event *ev = kineto_file_events(m->f);
	size_t nev = kineto_file_nevents(m->f);
	size_t cap = 4 + m->ncomms + 3 * m->ncolls + nev;
	int64_t last = m->base_ts;

	m->items = malloc(cap * sizeof(*m->items));
	if (!m->items)
		return -ENOMEM;
	item_add(m, KMAP_ITEM_HELLO, 0, m->base_ts);
	item_add(m, KMAP_ITEM_ANCHOR, 0, m->base_ts);
	if (kineto_file_meta(m->f)->device_name)
		item_add(m, KMAP_ITEM_DEVICE, 0, m->base_ts);
	for (size_t i = 0; i < m->ncomms; i++)
		item_add(m, KMAP_ITEM_COMM, (uint32_t)i, m->base_ts);
	for (size_t i = 0; i < m->ncolls; i++) {
		item_add(m, KMAP_ITEM_COLL, (uint32_t)i, m->colls[i].key);
		item_add(m, KMAP_ITEM_CORR, (uint32_t)i, m->colls[i].key);
		/* a group's record after its last call (keys never go down) */
		if (m->colls[i].group_id && (i + 1 == m->ncolls || m->colls[i + 1].group_id != m->colls[i].group_id))
			item_add(m, KMAP_ITEM_GROUP, (uint32_t)i, m->colls[i].key);
	}
	for (size_t i = 0; i < nev; i++) {
		const struct kineto_event *e = &ev[i];
		int64_t end = e->ts_ns + e->dur_ns;

		if (e->cat == KINETO_CAT_USER_ANNOTATION || e->cat == KINETO_CAT_GPU_USER_ANNOTATION) {
			item_add(m, KMAP_ITEM_RANGE, (uint32_t)i, end);
		} else if (gpu_kept(m, e)) {
			uint32_t seq = m->coll_of_event[i];

			/* a collective's kernel goes out after its collective */
			if (seq && m->colls[seq - 1].key > end)
				end = m->colls[seq - 1].key;
			item_add(m, KMAP_ITEM_GPU, (uint32_t)i, end);
			m->info.gpu_events++;
		}
	}
	for (size_t i = 0; i < m->nitems; i++)
		if (m->items[i].key > last)
			last = m->items[i].key;
	item_add(m, KMAP_ITEM_FIGURES, 0, last);
	qsort(m->items, m->nitems, sizeof(*m->items), cmp_items);
	return 0;
}

/* ---- strings ---- */

static int sent_test_set(kineto_map_t *m, uint32_t id)
{
	if (id >= m->sent_bits) {
		size_t bits = m->sent_bits ? m->sent_bits : 1024;
		uint8_t *v;

		while (bits <= id)
			bits *= 2;
		v = realloc(m->sent, bits / 8);
		if (!v)
			return -ENOMEM;
		memset(v + m->sent_bits / 8, 0, (bits - m->sent_bits) / 8);
		m->sent = v;
		m->sent_bits = bits;
	}
	if (m->sent[id / 8] & (1u << (id % 8)))
		return 1;
	m->sent[id / 8] |= (uint8_t)(1u << (id % 8));
	return 0;
}

/* Queue string `id` to be defined before the pending record (once per source). */
static void want(kineto_map_t *m, uint32_t id)
{
	if (!id || m->nwant >= sizeof(m->want) / sizeof(m->want[0]))
		return;
	if (sent_test_set(m, id) != 0)
		return; /* defined already (or no memory to know: then it stays unnamed) */
	m->want[m->nwant++] = id;
}

/* The next part of the string being defined into m->part; 1 when the
 * string is done after it. */
static int string_part(kineto_map_t *m)
{
	const char *text = kineto_file_string(m->f, m->want[m->wpos]);
	size_t len = strlen(text), take;
	struct fss_rec_string *s = &m->part.string;

	if (len > FSS_STRING_MAX_BYTES)
		len = FSS_STRING_MAX_BYTES;
	record_init(s, FSS_REC_STRING, sizeof(*s), m->source);
	s->id = m->want[m->wpos];
	s->total_len = (uint16_t)len;
	s->offset = (uint16_t)m->part_off;
	take = len - m->part_off < FSS_STRING_PART_BYTES ? len - m->part_off : FSS_STRING_PART_BYTES;
	memcpy(s->text, text + m->part_off, take);
	m->part_off += (uint32_t)take;
	return m->part_off >= len;
}

/* ---- records ---- */

static void make_hello(kineto_map_t *m)
{
	const struct kineto_meta *meta = kineto_file_meta(m->f);
	struct fss_rec_process_hello *h = &m->buf.hello;

	record_init(h, FSS_REC_PROCESS_HELLO, sizeof(*h), m->source);
	h->pid = m->info.pid;
	h->rank = meta->rank >= 0 ? meta->rank : FSS_RANK_UNKNOWN;
	h->local_rank = FSS_RANK_UNKNOWN;
	h->world_size = meta->world_size > 0 ? meta->world_size : -1;
	h->slurm_procid = h->ompi_rank = FSS_RANK_UNKNOWN;
	h->command = m->command;
	h->path = FSS_PATH_KINETO;
	h->mono_ns = (uint64_t)m->base_ts;
	h->realtime_ns = (uint64_t)(m->base_ts + m->realtime_offset);
	h->features = FSS_FEATURE_NCCL | FSS_FEATURE_CUPTI | FSS_FEATURE_NVTX;
	want(m, m->command);
}

static void make_comm(kineto_map_t *m, const struct kmap_comm *x, uint32_t index)
{
	struct fss_rec_comm *c = &m->buf.comm;

	record_init(c, FSS_REC_COMM, sizeof(*c), m->source);
	c->comm = 0x1000 + index;
	c->id_hash = x->id_hash;
	c->enter_ns = c->exit_ns = (uint64_t)m->base_ts;
	c->nranks = x->nranks;
	c->rank = x->rank;
	c->device = -1;
	c->color = c->key = -1;
	c->event = x->inferred ? FSS_COMM_OBSERVED : FSS_COMM_INIT;
	c->path = FSS_PATH_KINETO;
	c->name = x->name;
	c->inferred = x->inferred;
	want(m, x->name);
}

static void make_coll(kineto_map_t *m, uint32_t i)
{
	const struct kmap_coll *x = &m->colls[i];
	const struct kineto_event *k = &kineto_file_events(m->f)[x->kernel];
	struct fss_rec_collective *c = &m->buf.coll;

	record_init(c, FSS_REC_COLLECTIVE, sizeof(*c), m->source);
	c->seq = i + 1;
	c->comm = 0x1000 + x->comm;
	c->stream = k->stream >= 0 ? (uint64_t)k->stream : 0;
	c->count = x->count;
	c->bytes = x->bytes;
	c->enter_ns = (uint64_t)x->enter_ns;
	c->exit_ns = (uint64_t)x->exit_ns;
	c->thread = x->thread;
	c->group_id = x->group_id;
	c->group_depth = x->group_id ? 1 : 0;
	c->peer = -1;
	c->op = x->op;
	c->dtype = x->dtype;
	c->redop = x->op == FSS_OP_ALLREDUCE || x->op == FSS_OP_REDUCESCATTER || x->op == FSS_OP_REDUCE
		       ? FSS_REDOP_SUM
		       : FSS_REDOP_NONE;
	c->path = FSS_PATH_KINETO;
}

/* The group whose last collective is colls[last]: its calls run at their
 * shared launch (the group's ncclGroupEnd). */
static void make_group(kineto_map_t *m, uint32_t last)
{
	const struct kmap_coll *x = &m->colls[last];
	const struct kineto_event *ev = kineto_file_events(m->f);
	struct fss_rec_group *g = &m->buf.group;
	uint32_t first = last;

	while (first && m->colls[first - 1].group_id == x->group_id)
		first--;
	record_init(g, FSS_REC_GROUP, sizeof(*g), m->source);
	g->group_id = x->group_id;
	g->calls = last - first + 1;
	g->start_ns = (uint64_t)m->colls[first].enter_ns;
	g->end_enter_ns = x->launch != KMAP_NONE ? (uint64_t)ev[x->launch].ts_ns : g->start_ns;
	g->end_exit_ns = g->end_enter_ns;
	for (uint32_t i = first; i <= last; i++)
		if ((uint64_t)m->colls[i].exit_ns > g->end_exit_ns)
			g->end_exit_ns = (uint64_t)m->colls[i].exit_ns;
	if (g->end_enter_ns < g->start_ns)
		g->start_ns = g->end_enter_ns;
	g->thread = m->colls[first].thread;
}

static void make_gpu(kineto_map_t *m, uint32_t i)
{
	const struct kineto_event *e = &kineto_file_events(m->f)[i];
	struct fss_rec_gpu_interval *g = &m->buf.gpu;

	record_init(g, FSS_REC_GPU_INTERVAL, sizeof(*g), m->source);
	g->start_ns = (uint64_t)e->ts_ns;
	g->end_ns = (uint64_t)(e->ts_ns + e->dur_ns);
	g->stream = e->stream >= 0 ? (uint64_t)e->stream : 0;
	g->collective_seq = m->coll_of_event[i];
	g->correlation_id = e->correlation >= 0 ? (uint32_t)e->correlation : 0;
	g->device = e->pid >= 0 ? (uint32_t)e->pid : 0;
	g->name = e->name;
	g->kind = e->cat == KINETO_CAT_GPU_MEMCPY   ? FSS_GPU_MEMCPY
		  : e->cat == KINETO_CAT_GPU_MEMSET ? FSS_GPU_MEMSET
		  : g->collective_seq		    ? FSS_GPU_COMM
						    : FSS_GPU_COMPUTE;
	want(m, e->name);
}

static void make_range(kineto_map_t *m, uint32_t i)
{
	const struct kineto_event *e = &kineto_file_events(m->f)[i];
	struct fss_rec_nvtx_range *r = &m->buf.range;

	record_init(r, FSS_REC_NVTX_RANGE, sizeof(*r), m->source);
	r->start_ns = (uint64_t)e->ts_ns;
	r->end_ns = (uint64_t)(e->ts_ns + e->dur_ns);
	/* the GPU's copies of the host's annotations: a domain of their own,
	 * which the default step pattern leaves out (no step counted twice) */
	r->domain = e->cat == KINETO_CAT_GPU_USER_ANNOTATION ? m->gpu_domain : 0;
	r->name = e->name;
	r->thread = r->end_thread = (uint32_t)e->tid;
	r->kind = FSS_NVTX_PUSH_POP;
	r->depth = m->depth[i];
	want(m, r->domain);
	want(m, e->name);
}

/* deviceProperties[0] as the source's device: the name MFU's peak is
 * looked up by (the MI300X only so), its SMs and memory. The file gives no
 * compute capability the reader keeps, nor the ordinal: device 0. */
static void make_device(kineto_map_t *m)
{
	const struct kineto_meta *meta = kineto_file_meta(m->f);
	struct fss_rec_device *d = &m->buf.device;

	record_init(d, FSS_REC_DEVICE, sizeof(*d), m->source);
	d->name = meta->device_name;
	d->sm_count = meta->device_sms > 0 ? (uint32_t)meta->device_sms : 0;
	d->memory_bytes = meta->device_memory > 0 ? (uint64_t)meta->device_memory : 0;
	d->origin = FSS_DEVICE_KINETO;
	want(m, d->name);
}

/* Item `it` as a record in m->buf, its strings queued. */
static void make(kineto_map_t *m, const struct kmap_item *it)
{
	m->nwant = m->wpos = 0;
	m->part_off = 0;
	switch (it->kind) {
	case KMAP_ITEM_HELLO:
		make_hello(m);
		break;
	case KMAP_ITEM_ANCHOR:
		/* host and GPU times share the file's time base */
		record_init(&m->buf.anchor, FSS_REC_CLOCK_ANCHOR, sizeof(m->buf.anchor), m->source);
		m->buf.anchor.mono_ns = m->buf.anchor.other_ns = (uint64_t)m->base_ts;
		m->buf.anchor.domain = FSS_CLOCK_CUPTI;
		break;
	case KMAP_ITEM_COMM:
		make_comm(m, &m->comms[it->index], it->index);
		break;
	case KMAP_ITEM_COLL:
		make_coll(m, it->index);
		break;
	case KMAP_ITEM_CORR: {
		const struct kineto_event *k = &kineto_file_events(m->f)[m->colls[it->index].kernel];

		record_init(&m->buf.corr, FSS_REC_CORRELATION, sizeof(m->buf.corr), m->source);
		m->buf.corr.collective_seq = it->index + 1;
		m->buf.corr.correlation_id = k->correlation >= 0 ? (uint32_t)k->correlation : 0;
		break;
	}
	case KMAP_ITEM_GPU:
		make_gpu(m, it->index);
		break;
	case KMAP_ITEM_RANGE:
		make_range(m, it->index);
		break;
	case KMAP_ITEM_GROUP:
		make_group(m, it->index);
		break;
	case KMAP_ITEM_DEVICE:
		make_device(m);
		break;
	default:
		m->buf.figures = m->figures;
		break;
	}
}

int kineto_map_next(kineto_map_t *m, const struct fss_record_head **rec)
{
	for (;;) {
		if (m->wpos < m->nwant) {
			if (string_part(m)) {
				m->wpos++;
				m->part_off = 0;
			}
			*rec = &m->part.head;
			return 1;
		}
		if (m->pending) {
			m->pending = 0;
			*rec = &m->buf.head;
			return 1;
		}
		if (m->cursor >= m->nitems)
			return 0;
		make(m, &m->items[m->cursor]);
		if (m->items[m->cursor++].kind == KMAP_ITEM_HELLO) {
			/* the hello first: its strings follow it */
			*rec = &m->buf.head;
			return 1;
		}
		m->pending = 1;
	}
}

int64_t kineto_map_peek_realtime(const kineto_map_t *m)
{
	size_t i = m->cursor;

	if (m->wpos < m->nwant || m->pending)
		i = m->cursor - 1; /* the item being handed out */
	if (i >= m->nitems)
		return INT64_MAX;
	return m->items[i].key + m->realtime_offset;
}

void kineto_map_rewind(kineto_map_t *m)
{
	m->cursor = 0;
	m->nwant = m->wpos = 0;
	m->pending = 0;
	if (m->sent)
		memset(m->sent, 0, m->sent_bits / 8);
}
