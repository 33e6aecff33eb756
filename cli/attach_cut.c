/*
 * attach_cut.c - the common cut of `fsdpscope attach` at detach
 * (cli/attach_cut.h).
 */
#include "cli/attach_cut.h"

#include "common/record.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Records one process may hold; one more lets the oldest go uncut (memory
 * stays bounded when another rank falls far behind without stopping). */
#define CUT_HOLD_MAX 65536u

/* A communicator handle of one process, as its comm records named it. */
struct handle {
	uint64_t handle;  /* fss_rec_comm.comm */
	uint64_t id_hash; /* the same communicator on every rank */
	int32_t rank;
	uint64_t last;	/* the number of its last collective recorded (held or sent) */
	uint64_t sent;	/* the number of its last collective sent */
	uint64_t first; /* the number of its first call seen */
	uint64_t cut;	/* collectives left out at detach */
};

struct held {
	unsigned char rec[FSS_RECORD_MAX_BYTES];
	uint64_t id_hash; /* 0: holds no one, goes when it reaches the head */
	uint64_t number;  /* its call's number on the communicator */
	uint64_t exit_ns; /* a collective's return (fss_rec_collective.exit_ns), else 0 */
};

struct slot {
	int used, ended;
	struct handle *handles;
	size_t nhandles, caphandles;
	struct held *q; /* a ring of held records */
	size_t head, len, cap;
};

struct attach_cut {
	attach_cut_emit_fn emit;
	void *ctx;
	struct slot *slots;
	size_t nslots;
	int frozen; /* the probes began to go: nothing is sent until the cut */
	uint64_t frozen_ns;
};

int attach_cut_new(attach_cut_t **out, attach_cut_emit_fn emit, void *ctx)
{
	attach_cut_t *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->emit = emit;
	c->ctx = ctx;
	*out = c;
	return 0;
}

static struct slot *slot_get(attach_cut_t *c, size_t i)
{
	if (i >= c->nslots) {
		size_t n = i + 16;
		struct slot *ns = realloc(c->slots, n * sizeof(*ns));

		if (!ns)
			return NULL;
		memset(ns + c->nslots, 0, (n - c->nslots) * sizeof(*ns));
		c->slots = ns;
		c->nslots = n;
	}
	c->slots[i].used = 1;
	return &c->slots[i];
}

static struct handle *handle_find(struct slot *s, uint64_t handle)
{
	for (size_t i = 0; i < s->nhandles; i++)
		if (s->handles[i].handle == handle)
			return &s->handles[i];
	return NULL;
}

/* A comm record names a handle: the first names it for good (a later record is its destroy). */
static int handle_named(struct slot *s, const struct fss_rec_comm *r)
{
	struct handle *h;

	if (!r->comm || !r->id_hash || handle_find(s, r->comm))
		return 0;
	if (s->nhandles == s->caphandles) {
		size_t n = s->caphandles ? 2 * s->caphandles : 8;
		struct handle *nh = realloc(s->handles, n * sizeof(*nh));

		if (!nh)
			return -ENOMEM;
		s->handles = nh;
		s->caphandles = n;
	}
	h = &s->handles[s->nhandles++];
	memset(h, 0, sizeof(*h));
	h->handle = r->comm;
	h->id_hash = r->id_hash;
	h->rank = r->rank;
	/* first_call: the number of the next call, aligned across ranks (0: from 1) */
	h->last = r->first_call ? r->first_call - 1 : 0;
	h->sent = h->last;
	h->first = h->last + 1;
	return 0;
}

/* The last call on id_hash every other process still attached has recorded; UINT64_MAX when none shares it. */
static uint64_t others_last(const attach_cut_t *c, size_t self, uint64_t id_hash)
{
	uint64_t min = UINT64_MAX;

	for (size_t i = 0; i < c->nslots; i++) {
		const struct slot *s = &c->slots[i];

		if (i == self || !s->used || s->ended)
			continue;
		for (size_t k = 0; k < s->nhandles; k++)
			if (s->handles[k].id_hash == id_hash && s->handles[k].last < min)
				min = s->handles[k].last;
	}
	return min;
}

/* A held record goes: a collective's number is its handle's last sent. */
static void slot_sent(struct slot *s, const struct held *h)
{
	const struct fss_record_head *rh = (const void *)h->rec;

	if (rh->type != FSS_REC_COLLECTIVE || !h->id_hash)
		return;
	for (size_t k = 0; k < s->nhandles; k++)
		if (s->handles[k].id_hash == h->id_hash && s->handles[k].sent < h->number)
			s->handles[k].sent = h->number;
}

/* Send the held records of slot i from the head while they may go (all: every one). */
static void slot_release(attach_cut_t *c, size_t i, int all)
{
	struct slot *s = &c->slots[i];

	while (s->len && !c->frozen) {
		struct held *h = &s->q[s->head];

		if (!all && h->id_hash && others_last(c, i, h->id_hash) < h->number)
			break;
		slot_sent(s, h);
		c->emit(c->ctx, i, h->rec);
		s->head = (s->head + 1) % s->cap;
		s->len--;
	}
}

