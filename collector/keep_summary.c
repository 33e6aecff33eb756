/*
 * keep_summary.c - the summary of --keep summary (keep_summary.h).
 *
 * Records are placed in steps by their host time: a step is [start_ns,
 * start_ns + step_ns) of its rank, the time the analysis gives it. A call's
 * enter record and its exit (the collective, or the sync_exit) carry the
 * same enter_ns, so they are placed in the same step: both kept or both
 * left out, never an exit without its enter. An enter whose exit never came
 * (a hung call) waits with its undecided step and is written in full at the
 * source's end.
 */
#include "collector/keep_summary.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/median.h"

#define KEEP_HISTORY 8

/* One record a source holds back (summary), in arrival order. */
struct held {
	uint64_t t;   /* host time, 0 for an untimed record */
	uint32_t off; /* where its bytes are in the source's buffer */
	uint16_t size;
	uint8_t droppable; /* a raw record of a step (collective, group, ...), not one that states the process */
	uint8_t reserved;
};

/* A decided step of a source: its time span and whether it went in full. */
struct decision {
	uint64_t t0, t1;
	int kept;
};

struct kept_source {
	int used;
	uint32_t id;	       /* output source number */
	int32_t rank;	       /* as the per-source layer last said */
	uint32_t steps;	       /* its completed steps the keeper was told of */
	int selective;	       /* past its full steps: raw records are held back */
	uint64_t full_until;   /* latest time of a raw record written before it became selective */
	uint64_t forced_until; /* raw records up to here were left out unseen (the buffer overflowed) */
	int overflowed;	       /* the next summary says so */
	uint64_t last_t;       /* time of its latest timed record (for correlation records) */
	struct median step_median;
	struct decision hist[KEEP_HISTORY];
	unsigned nhist, hist_at;
	uint64_t hist_end; /* the latest end of a decided step */
	unsigned char *buf;
	size_t bytes, cap;
	struct held *held;
	size_t nheld, held_cap;
	/* left out since its last summary */
	uint64_t out_seq_lo, out_seq_hi;
	uint32_t out_collectives, out_records;
};

static struct kept_source *source_state(keeper_t *k, uint32_t id)
{
	if (id >= k->nsrc) {
		if (id >= (1u << 24))
			return NULL;
		size_t n = id + 1 > 2 * k->nsrc ? id + 1 : 2 * k->nsrc;
		struct kept_source *v = realloc(k->src, n * sizeof *v);
		if (!v)
			return NULL;
		memset(v + k->nsrc, 0, (n - k->nsrc) * sizeof *v);
		k->src = v;
		k->nsrc = n;
	}
	struct kept_source *s = &k->src[id];
	if (!s->used) {
		s->used = 1;
		s->id = id;
		s->rank = -1;
	}
	return s;
}

/* The raw records of a step: left out of a summarised step. Enter and
 * sync_exit records are the entries of its calls: they go with it. */
static int droppable(uint16_t type)
{
	return type == FSS_REC_COLLECTIVE || type == FSS_REC_GROUP || type == FSS_REC_GPU_INTERVAL ||
	       type == FSS_REC_NVTX_RANGE || type == FSS_REC_CORRELATION || type == FSS_REC_ENTER ||
	       type == FSS_REC_SYNC_EXIT;
}

/* Host time of a raw record; a correlation has none and goes with the
 * record before it. */
static uint64_t record_time(struct kept_source *s, const struct fss_record_head *rec, const struct source *src)
{
	uint64_t t = 0;
	switch (rec->type) {
	case FSS_REC_COLLECTIVE:
		t = ((const struct fss_rec_collective *)rec)->enter_ns;
		break;
	case FSS_REC_GROUP:
		t = ((const struct fss_rec_group *)rec)->start_ns;
		break;
	case FSS_REC_ENTER:
		/* the collective's own enter_ns: an enter and its exit land in one step */
		t = ((const struct fss_rec_enter *)rec)->enter_ns;
		break;
	case FSS_REC_SYNC_EXIT:
		t = ((const struct fss_rec_sync_exit *)rec)->enter_ns; /* with its enter */
		break;
	case FSS_REC_NVTX_RANGE:
		t = ((const struct fss_rec_nvtx_range *)rec)->start_ns;
		break;
	case FSS_REC_GPU_INTERVAL:
		t = ((const struct fss_rec_gpu_interval *)rec)->start_ns;
		if (src && src->have_cupti_anchor)
			t = (uint64_t)((int64_t)t + src->cupti_offset);
		break;
	default:
		return s->last_t;
	}
	s->last_t = t;
	return t;
}

