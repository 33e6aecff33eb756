/*
 * source_test.c - collector/source: the per-source layer every reader of a
 * trace shares. The rank comes from the largest communicator (else the
 * hello's hints, in their order), strings that arrive after the hello (and
 * in parts, out of order) resolve, an NVTX range named before its string
 * is handed over once the string arrives (or counted as dropped), the drop
 * counters are summed, gaps in collective sequence numbers are counted, and
 * each way a source can end is told apart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/source.h"
#include "collector/timeline.h"
#include "common/record.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* What the callbacks saw. */
struct seen {
	unsigned records, no_source, comms;
	unsigned ranges;
	char last_name[128], last_domain[64];
	uint64_t last_range_start;
};

static int seen_record(void *ctx, struct source *src, const struct fss_record_head *rec)
{
	struct seen *s = ctx;

	(void)rec;
	s->records++;
	s->no_source += src == NULL;
	return 0;
}

static int seen_range(void *ctx, struct source *src, const struct fss_rec_nvtx_range *r, const char *domain,
		      const char *name)
{
	struct seen *s = ctx;

	assert_non_null(src);
	assert_int_equal(src->id, r->head.source);
	s->ranges++;
	snprintf(s->last_name, sizeof(s->last_name), "%s", name);
	snprintf(s->last_domain, sizeof(s->last_domain), "%s", domain);
	s->last_range_start = r->start_ns;
	return 0;
}

static int seen_comm(void *ctx, struct source *src, size_t index)
{
	struct seen *s = ctx;

	assert_true(index < src->ncomms);
	s->comms++;
	return 0;
}

static const struct source_ops seen_ops = {
	.on_record = seen_record,
	.on_nvtx_range = seen_range,
	.on_comm = seen_comm,
};

static void feed(sources_t *t, const void *rec)
{
	assert_int_equal(sources_feed(t, rec), 0);
}

static void hello(sources_t *t, uint32_t source, uint32_t pid, int32_t rank, int32_t slurm, int32_t ompi)
{
	struct fss_rec_process_hello h;

	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), source);
	h.pid = pid;
	h.rank = rank;
	h.local_rank = h.world_size = -1;
	h.slurm_procid = slurm;
	h.ompi_rank = ompi;
	h.host = 1;
	h.command = 2;
	h.mono_ns = 1000;
	h.realtime_ns = 5000;
	feed(t, &h);
}

static void string_part(sources_t *t, uint32_t source, uint32_t id, const char *whole, size_t offset, size_t len)
{
	struct fss_rec_string s;

	record_init(&s, FSS_REC_STRING, sizeof(s), source);
	s.id = id;
	s.total_len = (uint16_t)strlen(whole);
	s.offset = (uint16_t)offset;
	memcpy(s.text, whole + offset, len);
	feed(t, &s);
}

static void string(sources_t *t, uint32_t source, uint32_t id, const char *text)
{
	string_part(t, source, id, text, 0, strlen(text));
}

static void comm(sources_t *t, uint32_t source, uint64_t handle, int32_t nranks, int32_t rank)
{
	struct fss_rec_comm c;

	record_init(&c, FSS_REC_COMM, sizeof(c), source);
	c.comm = handle;
	c.id_hash = handle * 977;
	c.nranks = nranks;
	c.rank = rank;
	c.device = -1;
	c.color = c.key = -1;
	c.event = FSS_COMM_INIT;
	c.enter_ns = 2000;
	c.exit_ns = 2100;
	feed(t, &c);
}

static void collective(sources_t *t, uint32_t source, uint64_t seq)
{
	struct fss_rec_collective c;

	record_init(&c, FSS_REC_COLLECTIVE, sizeof(c), source);
	c.seq = seq;
	c.comm = 0x10;
	c.op = FSS_OP_ALLGATHER;
	c.dtype = FSS_DTYPE_BFLOAT16;
	c.enter_ns = 3000 + seq * 10;
	c.exit_ns = 3005 + seq * 10;
	feed(t, &c);
}

