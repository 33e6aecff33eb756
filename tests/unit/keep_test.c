/*
 * keep_test.c - the --keep policy (collector/keep.c): parsing, last:N
 * rotation and removal, the disk guard, the projection line, and summary on
 * synthetic fsdp_ref-like traces fed through a session-like loop (the
 * trace's records through the per-source layer, a live analyzer and the
 * keeper into a trace writer that stands in for the ingest's output). No
 * test depends on timing: clocks and free space are the test's own.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "analysis_synth.h"
#include "collector/analyze.h"
#include "collector/analyze_traces.h"
#include "collector/keep.h"
#include "collector/keep_hooks.h"
#include "collector/source.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "rules/rules.h"

#include "tests/support/scratch_dir.h"

static char dir[] = "/tmp/fss-keep-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return scratch_dir_make(dir);
}

static int teardown(void **state)
{
	(void)state;
	if (getenv("KEEP_TEST_KEEP")) /* look at the traces */
		return 0;
	return scratch_dir_remove(dir);
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

static void touch(const char *path)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

/* An empty closed trace at path (what a merge leaves for the header mark). */
static void empty_trace(const char *path)
{
	trace_writer_t *w;
	assert_int_equal(trace_writer_open(&w, path, NULL), 0);
	assert_int_equal(trace_writer_close(w), 0);
}

static int read_header(const char *path, struct fss_file_header *h)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t got = fread(h, sizeof *h, 1, f);
	fclose(f);
	return got == 1 ? 0 : -1;
}

/* ---- policy ------------------------------------------------------------ */

static void test_policy_parse_format(void **state)
{
	(void)state;
	static const char *const good[] = {"full", "summary", "summary:8", "last:1", "last:20", "last:10000000"};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		struct keep_policy p;
		char buf[32];
		assert_int_equal(keep_policy_parse(good[i], &p), 0);
		assert_int_equal(p.is_default, 0);
		assert_string_equal(keep_policy_format(&p, buf, sizeof buf), good[i]);
	}
	struct keep_policy p;
	assert_int_equal(keep_policy_parse("summary", &p), 0);
	assert_int_equal(p.mode, KEEP_SUMMARY);
	assert_int_equal(p.steps, KEEP_SUMMARY_STEPS);
	assert_int_equal(keep_policy_parse("last:20", &p), 0);
	assert_int_equal(p.mode, KEEP_LAST);
	assert_int_equal(p.steps, 20);

	static const char *const bad[] = {
	    "",		 "Full",    "last",	     "last:",	 "last:0",
	    "last:-1",	 "last:2x", "last: 2",	     "last:1e3", "summary:",
	    "summary:0", "lastx:3", "last:10000001", "partial",	 "last:99999999999999999999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		p = (struct keep_policy){.mode = KEEP_LAST, .steps = 7};
		assert_int_equal(keep_policy_parse(bad[i], &p), -EINVAL);
		assert_int_equal(p.steps, 7); /* untouched */
	}
	assert_int_equal(keep_policy_parse(NULL, &p), -EINVAL);

	keeper_t *k = NULL;
	p = (struct keep_policy){.mode = KEEP_LAST, .steps = 0};
	assert_int_equal(keeper_new(&k, &p, NULL, "/nonexistent/t.fss", "/nonexistent"), -EINVAL);
	assert_null(k);

	keep_policy_default(&p);
	assert_int_equal(p.mode, KEEP_FULL);
	assert_int_equal(p.is_default, 1);
	char buf[32];
	assert_string_equal(keep_policy_format(&p, buf, sizeof buf), "full");
}

/* ---- a fake ingest ------------------------------------------------------ */

struct fake {
	unsigned nwritten_types;
	uint16_t written_types[256];
	struct fss_rec_step_summary summaries[16];
	unsigned nsummaries;
	unsigned rotations;
	uint32_t rotated_at[256]; /* the keeper's steps_done at each rotation */
	char rotated_to[256][128];
	unsigned merges;
	size_t merged_n;
	char merged[16][128];
	keeper_t *k;
	trace_writer_t *w; /* where write_record goes (summary), or NULL */
	uint64_t written;
	/* restate: rotate and merge as the ingest does: a new segment starts with
	 * every source's hello, strings and communicators; a merge keeps one copy */
	int restate;
	unsigned char *pre;
	size_t npre;
};

/* A record that states its process (what a rotated segment repeats). */
static int states_process(uint16_t type)
{
	return type == FSS_REC_PROCESS_HELLO || type == FSS_REC_STRING || type == FSS_REC_COMM ||
	       type == FSS_REC_CLOCK_ANCHOR;
}

static void remember(struct fake *f, const struct fss_record_head *rec)
{
	f->pre = realloc(f->pre, f->npre + rec->size);
	assert_non_null(f->pre);
	memcpy(f->pre + f->npre, rec, rec->size);
	f->npre += rec->size;
}

struct merging {
	trace_writer_t *w;
	uint8_t seen[64]; /* the source was in an earlier input */
	uint8_t now[64];  /* ... in this one */
};

static int merge_record(void *ctx, const struct fss_record_head *rec)
{
	struct merging *m = ctx;
	if (rec->type == FSS_REC_TRACE_END)
		return 0;
	if (rec->source < 64) {
		m->now[rec->source] = 1;
		if (m->seen[rec->source] && states_process(rec->type))
			return 0;
	}
	return trace_writer_append(m->w, rec);
}

static int fake_write(void *ctx, const struct fss_record_head *rec)
{
	struct fake *f = ctx;
	f->written++;
	if (f->nwritten_types < 256)
		f->written_types[f->nwritten_types++] = rec->type;
	if (rec->type == FSS_REC_STEP_SUMMARY && f->nsummaries < 16)
		memcpy(&f->summaries[f->nsummaries++], rec, sizeof f->summaries[0]);
	return f->w ? trace_writer_append(f->w, rec) : 0;
}

static int fake_rotate(void *ctx, const char *path)
{
	struct fake *f = ctx;
	if (f->restate) {
		f->rotations++;
		assert_int_equal(trace_writer_close(f->w), 0);
		assert_int_equal(trace_writer_open(&f->w, path, NULL), 0);
		for (size_t o = 0; o < f->npre;) {
			const struct fss_record_head *rec = (const void *)(f->pre + o);
			assert_int_equal(trace_writer_append(f->w, rec), 0);
			o += rec->size;
		}
		return 0;
	}
	struct keeper_stats st;
	keeper_get_stats(f->k, &st);
	assert_true(f->rotations < 256);
	f->rotated_at[f->rotations] = st.steps_done;
	snprintf(f->rotated_to[f->rotations], sizeof f->rotated_to[0], "%s", path);
	f->rotations++;
	touch(path);
	return 0;
}

static int fake_merge(void *ctx, const char *out, const char *const *in, size_t n)
{
	struct fake *f = ctx;
	if (f->restate) {
		struct merging m = {0};
		assert_int_equal(trace_writer_open(&m.w, out, NULL), 0);
		struct trace_parser_ops ops = {.on_record = merge_record};
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(trace_read(in[i], &ops, &m, NULL), 0);
			for (int s = 0; s < 64; s++)
				m.seen[s] |= m.now[s];
		}
		f->merges++;
		f->merged_n = n;
		return trace_writer_close(m.w);
	}
	f->merges++;
	f->merged_n = n;
	for (size_t i = 0; i < n && i < 16; i++)
		snprintf(f->merged[i], sizeof f->merged[0], "%s", in[i]);
	empty_trace(out);
	return 0;
}

static const struct keeper_ingest_ops fake_ops = {fake_write, fake_rotate, fake_merge};

static void step(keeper_t *k, int32_t rank, uint32_t ordinal)
{
	struct analysis_step_info s = {
	    .rank = rank, .ordinal = ordinal, .start_ns = 1000000ull * (ordinal + 1), .step_ns = 1000000};
	keeper_on_step(k, &s);
}

/* last:20 rotates every 5 steps of the slowest rank and removes a segment
 * once all its steps are older than the last 20. */
