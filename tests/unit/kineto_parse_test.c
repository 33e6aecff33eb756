/*
 * kineto_parse_test.c - the Kineto reader (collector/kineto_file.h) on
 * small documents written here: exact ns, every kept category and arg, the
 * metadata before and after traceEvents, gzip, each kind of damage with its
 * status and offset, and the same result at read sizes of 1, 7 and the
 * default. The real traces are tests/e2e/kineto.cmake's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "collector/kineto_file.h"
#include "collector/kineto_scan.h"

static int memfd_of(const void *data, size_t len)
{
	int fd = memfd_create("kineto_parse_test", MFD_CLOEXEC);
	assert_true(fd >= 0);
	const char *p = data;
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, p + done, len - done);
		assert_true(n > 0);
		done += (size_t)n;
	}
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static kineto_file_t *read_bytes(const void *data, size_t len, size_t chunk, struct kineto_read_info *info)
{
	int fd = memfd_of(data, len);
	kineto_file_t *f = NULL;
	assert_int_equal(kineto_file_read_fd_chunk(fd, chunk, &f, info), 0);
	close(fd);
	assert_non_null(f);
	return f;
}

static kineto_file_t *read_text(const char *json, size_t chunk, struct kineto_read_info *info)
{
	return read_bytes(json, strlen(json), chunk, info);
}

/* gzip of data (one member), malloc'd; *out_len its length */
static unsigned char *gzip_of(const void *data, size_t len, size_t *out_len)
{
	z_stream z = {0};
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
	size_t cap = deflateBound(&z, len) + 64;
	unsigned char *out = malloc(cap);
	assert_non_null(out);
	z.next_in = (unsigned char *)(uintptr_t)data;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	*out_len = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

/* ---- the documents ---- */

#define META_BEFORE                                                                                                  \
	"\"schemaVersion\": 1,\n"                                                                                    \
	"\"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100\", \"totalGlobalMem\": 85029158912, \"numSms\": 132},"   \
	" {\"id\": 1, \"name\": \"other\", \"numSms\": 7}],\n"                                                                \
	"\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 3, \"world_size\": 8, \"pg_count\": 2, \"pg_config\": ["     \
	"{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", \"pg_size\": 8, \"ranks\": [0, 1, 2, 3, 4, 5, 6, 7]}," \
	"{\"pg_name\": \"1\", \"pg_desc\": \"shard\", \"pg_size\": 2, \"ranks\": \"[2, 3]\"}], \"nccl_version\": \"2.21.5\"},\n" \
	"\"baseTimeNanoseconds\": 1733270400000000000,\n"                                                            \
	"\"traceName\": \"rank3.json\",\n"

/* One event of each kind the reader tells apart, in a fixed order. */
static const char *EVENTS =
	"\"traceEvents\": [\n"
	/* 0: a kernel with fractional µs, every id */
	"{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"sm90_gemm\", \"pid\": 0, \"tid\": 7, \"ts\": 4458677009853.422, \"dur\": 12.5,"
	" \"args\": {\"External id\": 41, \"queued\": 0, \"device\": 0, \"stream\": 7, \"correlation\": 99, \"grid\": [1, 2, [3]],"
	" \"blocks per SM\": 1.5e-3}},\n"
	/* 1: an NCCL kernel with PyTorch 2.x's args, ranks as an array */
	"{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllGather_RING_LL\", \"pid\": 0, \"tid\": 20, \"ts\": 100, \"dur\": 50,"
	" \"args\": {\"stream\": 20, \"correlation\": 100, \"Collective name\": \"_allgather_base\", \"In msg nelems\": 1024,"
	" \"Out msg nelems\": 8192, \"Group size\": 8, \"dtype\": \"BFloat16\", \"Process Group Name\": \"0\","
	" \"Process Group Description\": \"default_pg\", \"Process Group Ranks\": [0, 1, 2], \"Seq\": 17, \"Rank\": 3}},\n"
	"{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD\", \"pid\": 0, \"tid\": 7, \"ts\": 200, \"dur\": 3, \"args\": {\"stream\": 7, \"correlation\": 101}},\n"
	"{\"ph\": \"X\", \"cat\": \"gpu_memset\", \"name\": \"Memset\", \"pid\": 0, \"tid\": 7, \"ts\": 210, \"dur\": 1, \"args\": {\"stream\": 7, \"correlation\": 102}},\n"
	"{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 5, \"tid\": 6, \"ts\": 90, \"dur\": 4, \"args\": {\"External id\": 41, \"correlation\": 99}},\n"
	"{\"ph\": \"X\", \"cat\": \"cuda_driver\", \"name\": \"cuLaunchKernel\", \"pid\": 5, \"tid\": 6, \"ts\": 91, \"dur\": 4, \"args\": {\"correlation\": 103}},\n"
	/* not kept: a launch without a correlation id */
	"{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamSynchronize\", \"pid\": 5, \"tid\": 6, \"ts\": 92, \"dur\": 4, \"args\": {}},\n"
	"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 5, \"tid\": 6, \"ts\": 80, \"dur\": 30,"
	" \"args\": {\"External id\": 40, \"Collective name\": \"allreduce\", \"dtype\": \"Float\", \"Process Group Ranks\": \"[0, 1]\", \"Seq\": 4}},\n"
	"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"c10d::allreduce_\", \"pid\": 5, \"tid\": 6, \"ts\": 79, \"dur\": 32, \"args\": {}},\n"
	"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"nccl:all_reduce\", \"pid\": 5, \"tid\": 6, \"ts\": 81, \"dur\": 2},\n"
	/* not kept: an ordinary op */
	"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 5, \"tid\": 6, \"ts\": 70, \"dur\": 9, \"args\": {\"Input Dims\": [[2, 3], [3, 4]]}},\n"
	"{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#3\", \"pid\": 5, \"tid\": 6, \"ts\": 60, \"dur\": 300},\n"
	"{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"fwd\", \"pid\": 0, \"tid\": 7, \"ts\": 100, \"dur\": 120},\n"
	/* a GPU event of another cat (HTA counts it by its stream) */
	"{\"ph\": \"X\", \"cat\": \"gpu_other_thing\", \"name\": \"sync\", \"pid\": 0, \"tid\": 7, \"ts\": 230, \"dur\": 2, \"args\": {\"stream\": 7}},\n"
	/* not kept: a negative stream */
	"{\"ph\": \"X\", \"cat\": \"mystery\", \"name\": \"m\", \"pid\": 0, \"tid\": 7, \"ts\": 230, \"dur\": 2, \"args\": {\"stream\": -1}},\n"
	"{\"ph\": \"s\", \"id\": 99, \"pid\": 5, \"tid\": 6, \"ts\": 90, \"cat\": \"ac2g\", \"name\": \"ac2g\"},\n"
	"{\"ph\": \"f\", \"id\": 99, \"pid\": 0, \"tid\": 7, \"ts\": 100, \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"},\n"
	"{\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"\", \"tid\": \"\", \"ts\": 400},\n"
	"{\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": 5, \"tid\": 0, \"args\": {\"name\": \"python3\"}},\n"
	"{\"ph\": \"C\", \"name\": \"counter\", \"pid\": 5, \"ts\": 1, \"args\": {\"v\": 1}},\n"
	/* a Trace span with string pid and tid (kept: no; counted) */
	"{\"ph\": \"X\", \"cat\": \"Trace\", \"ts\": 60, \"dur\": 400, \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\", \"name\": \"PyTorch Profiler (0)\", \"args\": {\"Op count\": 0}},\n"
	/* a name with escapes and bytes that are not UTF-8 */
	"{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"caf\\u00e9 \\\"q\\\" \\ud83d\\ude00 \xff\xfe\", \"pid\": 5, \"tid\": 6, \"ts\": 61, \"dur\": 1}\n"
	"]";