static void range(sources_t *t, uint32_t source, uint32_t domain, uint32_t name, uint64_t start)
{
	struct fss_rec_nvtx_range r;

	record_init(&r, FSS_REC_NVTX_RANGE, sizeof(r), source);
	r.start_ns = start;
	r.end_ns = start + 5;
	r.domain = domain;
	r.name = name;
	r.kind = FSS_NVTX_PUSH_POP;
	feed(t, &r);
}

static void process_end(sources_t *t, uint32_t source, uint64_t collectives, int32_t exit_code)
{
	struct fss_rec_process_end e;

	record_init(&e, FSS_REC_PROCESS_END, sizeof(e), source);
	e.at_ns = 9000;
	e.collectives = collectives;
	e.exit_code = exit_code;
	feed(t, &e);
}

static void process_exit(sources_t *t, uint32_t source, uint32_t pid, int wait_status)
{
	struct fss_rec_process_exit x;

	record_init(&x, FSS_REC_PROCESS_EXIT, sizeof(x), source);
	x.at_ns = 99999;
	x.pid = pid;
	x.wait_status = wait_status;
	feed(t, &x);
}

/* A real waitpid() status of a child that ended as `how` says. */
static int child_status(int sig, int code)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		if (sig)
			raise(sig);
		_exit(code);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void test_rank_one_way(void **state)
{
	struct seen seen = {0};
	sources_t *t = sources_new(&seen_ops, &seen);
	struct source *s;

	(void)state;
	assert_non_null(t);
	hello(t, 0, 100, -1, 5, 9); /* no RANK: SLURM_PROCID comes before OMPI */
	hello(t, 1, 101, -1, -1, 9);
	hello(t, 2, 102, -1, -1, -1);
	hello(t, 3, 103, 4, 5, 9);
	assert_int_equal(sources_find(t, 0)->rank, 5);
	assert_int_equal(sources_find(t, 0)->rank_from, SOURCE_RANK_SLURM_PROCID);
	assert_int_equal(sources_find(t, 1)->rank, 9);
	assert_int_equal(sources_find(t, 1)->rank_from, SOURCE_RANK_OMPI_RANK);
	assert_int_equal(sources_find(t, 2)->rank, -1);
	assert_int_equal(sources_find(t, 2)->rank_from, SOURCE_RANK_UNKNOWN);
	assert_int_equal(sources_find(t, 3)->rank, 4);
	assert_int_equal(sources_find(t, 3)->rank_from, SOURCE_RANK_ENV_RANK);
	/* The communicator knows better than the environment; the largest wins. */
	comm(t, 0, 0x10, 2, 1);
	s = sources_find(t, 0);
	assert_int_equal(s->rank, 1);
	assert_int_equal(s->rank_from, SOURCE_RANK_COMMUNICATOR);
	assert_int_equal(s->world_size, 2);
	comm(t, 0, 0x20, 8, 6);
	comm(t, 0, 0x30, 4, 3);
	assert_int_equal(s->rank, 6);
	assert_int_equal(s->world_size, 8);
	assert_int_equal(s->ncomms, 3);
	assert_non_null(source_comm_find(s, 0x30));
	assert_int_equal(source_comm_find(s, 0x30)->nranks, 4);
	/* A replay of the same communicator (a new sink) adds nothing. */
	comm(t, 0, 0x20, 8, 6);
	assert_int_equal(s->ncomms, 3);
	assert_int_equal(seen.comms, 3);
	comm(t, 2, 0x10, 4, 2);
	assert_int_equal(sources_find(t, 2)->rank, 2);
	assert_int_equal(sources_count(t), 4);
	assert_int_equal(seen.records, 9);
	assert_string_equal(source_rank_from_name(SOURCE_RANK_COMMUNICATOR), "communicator");
	sources_free(t);
}