/* The decided step holding time t: 1 kept, 0 summarised, -1 none. */
static int decided(const struct kept_source *s, uint64_t t)
{
	for (unsigned i = 0; i < s->nhist; i++)
		if (t >= s->hist[i].t0 && t < s->hist[i].t1)
			return s->hist[i].kept;
	return -1;
}

/* A raw record left out: counted into the source's next summary. */
static void left_out(keeper_t *k, struct kept_source *s, const struct fss_record_head *rec)
{
	k->st.records_left_out++;
	s->out_records++;
	if (rec->type == FSS_REC_COLLECTIVE) {
		uint64_t seq = ((const struct fss_rec_collective *)rec)->seq;
		if (!s->out_collectives || seq < s->out_seq_lo)
			s->out_seq_lo = seq;
		if (!s->out_collectives || seq > s->out_seq_hi)
			s->out_seq_hi = seq;
		s->out_collectives++;
	}
}

/* What to do with a raw record of a selective source at time t, now: 1
 * write, 0 leave out, -1 hold it (its step is not decided). */
static int place(const struct kept_source *s, uint64_t t)
{
	if (t <= s->full_until)
		return 1;
	if (t <= s->forced_until)
		return 0;
	int d = decided(s, t);
	if (d >= 0)
		return d;
	return t < s->hist_end ? 1 : -1; /* between decided steps: outside any step, kept */
}

/* Write or leave out the held records from the front while their steps are
 * decided; the first undecided raw record stops (order is kept). */
static void resolve(keeper_t *k, struct kept_source *s, int all)
{
	if (!s->nheld)
		return;
	size_t i = 0;
	for (; i < s->nheld; i++) {
		const struct held *h = &s->held[i];
		const struct fss_record_head *rec = (const void *)(s->buf + h->off);
		int p = h->droppable && !all ? place(s, h->t) : 1;
		if (p < 0)
			break;
		if (p)
			keep_write_own(k, rec);
		else
			left_out(k, s, rec);
	}
	size_t from = i < s->nheld ? s->held[i].off : s->bytes;
	memmove(s->held, s->held + i, (s->nheld - i) * sizeof *s->held);
	s->nheld -= i;
	for (size_t j = 0; j < s->nheld; j++)
		s->held[j].off -= (uint32_t)from;
	memmove(s->buf, s->buf + from, s->bytes - from);
	s->bytes -= from;
}

/* The buffer outgrew its bound: its raw records are left out unseen (their
 * steps become summaries), the rest is written. */
static void overflow(keeper_t *k, struct kept_source *s)
{
	if (!s->overflowed)
		keep_say(k,
			 "--keep summary: source %u (rank %d) held back %zu bytes of one step: steps that long are "
			 "summarised without a look at them",
			 s->id, s->rank, s->bytes);
	for (size_t i = 0; i < s->nheld; i++) {
		const struct held *h = &s->held[i];
		const struct fss_record_head *rec = (const void *)(s->buf + h->off);
		if (!h->droppable) {
			keep_write_own(k, rec);
			continue;
		}
		left_out(k, s, rec);
		if (h->t > s->forced_until)
			s->forced_until = h->t;
	}
	s->nheld = 0;
	s->bytes = 0;
	s->overflowed = 1;
}