static char *document(int meta_first)
{
	size_t cap = strlen(EVENTS) + strlen(META_BEFORE) + 64;
	char *doc = malloc(cap);
	assert_non_null(doc);
	if (meta_first)
		snprintf(doc, cap, "{\n" META_BEFORE "%s\n}\n", EVENTS);
	else
		snprintf(doc, cap, "{\n%s,\n" META_BEFORE "\"displayTimeUnit\": \"ms\"}\n", EVENTS);
	return doc;
}

/* ---- checks ---- */

static void check_meta(const kineto_file_t *f)
{
	const struct kineto_meta *m = kineto_file_meta(f);
	assert_true(m->have_distributed);
	assert_int_equal(m->rank, 3);
	assert_int_equal(m->world_size, 8);
	assert_string_equal(kineto_file_string(f, m->backend), "nccl");
	assert_string_equal(kineto_file_string(f, m->nccl_version), "2.21.5");
	assert_true(m->have_base_time);
	assert_int_equal(m->base_time_ns, 1733270400000000000ll);
	assert_string_equal(kineto_file_string(f, m->device_name), "NVIDIA H100");
	assert_int_equal(m->device_sms, 132);
	assert_int_equal(m->device_memory, 85029158912ll);
	assert_int_equal(m->schema_version, 1);
	assert_string_equal(kineto_file_string(f, m->trace_name), "rank3.json");
	assert_int_equal(kineto_file_npgs(f), 2);
	const struct kineto_pg *pg = kineto_file_pgs(f);
	assert_string_equal(kineto_file_string(f, pg[0].name), "0");
	assert_string_equal(kineto_file_string(f, pg[0].desc), "default_pg");
	assert_int_equal(pg[0].size, 8);
	assert_string_equal(kineto_file_string(f, pg[0].ranks), "[0, 1, 2, 3, 4, 5, 6, 7]");
	assert_string_equal(kineto_file_string(f, pg[1].desc), "shard");
	assert_string_equal(kineto_file_string(f, pg[1].ranks), "[2, 3]");
}

