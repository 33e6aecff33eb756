/*
 * live.c - the one live state of a session (live.h).
 *
 * The state is per source (one rank each) and per job. Everything in it has
 * a fixed size but the table of sources, which grows with the processes of
 * the job and never with its length: after a rank's window has filled, a
 * step replaces the oldest one in place.
 *
 * Used by the session's thread only; readers get copies (live_publish).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/live.h"
#include "common/text_buffer.h"

/* Source ids up to this are found through an index; larger ones (a trace
 * never has them in practice) by a scan. */
#define LIVE_INDEX_MAX 65536u

/* One source: its public part and what only the state needs. */
struct live_slot {
	struct live_rank r;
	uint64_t comm_handle[LIVE_COMMS_MAX]; /* ncclComm_t of each entry in r.comms (the latest with that id) */
	uint64_t comm_dimension[LIVE_COMMS_MAX]; /* source_comm.dimension: the same role on every rank */
	size_t last_comm;                     /* entry the latest collective went to (a cache) */
	uint64_t dropped_counted;             /* r.dropped as added to job.records_dropped_total */
};

/* The hello's host or command name from the first part of its string
 * record (names longer than a part are cut there; the view keeps fewer
 * bytes anyway). */
static void take_name(char *dst, size_t len, uint32_t want, const struct fss_rec_string *str)
{
	size_t n;

	if (!want || str->id != want || str->offset != 0)
		return;
	char part[FSS_STRING_PART_BYTES + 1];

	n = str->total_len < FSS_STRING_PART_BYTES ? str->total_len : FSS_STRING_PART_BYTES;
	memcpy(part, str->text, n);
	part[n] = '\0';
	text_fit(dst, len, part);
}

struct live {
	struct live_job job;
	struct live_slot **slots; /* arrival order */
	size_t nslots, cap;
	uint32_t *index;          /* [nindex]: source id -> slot + 1, 0 none */
	size_t nindex;
};

int live_new(live_t **out)
{
	live_t *l = calloc(1, sizeof *l);

	*out = NULL;
	if (!l)
		return -ENOMEM;
	*out = l;
	return 0;
}

void live_free(live_t *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nslots; i++)
		free(l->slots[i]);
	free(l->slots);
	free(l->index);
	free(l);
}

size_t live_memory(const live_t *l)
{
	return sizeof *l + l->cap * sizeof *l->slots + l->nslots * sizeof(struct live_slot) +
	       l->nindex * sizeof *l->index;
}

/* The slot of trace source `source`, made on its first use; NULL on ENOMEM. */
static struct live_slot *slot_for(live_t *l, uint32_t source)
{
	if (source < l->nindex && l->index[source])
		return l->slots[l->index[source] - 1];
	if (source >= LIVE_INDEX_MAX)
		for (size_t i = 0; i < l->nslots; i++)
			if (l->slots[i]->r.source == source)
				return l->slots[i];
	if (source < LIVE_INDEX_MAX && source >= l->nindex) {
		size_t n = l->nindex ? l->nindex : 16;
		while (n <= source)
			n *= 2;
		uint32_t *v = realloc(l->index, n * sizeof *v);
		if (!v)
			return NULL;
		memset(v + l->nindex, 0, (n - l->nindex) * sizeof *v);
		l->index = v;
		l->nindex = n;
	}
	if (l->nslots == l->cap) {
		size_t n = l->cap ? 2 * l->cap : 8;
		struct live_slot **v = realloc(l->slots, n * sizeof *v);
		if (!v)
			return NULL;
		l->slots = v;
		l->cap = n;
	}
	struct live_slot *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->r.rank = -1;
	s->r.source = source;
	l->slots[l->nslots++] = s;
	if (source < LIVE_INDEX_MAX)
		l->index[source] = (uint32_t)l->nslots;
	return s;
}