static void test_last_rotation_and_removal(void **state)
{
	(void)state;
	char trace[160], folder[160];
	snprintf(trace, sizeof trace, "%s/last.fss", dir);
	snprintf(folder, sizeof folder, "%s/last.d", dir);
	assert_int_equal(mkdir(folder, 0700), 0);
	touch(trace);

	struct keep_policy p;
	assert_int_equal(keep_policy_parse("last:20", &p), 0);
	keeper_t *k;
	assert_int_equal(keeper_new(&k, &p, NULL, trace, folder), 0);
	struct fake f = {.k = k};
	keeper_set_hooks(k, &(struct keeper_hooks){.ingest = &fake_ops, .ingest_ctx = &f});

	/* rank 1 one step behind rank 0: the slowest decides */
	for (uint32_t i = 0; i < 100; i++) {
		step(k, 0, i);
		if (i)
			step(k, 1, i - 1);
		struct keeper_stats st;
		keeper_get_stats(k, &st);
		uint32_t done = i ? i : 1; /* rank 1 has done i steps (none: rank 0 alone counts) */
		assert_int_equal(st.steps_done, done);
		assert_int_equal(st.rotations, done / 5);
		assert_int_equal(st.segments_removed, done >= 20 ? (done - 20) / 5 : 0);
		assert_int_equal(st.segments_kept, st.rotations + 1 - st.segments_removed);
	}
	for (unsigned r = 0; r < f.rotations; r++) {
		assert_int_equal(f.rotated_at[r], 5 * (r + 1));
		char want[200];
		snprintf(want, sizeof want, "%s/segment-%06u.fss", folder, r + 1);
		assert_string_equal(f.rotated_to[r], want);
	}
	/* done 99: segments 0 (the trace itself) .. 14 removed, 15 .. 19 on disk */
	assert_int_equal(f.rotations, 19);
	assert_false(exists(trace));
	for (unsigned s = 1; s <= 19; s++) {
		char path[200];
		snprintf(path, sizeof path, "%s/segment-%06u.fss", folder, s);
		assert_int_equal(exists(path), s >= 15);
	}

	const char *note = NULL;
	assert_int_equal(keeper_finish(k, &note), 0);
	assert_int_equal(f.merges, 1);
	assert_int_equal(f.merged_n, 5);
	for (unsigned i = 0; i < 5; i++) {
		char want[200];
		snprintf(want, sizeof want, "%s/segment-%06u.fss", folder, 15 + i);
		assert_string_equal(f.merged[i], want);
		assert_false(exists(want)); /* merged, then removed */
	}
	assert_non_null(note);
	assert_string_equal(note, "the last 24 of 99 steps (--keep last:20)");
	struct fss_file_header h;
	assert_int_equal(read_header(trace, &h), 0);
	assert_int_equal(h.flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), FSS_FILE_KEEP_LAST);
	assert_int_equal(h.keep_steps, 20);
	/* the header still reads back (its CRC was redone) */
	struct trace_read_info info;
	struct trace_parser_ops none = {0};
	trace_read(trace, &none, NULL, &info);
	assert_int_equal(info.input, TRACE_INPUT_NO_RECORDS);
	keeper_free(k);
}

/* last:1: a segment per step, only the last one or two kept. */
static void test_last_one(void **state)
{
	(void)state;
	char trace[160], folder[160];
	snprintf(trace, sizeof trace, "%s/one.fss", dir);
	snprintf(folder, sizeof folder, "%s/one.d", dir);
	assert_int_equal(mkdir(folder, 0700), 0);
	touch(trace);
	struct keep_policy p;
	assert_int_equal(keep_policy_parse("last:1", &p), 0);
	keeper_t *k;
	assert_int_equal(keeper_new(&k, &p, NULL, trace, folder), 0);
	struct fake f = {.k = k};
	keeper_set_hooks(k, &(struct keeper_hooks){.ingest = &fake_ops, .ingest_ctx = &f});
	for (uint32_t i = 0; i < 10; i++) {
		step(k, 0, i);
		struct keeper_stats st;
		keeper_get_stats(k, &st);
		assert_int_equal(st.rotations, i + 1);
		assert_int_equal(st.segments_removed, i);
		assert_int_equal(st.segments_kept, 2); /* the last step's segment and the open one */
	}
	assert_int_equal(keeper_drain(k), 0);
	step(k, 0, 10); /* drained: the ingest is finishing, no more rotations */
	struct keeper_stats st;
	keeper_get_stats(k, &st);
	assert_int_equal(st.rotations, 10);
	assert_int_equal(keeper_finish(k, NULL), 0);
	assert_int_equal(f.merged_n, 2);
	keeper_free(k);
}

/* A rank that stops stepping holds the segments back only while it is
 * less than 64 steps behind; a failed rotation is tried again a segment
 * later, and said. */
static int fail_rotations;
static int failing_rotate(void *ctx, const char *path)
{
	if (fail_rotations > 0) {
		fail_rotations--;
		return -ENOSPC;
	}
	return fake_rotate(ctx, path);
}

static void test_last_stopped_rank(void **state)
{
	(void)state;
	char trace[160], folder[160];
	snprintf(trace, sizeof trace, "%s/stop.fss", dir);
	snprintf(folder, sizeof folder, "%s/stop.d", dir);
	assert_int_equal(mkdir(folder, 0700), 0);
	touch(trace);
	struct keep_policy p;
	assert_int_equal(keep_policy_parse("last:8", &p), 0);
	keeper_t *k;
	assert_int_equal(keeper_new(&k, &p, NULL, trace, folder), 0);
	struct fake f = {.k = k};
	static const struct keeper_ingest_ops ops = {fake_write, failing_rotate, fake_merge};
	keeper_set_hooks(k, &(struct keeper_hooks){.ingest = &ops, .ingest_ctx = &f});
	step(k, 1, 0); /* rank 1: one step, then no more */
	struct keeper_stats st;
	for (uint32_t i = 0; i < 65; i++) {
		step(k, 0, i);
		keeper_get_stats(k, &st);
		assert_int_equal(st.steps_done, 1);
	}
	step(k, 0, 65); /* rank 0 has 66 steps: rank 1 is 65 behind, left behind */
	keeper_get_stats(k, &st);
	assert_int_equal(st.steps_done, 66);
	assert_int_equal(st.rotations, 1);

	fail_rotations = 1;
	for (uint32_t i = 66; i < 68; i++)
		step(k, 0, i); /* 68: due (66 + 2), fails */
	keeper_get_stats(k, &st);
	assert_int_equal(st.rotations, 1);
	const char *m = keeper_take_message(k);
	assert_non_null(m);
	assert_non_null(strstr(m, "could not start segment"));
	step(k, 0, 68); /* 69: not yet again (tried at 68) */
	keeper_get_stats(k, &st);
	assert_int_equal(st.rotations, 1);
	assert_null(keeper_take_message(k));
	step(k, 0, 69); /* 70: a segment after the failure */
	keeper_get_stats(k, &st);
	assert_int_equal(st.rotations, 2);
	keeper_free(k);
}

/* ---- the disk guard and the projection ---------------------------------- */

static unsigned vfs_calls;
static uint64_t vfs_avail_start, vfs_step;

/* A 100 GB file system losing vfs_step bytes of free space per look. */
static int fake_statvfs(const char *path, struct statvfs *out)
{
	(void)path;
	memset(out, 0, sizeof *out);
	out->f_frsize = 4096;
	out->f_blocks = 100000000000ull / 4096;
	uint64_t avail = vfs_avail_start - (uint64_t)vfs_calls++ * vfs_step;
	out->f_bavail = avail / 4096;
	return 0;
}

static uint64_t fake_clock;
static uint64_t fake_now(void)
{
	return fake_clock;
}

static void feed_drops(keeper_t *k, unsigned n)
{
	struct fss_rec_drops d;
	record_init(&d, FSS_REC_DROPS, sizeof d, 0);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(keeper_on_record(k, &d.head, NULL), 0);
}