static const uint16_t KEPT_CATS[] = {
	KINETO_CAT_KERNEL,	 KINETO_CAT_KERNEL,	     KINETO_CAT_GPU_MEMCPY, KINETO_CAT_GPU_MEMSET,
	KINETO_CAT_CUDA_RUNTIME, KINETO_CAT_CUDA_DRIVER,     KINETO_CAT_CPU_OP,	    KINETO_CAT_CPU_OP,
	KINETO_CAT_CPU_OP,	 KINETO_CAT_USER_ANNOTATION, KINETO_CAT_GPU_USER_ANNOTATION, KINETO_CAT_GPU_OTHER,
	KINETO_CAT_USER_ANNOTATION,
};
#define NKEPT (sizeof(KEPT_CATS) / sizeof(KEPT_CATS[0]))

static void check_events(const kineto_file_t *f)
{
	const struct kineto_counts *c = kineto_file_counts(f);
	assert_int_equal(c->events, 22);
	assert_int_equal(c->kept, NKEPT);
	assert_int_equal(c->complete, 17);
	assert_int_equal(c->flows, 2);
	assert_int_equal(c->instants, 1);
	assert_int_equal(c->metadata, 1);
	assert_int_equal(c->other, 1);
	assert_int_equal(c->cpu_ops, 4);
	assert_int_equal(c->skipped, 0);
	assert_int_equal(kineto_file_nevents(f), NKEPT);
	const struct kineto_event *ev = kineto_file_events(f);
	for (size_t i = 0; i < NKEPT; i++)
		assert_int_equal(ev[i].cat, KEPT_CATS[i]);

	/* the kernel: exact ns, fractional, every id */
	assert_int_equal(ev[0].ts_ns, 4458677009853422ll);
	assert_int_equal(ev[0].dur_ns, 12500);
	assert_int_equal(ev[0].flags, KINETO_EV_FRACTIONAL | KINETO_EV_HAS_STREAM | KINETO_EV_HAS_CORRELATION |
					      KINETO_EV_HAS_EXTERNAL_ID);
	assert_int_equal(ev[0].correlation, 99);
	assert_int_equal(ev[0].external_id, 41);
	assert_int_equal(ev[0].stream, 7);
	assert_int_equal(ev[0].pid, 0);
	assert_int_equal(ev[0].tid, 7);
	assert_int_equal(ev[0].comm_args, 0);
	assert_string_equal(kineto_file_string(f, ev[0].name), "sm90_gemm");

	/* the NCCL kernel: every NCCL arg */
	assert_int_equal(ev[1].ts_ns, 100000);
	assert_int_equal(ev[1].flags & KINETO_EV_FRACTIONAL, 0);
	assert_int_equal(ev[1].external_id, KINETO_NONE);
	const struct kineto_comm_args *a = kineto_file_comm_args(f, ev[1].comm_args);
	assert_non_null(a);
	assert_string_equal(kineto_file_string(f, a->collective_name), "_allgather_base");
	assert_int_equal(a->in_nelems, 1024);
	assert_int_equal(a->out_nelems, 8192);
	assert_int_equal(a->group_size, 8);
	assert_string_equal(kineto_file_string(f, a->dtype), "BFloat16");
	assert_string_equal(kineto_file_string(f, a->pg_name), "0");
	assert_string_equal(kineto_file_string(f, a->pg_desc), "default_pg");
	assert_string_equal(kineto_file_string(f, a->pg_ranks), "[0, 1, 2]");
	assert_int_equal(a->seq, 17);
	assert_int_equal(a->rank, 3);

	/* record_param_comms: the args present, the others absent */
	a = kineto_file_comm_args(f, ev[6].comm_args);
	assert_non_null(a);
	assert_string_equal(kineto_file_string(f, a->collective_name), "allreduce");
	assert_string_equal(kineto_file_string(f, a->pg_ranks), "[0, 1]");
	assert_int_equal(a->seq, 4);
	assert_int_equal(a->pg_name, 0);
	assert_int_equal(a->in_nelems, KINETO_NONE);
	assert_int_equal(a->group_size, KINETO_NONE);
	assert_int_equal(a->rank, KINETO_NONE);
	assert_string_equal(kineto_file_string(f, ev[7].name), "c10d::allreduce_");
	assert_int_equal(ev[7].comm_args, 0);
	assert_string_equal(kineto_file_string(f, ev[8].name), "nccl:all_reduce");
	assert_int_equal(ev[8].correlation, KINETO_NONE);
	assert_int_equal(ev[8].stream, KINETO_NONE);

	assert_string_equal(kineto_file_string(f, ev[9].name), "ProfilerStep#3");
	assert_int_equal(ev[11].stream, 7);
	assert_int_equal(ev[11].correlation, KINETO_NONE);
	/* escapes decoded, a surrogate pair as UTF-8, other bytes as they are */
	assert_string_equal(kineto_file_string(f, ev[12].name), "caf\xc3\xa9 \"q\" \xf0\x9f\x98\x80 \xff\xfe");
	/* one text, one id: the two user_annotation names differ, the launches' names are their own */
	assert_true(ev[9].name != ev[12].name);
	check_meta(f);
}