static void test_strings(void **state)
{
	char longname[251];
	sources_t *t = sources_new(NULL, NULL);
	struct source *s;

	(void)state;
	for (size_t i = 0; i < sizeof(longname) - 1; i++)
		longname[i] = (char)('a' + i % 26);
	longname[sizeof(longname) - 1] = '\0';
	hello(t, 0, 100, 0, -1, -1);
	hello(t, 1, 101, 1, -1, -1);
	s = sources_find(t, 0);
	/* The hello names host 1 and command 2 before they are defined. */
	assert_int_equal(s->host, 1);
	assert_null(sources_string(t, 0, s->host));
	string(t, 0, 1, "node-a");
	string(t, 1, 1, "node-b");
	assert_string_equal(sources_string(t, 0, s->host), "node-a");
	assert_string_equal(sources_string(t, 1, 1), "node-b");
	/* A string in three parts, the last part first: complete only at the end. */
	string_part(t, 0, 2, longname, 208, 42);
	assert_null(sources_string(t, 0, 2));
	string_part(t, 0, 2, longname, 0, 104);
	assert_null(sources_string(t, 0, 2));
	string_part(t, 0, 2, longname, 104, 104);
	assert_string_equal(sources_string(t, 0, 2), longname);
	assert_null(sources_string(t, 0, FSS_STRING_NONE));
	sources_free(t);
}

static void test_nvtx_named_late(void **state)
{
	struct seen seen = {0};
	sources_t *t = sources_new(&seen_ops, &seen);
	struct source *s;

	(void)state;
	hello(t, 0, 100, 0, -1, -1);
	string(t, 0, 5, "layers.0");
	range(t, 0, 0, 5, 10); /* named: handed over at once */
	assert_int_equal(seen.ranges, 1);
	assert_string_equal(seen.last_name, "layers.0");
	assert_string_equal(seen.last_domain, "");
	range(t, 0, 0, 6, 20); /* its name comes later */
	range(t, 0, 7, 5, 30); /* its domain comes later */
	range(t, 0, 0, 8, 40); /* its name never comes */
	s = sources_find(t, 0);
	assert_int_equal(seen.ranges, 1);
	assert_int_equal(s->nvtx_pending, 3);
	string(t, 0, 6, "step 3");
	assert_int_equal(seen.ranges, 2);
	assert_string_equal(seen.last_name, "step 3");
	assert_int_equal(seen.last_range_start, 20);
	string(t, 0, 7, "fsdp");
	assert_int_equal(seen.ranges, 3);
	assert_string_equal(seen.last_domain, "fsdp");
	assert_string_equal(seen.last_name, "layers.0");
	assert_int_equal(s->nvtx_pending, 1);
	range(t, 0, 0, FSS_STRING_NONE, 50); /* no name at all: lost now */
	assert_int_equal(s->drops.nvtx_unnamed, 1);
	assert_int_equal(sources_finish(t), 0);
	assert_int_equal(s->nvtx_pending, 0);
	assert_int_equal(s->drops.nvtx_unnamed, 2);
	assert_int_equal(s->dropped, 2);
	sources_free(t);
}

static void test_nvtx_pending_bounded(void **state)
{
	struct seen seen = {0};
	sources_t *t = sources_new(&seen_ops, &seen);
	struct source *s;

	(void)state;
	hello(t, 0, 100, 0, -1, -1);
	for (unsigned i = 0; i < SOURCE_NVTX_PENDING_MAX + 3; i++)
		range(t, 0, 0, 9, i);
	s = sources_find(t, 0);
	assert_int_equal(s->nvtx_pending, SOURCE_NVTX_PENDING_MAX);
	assert_int_equal(s->drops.nvtx_unnamed, 3);
	string(t, 0, 9, "forward");
	assert_int_equal(seen.ranges, SOURCE_NVTX_PENDING_MAX);
	assert_int_equal(s->nvtx_pending, 0);
	sources_free(t);
}

