/*
 * keep.c - the --keep policy: what a session keeps of a long job (keep.h,
 * docs/keep.md). The keeper's life cycle, and the records and steps the
 * session hands it, sent on by the policy:
 *
 * full     every record goes to the file; when the policy was not chosen,
 *          a disk guard (keep_guard.c) looks at the trace's file system
 *          every KEEP_GUARD_EVERY bytes and switches to last:KEEP_GUARD_LAST
 *          before the free space would fall below max(1 GiB, 5 %).
 * last:N   the output is rotated (ingest_rotate) every max(1, N/4) steps of
 *          the slowest rank; a segment whose steps are all older than the
 *          last N is removed; keeper_finish merges what is left
 *          (keep_segments.c).
 * summary  the first steps of every rank in full; then each step of a rank
 *          in full when it stands out, else as one step_summary record
 *          (keep_summary.c).
 */
#include "collector/keep.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector/keep_guard.h"
#include "collector/keep_segments.h"
#include "collector/keep_state.h"
#include "collector/keep_summary.h"
#include "common/crc32c.h"
#include "common/trace_format.h"

/* A rank this many steps behind the fastest (or N of last:N, if more) no
 * longer counts as the slowest. */
#define KEEP_LAG_STEPS 64

void keep_say(keeper_t *k, const char *fmt, ...)
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

void keep_fail(keeper_t *k, int rc)
{
	if (!k->err)
		k->err = rc;
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
	if (!k->trace_path || !k->folder || !k->trace_dir || !seg0 || keep_segments_push(k, seg0, 0) < 0) {
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
	keep_summary_free(k);
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

int keep_write_own(keeper_t *k, const struct fss_record_head *rec)
{
	int rc = k->ops.write_record(k->ops_ctx, rec);
	if (rc < 0) {
		keep_fail(k, rc);
		return rc;
	}
	keep_guard_account(k, rec->size);
	return 0;
}

int keeper_on_record(keeper_t *k, const struct fss_record_head *rec, const struct source *src)
{
	if (!k->have_first) {
		k->have_first = 1;
		k->first_ns = k->now_fn();
	}
	k->st.records_in++;
	if (k->policy.mode == KEEP_SUMMARY && src && !k->drained) {
		int rc = keep_summary_record(k, rec, src);
		if (rc < 0) {
			keep_fail(k, rc);
			return rc;
		}
		if (rc == 1)
			return 1;
	}
	keep_guard_account(k, rec->size);
	return 0;
}

void keeper_on_step(keeper_t *k, const struct analysis_step_info *step)
{
	if (step->rank >= 0 && step->rank < (1 << 20)) {
		size_t r = (size_t)step->rank;
		if (r >= k->nranks) {
			size_t n = r + 1 > 2 * k->nranks ? r + 1 : 2 * k->nranks;
			uint32_t *v = realloc(k->rank_done, n * sizeof *v);
			if (!v) {
				keep_fail(k, -ENOMEM);
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
		keep_segments_step(k); /* not once drained: the ingest is finishing */
	else if (k->policy.mode == KEEP_SUMMARY && !k->drained)
		keep_summary_step(k, step);
}

int keeper_drain(keeper_t *k)
{
	k->drained = 1;
	keep_summary_drain(k);
	return k->err;
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
			rc = keep_segments_merge(k);
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