static void same_files(const kineto_file_t *a, const kineto_file_t *b)
{
	assert_memory_equal(kineto_file_counts(a), kineto_file_counts(b), sizeof(struct kineto_counts));
	assert_int_equal(kineto_file_nevents(a), kineto_file_nevents(b));
	for (size_t i = 0; i < kineto_file_nevents(a); i++) {
		struct kineto_event x = kineto_file_events(a)[i], y = kineto_file_events(b)[i];
		assert_string_equal(kineto_file_string(a, x.name), kineto_file_string(b, y.name));
		x.name = y.name = 0;
		assert_memory_equal(&x, &y, sizeof(x));
	}
	const struct kineto_meta *ma = kineto_file_meta(a), *mb = kineto_file_meta(b);
	assert_int_equal(ma->rank, mb->rank);
	assert_int_equal(ma->base_time_ns, mb->base_time_ns);
	assert_int_equal(kineto_file_npgs(a), kineto_file_npgs(b));
}

static void same_info(const struct kineto_read_info *a, const struct kineto_read_info *b)
{
	assert_int_equal(a->status, b->status);
	assert_int_equal(a->offset, b->offset);
	assert_string_equal(a->message, b->message);
	assert_int_equal(a->skip_offset, b->skip_offset);
	assert_string_equal(a->skip_message, b->skip_message);
}

/* ---- the tests ---- */

static void test_every_kind_and_arg(void **state)
{
	(void)state;
	char *doc = document(1);
	struct kineto_read_info info;
	kineto_file_t *f = read_text(doc, 0, &info);
	assert_int_equal(info.status, KINETO_READ_OK);
	assert_int_equal(info.offset, strlen(doc));
	assert_int_equal(info.gzip, 0);
	assert_string_equal(info.skip_message, "");
	check_events(f);
	kineto_file_free(f);
	free(doc);
}

static void test_meta_after_events(void **state)
{
	(void)state;
	char *doc = document(0);
	struct kineto_read_info info;
	kineto_file_t *f = read_text(doc, 0, &info);
	assert_int_equal(info.status, KINETO_READ_OK);
	check_events(f);
	kineto_file_free(f);
	free(doc);
}