static void test_drops_summed(void **state)
{
	sources_t *t = sources_new(NULL, NULL);
	struct fss_rec_drops d;
	struct source *s;

	(void)state;
	hello(t, 0, 100, 0, -1, -1);
	record_init(&d, FSS_REC_DROPS, sizeof(d), 0);
	d.ring_dropped = 1;
	d.sink_dropped = 2;
	d.cupti_dropped = 3;
	d.nvtx_dropped = 4;
	feed(t, &d);
	s = sources_find(t, 0);
	assert_int_equal(s->dropped, 10);
	/* Cumulative: the latest record replaces, never adds. */
	d.ring_dropped = 11;
	feed(t, &d);
	assert_int_equal(s->drops.ring, 11);
	assert_int_equal(s->drops.nvtx, 4);
	assert_int_equal(s->dropped, 20);
	/* Counters near the top (a damaged or hostile trace) saturate: a sum that wrapped would read as a few
	 * records lost. */
	d.ring_dropped = UINT64_MAX - 1;
	d.sink_dropped = 5;
	feed(t, &d);
	assert_true(s->dropped == UINT64_MAX);
	sources_free(t);
}

static void test_sequence_gaps(void **state)
{
	static const uint64_t seqs[] = {2, 1, 3, 5, 6, 9}; /* out of order, 4, 7 and 8 missing */
	sources_t *t = sources_new(NULL, NULL);
	struct source *s;

	(void)state;
	hello(t, 0, 100, 0, -1, -1);
	hello(t, 1, 101, 1, -1, -1);
	for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++)
		collective(t, 0, seqs[i]);
	for (uint64_t q = 1; q <= 4; q++)
		collective(t, 1, q);
	s = sources_find(t, 0);
	assert_int_equal(s->collectives, 6);
	assert_int_equal(s->max_seq, 9);
	assert_int_equal(source_collectives_missing(s), 3);
	/* process_end counted 12 calls: three more after the last one seen. */
	process_end(t, 0, 12, 0);
	assert_int_equal(source_collectives_missing(s), 6);
	assert_int_equal(source_collectives_missing(sources_find(t, 1)), 0);
	sources_free(t);
}

static void test_ends(void **state)
{
	struct seen seen = {0};
	sources_t *t = sources_new(&seen_ops, &seen);
	struct fss_rec_trace_end te;
	struct source_summary *sum;
	size_t n;

	(void)state;
	for (uint32_t i = 0; i < 6; i++)
		hello(t, i, 100 + i, (int32_t)i, -1, -1);
	string(t, 3, 1, "node-d");
	collective(t, 0, 1);
	process_end(t, 1, 0, 0);
	process_end(t, 2, 0, 0);
	process_exit(t, 2, 102, child_status(0, 0));
	process_exit(t, 3, 103, child_status(SIGKILL, 0));
	process_exit(t, 4, 104, child_status(0, 1));
	process_exit(t, 5, 105, child_status(0, 0)); /* exit 0, but no process_end */
	/* trace_end belongs to no source */
	record_init(&te, FSS_REC_TRACE_END, sizeof(te), FSS_SOURCE_NONE);
	feed(t, &te);
	assert_int_equal(sources_count(t), 6);
	assert_int_equal(seen.no_source, 1);

	assert_int_equal(source_end_of(sources_find(t, 0)), SOURCE_END_CUT_OFF);
	assert_int_equal(source_end_of(sources_find(t, 1)), SOURCE_END_CLEAN);
	assert_int_equal(source_end_of(sources_find(t, 2)), SOURCE_END_CLEAN);
	assert_int_equal(source_end_of(sources_find(t, 3)), SOURCE_END_SIGNALED);
	assert_int_equal(source_signal(sources_find(t, 3)), SIGKILL);
	assert_int_equal(source_end_of(sources_find(t, 4)), SOURCE_END_EXITED);
	assert_int_equal(source_exit_code(sources_find(t, 4)), 1);
	assert_int_equal(source_end_of(sources_find(t, 5)), SOURCE_END_EXITED);
	assert_int_equal(source_exit_code(sources_find(t, 5)), 0);
	assert_false(sources_find(t, 5)->has_process_end);

	assert_int_equal(sources_summarize(t, &sum, &n), 0);
	assert_int_equal(n, 6);
	assert_int_equal(sum[3].end, SOURCE_END_SIGNALED);
	assert_int_equal(sum[3].signal, SIGKILL);
	assert_int_equal(sum[3].rank, 3);
	assert_int_equal(sum[3].pid, 103);
	assert_string_equal(sum[3].host, "node-d");
	assert_string_equal(sum[0].host, "");
	assert_int_equal(sum[0].collectives, 1);
	assert_int_equal(sum[0].last_ns, 3015);
	assert_int_equal(sum[0].last_realtime_ns, 3015 + 4000);
	assert_int_equal(sum[4].end, SOURCE_END_EXITED);
	assert_int_equal(sum[4].exit_code, 1);
	assert_string_equal(source_end_name(sum[3].end), "signaled");
	free(sum);
	sources_free(t);
}