static int slot_push(struct slot *s, const void *record, uint64_t id_hash, uint64_t number, uint64_t exit_ns)
{
	const struct fss_record_head *rh = record;
	struct held *h;

	if (s->len == s->cap) {
		size_t n = s->cap ? 2 * s->cap : 64;
		struct held *nq = malloc(n * sizeof(*nq));

		if (!nq)
			return -ENOMEM;
		for (size_t k = 0; k < s->len; k++)
			nq[k] = s->q[(s->head + k) % s->cap];
		free(s->q);
		s->q = nq;
		s->head = 0;
		s->cap = n;
	}
	h = &s->q[(s->head + s->len++) % s->cap];
	memcpy(h->rec, record, rh->size <= FSS_RECORD_MAX_BYTES ? rh->size : FSS_RECORD_MAX_BYTES);
	h->id_hash = id_hash;
	h->number = number;
	h->exit_ns = exit_ns;
	return 0;
}

int attach_cut_record(attach_cut_t *c, size_t slot, const void *record)
{
	const struct fss_record_head *rh = record;
	struct slot *s = slot_get(c, slot);
	struct handle *h = NULL;
	uint64_t number = 0, exit_ns = 0;
	int err = 0;

	if (!s || rh->size > FSS_RECORD_MAX_BYTES) {
		c->emit(c->ctx, slot, record);
		return s ? 0 : -ENOMEM;
	}
	if (rh->type == FSS_REC_COMM && rh->size >= sizeof(struct fss_rec_comm))
		err = handle_named(s, record);
	else if (rh->type == FSS_REC_COLLECTIVE &&
		 (h = handle_find(s, ((const struct fss_rec_collective *)record)->comm))) {
		number = ++h->last;
		exit_ns = ((const struct fss_rec_collective *)record)->exit_ns;
	} else if (rh->type == FSS_REC_ENTER && (h = handle_find(s, ((const struct fss_rec_enter *)record)->comm)))
		number = h->last + 1; /* the call its collective record will be */
	if (!err && s->len == CUT_HOLD_MAX && !c->frozen)
		slot_release(c, slot, 1);
	if (!err)
		err = slot_push(s, record, h ? h->id_hash : 0, number, exit_ns);
	if (err) {
		c->frozen = 0; /* what is held goes uncut, the record after it */
		slot_release(c, slot, 1);
		c->emit(c->ctx, slot, record);
		return err;
	}
	/* this record may let go of its own and of the other processes' held ones */
	attach_cut_release(c, 0);
	return 0;
}

void attach_cut_release(attach_cut_t *c, int all)
{
	for (size_t i = 0; i < c->nslots; i++)
		if (c->slots[i].used)
			slot_release(c, i, all);
}

void attach_cut_end(attach_cut_t *c, size_t slot)
{
	struct slot *s = slot_get(c, slot);

	if (!s)
		return;
	slot_release(c, slot, 1);
	s->ended = 1;
	attach_cut_release(c, 0);
}

/* The last call on the handle h of slot s completed before the probes began
 * to go: what it sent (recorded before then), or a held one that returned before. */
static uint64_t slot_last_before(const attach_cut_t *c, const struct slot *s, const struct handle *h)
{
	uint64_t last = h->sent;

	for (size_t k = 0; k < s->len; k++) {
		const struct held *e = &s->q[(s->head + k) % s->cap];
		const struct fss_record_head *rh = (const void *)e->rec;

		if (rh->type == FSS_REC_COLLECTIVE && e->id_hash == h->id_hash && e->exit_ns < c->frozen_ns &&
		    e->number > last)
			last = e->number;
	}
	return last;
}

/* The cut of id_hash: the last call every process still attached that uses it completed before the
 * probes began to go (attach_cut_freeze says why not later). */
static uint64_t comm_cut(const attach_cut_t *c, uint64_t id_hash, uint32_t *members)
{
	uint64_t min = UINT64_MAX;

	*members = 0;
	for (size_t i = 0; i < c->nslots; i++) {
		const struct slot *s = &c->slots[i];

		if (!s->used || s->ended)
			continue;
		for (size_t k = 0; k < s->nhandles; k++)
			if (s->handles[k].id_hash == id_hash) {
				uint64_t last = slot_last_before(c, s, &s->handles[k]);

				(*members)++;
				if (last < min)
					min = last;
			}
	}
	return min;
}

/* The communicators shared by more than one process still attached, with their cuts. */
static int collect_comms(const attach_cut_t *c, struct attach_cut_result *r)
{
	for (size_t i = 0; i < c->nslots; i++)
		for (size_t k = 0; c->slots[i].used && !c->slots[i].ended && k < c->slots[i].nhandles; k++) {
			uint64_t id = c->slots[i].handles[k].id_hash;
			size_t j;
			uint32_t members;
			uint64_t number;

			for (j = 0; j < r->ncomms && r->comms[j].id_hash != id; j++)
				;
			if (j < r->ncomms)
				continue;
			number = comm_cut(c, id, &members);
			if (members < 2)
				continue;
			struct attach_cut_comm *nc = realloc(r->comms, (r->ncomms + 1) * sizeof(*nc));

			if (!nc)
				return -ENOMEM;
			r->comms = nc;
			r->comms[r->ncomms++] =
			    (struct attach_cut_comm){.id_hash = id, .number = number, .nslots = members};
		}
	return 0;
}