/* ts and dur to the ns: thousandths kept, the 4th digit rounds half up, no double in between */
static void test_exact_ns(void **state)
{
	(void)state;
	static const struct {
		const char *ts;
		long long ns;
		int fractional;
	} cases[] = {
		{"4458677009853.422", 4458677009853422ll, 1}, {"1234.5678", 1234568, 1}, {"0.0004999", 0, 1},
		{"0.0005", 1, 1}, {"7", 7000, 0}, {"7.0", 7000, 1}, {"-1.5", -1500, 1}, {"0", 0, 0},
		{"9223372036854774", 9223372036854774000ll, 0}, {"1.99999999999999999999", 2000, 1},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char doc[256];
		snprintf(doc, sizeof(doc),
			 "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"a\", \"ts\": %s, \"dur\": 0}]}",
			 cases[i].ts);
		struct kineto_read_info info;
		kineto_file_t *f = read_text(doc, 0, &info);
		assert_int_equal(info.status, KINETO_READ_OK);
		assert_int_equal(kineto_file_nevents(f), 1);
		assert_int_equal(kineto_file_events(f)[0].ts_ns, cases[i].ns);
		assert_int_equal((kineto_file_events(f)[0].flags & KINETO_EV_FRACTIONAL) != 0, cases[i].fractional);
		kineto_file_free(f);
	}
}

static void test_chunk_sizes(void **state)
{
	(void)state;
	char *doc = document(1);
	struct kineto_read_info i0, i1, i7;
	kineto_file_t *f0 = read_text(doc, 0, &i0), *f1 = read_text(doc, 1, &i1), *f7 = read_text(doc, 7, &i7);
	check_events(f1);
	check_events(f7);
	same_files(f0, f1);
	same_files(f0, f7);
	same_info(&i0, &i1);
	same_info(&i0, &i7);
	kineto_file_free(f0);
	kineto_file_free(f1);
	kineto_file_free(f7);
	/* through gzip too: 1-byte reads and 1-byte inflate outputs */
	size_t glen;
	unsigned char *gz = gzip_of(doc, strlen(doc), &glen);
	f1 = read_bytes(gz, glen, 1, &i1);
	f7 = read_bytes(gz, glen, 7, &i7);
	assert_int_equal(i1.status, KINETO_READ_OK);
	check_events(f1);
	check_events(f7);
	kineto_file_free(f1);
	kineto_file_free(f7);
	free(gz);
	free(doc);
}

static void test_gzip(void **state)
{
	(void)state;
	char *doc = document(0);
	size_t len = strlen(doc), glen;
	unsigned char *gz = gzip_of(doc, len, &glen);
	struct kineto_read_info info;
	kineto_file_t *f = read_bytes(gz, glen, 0, &info);
	assert_int_equal(info.status, KINETO_READ_OK);
	assert_int_equal(info.gzip, 1);
	assert_int_equal(info.compressed, glen);
	assert_int_equal(info.offset, len);
	check_events(f);
	kineto_file_free(f);

	/* two members (gzip a b > c): one text */
	size_t half = strlen(doc) / 2, l1, l2;
	unsigned char *g1 = gzip_of(doc, half, &l1), *g2 = gzip_of(doc + half, len - half, &l2);
	unsigned char *both = malloc(l1 + l2);
	memcpy(both, g1, l1);
	memcpy(both + l1, g2, l2);
	f = read_bytes(both, l1 + l2, 0, &info);
	assert_int_equal(info.status, KINETO_READ_OK);
	check_events(f);
	kineto_file_free(f);

	/* a bad byte inside the deflate data: BAD_GZIP, the events before it kept */
	unsigned char *bad = malloc(glen);
	memcpy(bad, gz, glen);
	for (size_t i = glen / 2; i < glen / 2 + 16; i++)
		bad[i] ^= 0x5a;
	f = read_bytes(bad, glen, 0, &info);
	assert_true(info.status == KINETO_READ_BAD_GZIP || info.status == KINETO_READ_BAD_JSON);
	assert_true(info.offset < len);
	assert_true(strlen(info.message) > 0);
	kineto_file_free(f);

	/* a cut gzip stream: TRUNCATED */
	f = read_bytes(gz, glen / 2, 0, &info);
	assert_int_equal(info.status, KINETO_READ_TRUNCATED);
	assert_non_null(strstr(info.message, "gzip"));
	kineto_file_free(f);
	/* only the gzip trailer missing: the text is whole, the file still cut */
	f = read_bytes(gz, glen - 4, 0, &info);
	assert_int_equal(info.status, KINETO_READ_TRUNCATED);
	kineto_file_free(f);
	free(bad);
	free(both);
	free(g1);
	free(g2);
	free(gz);
	free(doc);
}

