/*
 * keep.c - the --keep policy: what a session keeps of a long job (keep.h,
 * docs/keep.md).
 *
 * full     every record goes to the file; when the policy was not chosen,
 *          a disk guard looks at the trace's file system every
 *          KEEP_GUARD_EVERY bytes and switches to last:KEEP_GUARD_LAST
 *          before the free space would fall below max(1 GiB, 5 %).
 * last:N   the output is rotated (ingest_rotate) every max(1, N/4) steps of
 *          the slowest rank; a segment whose steps are all older than the
 *          last N is removed; keeper_finish merges what is left.
 * summary  the first steps of every rank in full; then each rank's records
 *          of a step are held back (one step in progress per rank, bounded)
 *          until the analysis completes the step: a step that stands out
 *          (lost collectives, slower than twice the running median) is
 *          written in full, any other becomes one step_summary record.
 *
 * Records are placed in steps by their host time: a step is [start_ns,
 * start_ns + step_ns) of its rank, the time the analysis gives it. A call's
 * enter record and its exit (the collective, or the sync_exit) carry the
 * same enter_ns, so they are placed in the same step: both kept or both
 * left out, never an exit without its enter. An enter whose exit never came
 * (a hung call) waits with its undecided step and is written in full at the
 * source's end.
 */
#include "collector/keep.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector/median.h"
#include "common/crc32c.h"
#include "common/trace_format.h"

#define KEEP_STEPS_MAX 10000000u
#define KEEP_MESSAGES 8
#define KEEP_MESSAGE_BYTES 320
#define KEEP_HISTORY 8
/* A rank this many steps behind the fastest (or N of last:N, if more) no
 * longer counts as the slowest. */
#define KEEP_LAG_STEPS 64

/* ---- the policy --------------------------------------------------------- */