static void test_disk_guard(void **state)
{
	(void)state;
	char trace[160], folder[160];
	snprintf(trace, sizeof trace, "%s/guard.fss", dir);
	snprintf(folder, sizeof folder, "%s/guard.d", dir);
	assert_int_equal(mkdir(folder, 0700), 0);

	/* 10 GB free, 1 GB less at every look; the floor is 5 % of 100 GB = 5 GB */
	vfs_calls = 0;
	vfs_avail_start = 10000000000ull;
	vfs_step = 1000000000ull;
	struct keep_policy p;
	keep_policy_default(&p);
	keeper_t *k;
	assert_int_equal(keeper_new(&k, &p, NULL, trace, folder), 0);
	struct fake f = {.k = k};
	keeper_set_hooks(k,
			 &(struct keeper_hooks){
			     .ingest = &fake_ops, .ingest_ctx = &f, .statvfs = fake_statvfs, .guard_every = 56 * 10});
	/* a look at the first record, then every 10 records of 56 bytes */
	for (unsigned look = 0; look < 5; look++) {
		feed_drops(k, 10);
		struct keeper_stats st;
		keeper_get_stats(k, &st);
		assert_int_equal(st.guard_checks, look + 1);
		assert_int_equal(st.guard_switched, 0);
		assert_null(keeper_take_message(k));
	}
	feed_drops(k, 1); /* look 6: 5 GB free, the floor */
	struct keeper_stats st;
	keeper_get_stats(k, &st);
	assert_int_equal(st.guard_checks, 6);
	assert_int_equal(st.guard_switched, 1);
	assert_int_equal(f.rotations, 1); /* what was written so far is a segment of its own */
	const char *m = keeper_take_message(k);
	assert_non_null(m);
	assert_non_null(strstr(m, "keeps only the last 1000 steps (--keep last:1000"));
	assert_null(keeper_take_message(k));
	/* no more looks: the trace is bounded now */
	feed_drops(k, 100);
	keeper_get_stats(k, &st);
	assert_int_equal(st.guard_checks, 6);
	/* and it rotates as last:1000 does, every 250 steps */
	for (uint32_t i = 0; i < 500; i++)
		step(k, 0, i);
	assert_int_equal(f.rotations, 3);
	assert_int_equal(f.rotated_at[1], 250);
	assert_int_equal(f.rotated_at[2], 500);

	const char *note;
	assert_int_equal(keeper_finish(k, &note), 0);
	assert_non_null(strstr(note, "the disk ran short at step 0"));
	struct fss_file_header h;
	assert_int_equal(read_header(trace, &h), 0);
	assert_int_equal(h.flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), FSS_FILE_KEEP_LAST);
	assert_int_equal(h.keep_steps, 1000);
	keeper_free(k);

	/* a chosen `full` is warned about once and never switched */
	vfs_calls = 0;
	assert_int_equal(keep_policy_parse("full", &p), 0);
	assert_int_equal(keeper_new(&k, &p, NULL, trace, folder), 0);
	f = (struct fake){.k = k};
	keeper_set_hooks(k,
			 &(struct keeper_hooks){
			     .ingest = &fake_ops, .ingest_ctx = &f, .statvfs = fake_statvfs, .guard_every = 56 * 10});
	feed_drops(k, 100);
	keeper_get_stats(k, &st);
	assert_int_equal(st.guard_checks, 10);
	assert_int_equal(st.guard_switched, 0);
	assert_int_equal(f.rotations, 0);
	m = keeper_take_message(k);
	assert_non_null(m);
	assert_non_null(strstr(m, "--keep full:"));
	assert_null(keeper_take_message(k));
	assert_int_equal(keeper_finish(k, &note), 0);
	assert_null(note);
	keeper_free(k);
}

static void test_projection(void **state)
{
	(void)state;
	char trace[160];
	snprintf(trace, sizeof trace, "%s/proj.fss", dir);
	struct keep_policy p;
	keep_policy_default(&p);
	keeper_t *k;
	assert_int_equal(keeper_new(&k, &p, NULL, trace, dir), 0);
	vfs_calls = 0;
	vfs_avail_start = 90000000000ull;
	vfs_step = 0;
	fake_clock = 5000000000ull;
	keeper_set_hooks(k, &(struct keeper_hooks){.statvfs = fake_statvfs, .now_ns = fake_now});
	char buf[200];
	assert_string_equal(keeper_projection(k, fake_clock, buf, sizeof buf), "");
	/* 1,234 records of 56 bytes in one second: 69,104 bytes/s, 5.97 GB a day */
	feed_drops(k, 1234);
	keeper_projection(k, fake_clock + 1000000000ull, buf, sizeof buf);
	assert_string_equal(buf, "at 1,234 records/s: about 6.0 GB a day (--keep full; with the disk short of space, "
				 "the last 1000 steps)");
	keeper_free(k);
}

/* ---- summary, record by record ------------------------------------------ */

static void coll(struct fss_rec_collective *c, uint64_t seq, uint64_t t)
{
	record_init(c, FSS_REC_COLLECTIVE, sizeof *c, 0);
	c->seq = seq;
	c->op = FSS_OP_ALLGATHER;
	c->enter_ns = t;
	c->exit_ns = t + 1000;
}

/* summary:2 on hand-made steps: the slow one is kept, the others summarised
 * with their seq numbers; records that state the process keep their order;
 * a late GPU interval follows its step's decision. */
static void test_summary_decisions(void **state)
{
	(void)state;
	char trace[160];
	snprintf(trace, sizeof trace, "%s/hand.fss", dir);
	empty_trace(trace);
	sources_t *srcs = sources_new(NULL, NULL);
	struct fss_rec_process_hello hello;
	record_init(&hello, FSS_REC_PROCESS_HELLO, sizeof hello, 0);
	hello.rank = 0;
	assert_int_equal(sources_feed(srcs, &hello.head), 0);
	const struct source *src = sources_find(srcs, 0);
	assert_int_equal(src->rank, 0);

	struct keep_policy p;
	assert_int_equal(keep_policy_parse("summary:2", &p), 0);
	keeper_t *k;
	assert_int_equal(keeper_new(&k, &p, NULL, trace, dir), 0);
	struct fake f = {.k = k};
	keeper_set_hooks(k, &(struct keeper_hooks){.ingest = &fake_ops, .ingest_ctx = &f});
	assert_int_equal(keeper_on_record(k, &hello.head, src), 0);

	const uint64_t ms = 1000000;
	uint64_t t0 = 0, seq = 1;
	int returned[10][3];
	for (uint32_t i = 0; i < 10; i++) {
		uint64_t len = i == 6 ? 30 * ms : 10 * ms;
		for (int j = 0; j < 3; j++) {
			struct fss_rec_collective c;
			coll(&c, seq++, t0 + (uint64_t)(j + 1) * ms);
			returned[i][j] = keeper_on_record(k, &c.head, src);
			if (i == 4 && j == 1) {
				/* a string in the middle of a held step: held, then written in its place */
				struct fss_rec_string str;
				record_init(&str, FSS_REC_STRING, sizeof str, 0);
				str.id = 9;
				assert_int_equal(keeper_on_record(k, &str.head, src), 1);
			}
		}
		struct analysis_step_info si = {
		    .rank = 0, .ordinal = i, .start_ns = t0, .step_ns = len, .allgathers = 3, .events = 3};
		unsigned before = f.nwritten_types;
		keeper_on_step(k, &si);
		if (i == 4) { /* collectives left out, the string and the summary written */
			assert_int_equal(f.nwritten_types - before, 2);
			assert_int_equal(f.written_types[before], FSS_REC_STRING);
			assert_int_equal(f.written_types[before + 1], FSS_REC_STEP_SUMMARY);
		}
		if (i == 6) { /* kept: its three collectives */
			assert_int_equal(f.nwritten_types - before, 3);
			for (int j = 0; j < 3; j++)
				assert_int_equal(f.written_types[before + (unsigned)j], FSS_REC_COLLECTIVE);
		}
		t0 += len;
	}
	/* the first two steps go to the file at once; later ones are held */
	for (int i = 0; i < 10; i++)
		for (int j = 0; j < 3; j++)
			assert_int_equal(returned[i][j], i < 2 ? 0 : 1);
	struct keeper_stats st;
	keeper_get_stats(k, &st);
	assert_int_equal(st.steps_summarised, 7);
	assert_int_equal(st.steps_standing_out, 1);
	assert_int_equal(f.nsummaries, 7);
	static const uint32_t ordinals[] = {2, 3, 4, 5, 7, 8, 9};
	for (unsigned i = 0; i < 7; i++) {
		const struct fss_rec_step_summary *r = &f.summaries[i];
		assert_int_equal(r->ordinal, ordinals[i]);
		assert_int_equal(r->seq_first, 3 * ordinals[i] + 1);
		assert_int_equal(r->seq_last, 3 * ordinals[i] + 3);
		assert_int_equal(r->collectives, 3);
		assert_int_equal(r->records, 3);
		assert_int_equal(r->allgathers, 3);
		assert_int_equal(r->head.source, 0);
	}
	/* late GPU intervals: of summarised step 5 left out, of kept step 6 written */
	struct fss_rec_gpu_interval g;
	record_init(&g, FSS_REC_GPU_INTERVAL, sizeof g, 0);
	g.start_ns = 55 * ms;
	assert_int_equal(keeper_on_record(k, &g.head, src), 1);
	g.start_ns = 65 * ms;
	assert_int_equal(keeper_on_record(k, &g.head, src), 0);
	/* the end of the process: what is held goes out in full first */
	struct fss_rec_collective c;
	coll(&c, seq++, t0 + ms);
	assert_int_equal(keeper_on_record(k, &c.head, src), 1);
	struct fss_rec_process_end end;
	record_init(&end, FSS_REC_PROCESS_END, sizeof end, 0);
	unsigned before = f.nwritten_types;
	assert_int_equal(keeper_on_record(k, &end.head, src), 0);
	assert_int_equal(f.nwritten_types - before, 1);
	assert_int_equal(f.written_types[before], FSS_REC_COLLECTIVE);
	assert_int_equal(keeper_drain(k), 0);
	assert_int_equal(keeper_on_record(k, &c.head, src), 0); /* drained: everything goes */
	keeper_free(k);
	sources_free(srcs);
}