/* A damaged document: its status, the offset of the damage (-1: the end),
 * a word of its message, and how many events stay kept before it. */
struct damage {
	const char *doc;
	enum kineto_read_status status;
	long offset_of;	   /* index in doc of the bad byte; -1 the length */
	const char *word;
	size_t kept;
};

#define EV_OK "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"a\", \"ts\": 1, \"dur\": 2}"

static void check_damage(const struct damage *d)
{
	size_t len = strlen(d->doc);
	uint64_t want_offset = d->offset_of < 0 ? len : (uint64_t)d->offset_of;
	struct kineto_read_info first;
	size_t chunks[] = {0, 1, 7};
	for (size_t k = 0; k < 3; k++) {
		struct kineto_read_info info;
		kineto_file_t *f = read_text(d->doc, chunks[k], &info);
		if (info.status != d->status || info.offset != want_offset)
			fail_msg("%s: status %d offset %llu (%s), expected %d at %llu", d->doc, info.status,
				 (unsigned long long)info.offset, info.message, d->status, (unsigned long long)want_offset);
		if (!strstr(info.message, d->word))
			fail_msg("%s: message \"%s\" lacks \"%s\"", d->doc, info.message, d->word);
		assert_int_equal(kineto_file_nevents(f), d->kept);
		if (k == 0)
			first = info;
		else
			same_info(&first, &info);
		kineto_file_free(f);
	}
}

static long at(const char *doc, const char *needle)
{
	const char *p = strstr(doc, needle);
	assert_non_null(p);
	return (long)(p - doc);
}

