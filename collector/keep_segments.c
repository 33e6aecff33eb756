/*
 * keep_segments.c - the segments of last:N (keep_segments.h).
 */
#include "collector/keep_segments.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int keep_segments_push(keeper_t *k, char *path, uint32_t start)
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

/* Close the open output as a segment and go on in a new one. */
int keep_segments_rotate(keeper_t *k)
{
	char *path = NULL;
	if (asprintf(&path, "%s/segment-%06u.fss", k->folder, ++k->seg_number) < 0)
		return -ENOMEM;
	/* tracked first: a segment the ingest opened is never lost track of */
	if (keep_segments_push(k, path, k->st.steps_done) < 0) {
		free(path);
		return -ENOMEM;
	}
	int rc = k->ops.rotate(k->ops_ctx, path);
	if (rc < 0) {
		k->nsegs--;
		keep_say(k, "--keep last:%u: could not start segment %s: %s; the trace goes on in the current file",
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
void keep_segments_step(keeper_t *k)
{
	uint32_t n = k->policy.steps, per = n / 4 ? n / 4 : 1, done = k->st.steps_done;
	if (done >= k->segs[k->nsegs - 1].start + per && keep_segments_rotate(k) < 0) {
		k->segs[k->nsegs - 1].start = done; /* try again a segment later */
		return;
	}
	while (k->first_kept + 1 < k->nsegs && (uint64_t)k->segs[k->first_kept + 1].start + n <= done) {
		struct segment *s = &k->segs[k->first_kept];
		if (unlink(s->path) < 0 && errno != ENOENT)
			keep_say(k, "--keep last:%u: could not remove %s: %s", n, s->path, strerror(errno));
		else
			k->st.segments_removed++;
		k->first_kept++;
		k->st.segments_kept--;
	}
}

/* Merge the kept segments (the closed tail included) into the trace. */
int keep_segments_merge(keeper_t *k)
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
			keep_say(k, "could not remove segment %s: %s", k->segs[i].path, strerror(errno));
	}
	k->first_kept = k->nsegs;
	k->st.segments_kept = 0;
	return 0;
}