/* A step count: digits only, 1..KEEP_STEPS_MAX. */
static int parse_steps(const char *s, uint32_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > KEEP_STEPS_MAX)
			return -EINVAL;
	}
	if (v == 0)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int keep_policy_parse(const char *text, struct keep_policy *out)
{
	struct keep_policy p = {0};
	if (!text)
		return -EINVAL;
	if (strcmp(text, "full") == 0) {
		p.mode = KEEP_FULL;
	} else if (strcmp(text, "summary") == 0) {
		p.mode = KEEP_SUMMARY;
		p.steps = KEEP_SUMMARY_STEPS;
	} else if (strncmp(text, "summary:", 8) == 0) {
		p.mode = KEEP_SUMMARY;
		if (parse_steps(text + 8, &p.steps) < 0)
			return -EINVAL;
	} else if (strncmp(text, "last:", 5) == 0) {
		p.mode = KEEP_LAST;
		if (parse_steps(text + 5, &p.steps) < 0)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	*out = p;
	return 0;
}

void keep_policy_default(struct keep_policy *out)
{
	*out = (struct keep_policy){.mode = KEEP_FULL, .steps = 0, .is_default = 1};
}

const char *keep_policy_format(const struct keep_policy *p, char *buf, size_t len)
{
	if (!len)
		return buf;
	switch (p->mode) {
	case KEEP_LAST:
		snprintf(buf, len, "last:%u", p->steps);
		break;
	case KEEP_SUMMARY:
		if (p->steps == KEEP_SUMMARY_STEPS)
			snprintf(buf, len, "summary");
		else
			snprintf(buf, len, "summary:%u", p->steps);
		break;
	default:
		snprintf(buf, len, "full");
		break;
	}
	return buf;
}

/* ---- the keeper --------------------------------------------------------- */

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

struct segment {
	char *path;
	uint32_t start; /* the slowest rank's completed steps when it began */
};

struct keeper {
	struct keep_policy policy; /* as it is now (the guard may switch it) */
	ingest_t *ing;
	char *trace_path, *folder, *trace_dir;
	struct keeper_ingest_ops ops;
	void *ops_ctx;
	int (*statvfs_fn)(const char *path, struct statvfs *out);
	uint64_t (*now_fn)(void);
	uint64_t guard_every;
	size_t buffer_max;
	int err;
	int drained; /* keeper_drain ran: everything is written as it comes */

	uint64_t next_check;
	int guard_warned, guard_failed_said;
	uint32_t guard_step; /* steps done when the guard switched */

	struct segment *segs; /* [first_kept, nsegs) on disk, the last one open */
	size_t nsegs, segs_cap, first_kept;
	uint32_t seg_number;

	uint32_t *rank_done; /* completed steps per rank */
	size_t nranks;

	struct kept_source *src; /* by output source number */
	size_t nsrc;

	char msg[KEEP_MESSAGES][KEEP_MESSAGE_BYTES];
	unsigned msg_head, msg_count;
	char msg_out[KEEP_MESSAGE_BYTES];
	char note[256];

	int have_first;
	uint64_t first_ns;
	struct keeper_stats st;
};

static void say(keeper_t *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Queue a line for keeper_take_message; the oldest goes when the queue is full. */
static void say(keeper_t *k, const char *fmt, ...)
{
	if (k->msg_count == KEEP_MESSAGES) {
		k->msg_head = (k->msg_head + 1) % KEEP_MESSAGES;
		k->msg_count--;
	}
	char *m = k->msg[(k->msg_head + k->msg_count++) % KEEP_MESSAGES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, KEEP_MESSAGE_BYTES, fmt, ap);
	va_end(ap);
}

static void fail(keeper_t *k, int rc)
{
	if (!k->err)
		k->err = rc;
}

/* "12.3 GB", decimal units (what df -H and disk vendors say). */
static const char *human_bytes(double b, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "kB", "MB", "GB", "TB", "PB"};
	unsigned u = 0;
	while (b >= 1000.0 && u + 1 < sizeof unit / sizeof unit[0]) {
		b /= 1000.0;
		u++;
	}
	snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", b, unit[u]);
	return buf;
}

/* "1,234,567" */
static const char *grouped(uint64_t v, char *buf, size_t len)
{
	char digits[32];
	int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
	size_t o = 0;
	for (int i = 0; i < n && o + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = 0;
	return buf;
}

static int default_write_record(void *ctx, const struct fss_record_head *rec)
{
	return ingest_write_record(ctx, rec);
}

static int default_rotate(void *ctx, const char *path)
{
	return ingest_rotate(ctx, path);
}

static int default_merge(void *ctx, const char *out_path, const char *const *inputs, size_t n)
{
	(void)ctx;
	ingest_t *m;
	int rc = ingest_new(&m, out_path, &(struct ingest_options){.sync_on_close = 1});
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = ingest_add_file(m, inputs[i]);
	int frc = ingest_finish(m, NULL);
	ingest_free(m);
	return rc < 0 ? rc : frc;
}

static const struct keeper_ingest_ops default_ops = {
    .write_record = default_write_record,
    .rotate = default_rotate,
    .merge = default_merge,
};

static int default_statvfs(const char *path, struct statvfs *out)
{
	return statvfs(path, out) == 0 ? 0 : -errno;
}

static uint64_t default_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int push_segment(keeper_t *k, char *path, uint32_t start)
{
	if (k->nsegs == k->segs_cap) {
		size_t cap = k->segs_cap ? 2 * k->segs_cap : 8;
		struct segment *v = realloc(k->segs, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		k->segs = v;
		k->segs_cap = cap;
	}
	k->segs[k->nsegs++] = (struct segment){path, start};
	return 0;
}

int keeper_new(keeper_t **out, const struct keep_policy *p, ingest_t *ing, const char *trace_path, const char *folder)
{
	*out = NULL;
	if (!p || !trace_path || !folder || (p->mode != KEEP_FULL && p->steps == 0))
		return -EINVAL;
	keeper_t *k = calloc(1, sizeof *k);
	if (!k)
		return -ENOMEM;
	k->policy = *p;
	k->ing = ing;
	k->ops = default_ops;
	k->ops_ctx = ing;
	k->statvfs_fn = default_statvfs;
	k->now_fn = default_now;
	k->guard_every = KEEP_GUARD_EVERY;
	k->buffer_max = KEEP_BUFFER_MAX;
	k->trace_path = strdup(trace_path);
	k->folder = strdup(folder);
	k->trace_dir = strdup(trace_path);
	char *seg0 = strdup(trace_path);
	if (!k->trace_path || !k->folder || !k->trace_dir || !seg0 || push_segment(k, seg0, 0) < 0) {
		free(seg0);
		keeper_free(k);
		return -ENOMEM;
	}
	char *slash = strrchr(k->trace_dir, '/');
	if (!slash)
		strcpy(k->trace_dir, ".");
	else if (slash == k->trace_dir)
		slash[1] = 0;
	else
		*slash = 0;
	k->st.segments_kept = 1;
	*out = k;
	return 0;
}

void keeper_set_hooks(keeper_t *k, const struct keeper_hooks *h)
{
	if (h->ingest) {
		k->ops = *h->ingest;
		k->ops_ctx = h->ingest_ctx;
	}
	if (h->statvfs)
		k->statvfs_fn = h->statvfs;
	if (h->now_ns)
		k->now_fn = h->now_ns;
	if (h->guard_every)
		k->guard_every = h->guard_every;
	if (h->buffer_max)
		k->buffer_max = h->buffer_max;
}

void keeper_free(keeper_t *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->nsegs; i++)
		free(k->segs[i].path);
	free(k->segs);
	for (size_t i = 0; i < k->nsrc; i++) {
		free(k->src[i].buf);
		free(k->src[i].held);
	}
	free(k->src);
	free(k->rank_done);
	free(k->trace_path);
	free(k->folder);
	free(k->trace_dir);
	free(k);
}

const char *keeper_take_message(keeper_t *k)
{
	if (!k->msg_count)
		return NULL;
	memcpy(k->msg_out, k->msg[k->msg_head], sizeof k->msg_out);
	k->msg_head = (k->msg_head + 1) % KEEP_MESSAGES;
	k->msg_count--;
	return k->msg_out;
}

void keeper_get_stats(const keeper_t *k, struct keeper_stats *out)
{
	*out = k->st;
}

/* ---- last:N: segments ---------------------------------------------------- */

/* Close the open output as a segment and go on in a new one. */
static int rotate(keeper_t *k)
{
	char *path = NULL;
	if (asprintf(&path, "%s/segment-%06u.fss", k->folder, ++k->seg_number) < 0)
		return -ENOMEM;
	/* tracked first: a segment the ingest opened is never lost track of */
	if (push_segment(k, path, k->st.steps_done) < 0) {
		free(path);
		return -ENOMEM;
	}
	int rc = k->ops.rotate(k->ops_ctx, path);
	if (rc < 0) {
		k->nsegs--;
		say(k, "--keep last:%u: could not start segment %s: %s; the trace goes on in the current file",
		    k->policy.steps, path, strerror(-rc));
		free(path);
		return rc;
	}
	k->st.rotations++;
	k->st.segments_kept++;
	return 0;
}

/* Rotate when the open segment holds its steps; remove segments whose steps
 * are all older than the last N. */
static void last_steps(keeper_t *k)
{
	uint32_t n = k->policy.steps, per = n / 4 ? n / 4 : 1, done = k->st.steps_done;
	if (done >= k->segs[k->nsegs - 1].start + per && rotate(k) < 0) {
		k->segs[k->nsegs - 1].start = done; /* try again a segment later */
		return;
	}
	while (k->first_kept + 1 < k->nsegs && (uint64_t)k->segs[k->first_kept + 1].start + n <= done) {
		struct segment *s = &k->segs[k->first_kept];
		if (unlink(s->path) < 0 && errno != ENOENT)
			say(k, "--keep last:%u: could not remove %s: %s", n, s->path, strerror(errno));
		else
			k->st.segments_removed++;
		k->first_kept++;
		k->st.segments_kept--;
	}
}

/* ---- the disk guard ------------------------------------------------------ */

static void guard(keeper_t *k)
{
	struct statvfs vfs;
	k->st.guard_checks++;
	int rc = k->statvfs_fn(k->trace_dir, &vfs);
	if (rc < 0) {
		if (!k->guard_failed_said++)
			say(k, "cannot read the free space of %s (%s): the trace is kept in full without a check",
			    k->trace_dir, strerror(-rc));
		return;
	}
	uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize, total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	uint64_t need = total / 20 > KEEP_GUARD_MIN_FREE ? total / 20 : KEEP_GUARD_MIN_FREE;
	/* the next check is guard_every bytes away: switch while that much still fits */
	if (avail >= need + k->guard_every)
		return;
	char a[32], b[32];
	human_bytes((double)avail, a, sizeof a);
	human_bytes((double)need, b, sizeof b);
	if (!k->policy.is_default) {
		if (!k->guard_warned++)
			say(k,
			    "--keep full: %s free on the trace's file system (%s), under the %s to leave free: "
			    "the trace may fill it (--keep last:N or --keep summary bound it)",
			    a, k->trace_dir, b);
		return;
	}
	k->policy = (struct keep_policy){.mode = KEEP_LAST, .steps = KEEP_GUARD_LAST, .is_default = 1};
	k->st.guard_switched = 1;
	k->guard_step = k->st.steps_done;
	say(k,
	    "%s free on the trace's file system (%s), under the %s to leave free: from step %u on the trace "
	    "keeps only the last %u steps (--keep last:%u; choose with --keep)",
	    a, k->trace_dir, b, k->guard_step, KEEP_GUARD_LAST, KEEP_GUARD_LAST);
	/* what was written so far becomes a segment of its own, removed once old
	 * (a failure is said, and tried again a segment later) */
	rotate(k);
}

/* Count bytes the trace gets; look at the disk every guard_every of them. */
static void account(keeper_t *k, uint16_t size)
{
	k->st.bytes += size;
	if (k->policy.mode == KEEP_FULL && k->st.bytes >= k->next_check) {
		k->next_check = k->st.bytes + k->guard_every;
		guard(k);
	}
}

static int write_own(keeper_t *k, const struct fss_record_head *rec)
{
	int rc = k->ops.write_record(k->ops_ctx, rec);
	if (rc < 0) {
		fail(k, rc);
		return rc;
	}
	account(k, rec->size);
	return 0;
}

/* ---- summary: held records ---------------------------------------------- */

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
			write_own(k, rec);
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
		say(k,
		    "--keep summary: source %u (rank %d) held back %zu bytes of one step: steps that long are "
		    "summarised without a look at them",
		    s->id, s->rank, s->bytes);
	for (size_t i = 0; i < s->nheld; i++) {
		const struct held *h = &s->held[i];
		const struct fss_record_head *rec = (const void *)(s->buf + h->off);
		if (!h->droppable) {
			write_own(k, rec);
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

static int summary_record(keeper_t *k, const struct fss_record_head *rec, const struct source *src)
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

int keeper_on_record(keeper_t *k, const struct fss_record_head *rec, const struct source *src)
{
	if (!k->have_first) {
		k->have_first = 1;
		k->first_ns = k->now_fn();
	}
	k->st.records_in++;
	if (k->policy.mode == KEEP_SUMMARY && src && !k->drained) {
		int rc = summary_record(k, rec, src);
		if (rc < 0) {
			fail(k, rc);
			return rc;
		}
		if (rc == 1)
			return 1;
	}
	account(k, rec->size);
	return 0;
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

static void summary_step(keeper_t *k, const struct analysis_step_info *step)
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
	if (write_own(k, &r.head) == 0)
		k->st.steps_summarised++;
}

void keeper_on_step(keeper_t *k, const struct analysis_step_info *step)
{
	if (step->rank >= 0 && step->rank < (1 << 20)) {
		size_t r = (size_t)step->rank;
		if (r >= k->nranks) {
			size_t n = r + 1 > 2 * k->nranks ? r + 1 : 2 * k->nranks;
			uint32_t *v = realloc(k->rank_done, n * sizeof *v);
			if (!v) {
				fail(k, -ENOMEM);
				return;
			}
			memset(v + k->nranks, 0, (n - k->nranks) * sizeof *v);
			k->rank_done = v;
			k->nranks = n;
		}
		if (step->ordinal + 1 > k->rank_done[r])
			k->rank_done[r] = step->ordinal + 1;
		/* the slowest rank of those still stepping: a rank more than
		 * KEEP_LAG_STEPS behind the fastest has stopped (it ended, or it is
		 * no training rank) and must not hold the segments back */
		uint32_t fastest = 0, slowest = UINT32_MAX;
		for (size_t i = 0; i < k->nranks; i++)
			if (k->rank_done[i] > fastest)
				fastest = k->rank_done[i];
		uint32_t lag = k->policy.steps > KEEP_LAG_STEPS ? k->policy.steps : KEEP_LAG_STEPS;
		for (size_t i = 0; i < k->nranks; i++)
			if (k->rank_done[i] && k->rank_done[i] < slowest && k->rank_done[i] + lag >= fastest)
				slowest = k->rank_done[i];
		k->st.steps_done = slowest == UINT32_MAX ? 0 : slowest;
	}
	if (k->policy.mode == KEEP_LAST && !k->drained)
		last_steps(k); /* not once drained: the ingest is finishing */
	else if (k->policy.mode == KEEP_SUMMARY && !k->drained)
		summary_step(k, step);
}

int keeper_drain(keeper_t *k)
{
	k->drained = 1;
	for (size_t i = 0; i < k->nsrc; i++)
		if (k->src[i].used && k->src[i].nheld)
			resolve(k, &k->src[i], 1);
	return k->err;
}

const char *keeper_projection(const keeper_t *k, uint64_t now_ns, char *buf, size_t len)
{
	if (!len)
		return buf;
	buf[0] = 0;
	if (!k->have_first || now_ns <= k->first_ns || !k->st.records_in)
		return buf;
	double secs = (double)(now_ns - k->first_ns) / 1e9;
	char rate[32], day[32], kept[32];
	grouped((uint64_t)((double)k->st.records_in / secs + 0.5), rate, sizeof rate);
	human_bytes((double)k->st.bytes / secs * 86400.0, day, sizeof day);
	int n = snprintf(buf, len, "at %s records/s: about %s a day", rate, day);
	if (n < 0 || (size_t)n >= len)
		return buf;
	if (k->policy.mode == KEEP_LAST && k->st.steps_done) {
		uint32_t per = k->policy.steps / 4 ? k->policy.steps / 4 : 1;
		/* steps since the guard switched (or from the start) are all in segments */
		uint32_t steps = k->st.steps_done - k->guard_step;
		if (steps)
			snprintf(buf + n, len - (size_t)n, ", of which the last %u steps stay: at most about %s",
				 k->policy.steps,
				 human_bytes((double)k->st.bytes / k->st.steps_done * (k->policy.steps + per), kept,
					     sizeof kept));
	} else if (k->policy.mode == KEEP_FULL && k->policy.is_default) {
		snprintf(buf + n, len - (size_t)n, " (--keep full; with the disk short of space, the last %u steps)",
			 KEEP_GUARD_LAST);
	}
	return buf;
}

/* ---- the end ----------------------------------------------------------- */

/* Mark the policy in the header of the closed trace at path. */
static int mark_header(const char *path, uint32_t flags, uint32_t steps)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	struct fss_file_header h;
	int rc = 0;
	ssize_t got = pread(fd, &h, sizeof h, 0);
	if (got != (ssize_t)sizeof h || memcmp(h.magic, FSS_FILE_MAGIC, 8) != 0 ||
	    h.byte_order != FSS_BYTE_ORDER_MARK) {
		rc = got < 0 ? -errno : -EINVAL;
		goto out;
	}
	h.flags = (h.flags & ~(FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY)) | flags;
	h.keep_steps = steps;
	h.crc = crc32c(0, &h, offsetof(struct fss_file_header, crc));
	if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
		rc = -errno;
	else if (fsync(fd) < 0)
		rc = -errno;
out:
	close(fd);
	return rc;
}

/* Merge the kept segments (the closed tail included) into the trace. */
static int merge_segments(keeper_t *k)
{
	size_t n = k->nsegs - k->first_kept;
	const char **in = malloc(n * sizeof *in);
	if (!in)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		in[i] = k->segs[k->first_kept + i].path;
	int rc = k->ops.merge(k->ops_ctx, k->trace_path, in, n);
	free(in);
	if (rc < 0)
		return rc;
	for (size_t i = k->first_kept; i < k->nsegs; i++) {
		if (strcmp(k->segs[i].path, k->trace_path) == 0)
			continue;
		if (unlink(k->segs[i].path) < 0 && errno != ENOENT)
			say(k, "could not remove segment %s: %s", k->segs[i].path, strerror(errno));
	}
	k->first_kept = k->nsegs;
	k->st.segments_kept = 0;
	return 0;
}

int keeper_finish(keeper_t *k, const char **note)
{
	if (note)
		*note = NULL;
	if (k->err)
		return k->err;
	int rc = 0;
	uint32_t flags = 0;
	k->note[0] = 0;
	if (k->policy.mode == KEEP_LAST) {
		uint32_t from = k->segs[k->first_kept].start;
		if (k->nsegs - k->first_kept > 1 || strcmp(k->segs[k->first_kept].path, k->trace_path) != 0)
			rc = merge_segments(k);
		if (rc < 0)
			return rc;
		flags = FSS_FILE_KEEP_LAST;
		if (k->st.guard_switched)
			snprintf(k->note, sizeof k->note,
				 "the disk ran short at step %u: the trace holds the steps from %u on, of %u (--keep "
				 "last:%u)",
				 k->guard_step, from, k->st.steps_done, k->policy.steps);
		else
			snprintf(k->note, sizeof k->note, "the last %u of %u steps (--keep last:%u)",
				 k->st.steps_done - from, k->st.steps_done, k->policy.steps);
	} else if (k->policy.mode == KEEP_SUMMARY) {
		flags = FSS_FILE_KEEP_SUMMARY;
		snprintf(
		    k->note, sizeof k->note,
		    "the first %u steps of every rank in full, %u steps summarised, %u kept in full for standing out "
		    "(--keep summary)",
		    k->policy.steps, k->st.steps_summarised, k->st.steps_standing_out);
	}
	if (flags) {
		rc = mark_header(k->trace_path, flags, k->policy.steps);
		if (rc < 0)
			return rc;
		if (note)
			*note = k->note;
	}
	return 0;
}