static void enter_of(struct fss_rec_enter *e, const struct fss_rec_collective *c)
{
	record_init(e, FSS_REC_ENTER, sizeof *e, c->head.source);
	e->seq = c->seq;
	e->op = c->op;
	e->kind = FSS_ENTER_COLLECTIVE;
	e->enter_ns = c->enter_ns;
	e->peer = -1;
	e->redop = FSS_REDOP_NONE;
}

/* summary:1 with calls in flight: a summarised step leaves its enter and
 * sync_exit records out with its collectives and counts them in its
 * records; a kept step writes them in their order; the enter of a call that
 * never returned waits and is written at the source's end. */
static void test_summary_enter_records(void **state)
{
	(void)state;
	char trace[160];
	snprintf(trace, sizeof trace, "%s/enter.fss", dir);
	empty_trace(trace);
	sources_t *srcs = sources_new(NULL, NULL);
	struct fss_rec_process_hello hello;
	record_init(&hello, FSS_REC_PROCESS_HELLO, sizeof hello, 0);
	hello.rank = 0;
	hello.features = FSS_FEATURE_NCCL | FSS_FEATURE_ENTER;
	assert_int_equal(sources_feed(srcs, &hello.head), 0);
	const struct source *src = sources_find(srcs, 0);

	struct keep_policy p;
	assert_int_equal(keep_policy_parse("summary:1", &p), 0);
	keeper_t *k;
	assert_int_equal(keeper_new(&k, &p, NULL, trace, dir), 0);
	struct fake f = {.k = k};
	keeper_set_hooks(k, &(struct keeper_hooks){.ingest = &fake_ops, .ingest_ctx = &f});
	assert_int_equal(keeper_on_record(k, &hello.head, src), 0);

	const uint64_t ms = 1000000;
	uint64_t t0 = 0, seq = 1;
	uint32_t sync_id = 1;
	for (uint32_t i = 0; i < 6; i++) {
		uint64_t len = i == 4 ? 30 * ms : 10 * ms;
		unsigned before = f.nwritten_types;
		for (int j = 0; j < 2; j++) {
			struct fss_rec_collective c;
			struct fss_rec_enter e;
			coll(&c, seq++, t0 + (uint64_t)(j + 1) * ms);
			enter_of(&e, &c);
			int re = keeper_on_record(k, &e.head, src);
			int rc = keeper_on_record(k, &c.head, src);
			assert_int_equal(re, i < 1 ? 0 : 1); /* the full step goes out at once */
			assert_int_equal(rc, re);
		}
		/* a host wait after the step's second collective */
		struct fss_rec_enter se;
		record_init(&se, FSS_REC_ENTER, sizeof se, 0);
		se.kind = FSS_ENTER_STREAM_SYNC;
		se.seq = seq - 1;
		se.sync_id = sync_id;
		se.enter_ns = t0 + 3 * ms;
		struct fss_rec_sync_exit sx;
		record_init(&sx, FSS_REC_SYNC_EXIT, sizeof sx, 0);
		sx.kind = FSS_ENTER_STREAM_SYNC;
		sx.after_seq = seq - 1;
		sx.sync_id = sync_id++;
		sx.enter_ns = se.enter_ns;
		sx.exit_ns = t0 + 4 * ms;
		assert_int_equal(keeper_on_record(k, &se.head, src), i < 1 ? 0 : 1);
		assert_int_equal(keeper_on_record(k, &sx.head, src), i < 1 ? 0 : 1);
		struct analysis_step_info si = {
		    .rank = 0, .ordinal = i, .start_ns = t0, .step_ns = len, .allgathers = 2, .events = 2};
		keeper_on_step(k, &si);
		if (i == 4) { /* kept: every record of it, in order */
			static const uint16_t want[] = {FSS_REC_ENTER,	    FSS_REC_COLLECTIVE, FSS_REC_ENTER,
							FSS_REC_COLLECTIVE, FSS_REC_ENTER,	FSS_REC_SYNC_EXIT};
			assert_int_equal(f.nwritten_types - before, 6);
			for (unsigned j = 0; j < 6; j++)
				assert_int_equal(f.written_types[before + j], want[j]);
		} else if (i > 1) { /* summarised (step 1 only sets the median): the summary alone */
			assert_int_equal(f.nwritten_types - before, 1);
			assert_int_equal(f.written_types[before], FSS_REC_STEP_SUMMARY);
		}
		t0 += len;
	}
	struct keeper_stats st;
	keeper_get_stats(k, &st);
	assert_int_equal(st.steps_summarised, 4);
	assert_int_equal(st.steps_standing_out, 1);
	assert_int_equal(st.records_left_out, 4 * 6);
	for (unsigned i = 0; i < f.nsummaries; i++) {
		const struct fss_rec_step_summary *r = &f.summaries[i];
		assert_int_equal(r->collectives, 2);
		assert_int_equal(r->records, 6); /* 2 collectives, 2 enters, a sync's enter and exit */
		assert_int_equal(r->seq_first, 2 * r->ordinal + 1);
		assert_int_equal(r->seq_last, 2 * r->ordinal + 2);
	}

	/* a call that never returns: its enter is held with its undecided step,
	 * and written at the source's end */
	struct fss_rec_collective hung;
	struct fss_rec_enter he;
	coll(&hung, seq, t0 + ms);
	enter_of(&he, &hung);
	assert_int_equal(keeper_on_record(k, &he.head, src), 1);
	struct fss_rec_process_exit ex;
	record_init(&ex, FSS_REC_PROCESS_EXIT, sizeof ex, 0);
	unsigned before = f.nwritten_types;
	assert_int_equal(keeper_on_record(k, &ex.head, src), 0);
	assert_int_equal(f.nwritten_types - before, 1);
	assert_int_equal(f.written_types[before], FSS_REC_ENTER);
	keeper_free(k);
	sources_free(srcs);
}

/* ---- summary on synthetic traces ----------------------------------------- */

/* A session in miniature: records through the per-source layer, the live
 * analysis (its steps to the keeper) and the keeper into the output. */
struct session {
	keeper_t *k;
	sources_t *sources;
	analyzer_t *live;
	struct fake fake;
	uint32_t skip_source; /* leave this collective out of the input (an agent's loss) */
	uint64_t skip_seq;
	uint32_t steps[8]; /* step callbacks per rank */
	uint32_t excluded[8];
};

static void on_step(void *ctx, const struct analysis_step_info *s)
{
	struct session *ss = ctx;
	if (s->rank >= 0 && s->rank < 8) {
		ss->steps[s->rank]++;
		ss->excluded[s->rank] += s->excluded != 0;
	}
	keeper_on_step(ss->k, s);
}