static int hold(keeper_t *k, struct kept_source *s, const struct fss_record_head *rec, uint64_t t, int drop)
{
	if (s->bytes + rec->size > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 4096;
		while (cap < s->bytes + rec->size)
			cap *= 2;
		/* never more than the bound and one record: past it the buffer is emptied */
		if (cap > k->buffer_max + FSS_RECORD_MAX_BYTES &&
		    s->bytes + rec->size <= k->buffer_max + FSS_RECORD_MAX_BYTES)
			cap = k->buffer_max + FSS_RECORD_MAX_BYTES;
		unsigned char *b = realloc(s->buf, cap);
		if (!b)
			return -ENOMEM;
		s->buf = b;
		s->cap = cap;
	}
	if (s->nheld == s->held_cap) {
		size_t cap = s->held_cap ? 2 * s->held_cap : 64;
		struct held *v = realloc(s->held, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		s->held = v;
		s->held_cap = cap;
	}
	memcpy(s->buf + s->bytes, rec, rec->size);
	s->held[s->nheld++] =
	    (struct held){.t = t, .off = (uint32_t)s->bytes, .size = rec->size, .droppable = (uint8_t)drop};
	s->bytes += rec->size;
	if (s->bytes > k->st.buffered_max)
		k->st.buffered_max = s->bytes;
	if (s->bytes > k->buffer_max)
		overflow(k, s);
	return 0;
}

int keep_summary_record(keeper_t *k, const struct fss_record_head *rec, const struct source *src)
{
	struct kept_source *s = source_state(k, rec->source);
	if (!s)
		return -ENOMEM;
	s->rank = src->rank;
	if (!droppable(rec->type)) {
		/* a sink record (the ingest's resume marker after a record left out) is
		 * written whatever the keeper says: held records go after it */
		if (!s->nheld || rec->type == FSS_REC_SINK)
			return 0;
		if (rec->type == FSS_REC_PROCESS_END || rec->type == FSS_REC_PROCESS_EXIT) {
			/* its last step is only decided at the very end: write what is held, in full */
			resolve(k, s, 1);
			return k->err ? k->err : 0;
		}
		int rc = hold(k, s, rec, 0, 0);
		return rc < 0 ? rc : 1;
	}
	uint64_t t = record_time(s, rec, src);
	if (!s->selective) {
		if (t > s->full_until)
			s->full_until = t;
		return 0;
	}
	if (!s->nheld) {
		int p = place(s, t);
		if (p == 1)
			return 0;
		if (p == 0) {
			left_out(k, s, rec);
			return 1;
		}
	}
	int rc = hold(k, s, rec, t, 1);
	return rc < 0 ? rc : 1;
}

/* The source whose step this is: the one the step names when its rank
 * agrees, else the latest one with that rank. */
static struct kept_source *source_of_step(keeper_t *k, const struct analysis_step_info *step)
{
	if (step->source < k->nsrc && k->src[step->source].used && k->src[step->source].rank == step->rank)
		return &k->src[step->source];
	for (size_t i = k->nsrc; i-- > 0;)
		if (k->src[i].used && k->src[i].rank == step->rank)
			return &k->src[i];
	return NULL;
}

void keep_summary_step(keeper_t *k, const struct analysis_step_info *step)
{
	struct kept_source *s = source_of_step(k, step);
	if (!s)
		return;
	s->steps++;
	uint64_t median = median_get(&s->step_median);
	if (!step->excluded && step->step_ns)
		median_add(&s->step_median, step->step_ns);
	if (!s->selective) {
		if (s->steps >= k->policy.steps)
			s->selective = 1;
		return;
	}
	uint64_t t0 = step->start_ns, t1 = step->start_ns + step->step_ns;
	int kept, forced = 0;
	if (t0 <= s->forced_until) {
		kept = 0; /* some of its records were left out unseen: only a summary can account for them */
		forced = 1;
	} else if (t0 <= s->full_until) {
		kept = 1; /* begun before the source was selective: some of it is written already */
	} else {
		kept = step->excluded != 0 || (median && step->step_ns > 2 * median);
		if (kept)
			k->st.steps_standing_out++;
	}
	s->hist[s->hist_at] = (struct decision){t0, t1, kept};
	s->hist_at = (s->hist_at + 1) % KEEP_HISTORY;
	if (s->nhist < KEEP_HISTORY)
		s->nhist++;
	if (t1 > s->hist_end)
		s->hist_end = t1;
	resolve(k, s, 0);
	if (kept)
		return;
	struct fss_rec_step_summary r;
	record_init(&r, FSS_REC_STEP_SUMMARY, sizeof r, s->id);
	r.rank = step->rank;
	r.ordinal = step->ordinal;
	r.start_ns = step->start_ns;
	r.step_ns = step->step_ns;
	r.allgather_ns = step->allgather_ns;
	r.exposed_allgather_ns = step->exposed_allgather_ns;
	r.compute_wait_ns = step->compute_wait_ns;
	r.compute_ns = step->compute_ns;
	r.exposed_comm_ns = step->exposed_comm_ns;
	r.seq_first = s->out_collectives ? s->out_seq_lo : 0;
	r.seq_last = s->out_collectives ? s->out_seq_hi : 0;
	r.events = step->events;
	r.allgathers = step->allgathers;
	r.collectives = s->out_collectives;
	r.records = s->out_records;
	r.exposure_source = (uint16_t)step->exposure_source;
	r.flags = forced || s->overflowed ? FSS_STEP_SUMMARY_OVERFLOW : 0;
	if (r.flags)
		k->st.steps_overflowed++;
	s->overflowed = 0;
	s->out_collectives = s->out_records = 0;
	s->out_seq_lo = s->out_seq_hi = 0;
	if (keep_write_own(k, &r.head) == 0)
		k->st.steps_summarised++;
}

void keep_summary_drain(keeper_t *k)
{
	for (size_t i = 0; i < k->nsrc; i++)
		if (k->src[i].used && k->src[i].nheld)
			resolve(k, &k->src[i], 1);
}

void keep_summary_free(keeper_t *k)
{
	for (size_t i = 0; i < k->nsrc; i++) {
		free(k->src[i].buf);
		free(k->src[i].held);
	}
}