/* The entry of s's communicator `handle` (made when there is room), or NULL. */
static struct live_comm *comm_for(struct live_slot *s, const struct source *src, uint64_t handle)
{
	if (s->last_comm < s->r.ncomms && s->comm_handle[s->last_comm] == handle)
		return &s->r.comms[s->last_comm];
	const struct source_comm *sc = src ? source_comm_find(src, handle) : NULL;
	uint64_t id = sc ? sc->id_hash : 0;
	for (size_t i = 0; i < s->r.ncomms; i++)
		if (sc ? s->r.comms[i].id_hash == id : s->comm_handle[i] == handle) {
			s->comm_handle[i] = handle;
			s->last_comm = i;
			return &s->r.comms[i];
		}
	if (s->r.ncomms == LIVE_COMMS_MAX)
		return NULL;
	size_t i = s->r.ncomms++;
	struct live_comm *c = &s->r.comms[i];
	memset(c, 0, sizeof *c);
	c->id_hash = id;
	c->nranks = sc && sc->nranks > 0 ? (uint32_t)sc->nranks : 0;
	c->rank = sc ? sc->rank : -1;
	s->comm_handle[i] = handle;
	s->comm_dimension[i] = sc ? sc->dimension : 0;
	s->last_comm = i;
	return c;
}

/*
 * The collectives of a communicator are numbered from 1 in each rank's
 * issue order (comm_seq, docs/hangs.md), so the highest number entered is
 * how many the rank entered there, and the highest left how many it
 * returned from: counted, not read from the per-source seq (which numbers
 * every communicator's calls together). A source with enter records
 * (FSS_FEATURE_ENTER) enters with them; one without enters and leaves with
 * its collective record. An enter record lost (a full ring) cannot leave a
 * rank further out than in.
 */
static void count_left(struct live_comm *lc, const struct source *src)
{
	lc->left++;
	if (!(src->features & FSS_FEATURE_ENTER))
		lc->entered++; /* entered and returned at once, as far as the trace tells */
	if (lc->entered < lc->left)
		lc->entered = lc->left; /* its enter record was lost */
}

int live_on_record(live_t *l, const struct fss_record_head *rec, const struct source *src)
{
	l->job.records_total++;
	if (!src)
		return 0;
	struct live_slot *s = slot_for(l, rec->source);
	if (!s)
		return -ENOMEM;
	struct live_rank *r = &s->r;
	r->records++;
	r->rank = src->rank;
	r->pid = src->pid;
	r->ended = src->has_process_end || src->has_exit;
	r->attached = source_is_attached(src) && !(src->features & FSS_FEATURE_CUPTI);
	r->rank_from = (int32_t)src->rank_from;
	r->dropped = src->dropped;
	r->collectives_missing = source_collectives_missing(src);
	if (src->last_ns > r->last_ns)
		r->last_ns = src->last_ns;
	if (r->dropped != s->dropped_counted) {
		l->job.records_dropped_total += r->dropped - s->dropped_counted;
		s->dropped_counted = r->dropped;
	}
	if (rec->type == FSS_REC_STRING && rec->size >= sizeof(struct fss_rec_string) && src->has_hello) {
		const struct fss_rec_string *str = (const void *)rec;
		take_name(r->host, sizeof r->host, src->host, str);
		take_name(r->command, sizeof r->command, src->command, str);
	} else if (rec->type == FSS_REC_COLLECTIVE && rec->size >= sizeof(struct fss_rec_collective)) {
		const struct fss_rec_collective *c = (const void *)rec;
		r->collectives++;
		struct live_comm *lc = comm_for(s, src, c->comm);
		if (lc) {
			lc->collectives++;
			if (c->seq > lc->last_seq)
				lc->last_seq = c->seq;
			count_left(lc, src);
		}
	} else if (rec->type == FSS_REC_ENTER && rec->size >= sizeof(struct fss_rec_enter)) {
		const struct fss_rec_enter *e = (const void *)rec;
		struct live_comm *lc = e->kind == FSS_ENTER_COLLECTIVE ? comm_for(s, src, e->comm) : NULL;
		if (lc)
			lc->entered++;
	}
	return 0;
}