static int session_record(void *ctx, const struct fss_record_head *rec)
{
	struct session *ss = ctx;
	if (rec->type == FSS_REC_TRACE_END)
		return 0; /* the output writes its own */
	if (rec->type == FSS_REC_COLLECTIVE && rec->source == ss->skip_source &&
	    ((const struct fss_rec_collective *)rec)->seq == ss->skip_seq)
		return 0;
	int rc = sources_feed(ss->sources, rec);
	if (rc < 0)
		return rc;
	rc = analyzer_feed(ss->live, rec);
	if (rc < 0)
		return rc;
	rc = keeper_on_record(ss->k, rec, sources_find(ss->sources, rec->source));
	if (rc < 0)
		return rc;
	if (rc == 0 && ss->fake.restate && states_process(rec->type))
		remember(&ss->fake, rec);
	return rc == 0 ? trace_writer_append(ss->fake.w, rec) : 0;
}

/* Run `in` through a session keeping `policy` into `out`. */
static void run_session(struct session *ss, const char *in, const char *out, const char *policy, size_t buffer_max)
{
	struct keep_policy p;
	assert_int_equal(keep_policy_parse(policy, &p), 0);
	assert_int_equal(keeper_new(&ss->k, &p, NULL, out, dir), 0);
	ss->fake.k = ss->k;
	keeper_set_hooks(
	    ss->k, &(struct keeper_hooks){.ingest = &fake_ops, .ingest_ctx = &ss->fake, .buffer_max = buffer_max});
	ss->sources = sources_new(NULL, NULL);
	assert_non_null(ss->sources);
	assert_int_equal(analyzer_new(&ss->live, NULL), 0);
	analyzer_on_step(ss->live, on_step, ss);
	assert_int_equal(trace_writer_open(&ss->fake.w, out, NULL), 0);
	ss->fake.restate = p.mode == KEEP_LAST;
	struct trace_parser_ops ops = {.on_record = session_record};
	assert_int_equal(trace_read(in, &ops, ss, NULL), 0);
	/* the session's end: the live analysis' last steps, then the drain */
	struct analysis_result *r;
	assert_int_equal(analyzer_finish(ss->live, &r), 0);
	analysis_result_free(r);
	assert_int_equal(keeper_drain(ss->k), 0);
	assert_int_equal(trace_writer_close(ss->fake.w), 0);
	const char *note;
	assert_int_equal(keeper_finish(ss->k, &note), 0);
	assert_non_null(note);
	analyzer_free(ss->live);
	sources_free(ss->sources);
	free(ss->fake.pre);
}

struct counts {
	uint64_t by_type[FSS_REC_TYPE_MAX];
	uint64_t summaries_of[8]; /* per source */
	uint64_t collectives_of[8];
	uint64_t seq_seen[8][4]; /* seq numbers asked for by the test, per source: seen? */
	uint64_t want_seq[4];
};

static int count_record(void *ctx, const struct fss_record_head *rec)
{
	struct counts *c = ctx;
	if (rec->type < FSS_REC_TYPE_MAX)
		c->by_type[rec->type]++;
	if (rec->source < 8 && rec->type == FSS_REC_STEP_SUMMARY)
		c->summaries_of[rec->source]++;
	if (rec->source < 8 && rec->type == FSS_REC_COLLECTIVE) {
		c->collectives_of[rec->source]++;
		uint64_t seq = ((const struct fss_rec_collective *)rec)->seq;
		for (int i = 0; i < 4; i++)
			if (c->want_seq[i] && seq == c->want_seq[i])
				c->seq_seen[rec->source][i] = 1;
	}
	return 0;
}

static void count(const char *path, struct counts *c)
{
	struct trace_parser_ops ops = {.on_record = count_record};
	assert_int_equal(trace_read(path, &ops, c, NULL), 0);
}

static struct analysis_result *analyse(const char *path)
{
	struct analysis_result *r = NULL;
	char err[256] = "";
	int rc = analyze_trace(path, NULL, &r, err, sizeof err);
	if (rc)
		fprintf(stderr, "%s: %s\n", path, err);
	assert_int_equal(rc, 0);
	if (getenv("KEEP_TEST_NOTES"))
		for (uint32_t i = 0; i < r->nnotes; i++)
			fprintf(stderr, "%s: %s\n", path, r->notes[i]);
	return r;
}

/* The verdict, units and findings of lint agree. */
static void same_diagnosis(const struct analysis_result *a, const struct analysis_result *b)
{
	assert_int_equal(a->verdict, b->verdict);
	assert_int_equal(a->units.repeating_units, b->units.repeating_units);
	assert_int_equal(a->units.gathers_per_unit, b->units.gathers_per_unit);
	struct rule_config rc;
	rule_config_init(&rc);
	findings_t *fa = findings_new(), *fb = findings_new();
	assert_int_equal(rules_run(a, &rc, fa), 0);
	assert_int_equal(rules_run(b, &rc, fb), 0);
	assert_int_equal(findings_count(fa), findings_count(fb));
	for (size_t i = 0; i < findings_count(fa); i++) {
		assert_string_equal(findings_get(fa, i)->rule->id, findings_get(fb, i)->rule->id);
		assert_int_equal(findings_get(fa, i)->severity, findings_get(fb, i)->severity);
	}
	findings_free(fa);
	findings_free(fb);
}

static int has_note(const struct analysis_result *r, const char *text)
{
	for (uint32_t i = 0; i < r->nnotes; i++)
		if (strstr(r->notes[i], text))
			return 1;
	return 0;
}

/* Copy a trace, an enter record before each collective (as an agent of
 * format 1.3 writes them) and a stream synchronize pair after every
 * ReduceScatter. */
struct entering {
	trace_writer_t *w;
	uint32_t sync_ids[8];
};

static int enters_record(void *ctx, const struct fss_record_head *rec)
{
	struct entering *en = ctx;
	if (rec->type == FSS_REC_TRACE_END)
		return 0;
	if (rec->type == FSS_REC_PROCESS_HELLO) {
		struct fss_rec_process_hello h;
		memcpy(&h, rec, sizeof h);
		h.features |= FSS_FEATURE_ENTER;
		return trace_writer_append(en->w, &h.head);
	}
	if (rec->type != FSS_REC_COLLECTIVE)
		return trace_writer_append(en->w, rec);
	const struct fss_rec_collective *c = (const void *)rec;
	struct fss_rec_enter e;
	enter_of(&e, c);
	e.comm = c->comm;
	e.count = c->count;
	e.dtype = c->dtype;
	e.redop = c->redop;
	e.group_id = c->group_id;
	int rc = trace_writer_append(en->w, &e.head);
	if (!rc)
		rc = trace_writer_append(en->w, rec);
	if (!rc && c->op == FSS_OP_REDUCESCATTER && rec->source < 8) {
		struct fss_rec_enter se;
		record_init(&se, FSS_REC_ENTER, sizeof se, rec->source);
		se.kind = FSS_ENTER_STREAM_SYNC;
		se.seq = c->seq;
		se.sync_id = ++en->sync_ids[rec->source];
		se.enter_ns = c->exit_ns + 1;
		se.peer = -1;
		se.redop = FSS_REDOP_NONE;
		struct fss_rec_sync_exit sx;
		record_init(&sx, FSS_REC_SYNC_EXIT, sizeof sx, rec->source);
		sx.kind = se.kind;
		sx.after_seq = se.seq;
		sx.sync_id = se.sync_id;
		sx.enter_ns = se.enter_ns;
		sx.exit_ns = se.enter_ns + 1000;
		rc = trace_writer_append(en->w, &se.head);
		if (!rc)
			rc = trace_writer_append(en->w, &sx.head);
	}
	return rc;
}

static void with_enters(const char *in, const char *out)
{
	struct entering en = {0};
	assert_int_equal(trace_writer_open(&en.w, out, NULL), 0);
	struct trace_parser_ops ops = {.on_record = enters_record};
	assert_int_equal(trace_read(in, &ops, &en, NULL), 0);
	assert_int_equal(trace_writer_close(en.w), 0);
}

/* Calls in flight of a kept trace, per source: which collective seqs and
 * sync ids have an enter, which an exit. */
#define PAIRS_MAX 65536
struct pairs {
	uint8_t coll[8][PAIRS_MAX]; /* bit 0: enter, bit 1: collective */
	uint8_t sync[8][PAIRS_MAX]; /* bit 0: enter, bit 1: sync_exit */
	uint64_t records_left_out;  /* the summaries' records */
	uint64_t enters;
};