static const struct attach_cut_comm *result_comm(const struct attach_cut_result *r, uint64_t id_hash)
{
	for (size_t j = 0; j < r->ncomms; j++)
		if (r->comms[j].id_hash == id_hash)
			return &r->comms[j];
	return NULL;
}

/* Send slot i's held records before the cut, leave out its collectives and enters past it. */
static int slot_cut(attach_cut_t *c, size_t i, struct attach_cut_result *r)
{
	struct slot *s = &c->slots[i];
	struct attach_cut_slot share = {.slot = i, .rank = -1};
	uint64_t most = 0;

	for (; s->len; s->head = (s->head + 1) % s->cap, s->len--) {
		struct held *h = &s->q[s->head];
		const struct fss_record_head *rh = (const void *)h->rec;
		const struct attach_cut_comm *cc = h->id_hash ? result_comm(r, h->id_hash) : NULL;

		if (!cc || h->number <= cc->number) {
			c->emit(c->ctx, i, h->rec);
			continue;
		}
		if (rh->type != FSS_REC_COLLECTIVE)
			continue; /* an enter past the cut: its call is left out with it */
		share.collectives++;
		for (size_t k = 0; k < s->nhandles; k++)
			if (s->handles[k].id_hash == h->id_hash && ++s->handles[k].cut > most) {
				most = s->handles[k].cut;
				share.comm = h->id_hash;
				share.rank = s->handles[k].rank;
			}
	}
	if (!share.collectives)
		return 0;
	struct attach_cut_slot *ns = realloc(r->slots, (r->nslots + 1) * sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	r->slots = ns;
	r->slots[r->nslots++] = share;
	r->collectives += share.collectives;
	for (size_t j = 0; j < r->ncomms; j++)
		if (r->comms[j].id_hash == share.comm)
			r->comms[j].cut_slots++;
	return 0;
}

void attach_cut_freeze(attach_cut_t *c, uint64_t mono_ns)
{
	c->frozen = 1;
	c->frozen_ns = mono_ns;
}

/* The first call on id_hash any process was seen to make (ended ones too: they were there). */
static uint64_t comm_first(const attach_cut_t *c, uint64_t id_hash, uint32_t *members)
{
	uint64_t min = UINT64_MAX;

	*members = 0;
	for (size_t i = 0; i < c->nslots; i++)
		for (size_t k = 0; c->slots[i].used && k < c->slots[i].nhandles; k++)
			if (c->slots[i].handles[k].id_hash == id_hash) {
				(*members)++;
				if (c->slots[i].handles[k].first < min)
					min = c->slots[i].handles[k].first;
			}
	return min;
}

/* Per process, the calls in flight at attach on the communicators it shares (attach_cut_unseen). */
static int collect_unseen(const attach_cut_t *c, struct attach_cut_result *r)
{
	for (size_t i = 0; i < c->nslots; i++) {
		struct attach_cut_unseen u = {.slot = i, .rank = -1};

		for (size_t k = 0; c->slots[i].used && k < c->slots[i].nhandles; k++) {
			const struct handle *h = &c->slots[i].handles[k];
			uint32_t members;
			uint64_t first = comm_first(c, h->id_hash, &members);

			if (members > 1 && h->first > first) {
				u.calls += h->first - first;
				u.rank = h->rank;
			}
		}
		if (!u.calls)
			continue;
		struct attach_cut_unseen *nu = realloc(r->unseen, (r->nunseen + 1) * sizeof(*nu));

		if (!nu)
			return -ENOMEM;
		r->unseen = nu;
		r->unseen[r->nunseen++] = u;
		r->unseen_calls += u.calls;
	}
	return 0;
}

int attach_cut_detach(attach_cut_t *c, struct attach_cut_result *r)
{
	int err;

	memset(r, 0, sizeof(*r));
	if (!c->frozen)
		attach_cut_freeze(c, UINT64_MAX);
	err = collect_comms(c, r);
	if (!err)
		err = collect_unseen(c, r);
	c->frozen = 0; /* slot_cut sends; what fails below goes uncut */
	for (size_t i = 0; !err && i < c->nslots; i++)
		if (c->slots[i].used && !c->slots[i].ended)
			err = slot_cut(c, i, r);
	if (err) {
		attach_cut_release(c, 1);
		attach_cut_result_free(r);
		memset(r, 0, sizeof(*r));
	}
	return err;
}

void attach_cut_result_free(struct attach_cut_result *r)
{
	if (!r)
		return;
	free(r->comms);
	free(r->slots);
	free(r->unseen);
}

void attach_cut_free(attach_cut_t *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nslots; i++) {
		free(c->slots[i].handles);
		free(c->slots[i].q);
	}
	free(c->slots);
	free(c);
}