static void test_damaged(void **state)
{
	(void)state;
	static const char cut[] = "{\"traceEvents\": [" EV_OK ", " EV_OK ", {\"ph\": \"X\", \"na";
	static const char bad_byte[] = "{\"traceEvents\": [" EV_OK ", " EV_OK " ; ]}";
	static const char dup_event[] = "{\"traceEvents\": [" EV_OK ", {\"ph\": \"X\", \"ts\": 1, \"ph\": \"X\"}]}";
	static const char dup_args[] = "{\"traceEvents\": [{\"ph\": \"X\", \"args\": {\"stream\": 1, \"grid\": [1], \"stream\": 2}}]}";
	static const char dup_top[] = "{\"traceEvents\": [" EV_OK "], \"traceName\": \"a\", \"traceName\": \"b\"}";
	static const char nan[] = "{\"traceEvents\": [" EV_OK ", {\"ph\": \"X\", \"args\": {\"blocks\": NaN}}]}";
	static const char inf[] = "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": Infinity}]}";
	static const char minus_inf[] = "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": -Infinity}]}";
	static const char control[] = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\tb\"}]}";
	static const char bad_escape[] = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\\qb\"}]}";
	static const char leading_zero[] = "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 012}]}";
	static const char trailing[] = "{\"traceEvents\": [" EV_OK "]} {";
	static const char cut_string[] = "{\"traceEvents\": [" EV_OK ", {\"name\": \"abc";
	static const char cut_number[] = "{\"traceEvents\": [" EV_OK ", {\"ts\": 12.";
	char deep[512];
	int n = snprintf(deep, sizeof(deep), "{\"traceEvents\": [" EV_OK ", {\"ph\": \"X\", \"args\": {\"x\": ");
	for (int i = 0; i < 70; i++)
		deep[n++] = '[';
	deep[n] = 0;
	const struct damage cases[] = {
		{cut, KINETO_READ_TRUNCATED, -1, "ends inside", 2},
		{bad_byte, KINETO_READ_BAD_JSON, at(bad_byte, ";"), "expected ','", 2},
		{dup_event, KINETO_READ_BAD_JSON, at(dup_event, "\"ph\": \"X\"}"), "duplicate key \"ph\"", 1},
		{dup_args, KINETO_READ_BAD_JSON, at(dup_args, "\"stream\": 2"), "duplicate key \"stream\"", 0},
		{dup_top, KINETO_READ_BAD_JSON, at(dup_top, "\"traceName\": \"b\""), "duplicate key", 1},
		{nan, KINETO_READ_BAD_JSON, at(nan, "NaN"), "NaN", 1},
		{inf, KINETO_READ_BAD_JSON, at(inf, "Infinity"), "Infinity", 0},
		{minus_inf, KINETO_READ_BAD_JSON, at(minus_inf, "Infinity"), "Infinity", 0},
		{control, KINETO_READ_BAD_JSON, at(control, "\t"), "control byte", 0},
		{bad_escape, KINETO_READ_BAD_JSON, at(bad_escape, "\\q"), "escape", 0},
		{leading_zero, KINETO_READ_BAD_JSON, at(leading_zero, "012"), "leading zero", 0},
		{trailing, KINETO_READ_BAD_JSON, at(trailing, "} {") + 2, "after the end", 1},
		{cut_string, KINETO_READ_TRUNCATED, -1, "a string", 1},
		{cut_number, KINETO_READ_TRUNCATED, -1, "a number", 1},
		{deep, KINETO_READ_BAD_JSON, at(deep, "[[") + KSCAN_MAX_DEPTH - 4, "nested deeper than 64", 1},
		{"[1, 2]", KINETO_READ_NOT_TRACE, 0, "not an object", 0},
		{"{\"a\": 1}", KINETO_READ_NOT_TRACE, -1, "no traceEvents", 0},
		{"{\"traceEvents\": {}}", KINETO_READ_NOT_TRACE, -1, "not an array", 0},
		{"", KINETO_READ_NOT_TRACE, 0, "empty", 0},
		{"FSSTRACE\x01\x00", KINETO_READ_BAD_JSON, 0, "not JSON", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_damage(&cases[i]);

	/* the element the file is cut inside is in no count: the counts still add up */
	struct kineto_read_info info;
	kineto_file_t *f = read_text(cut, 0, &info);
	const struct kineto_counts *c = kineto_file_counts(f);
	assert_int_equal(c->events, 2);
	assert_int_equal(c->complete, 2);
	assert_int_equal(c->skipped, 0);
	kineto_file_free(f);
}

/* Values of the wrong type: the event left out and counted, the first offset kept; the read goes on. */
static void test_wrong_types(void **state)
{
	(void)state;
	static const char doc[] = "{\"traceEvents\": [" EV_OK ",\n"
				  "{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": \"12\", \"dur\": 1},\n"
				  "{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1, \"args\": {\"stream\": {\"a\": 1}}},\n"
				  "{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1e3, \"dur\": 1},\n"
				  "{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 99999999999999999999999, \"dur\": 1},\n"
				  "{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1, \"args\": {\"correlation\": 1.5}},\n"
				  "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"ts\": 1, \"dur\": 1,"
				  " \"args\": {\"Process Group Ranks\": [0, \"x\"]}},\n"
				  "{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1},\n"
				  "{\"cat\": \"kernel\", \"ts\": 1, \"dur\": 1},\n"
				  "{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": -1},\n"
				  "17,\n"
				  /* huge numbers and exponents where nothing is read: fine */
				  "{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 5, \"dur\": 1, \"args\": {\"big\": 123456789012345678901234567890, \"e\": -1.5E+300}},\n"
				  EV_OK "]}";
	struct kineto_read_info info;
	kineto_file_t *f = read_text(doc, 0, &info);
	assert_int_equal(info.status, KINETO_READ_OK);
	const struct kineto_counts *c = kineto_file_counts(f);
	assert_int_equal(c->events, 13);
	assert_int_equal(c->skipped, 10);
	assert_int_equal(c->kept, 3);
	assert_int_equal(c->complete, 3);
	assert_int_equal(info.skip_offset, (uint64_t)at(doc, "\"12\""));
	assert_string_equal(info.skip_message, "ts: not a number");
	assert_int_equal(kineto_file_events(f)[1].ts_ns, 5000);
	kineto_file_free(f);

	/* each reason on its own */
	static const struct {
		const char *event, *value, *word;
	} one[] = {
		{"{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1e3, \"dur\": 1}", "1e3", "ts: a time with an exponent"},
		{"{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 99999999999999999999999, \"dur\": 1}", "9999", "ts: a time too large"},
		{"{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1, \"args\": {\"stream\": [7]}}", "[7]", "stream: not an integer"},
		{"{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1, \"pid\": {}}", "{}", "pid: neither an integer nor a string"},
		{"{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1, \"args\": 3}", "3}", "args: not an object"},
		{"{\"ph\": 1}", "1}", "ph: not a string"},
		{"{\"ph\": \"X\", \"pid\": 1.5}", "1.5", "pid: a number with a fraction"},
		{"{\"ph\": \"X\", \"args\": {\"Process Group Ranks\": {}}}", "{}", "Process Group Ranks: neither a string nor an array"},
	};
	for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++) {
		char d[256];
		snprintf(d, sizeof(d), "{\"traceEvents\": [%s]}", one[i].event);
		f = read_text(d, 0, &info);
		assert_int_equal(info.status, KINETO_READ_OK);
		assert_int_equal(kineto_file_counts(f)->skipped, 1);
		assert_int_equal(info.skip_offset, (uint64_t)at(d, one[i].value));
		if (!strstr(info.skip_message, one[i].word))
			fail_msg("%s: \"%s\" lacks \"%s\"", d, info.skip_message, one[i].word);
		kineto_file_free(f);
	}
}