static int pairs_record(void *ctx, const struct fss_record_head *rec)
{
	struct pairs *p = ctx;
	if (rec->source >= 8)
		return 0;
	if (rec->type == FSS_REC_ENTER) {
		const struct fss_rec_enter *e = (const void *)rec;
		p->enters++;
		if (e->kind == FSS_ENTER_COLLECTIVE && e->seq < PAIRS_MAX)
			p->coll[rec->source][e->seq] |= 1;
		else if (e->kind != FSS_ENTER_COLLECTIVE && e->sync_id < PAIRS_MAX)
			p->sync[rec->source][e->sync_id] |= 1;
	} else if (rec->type == FSS_REC_COLLECTIVE) {
		uint64_t seq = ((const struct fss_rec_collective *)rec)->seq;
		if (seq < PAIRS_MAX)
			p->coll[rec->source][seq] |= 2;
	} else if (rec->type == FSS_REC_SYNC_EXIT) {
		uint32_t id = ((const struct fss_rec_sync_exit *)rec)->sync_id;
		if (id < PAIRS_MAX)
			p->sync[rec->source][id] |= 2;
	} else if (rec->type == FSS_REC_STEP_SUMMARY) {
		p->records_left_out += ((const struct fss_rec_step_summary *)rec)->records;
	}
	return 0;
}

/* Every call of `path` has both its enter and its exit, or neither; a
 * collective without its enter is allowed only as the first call a source
 * has in the trace (last:N cut its segment off in between). Returns the
 * pairs read (callers free). */
static struct pairs *pairs_whole(const char *path, int ranks)
{
	struct pairs *p = calloc(1, sizeof *p);
	assert_non_null(p);
	struct trace_parser_ops ops = {.on_record = pairs_record};
	assert_int_equal(trace_read(path, &ops, p, NULL), 0);
	assert_true(p->enters > 0);
	for (int s = 0; s < ranks; s++) {
		int first = 1;
		for (size_t i = 0; i < PAIRS_MAX; i++) {
			if (!p->coll[s][i])
				continue;
			if (!(first && p->coll[s][i] == 2))
				assert_int_equal(p->coll[s][i], 3);
			first = 0;
		}
		for (size_t i = 0; i < PAIRS_MAX; i++)
			assert_true(p->sync[s][i] == 0 || p->sync[s][i] == 3);
	}
	return p;
}

static void summary_on(const struct synth_config *c, const char *name)
{
	char in[160], out[160];
	snprintf(in, sizeof in, "%s/%s-full.fss", dir, name);
	snprintf(out, sizeof out, "%s/%s-summary.fss", dir, name);
	struct synth_truth truth;
	assert_int_equal(synth_write(in, c, &truth), 0);

	struct session ss = {.skip_source = UINT32_MAX};
	run_session(&ss, in, out, "summary", 0);
	struct keeper_stats st;
	keeper_get_stats(ss.k, &st);

	struct counts full = {0}, sum = {0};
	count(in, &full);
	count(out, &sum);
	if (getenv("KEEP_TEST_NOTES"))
		fprintf(stderr,
			"%s: %llu records in, %llu left out, %u summarised, %u standing out, %zu bytes held at most\n",
			name, (unsigned long long)st.records_in, (unsigned long long)st.records_left_out,
			st.steps_summarised, st.steps_standing_out, st.buffered_max);
	/* one summary per step of every rank past its first 16, less those kept in full */
	uint64_t past = 0;
	for (int r = 0; r < c->ranks; r++)
		past += ss.steps[r] > KEEP_SUMMARY_STEPS ? ss.steps[r] - KEEP_SUMMARY_STEPS : 0;
	assert_true(past > 0);
	assert_int_equal(sum.by_type[FSS_REC_STEP_SUMMARY], st.steps_summarised);
	assert_true(st.steps_summarised + st.steps_standing_out <= past);
	assert_true(st.steps_summarised >= past * 3 / 4);
	for (int s = 0; s < c->ranks; s++)
		assert_true(sum.summaries_of[s] > 0);
	/* what states the processes is all there; the raw records are fewer */
	static const uint16_t whole[] = {FSS_REC_PROCESS_HELLO, FSS_REC_STRING, FSS_REC_COMM, FSS_REC_PROCESS_END};
	for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
		assert_int_equal(sum.by_type[whole[i]], full.by_type[whole[i]]);
	assert_true(sum.by_type[FSS_REC_COLLECTIVE] < full.by_type[FSS_REC_COLLECTIVE]);
	static const uint16_t raw[] = {FSS_REC_COLLECTIVE, FSS_REC_GROUP, FSS_REC_GPU_INTERVAL, FSS_REC_NVTX_RANGE,
				       FSS_REC_CORRELATION};
	uint64_t raw_full = 0, raw_kept = 0;
	for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
		raw_full += full.by_type[raw[i]];
		raw_kept += sum.by_type[raw[i]];
	}
	assert_int_equal(raw_kept + st.records_left_out, raw_full);

	struct fss_file_header h;
	assert_int_equal(read_header(out, &h), 0);
	assert_int_equal(h.flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), FSS_FILE_KEEP_SUMMARY);
	assert_int_equal(h.keep_steps, KEEP_SUMMARY_STEPS);

	struct analysis_result *a = analyse(in), *b = analyse(out);
	same_diagnosis(a, b);
	assert_true(has_note(b, "--keep summary:"));
	assert_false(has_note(a, "--keep"));
	/* summarised calls are not lost calls */
	assert_int_equal(b->trust.steps_lost_all, 0);
	assert_int_equal(b->trust.collectives_lost, 0);
	for (uint32_t i = 0; i < b->nsources; i++)
		assert_int_equal(b->sources[i].collectives_missing, 0);
	analysis_result_free(a);
	analysis_result_free(b);
	keeper_free(ss.k);
}

static void test_summary_nvtx_steps(void **state)
{
	(void)state;
	struct synth_config c;
	synth_defaults(&c);
	c.steps = 60;
	summary_on(&c, "nvtx");
}

static void test_summary_period_steps(void **state)
{
	(void)state;
	struct synth_config c;
	synth_defaults(&c);
	c.steps = 80;
	c.nvtx_steps = 0;
	c.nvtx_compute = 0;
	c.wrap = "linear";
	c.layers = 8;
	summary_on(&c, "period");
}

/* last:20 over a 200-step job: the merged trace holds 20..25 steps of
 * every rank and diagnoses as the whole trace does. */
static void test_last_session(void **state)
{
	(void)state;
	char in[160], out[160];
	snprintf(in, sizeof in, "%s/l200-full.fss", dir);
	snprintf(out, sizeof out, "%s/l200-last.fss", dir);
	struct synth_config c;
	synth_defaults(&c);
	c.steps = 200;
	struct synth_truth truth;
	assert_int_equal(synth_write(in, &c, &truth), 0);
	struct session ss = {.skip_source = UINT32_MAX};
	run_session(&ss, in, out, "last:20", 0);
	struct keeper_stats st;
	keeper_get_stats(ss.k, &st);
	assert_true(st.rotations >= 200 / 5 - 2);
	assert_true(st.segments_removed + 6 >= st.rotations + 1); /* at most 5 full segments and the tail were merged */

	struct analysis_result *a = analyse(in), *b = analyse(out);
	assert_int_equal(b->nper_rank, c.ranks);
	for (uint32_t i = 0; i < b->nper_rank; i++) {
		uint32_t seen = b->per_rank[i].steps_seen;
		assert_true(seen >= 20 && seen <= 26);
		assert_int_equal(b->per_rank[i].steps_lost, 0);
	}
	same_diagnosis(a, b);
	assert_int_equal(b->trust.collectives_lost, 0);
	for (uint32_t i = 0; i < b->nsources; i++)
		assert_int_equal(b->sources[i].collectives_missing, 0);
	assert_true(has_note(b, "--keep last:20"));
	struct fss_file_header h;
	assert_int_equal(read_header(out, &h), 0);
	assert_int_equal(h.flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), FSS_FILE_KEEP_LAST);
	assert_int_equal(h.keep_steps, 20);
	analysis_result_free(a);
	analysis_result_free(b);
	keeper_free(ss.k);
}

/* A synthetic job whose agents write enter records: summary leaves each
 * summarised call out whole (enter and exit) and counts its enters in the
 * step's records; last:N keeps every enter with its exit; both diagnose as
 * the whole trace does. */