int live_in_flight(const live_t *l)
{
	for (size_t i = 0; i < l->nslots; i++)
		for (size_t c = 0; c < l->slots[i]->r.ncomms; c++)
			if (l->slots[i]->r.comms[c].entered > l->slots[i]->r.comms[c].left)
				return 1;
	return 0;
}

void live_on_step(live_t *l, const struct analysis_step_info *step)
{
	struct live_slot *s = slot_for(l, step->source);
	if (!s)
		return; /* out of memory: the step is not shown, the analysis goes on */
	struct live_rank *r = &s->r;
	if (step->rank >= 0)
		r->rank = step->rank;
	struct live_step ls = {
		.ordinal = step->ordinal,
		.excluded = step->excluded,
		.start_ns = step->start_ns,
		.step_ns = step->step_ns,
		.allgathers = step->allgathers,
		.microbatches = step->microbatches,
		.allgather_ns = step->allgather_ns,
		.exposed_allgather_ns = step->exposed_allgather_ns,
		.compute_wait_ns = step->compute_wait_ns,
		.compute_ns = step->compute_ns,
		.exposed_comm_ns = step->exposed_comm_ns,
	};
	r->last = ls;
	if (r->nwindow == LIVE_WINDOW) {
		memmove(r->window, r->window + 1, (LIVE_WINDOW - 1) * sizeof r->window[0]);
		r->nwindow--;
	}
	r->window[r->nwindow++] = ls;

	struct live_totals *t = &r->totals;
	if (step->excluded) {
		t->steps_excluded++;
	} else {
		if (t->steps == 0 || step->step_ns < t->step_ns_min)
			t->step_ns_min = step->step_ns;
		if (step->step_ns > t->step_ns_max)
			t->step_ns_max = step->step_ns;
		t->steps++;
		t->step_ns_sum += step->step_ns;
		t->allgathers_sum += step->allgathers;
		t->exposed_allgather_ns_sum += step->exposed_allgather_ns;
		t->compute_wait_ns_sum += step->compute_wait_ns;
		t->compute_ns_sum += step->compute_ns;
	}

	size_t n = step->nstep_events < LIVE_STRIP_MAX ? step->nstep_events : LIVE_STRIP_MAX;
	for (size_t i = 0; i < n; i++) {
		const struct analysis_step_event *e = &step->step_events[i];
		r->strip[i] = (struct live_event){
			.start_ns = e->start_ns,
			.end_ns = e->end_ns,
			.op = e->op,
			.phase = e->phase,
			.calls = e->calls > UINT16_MAX ? UINT16_MAX : (uint16_t)e->calls,
			.unit = e->unit < 0 ? UINT32_MAX : (uint32_t)e->unit,
			.bytes = e->bytes,
			.exposed_ns = e->exposed_ns,
		};
	}
	r->nstrip = n;
}

void live_step_cb(void *live, const struct analysis_step_info *step)
{
	live_on_step(live, step);
}

static void copy_text(char *dst, size_t len, const char *src)
{
	text_fit(dst, len, src);
}

/* The role of s's communicator i from the diagnosis' communicators (the
 * headline rank's): by id, else by dimension (the same calls made it on
 * every rank: an HSDP replicate group of another node, say). */
static uint8_t comm_role(const struct analysis_result *res, const struct live_slot *s, size_t i)
{
	for (uint32_t k = 0; k < res->ncomms; k++)
		if (res->comms[k].id == s->r.comms[i].id_hash && s->r.comms[i].id_hash)
			return res->comms[k].role;
	for (uint32_t k = 0; k < res->ncomms; k++)
		if (res->comms[k].dimension == s->comm_dimension[i] && s->comm_dimension[i])
			return res->comms[k].role;
	return s->r.comms[i].role;
}