/* The timeline reads its sources through the layer: a step range whose
 * name arrives after it still counts, and the rank is the communicator's. */
static void test_timeline_through_layer(void **state)
{
	timeline_t *tl = timeline_new("fsdp_ref:step *", "fsdp_ref:*");
	struct tl_source *src = NULL;
	struct fss_rec_nvtx_range r;
	struct fss_rec_process_hello h;
	struct fss_rec_string str;
	struct fss_rec_comm c;

	(void)state;
	assert_non_null(tl);
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), 0);
	h.rank = h.slurm_procid = h.ompi_rank = -1;
	assert_int_equal(timeline_feed(tl, &h.head, &src), 0);
	assert_non_null(src);
	assert_int_equal(src->rank, -1);
	record_init(&c, FSS_REC_COMM, sizeof(c), 0);
	c.comm = 0x10;
	c.id_hash = 0x99;
	c.nranks = 4;
	c.rank = 3;
	c.event = FSS_COMM_INIT;
	assert_int_equal(timeline_feed(tl, &c.head, &src), 0);
	assert_int_equal(src->rank, 3);
	assert_int_equal(src->world_size, 4);
	assert_int_equal(src->ncomms, 1);
	assert_int_equal(src->comms[0].id_hash, 0x99);
	record_init(&r, FSS_REC_NVTX_RANGE, sizeof(r), 0);
	r.start_ns = 100;
	r.end_ns = 200;
	r.domain = 1;
	r.name = 2;
	r.kind = FSS_NVTX_PUSH_POP;
	assert_int_equal(timeline_feed(tl, &r.head, &src), 0);
	assert_int_equal(tl_array_len(&src->ranges), 0);
	record_init(&str, FSS_REC_STRING, sizeof(str), 0);
	str.id = 1;
	str.total_len = 8;
	memcpy(str.text, "fsdp_ref", 8);
	assert_int_equal(timeline_feed(tl, &str.head, &src), 0);
	str.id = 2;
	str.total_len = 6;
	memset(str.text, 0, sizeof(str.text));
	memcpy(str.text, "step 1", 6);
	assert_int_equal(timeline_feed(tl, &str.head, &src), 0);
	src = timeline_source(tl, 0);
	assert_int_equal(tl_array_len(&src->ranges), 1);
	assert_true(((struct tl_range *)tl_array_at(&src->ranges, 0))->is_step);
	assert_int_equal(src->step_ranges, 1);
	assert_string_equal(src->step_name, "step 1");
	timeline_free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rank_one_way),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_nvtx_named_late),
		cmocka_unit_test(test_nvtx_pending_bounded),
		cmocka_unit_test(test_drops_summed),
		cmocka_unit_test(test_sequence_gaps),
		cmocka_unit_test(test_ends),
		cmocka_unit_test(test_timeline_through_layer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