static void test_enter_records_kept_with_their_step(void **state)
{
	(void)state;
	char syn[160], in[160], sum_out[160], last_out[160];
	snprintf(syn, sizeof syn, "%s/en-synth.fss", dir);
	snprintf(in, sizeof in, "%s/en-full.fss", dir);
	snprintf(sum_out, sizeof sum_out, "%s/en-summary.fss", dir);
	snprintf(last_out, sizeof last_out, "%s/en-last.fss", dir);
	struct synth_config c;
	synth_defaults(&c);
	c.steps = 80;
	struct synth_truth truth;
	assert_int_equal(synth_write(syn, &c, &truth), 0);
	with_enters(syn, in);

	struct counts full = {0};
	count(in, &full);
	assert_int_equal(full.by_type[FSS_REC_ENTER] - full.by_type[FSS_REC_SYNC_EXIT],
			 full.by_type[FSS_REC_COLLECTIVE]);
	free(pairs_whole(in, c.ranks));

	/* summary */
	struct session ss = {.skip_source = UINT32_MAX};
	run_session(&ss, in, sum_out, "summary", 0);
	struct keeper_stats st;
	keeper_get_stats(ss.k, &st);
	assert_true(st.steps_summarised > 0);
	struct counts sum = {0};
	count(sum_out, &sum);
	assert_true(sum.by_type[FSS_REC_ENTER] < full.by_type[FSS_REC_ENTER]);
	assert_true(sum.by_type[FSS_REC_SYNC_EXIT] < full.by_type[FSS_REC_SYNC_EXIT]);
	static const uint16_t raw[] = {FSS_REC_COLLECTIVE,  FSS_REC_GROUP, FSS_REC_GPU_INTERVAL, FSS_REC_NVTX_RANGE,
				       FSS_REC_CORRELATION, FSS_REC_ENTER, FSS_REC_SYNC_EXIT};
	uint64_t raw_full = 0, raw_kept = 0;
	for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
		raw_full += full.by_type[raw[i]];
		raw_kept += sum.by_type[raw[i]];
	}
	assert_int_equal(raw_kept + st.records_left_out, raw_full);
	struct pairs *p = pairs_whole(sum_out, c.ranks);
	for (int s = 0; s < c.ranks; s++)
		for (size_t i = 1; i < PAIRS_MAX; i++) /* summary never cuts a call: no collective alone */
			assert_true(p->coll[s][i] == 0 || p->coll[s][i] == 3);
	assert_int_equal(p->records_left_out, st.records_left_out); /* the summaries count every record left out */
	free(p);
	struct analysis_result *a = analyse(in), *b = analyse(sum_out);
	same_diagnosis(a, b);
	analysis_result_free(b);
	keeper_free(ss.k);

	/* last:20 */
	struct session sl = {.skip_source = UINT32_MAX};
	run_session(&sl, in, last_out, "last:20", 0);
	keeper_get_stats(sl.k, &st);
	assert_true(st.segments_removed > 0);
	struct counts last = {0};
	count(last_out, &last);
	assert_true(last.by_type[FSS_REC_ENTER] < full.by_type[FSS_REC_ENTER]);
	free(pairs_whole(last_out, c.ranks));
	b = analyse(last_out);
	same_diagnosis(a, b);
	analysis_result_free(a);
	analysis_result_free(b);
	keeper_free(sl.k);
}

/* A step that lost a collective after the full steps is kept in full. */
static void test_summary_keeps_lost_step(void **state)
{
	(void)state;
	char in[160], out[160];
	snprintf(in, sizeof in, "%s/gap-full.fss", dir);
	snprintf(out, sizeof out, "%s/gap-summary.fss", dir);
	struct synth_config c;
	synth_defaults(&c);
	c.steps = 50;
	struct synth_truth truth;
	assert_int_equal(synth_write(in, &c, &truth), 0);
	/* rank 1 (source 1) loses one call of its step 30 */
	uint64_t per_step = (uint64_t)(truth.allgathers + truth.reduce_scatters + truth.allreduces);
	uint64_t lost = 30 * per_step + 3;

	struct session ss = {.skip_source = 1, .skip_seq = lost};
	run_session(&ss, in, out, "summary", 0);
	struct keeper_stats st;
	keeper_get_stats(ss.k, &st);
	assert_true(ss.excluded[1] >= 1);
	assert_true(st.steps_standing_out >= 1);

	struct counts sum = {.want_seq = {lost - 1, lost + 1}};
	count(out, &sum);
	assert_true(sum.seq_seen[1][0] && sum.seq_seen[1][1]);	/* its neighbours are in the trace */
	assert_false(sum.seq_seen[0][0] || sum.seq_seen[0][1]); /* rank 0's same step is summarised */
	assert_true(sum.collectives_of[1] > sum.collectives_of[0]);

	struct analysis_result *b = analyse(out);
	assert_true(b->trust.steps_lost_all >= 1); /* the real loss is still seen */
	assert_true(b->trust.collectives_lost >= 1);
	analysis_result_free(b);
	keeper_free(ss.k);
}

/* A step whose records outgrow the buffer is summarised without a look. */
static void test_summary_overflow(void **state)
{
	(void)state;
	char in[160], out[160];
	snprintf(in, sizeof in, "%s/big-full.fss", dir);
	snprintf(out, sizeof out, "%s/big-summary.fss", dir);
	struct synth_config c;
	synth_defaults(&c);
	c.steps = 40;
	struct synth_truth truth;
	assert_int_equal(synth_write(in, &c, &truth), 0);
	struct session ss = {.skip_source = UINT32_MAX};
	run_session(&ss, in, out, "summary:8", 1024);
	struct keeper_stats st;
	keeper_get_stats(ss.k, &st);
	assert_true(st.steps_overflowed > 0);
	assert_true(st.buffered_max <= 1024 + 128);
	const char *m = keeper_take_message(ss.k);
	assert_non_null(m);
	assert_non_null(strstr(m, "summarised without a look"));
	struct counts sum = {0};
	count(out, &sum);
	assert_int_equal(sum.by_type[FSS_REC_STEP_SUMMARY], st.steps_summarised);
	struct analysis_result *b = analyse(out);
	assert_int_equal(b->trust.steps_lost_all, 0);
	analysis_result_free(b);
	keeper_free(ss.k);
}

/* ---- with the real ingest -------------------------------------------------- */

#include <dirent.h>

#include "collector/ingest.h"

/* Copy a synthetic trace with a sink record after every hello, as agents of
 * format 1.2 write (the ingest keeps one source per process by them). */
static int sinks_record(void *ctx, const struct fss_record_head *rec)
{
	trace_writer_t *w = ctx;
	if (rec->type == FSS_REC_TRACE_END)
		return 0;
	int rc = trace_writer_append(w, rec);
	if (rc == 0 && rec->type == FSS_REC_PROCESS_HELLO) {
		struct fss_rec_sink k;
		record_init(&k, FSS_REC_SINK, sizeof k, rec->source);
		k.process_id = 0x5eed0000u + rec->source;
		k.serial = 1;
		k.kind = FSS_SINK_FILE;
		rc = trace_writer_append(w, &k);
	}
	return rc;
}

static void with_sinks(const char *in, const char *out)
{
	trace_writer_t *w;
	assert_int_equal(trace_writer_open(&w, out, NULL), 0);
	struct trace_parser_ops ops = {.on_record = sinks_record};
	assert_int_equal(trace_read(in, &ops, w, NULL), 0);
	assert_int_equal(trace_writer_close(w), 0);
}

struct real {
	analyzer_t *live;
	keeper_t *k;
};

static int real_on_record(void *ctx, const struct fss_record_head *rec, const struct source *src)
{
	struct real *r = ctx;
	int rc = analyzer_feed(r->live, rec);
	return rc < 0 ? rc : keeper_on_record(r->k, rec, src);
}

static void real_on_step(void *ctx, const struct analysis_step_info *s)
{
	keeper_on_step(((struct real *)ctx)->k, s);
}

/* A session as `collect` runs one: the ingest reads `in`, its callback feeds
 * the live analysis and asks the keeper. */