void live_set_diagnosis(live_t *l, const struct analysis_result *res, const struct live_finding *findings,
			size_t nfindings)
{
	struct live_job *j = &l->job;
	j->diagnoses++;
	j->diagnosed = 1;
	j->verdict = (int)res->verdict;
	j->undecided_reason = (int)res->undecided_reason;
	j->repeating_units = res->units.repeating_units;
	j->gathers_per_unit = res->units.gathers_per_unit;
	j->allgathers_per_step = res->per_step.allgathers;
	j->microbatches = res->microbatches.per_step;
	j->reshard = (int)res->reshard.policy;
	j->exposed_allgather_ns_per_step = res->exposure.exposed_allgather_ns_per_step;
	j->compute_wait_ns_per_step = res->exposure.compute_wait_ns_per_step;
	j->flight = res->flight;
	j->sources_attached = res->trace.sources_attached;
	j->exposure_source = (int)res->exposure.source;

	j->nfindings = 0;
	for (size_t i = 0; i < nfindings && j->nfindings < LIVE_FINDINGS_MAX; i++) {
		struct live_finding *f = &j->findings[j->nfindings++];
		copy_text(f->rule, sizeof f->rule, findings[i].rule);
		f->severity = findings[i].severity;
		copy_text(f->title, sizeof f->title, findings[i].title);
		copy_text(f->message, sizeof f->message, findings[i].message);
		copy_text(f->evidence, sizeof f->evidence, findings[i].evidence);
		copy_text(f->fix, sizeof f->fix, findings[i].fix);
	}

	/* the forward gathers of the representative step, in issue order: a
	 * unit's gathers follow one another, so the sequence is grouped by unit */
	j->ngathers = 0;
	for (uint32_t i = 0; i < res->ngathers && j->ngathers < LIVE_GATHERS_MAX; i++) {
		const struct analysis_gather *g = &res->gathers[i];
		if (g->phase != ANALYSIS_PHASE_FORWARD)
			continue;
		struct live_gather *o = &j->gathers[j->ngathers++];
		memset(o, 0, sizeof *o);
		o->unit = g->repeat < 0 ? UINT32_MAX : (uint32_t)g->repeat;
		o->bytes = g->bytes;
		o->nranks = g->nranks > 0 ? (uint32_t)g->nranks : 1;
		o->exposed_ns = g->exposed_ns;
		copy_text(o->name, sizeof o->name, g->name);
	}

	for (size_t i = 0; i < l->nslots; i++) {
		struct live_slot *s = l->slots[i];
		s->r.lateness_ns = 0;
		for (uint32_t k = 0; k < res->nper_rank; k++)
			if (res->per_rank[k].source == s->r.source) {
				uint64_t late = res->per_rank[k].late_ns_per_step;
				s->r.lateness_ns = late > INT64_MAX ? INT64_MAX : (int64_t)late;
				break;
			}
		for (size_t c = 0; c < s->r.ncomms; c++)
			s->r.comms[c].role = comm_role(res, s, c);
	}
}

/* By rank, ranks not known yet last by source. */
static int rank_cmp(const void *x, const void *y)
{
	const struct live_rank *a = x, *b = y;
	if ((a->rank < 0) != (b->rank < 0))
		return a->rank < 0 ? 1 : -1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return a->source < b->source ? -1 : a->source > b->source;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int live_publish(live_t *l, live_board_t *b)
{
	struct live_view *v = calloc(1, sizeof *v);
	if (!v)
		return -ENOMEM;
	v->ranks = malloc((l->nslots ? l->nslots : 1) * sizeof *v->ranks);
	if (!v->ranks) {
		free(v);
		return -ENOMEM;
	}
	v->at_ns = clock_ns(CLOCK_MONOTONIC);
	v->at_realtime_ns = clock_ns(CLOCK_REALTIME);
	v->job = l->job;
	v->nranks = l->nslots;
	for (size_t i = 0; i < l->nslots; i++)
		v->ranks[i] = l->slots[i]->r;
	qsort(v->ranks, v->nranks, sizeof *v->ranks, rank_cmp);
	return live_board_put(b, v);
}