static void test_sniff(void **state)
{
	(void)state;
	char dir[] = "/tmp/kineto_sniff_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	static const struct {
		const char *text;
		size_t len;
		int want;
	} cases[] = { /* len 0: strlen */
		{"{\"traceEvents\": []}", 0, 1},
		{"\xef\xbb\xbf \n {\"schemaVersion\": 1", 0, 1},
		{"FSSTRACE\x01\x00\x00\x00", 12, 0},
		{"[1]", 0, 0},
		{"", 0, 0},
		{"\xef\xbb{", 0, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(path, sizeof(path), "%s/f%zu", dir, i);
		FILE *fp = fopen(path, "wb");
		assert_non_null(fp);
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
		fwrite(cases[i].text, 1, len, fp);
		fclose(fp);
		assert_int_equal(kineto_sniff(path), cases[i].want);
		/* the same, gzip'd */
		size_t glen;
		unsigned char *gz = gzip_of(cases[i].text, len, &glen);
		fp = fopen(path, "wb");
		fwrite(gz, 1, glen, fp);
		fclose(fp);
		free(gz);
		assert_int_equal(kineto_sniff(path), cases[i].want);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/absent", dir);
	assert_true(kineto_sniff(path) < 0);
	rmdir(dir);
}

/* The builder, as part B's tests use it. */
static void test_builder(void **state)
{
	(void)state;
	kineto_file_t *f = kineto_file_new();
	assert_non_null(f);
	uint32_t a, b, c;
	assert_int_equal(kineto_file_intern(f, "ncclKernel", 10, &a), 0);
	const char *text = kineto_file_string(f, a);
	char many[32];
	for (int i = 0; i < 5000; i++) {
		int n = snprintf(many, sizeof(many), "name %d", i);
		assert_int_equal(kineto_file_intern(f, many, (size_t)n, &c), 0);
	}
	assert_int_equal(kineto_file_intern(f, "ncclKernel", 10, &b), 0);
	assert_int_equal(a, b);
	assert_ptr_equal(kineto_file_string(f, a), text); /* strings do not move */
	assert_int_equal(kineto_file_intern(f, "name 42", 7, &c), 0);
	assert_string_equal(kineto_file_string(f, c), "name 42");
	assert_string_equal(kineto_file_string(f, 0), "");
	struct kineto_comm_args args = {.collective_name = a, .in_nelems = 5};
	uint32_t index1;
	assert_int_equal(kineto_file_add_comm_args(f, &args, &index1), 0);
	assert_int_equal(index1, 1);
	struct kineto_event ev = {.ts_ns = 1, .comm_args = index1, .cat = KINETO_CAT_KERNEL};
	assert_int_equal(kineto_file_add(f, &ev), 0);
	assert_int_equal(kineto_file_nevents(f), 1);
	assert_int_equal(kineto_file_comm_args(f, kineto_file_events(f)[0].comm_args)->in_nelems, 5);
	assert_null(kineto_file_comm_args(f, 2));
	kineto_file_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_kind_and_arg),
		cmocka_unit_test(test_meta_after_events),
		cmocka_unit_test(test_exact_ns),
		cmocka_unit_test(test_chunk_sizes),
		cmocka_unit_test(test_gzip),
		cmocka_unit_test(test_damaged),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_sniff),
		cmocka_unit_test(test_builder),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