static void real_session(const char *in, const char *out, const char *policy, const char *folder,
			 struct keeper_stats *st)
{
	struct keep_policy p;
	if (policy)
		assert_int_equal(keep_policy_parse(policy, &p), 0);
	else
		keep_policy_default(&p);
	ingest_t *ing;
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	struct real r;
	assert_int_equal(keeper_new(&r.k, &p, ing, out, folder), 0);
	if (!policy) /* the disk is short from the start */
		keeper_set_hooks(r.k, &(struct keeper_hooks){.statvfs = fake_statvfs});
	assert_int_equal(analyzer_new(&r.live, NULL), 0);
	analyzer_on_step(r.live, real_on_step, &r);
	ingest_on_record(ing, real_on_record, &r);
	assert_int_equal(ingest_add_file(ing, in), 0);
	struct analysis_result *res;
	assert_int_equal(analyzer_finish(r.live, &res), 0);
	analysis_result_free(res);
	assert_int_equal(keeper_drain(r.k), 0);
	assert_int_equal(ingest_finish(ing, NULL), 0);
	const char *note;
	assert_int_equal(keeper_finish(r.k, &note), 0);
	assert_non_null(note);
	keeper_get_stats(r.k, st);
	keeper_free(r.k);
	ingest_free(ing);
	analyzer_free(r.live);
}

static void test_real_last(void **state)
{
	(void)state;
	char syn[160], in[160], out[160], folder[160];
	snprintf(syn, sizeof syn, "%s/r200-synth.fss", dir);
	snprintf(in, sizeof in, "%s/r200-full.fss", dir);
	snprintf(out, sizeof out, "%s/r200-last.fss", dir);
	snprintf(folder, sizeof folder, "%s/r200.d", dir);
	assert_int_equal(mkdir(folder, 0700), 0);
	struct synth_config c;
	synth_defaults(&c);
	c.steps = 200;
	struct synth_truth truth;
	assert_int_equal(synth_write(syn, &c, &truth), 0);
	with_sinks(syn, in);
	struct keeper_stats st;
	real_session(in, out, "last:20", folder, &st);
	assert_true(st.rotations >= 200 / 5 - 2);

	struct analysis_result *a = analyse(in), *b = analyse(out);
	assert_int_equal(b->nsources, (uint32_t)c.ranks); /* one source per process across segments */
	assert_int_equal(b->nper_rank, (uint32_t)c.ranks);
	for (uint32_t i = 0; i < b->nper_rank; i++) {
		uint32_t seen = b->per_rank[i].steps_seen;
		assert_true(seen >= 20 && seen <= 26);
	}
	same_diagnosis(a, b);
	assert_int_equal(b->trust.collectives_lost, 0);
	for (uint32_t i = 0; i < b->nsources; i++)
		assert_int_equal(b->sources[i].collectives_missing, 0);
	struct fss_file_header h;
	assert_int_equal(read_header(out, &h), 0);
	assert_int_equal(h.flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), FSS_FILE_KEEP_LAST);
	assert_int_equal(h.keep_steps, 20);
	/* the segments are gone */
	DIR *d = opendir(folder);
	assert_non_null(d);
	unsigned left = 0;
	for (struct dirent *e; (e = readdir(d));)
		left += e->d_name[0] != '.';
	closedir(d);
	assert_int_equal(left, 0);
	analysis_result_free(a);
	analysis_result_free(b);
}

/* The disk guard through the real ingest: switched at the first record,
 * the trace itself is the first segment and is merged with the others into
 * itself. */
static void test_real_guard(void **state)
{
	(void)state;
	char syn[160], in[160], out[160], folder[160];
	snprintf(syn, sizeof syn, "%s/rg-synth.fss", dir);
	snprintf(in, sizeof in, "%s/rg-full.fss", dir);
	snprintf(out, sizeof out, "%s/rg-guarded.fss", dir);
	snprintf(folder, sizeof folder, "%s/rg.d", dir);
	assert_int_equal(mkdir(folder, 0700), 0);
	struct synth_config c;
	synth_defaults(&c);
	c.steps = 40;
	struct synth_truth truth;
	assert_int_equal(synth_write(syn, &c, &truth), 0);
	with_sinks(syn, in);
	vfs_calls = 0;
	vfs_avail_start = 4000000000ull; /* under 5 % of 100 GB */
	vfs_step = 0;
	struct keeper_stats st;
	real_session(in, out, NULL, folder, &st);
	assert_int_equal(st.guard_switched, 1);
	assert_int_equal(st.rotations, 1);
	struct counts full = {0}, kept = {0};
	count(in, &full);
	count(out, &kept);
	assert_int_equal(kept.by_type[FSS_REC_COLLECTIVE], full.by_type[FSS_REC_COLLECTIVE]);
	struct analysis_result *a = analyse(in), *b = analyse(out);
	assert_int_equal(b->nsources, (uint32_t)c.ranks);
	same_diagnosis(a, b);
	struct fss_file_header h;
	assert_int_equal(read_header(out, &h), 0);
	assert_int_equal(h.flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), FSS_FILE_KEEP_LAST);
	assert_int_equal(h.keep_steps, KEEP_GUARD_LAST);
	analysis_result_free(a);
	analysis_result_free(b);
}

static void test_real_summary(void **state)
{
	(void)state;
	char syn[160], in[160], out[160];
	snprintf(syn, sizeof syn, "%s/rs-synth.fss", dir);
	snprintf(in, sizeof in, "%s/rs-full.fss", dir);
	snprintf(out, sizeof out, "%s/rs-summary.fss", dir);
	struct synth_config c;
	synth_defaults(&c);
	c.steps = 60;
	struct synth_truth truth;
	assert_int_equal(synth_write(syn, &c, &truth), 0);
	with_sinks(syn, in);
	struct keeper_stats st;
	real_session(in, out, "summary", dir, &st);
	struct counts full = {0}, sum = {0};
	count(in, &full);
	count(out, &sum);
	assert_true(st.steps_summarised > 0);
	assert_int_equal(sum.by_type[FSS_REC_STEP_SUMMARY], st.steps_summarised);
	for (int s = 0; s < c.ranks; s++)
		assert_true(sum.summaries_of[s] > 0);
	assert_true(sum.by_type[FSS_REC_COLLECTIVE] < full.by_type[FSS_REC_COLLECTIVE]);
	assert_int_equal(sum.by_type[FSS_REC_PROCESS_HELLO], full.by_type[FSS_REC_PROCESS_HELLO]);
	struct analysis_result *a = analyse(in), *b = analyse(out);
	same_diagnosis(a, b);
	assert_true(has_note(b, "--keep summary:"));
	assert_int_equal(b->trust.collectives_lost, 0);
	struct fss_file_header h;
	assert_int_equal(read_header(out, &h), 0);
	assert_int_equal(h.flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), FSS_FILE_KEEP_SUMMARY);
	analysis_result_free(a);
	analysis_result_free(b);
	/* the file is smaller: fewer records in all, the ingest's resume markers included */
	uint64_t all_full = 0, all_sum = 0;
	for (int t = 0; t < FSS_REC_TYPE_MAX; t++) {
		all_full += full.by_type[t];
		all_sum += t == FSS_REC_SINK ? 0 : sum.by_type[t];
	}
	assert_true(all_sum < all_full);
	/* resume markers: a few per source and output chunk, not one per record left out */
	assert_true(sum.by_type[FSS_REC_SINK] <= 4 * full.by_type[FSS_REC_SINK] + 64);
	assert_true(all_sum + sum.by_type[FSS_REC_SINK] < all_full);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policy_parse_format),
	    cmocka_unit_test(test_last_rotation_and_removal),
	    cmocka_unit_test(test_last_one),
	    cmocka_unit_test(test_last_stopped_rank),
	    cmocka_unit_test(test_disk_guard),
	    cmocka_unit_test(test_projection),
	    cmocka_unit_test(test_summary_decisions),
	    cmocka_unit_test(test_summary_enter_records),
	    cmocka_unit_test(test_enter_records_kept_with_their_step),
	    cmocka_unit_test(test_summary_nvtx_steps),
	    cmocka_unit_test(test_summary_period_steps),
	    cmocka_unit_test(test_summary_keeps_lost_step),
	    cmocka_unit_test(test_last_session),
	    cmocka_unit_test(test_summary_overflow),
	    cmocka_unit_test(test_real_last),
	    cmocka_unit_test(test_real_guard),
	    cmocka_unit_test(test_real_summary),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
