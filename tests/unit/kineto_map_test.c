/*
 * kineto_map_test.c - one Kineto file as one source's records
 * (collector/kineto_map.h), on files made with the builder: op, dtype and
 * count from the args and from kernel names; the host view chain (launch,
 * op around it, External id) and its fallbacks; process-group and
 * inferred communicators; seq in issue order; ranges, their depth and the
 * steps; HTA's overlap with the inward rounding and the last-step window
 * on a small case computed by hand. The real traces are
 * tests/e2e/kineto_read.cmake's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "collector/kineto_file.h"
#include "collector/kineto_map.h"
#include "common/record.h"

/* ---- making files ---- */

static uint32_t str(kineto_file_t *f, const char *s)
{
	uint32_t id = 0;

	assert_int_equal(kineto_file_intern(f, s, strlen(s), &id), 0);
	return id;
}

/* An event of cat with times in ns; stream, correlation, external id and args as given (-1 / 0: none). */
static void add(kineto_file_t *f, uint16_t cat, const char *name, int32_t tid, int64_t ts, int64_t dur, int32_t stream,
		int64_t corr, int64_t ext, uint32_t args)
{
	struct kineto_event e = {
	    .ts_ns = ts,
	    .dur_ns = dur,
	    .correlation = corr,
	    .external_id = ext,
	    .tid = tid,
	    .stream = stream,
	    .name = str(f, name),
	    .comm_args = args,
	    .cat = cat,
	    .pid = stream >= 0 ? 0 : 4242,
	};

	if (stream >= 0)
		e.flags |= KINETO_EV_HAS_STREAM;
	if (corr >= 0)
		e.flags |= KINETO_EV_HAS_CORRELATION;
	if (ext >= 0)
		e.flags |= KINETO_EV_HAS_EXTERNAL_ID;
	if (ts % 1000 || dur % 1000)
		e.flags |= KINETO_EV_FRACTIONAL;
	assert_int_equal(kineto_file_add(f, &e), 0);
}

static uint32_t args(kineto_file_t *f, const char *coll, const char *dtype, int64_t in, int64_t out, const char *pg,
		     const char *ranks, int32_t size)
{
	struct kineto_comm_args a = {
	    .collective_name = coll ? str(f, coll) : 0,
	    .dtype = dtype ? str(f, dtype) : 0,
	    .pg_name = pg ? str(f, pg) : 0,
	    .pg_ranks = ranks ? str(f, ranks) : 0,
	    .group_size = size,
	    .in_nelems = in,
	    .out_nelems = out,
	    .seq = KINETO_NONE,
	    .rank = KINETO_NONE,
	};
	uint32_t idx = 0;

	assert_int_equal(kineto_file_add_comm_args(f, &a, &idx), 0);
	return idx;
}

static kineto_file_t *new_file(int32_t rank, int32_t world)
{
	kineto_file_t *f = kineto_file_new();
	struct kineto_meta *m;

	assert_non_null(f);
	m = kineto_file_meta_mut(f);
	m->have_distributed = 1;
	m->rank = rank;
	m->world_size = world;
	return f;
}

/* ---- reading the records back ---- */

#define MAX_RECS 64

struct recs {
	struct fss_rec_process_hello hello;
	struct fss_rec_comm comms[8];
	size_t ncomms;
	struct fss_rec_collective colls[16];
	size_t ncolls;
	struct fss_rec_gpu_interval gpus[16];
	size_t ngpus;
	size_t coll_at[16], gpu_at[16]; /* where in the order each came */
	struct fss_rec_nvtx_range ranges[16];
	size_t nranges;
	size_t ncorr;
	struct fss_rec_group groups[8];
	size_t ngroups, group_at[8];
	struct fss_rec_source_figures figures;
	int have_figures;
	char strings[64][128]; /* by id (the tests' ids are small) */
	uint16_t order[256];   /* record types in the order handed out */
	size_t n;
};

static void collect(kineto_map_t *m, struct recs *r)
{
	const struct fss_record_head *h;

	memset(r, 0, sizeof(*r));
	while (kineto_map_next(m, &h) == 1) {
		assert_true(r->n < 256);
		r->order[r->n++] = h->type;
		switch (h->type) {
		case FSS_REC_PROCESS_HELLO:
			memcpy(&r->hello, h, sizeof(r->hello));
			break;
		case FSS_REC_STRING: {
			const struct fss_rec_string *s = (const void *)h;

			assert_true(s->id < 64 && s->total_len < 128);
			size_t left = (size_t)s->total_len - s->offset;

			memcpy(r->strings[s->id] + s->offset, s->text,
			       left < FSS_STRING_PART_BYTES ? left : FSS_STRING_PART_BYTES);
			break;
		}
		case FSS_REC_COMM:
			memcpy(&r->comms[r->ncomms++], h, sizeof(r->comms[0]));
			break;
		case FSS_REC_COLLECTIVE:
			r->coll_at[r->ncolls] = r->n;
			memcpy(&r->colls[r->ncolls++], h, sizeof(r->colls[0]));
			break;
		case FSS_REC_GPU_INTERVAL:
			r->gpu_at[r->ngpus] = r->n;
			memcpy(&r->gpus[r->ngpus++], h, sizeof(r->gpus[0]));
			break;
		case FSS_REC_NVTX_RANGE:
			memcpy(&r->ranges[r->nranges++], h, sizeof(r->ranges[0]));
			break;
		case FSS_REC_CORRELATION:
			r->ncorr++;
			break;
		case FSS_REC_GROUP:
			assert_true(r->ngroups < 8);
			r->group_at[r->ngroups] = r->n;
			memcpy(&r->groups[r->ngroups++], h, sizeof(r->groups[0]));
			break;
		case FSS_REC_SOURCE_FIGURES:
			memcpy(&r->figures, h, sizeof(r->figures));
			r->have_figures = 1;
			break;
		default:
			break;
		}
	}
}

static kineto_map_t *map_of(kineto_file_t *f)
{
	kineto_map_t *m = NULL;

	assert_int_equal(kineto_map_new(f, "/tmp/rank0.json.gz", 0, &m), 0);
	return m;
}

/* ---- the tests ---- */

/* The args say the op, dtype and count (per rank for AllGather); the
 * process group makes the communicator, the same hash for the same group. */
static void test_args_and_groups(void **state)
{
	kineto_file_t *f = new_file(2, 4);
	uint32_t a1 = args(f, "_allgather_base", "BFloat16", 100, 400, "0", "[0, 1, 2, 3]", 4);
	uint32_t a2 = args(f, "reduce_scatter_tensor", "Float", 800, 200, "0", "[0, 1, 2, 3]", 4);
	uint32_t a3 = args(f, "allreduce", "Half", 50, 50, "7", "[1, 2]", 2);
	struct recs r;
	kineto_map_t *m;

	(void)state;
	add(f, KINETO_CAT_KERNEL, "ncclDevKernel_Generic", 7, 1000000, 5000, 7, 1, 1, a1);
	add(f, KINETO_CAT_KERNEL, "ncclDevKernel_Generic", 7, 2000000, 5000, 7, 2, 2, a2);
	add(f, KINETO_CAT_KERNEL, "ncclDevKernel_Generic", 9, 3000000, 5000, 9, 3, 3, a3);
	m = map_of(f);
	collect(m, &r);
	assert_int_equal(r.ncolls, 3);
	assert_int_equal(r.colls[0].op, FSS_OP_ALLGATHER);
	assert_int_equal(r.colls[0].dtype, FSS_DTYPE_BFLOAT16);
	assert_int_equal(r.colls[0].count, 100);
	assert_int_equal(r.colls[0].bytes, 200);
	assert_int_equal(r.colls[1].op, FSS_OP_REDUCESCATTER);
	assert_int_equal(r.colls[1].count, 200); /* the per-rank output */
	assert_int_equal(r.colls[1].bytes, 800);
	assert_int_equal(r.colls[2].op, FSS_OP_ALLREDUCE);
	assert_int_equal(r.colls[2].dtype, FSS_DTYPE_FLOAT16);
	assert_int_equal(r.ncomms, 2);
	assert_int_equal(r.comms[0].event, FSS_COMM_INIT);
	assert_int_equal(r.comms[0].nranks, 4);
	assert_int_equal(r.comms[0].rank, 2);
	assert_int_equal(r.comms[1].nranks, 2);
	assert_int_equal(r.comms[1].rank, 1); /* global rank 2 is the second of [1, 2] */
	assert_int_equal(r.colls[0].comm, r.colls[1].comm);
	assert_int_not_equal(r.colls[0].comm, r.colls[2].comm);
	assert_int_not_equal(r.comms[0].id_hash, r.comms[1].id_hash);
	assert_int_equal(r.comms[0].inferred, 0);
	assert_false(r.figures.unknown & FSS_FIGURES_NO_COMM_IDS);
	assert_int_equal(r.figures.allgather_kernels, 1);
	assert_int_equal(r.figures.reduce_scatter_kernels, 1);
	assert_int_equal(r.figures.allreduce_kernels, 1);
	assert_int_equal(r.hello.rank, 2);
	assert_int_equal(r.hello.world_size, 4);
	assert_int_equal(r.hello.path, FSS_PATH_KINETO);
	kineto_map_free(m);

	/* the same group in another rank's file: the same communicator id */
	f = new_file(0, 4);
	a1 = args(f, "_allgather_base", "BFloat16", 100, 400, "0", "[0, 1, 2, 3]", 4);
	add(f, KINETO_CAT_KERNEL, "ncclDevKernel_Generic", 7, 1000000, 5000, 7, 1, 1, a1);
	m = map_of(f);
	{
		struct recs r0;

		collect(m, &r0);
		assert_int_equal(r0.comms[0].id_hash, r.comms[0].id_hash);
		assert_int_equal(r0.comms[0].rank, 0);
	}
	kineto_map_free(m);
}

/* Without args: op and dtype from the kernel's name; without groups: one
 * communicator per NCCL stream, observed, inferred, and said in the figures. */
static void test_kernel_names_and_inferred(void **state)
{
	kineto_file_t *f = new_file(0, 8);
	struct recs r;
	kineto_map_t *m;

	(void)state;
	add(f, KINETO_CAT_KERNEL, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 14, 1000000, 1000, 14, 1, -1,
	    0);
	add(f, KINETO_CAT_KERNEL, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 14,
	    2000000, 1000, 14, 2, -1, 0);
	add(f, KINETO_CAT_KERNEL, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", 21, 3000000, 1000, 21, 3,
	    -1, 0);
	add(f, KINETO_CAT_KERNEL, "void gemm<float>(float*)", 7, 1000000, 3000, 7, 4, -1, 0);
	m = map_of(f);
	collect(m, &r);
	assert_int_equal(r.ncolls, 3);
	assert_int_equal(r.colls[0].op, FSS_OP_ALLREDUCE);
	assert_int_equal(r.colls[0].dtype, FSS_DTYPE_FLOAT32);
	assert_int_equal(r.colls[1].op, FSS_OP_ALLGATHER);
	assert_int_equal(r.colls[1].dtype, FSS_DTYPE_UNKNOWN);
	assert_int_equal(r.colls[2].op, FSS_OP_SEND); /* SendRecv, and no host op to say all-to-all */
	assert_int_equal(r.colls[2].dtype, FSS_DTYPE_INT8);
	assert_int_equal(r.colls[0].count, 0);
	assert_int_equal(r.ncomms, 2); /* streams 14 and 21 */
	assert_int_equal(r.comms[0].event, FSS_COMM_OBSERVED);
	assert_true(r.comms[0].inferred & FSS_COMM_INFER_ID);
	assert_int_equal(r.comms[0].nranks, 8); /* the world, as nothing else says */
	assert_true(r.figures.unknown & FSS_FIGURES_NO_COMM_IDS);
	assert_int_equal(r.figures.other_kernels, 1);
	/* every GPU event a gpu_interval; the NCCL ones tied to their collective */
	assert_int_equal(r.ngpus, 4);
	assert_int_equal(r.ncorr, 3);
	for (size_t i = 0; i < r.ngpus; i++)
		assert_int_equal(r.gpus[i].kind == FSS_GPU_COMM, r.gpus[i].collective_seq != 0);
	kineto_map_free(m);
}

/* Host times: the outermost communication op around the launch on its
 * thread, else the op with the launch's External id, else the launch,
 * else the kernel's start; seq follows the host's issue order. */
static void test_host_view(void **state)
{
	kineto_file_t *f = new_file(0, 2);
	struct recs r;
	kineto_map_t *m;

	(void)state;
	/* seq 1: op [100, 200) us on tid 10 with record_param_comms inside, its launch in it */
	add(f, KINETO_CAT_CPU_OP, "c10d::allreduce_", 10, 100000, 100000, -1, -1, 50, 0);
	add(f, KINETO_CAT_CPU_OP, "record_param_comms", 10, 110000, 50000, -1, -1, 51, 0);
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaLaunchKernel", 10, 120000, 10000, -1, 11, 51, 0);
	/* seq 2: launch on another thread, tied by External id to an op */
	add(f, KINETO_CAT_CPU_OP, "c10d::broadcast_", 10, 300000, 20000, -1, -1, 60, 0);
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaLaunchKernel", 12, 330000, 5000, -1, 12, 60, 0);
	/* seq 3: a launch and no op */
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaLaunchKernel", 10, 500000, 7000, -1, 13, -1, 0);
	/* the kernels, in another order than their launches; seq 4 has no launch */
	add(f, KINETO_CAT_KERNEL, "ncclKernel_AllReduce_RING_LL_Sum_float", 7, 600000, 1000, 7, 13, -1, 0);
	add(f, KINETO_CAT_KERNEL, "ncclKernel_Broadcast_RING_LL_Sum_int8_t", 7, 400000, 1000, 7, 12, -1, 0);
	add(f, KINETO_CAT_KERNEL, "ncclKernel_AllReduce_RING_LL_Sum_float", 7, 250000, 1000, 7, 11, -1, 0);
	add(f, KINETO_CAT_KERNEL, "ncclKernel_AllReduce_RING_LL_Sum_float", 7, 700000, 1000, 7, 99, -1, 0);
	m = map_of(f);
	collect(m, &r);
	assert_int_equal(r.ncolls, 4);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(r.colls[i].seq, i + 1);
	assert_int_equal(r.colls[0].enter_ns, 100000);
	assert_int_equal(r.colls[0].exit_ns, 200000);
	assert_int_equal(r.colls[0].thread, 10);
	assert_int_equal(r.colls[1].op, FSS_OP_BROADCAST);
	assert_int_equal(r.colls[1].enter_ns, 300000); /* by External id */
	assert_int_equal(r.colls[2].enter_ns, 500000); /* its launch */
	assert_int_equal(r.colls[2].exit_ns, 507000);
	assert_int_equal(r.colls[3].enter_ns, 700000); /* its kernel */
	assert_int_equal(r.colls[3].exit_ns, 700000);
	assert_int_equal(r.figures.host_view_missing, 2);
	assert_true(r.figures.unknown & FSS_FIGURES_NO_HOST_VIEW);
	assert_true(r.figures.unknown & FSS_FIGURES_NO_ENTER);
	assert_int_equal(r.hello.pid, 4242); /* the pid the host events carry */
	assert_false(r.figures.unknown & FSS_FIGURES_NO_PID);
	/* records in host-time order: the hello first, the figures last, and
	 * each collective before the kernel tied to it */
	assert_int_equal(r.order[0], FSS_REC_PROCESS_HELLO);
	assert_int_equal(r.order[r.n - 1], FSS_REC_SOURCE_FIGURES);
	for (size_t i = 0; i < r.ngpus; i++) {
		uint64_t seq = r.gpus[i].collective_seq;

		assert_true(seq >= 1 && seq <= 4);
		assert_true(r.gpu_at[i] > r.coll_at[seq - 1]);
	}
	kineto_map_free(m);
}

/* Older PyTorch wrote its nccl: ops as user_annotation: one around a
 * SendRecv kernel's launch says all-to-all, and gives the host times. */
static void test_annotation_host_op(void **state)
{
	kineto_file_t *f = new_file(3, 8);
	struct recs r;
	kineto_map_t *m;

	(void)state;
	add(f, KINETO_CAT_USER_ANNOTATION, "nccl:all_to_all", 10, 100000, 50000, -1, -1, -1, 0);
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaLaunchKernel", 10, 120000, 5000, -1, 5, -1, 0);
	add(f, KINETO_CAT_KERNEL, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", 21, 130000, 9000, 21, 5,
	    -1, 0);
	m = map_of(f);
	collect(m, &r);
	assert_int_equal(r.ncolls, 1);
	assert_int_equal(r.colls[0].op, FSS_OP_ALLTOALL);
	assert_int_equal(r.colls[0].enter_ns, 100000);
	assert_int_equal(r.colls[0].exit_ns, 150000);
	assert_int_equal(r.figures.host_view_missing, 0);
	assert_int_equal(r.nranges, 1); /* and still a range */
	kineto_map_free(m);
}

/* Ranges: user_annotation nested on a thread (depths 0, 1), the
 * ProfilerStep#N counted; gpu_user_annotation in a domain of its own. */
static void test_ranges(void **state)
{
	kineto_file_t *f = new_file(0, 1);
	struct recs r;
	kineto_map_t *m;
	int outer = -1, inner = -1, gpu = -1;

	(void)state;
	add(f, KINETO_CAT_USER_ANNOTATION, "ProfilerStep#3", 10, 0, 100000, -1, -1, -1, 0);
	add(f, KINETO_CAT_USER_ANNOTATION, "## forward ##", 10, 10000, 20000, -1, -1, -1, 0);
	add(f, KINETO_CAT_USER_ANNOTATION, "ProfilerStep#4", 10, 100000, 100000, -1, -1, -1, 0);
	add(f, KINETO_CAT_GPU_USER_ANNOTATION, "ProfilerStep#4", 7, 110000, 90000, -1, -1, -1, 0);
	m = map_of(f);
	collect(m, &r);
	assert_int_equal(r.nranges, 4);
	for (size_t i = 0; i < r.nranges; i++) {
		const char *name = r.strings[r.ranges[i].name];

		if (r.ranges[i].domain)
			gpu = (int)i;
		else if (strcmp(name, "## forward ##") == 0)
			inner = (int)i;
		else if (strcmp(name, "ProfilerStep#3") == 0)
			outer = (int)i;
	}
	assert_true(outer >= 0 && inner >= 0 && gpu >= 0);
	assert_int_equal(r.ranges[outer].depth, 0);
	assert_int_equal(r.ranges[inner].depth, 1);
	assert_int_equal(r.ranges[inner].thread, 10);
	assert_string_equal(r.strings[r.ranges[gpu].domain], "gpu_user_annotation");
	assert_int_equal(r.figures.profiler_steps, 2); /* the GPU copy is not a step */
	assert_int_equal(r.ncolls, 0);
	assert_int_equal(r.figures.comm_ns, 0);
	assert_int_equal(r.hello.pid, 4242);
	kineto_map_free(m);
}

/* HTA's overlap by hand: two ProfilerStep# names, the last starting at
 * 100 us, so only kernels launched before it count; fractional times
 * rounded inward. comm [10.4, 50.6] -> [11, 50]; compute [30.2, 70.0] ->
 * [31, 70]; a comm kernel [60, 80] launched at 150 us is left out: comm
 * 39 us, overlap 19 us (without the rounding 40.2 and 20.4, without the
 * window 59 and 29). */
static void test_hta_overlap(void **state)
{
	kineto_file_t *f = new_file(0, 2);
	uint64_t comm = 0, overlap = 0;

	(void)state;
	add(f, KINETO_CAT_USER_ANNOTATION, "ProfilerStep#1", 10, 0, 100000, -1, -1, -1, 0);
	add(f, KINETO_CAT_USER_ANNOTATION, "ProfilerStep#2", 10, 100000, 100000, -1, -1, -1, 0);
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaLaunchKernel", 10, 5000, 1000, -1, 1, -1, 0);
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaLaunchKernel", 10, 20000, 1000, -1, 2, -1, 0);
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaLaunchKernel", 10, 150000, 1000, -1, 3, -1, 0);
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaMemcpyAsync", 10, 21000, 1000, -1, 4, -1, 0);
	add(f, KINETO_CAT_KERNEL, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7, 10400, 40200, 7, 1, -1, 0);
	add(f, KINETO_CAT_KERNEL, "void gemm<float>(float*)", 8, 30200, 39800, 8, 2, -1, 0);
	add(f, KINETO_CAT_KERNEL, "ncclDevKernel_Broadcast_RING_LL", 7, 60000, 20000, 7, 3, -1, 0);
	/* a copy is neither side */
	add(f, KINETO_CAT_GPU_MEMCPY, "Memcpy HtoD (Pageable -> Device)", 9, 0, 90000, 9, 4, -1, 0);
	assert_int_equal(kineto_figures_overlap(f, &comm, &overlap), 0);
	assert_int_equal(comm, 39000);
	assert_int_equal(overlap, 19000);
	kineto_file_free(f);
}

/* HTA's classes of kernel names (hta/utils/utils.py get_kernel_type). */
static void test_kernel_classes(void **state)
{
	(void)state;
	assert_int_equal(kineto_kernel_class_of("ncclDevKernel_AllGather_RING_LL"), KINETO_KERNEL_COMMUNICATION);
	assert_int_equal(kineto_kernel_class_of("void foo::ncclKernelBar()"), KINETO_KERNEL_COMMUNICATION);
	assert_int_equal(kineto_kernel_class_of("hipMemcpy"), KINETO_KERNEL_COMMUNICATION); /* ^hip comes first */
	assert_int_equal(kineto_kernel_class_of("Memset (Device)"), KINETO_KERNEL_MEMORY);
	assert_int_equal(kineto_kernel_class_of("Memcpy DtoD (Device -> Device)"), KINETO_KERNEL_MEMORY);
	assert_int_equal(kineto_kernel_class_of("Context Sync"), KINETO_KERNEL_OTHER);
	assert_int_equal(kineto_kernel_class_of("void at::native::elementwise_kernel<128>"), KINETO_KERNEL_COMPUTATION);
	assert_true(kineto_is_profiler_step("ProfilerStep#12"));
	assert_false(kineto_is_profiler_step("ProfilerStep#"));
	assert_false(kineto_is_profiler_step("ProfilerStep"));
	assert_int_equal(kineto_op_of_name("all_gather_into_tensor_coalesced"), FSS_OP_ALLGATHER);
	assert_int_equal(kineto_op_of_name("_reduce_scatter_base"), FSS_OP_REDUCESCATTER);
	assert_int_equal(kineto_op_of_name("c10d::alltoall_base_"), FSS_OP_ALLTOALL);
	assert_int_equal(kineto_op_of_name("nccl:all_to_all"), FSS_OP_ALLTOALL);
	assert_int_equal(kineto_op_of_name("recv"), FSS_OP_RECV);
	assert_int_equal(kineto_op_of_name("record_param_comms"), 0);
	assert_int_equal(kineto_dtype_of_kernel("ncclKernel_ReduceScatter_RING_SIMPLE_Sum_bf16(x)"),
			 FSS_DTYPE_BFLOAT16);
	assert_int_equal(kineto_dtype_of_arg("Float8_e4m3fn"), FSS_DTYPE_FLOAT8E4M3);
}

/* NCCL kernels that share one launch (an ncclGroupStart / End of several
 * calls, as fsdpscope's export writes it) are one fss group, its record after
 * its last call; a coalesced op's one kernel (what PyTorch writes for
 * allgather_into_tensor_coalesced) is one call, in no group. */
static void test_shared_launch_group(void **state)
{
	kineto_file_t *f = new_file(0, 2);
	uint32_t a1 = args(f, "allgather_into_tensor_coalesced", "BFloat16", 100, 200, "0", "[0, 1]", 2);
	uint32_t a2 = args(f, "allgather_into_tensor_coalesced", "BFloat16", 300, 600, "0", "[0, 1]", 2);
	const char *k = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
	struct recs r;
	kineto_map_t *m;

	(void)state;
	add(f, KINETO_CAT_CPU_OP, "record_param_comms", 1, 1000000, 100000, -1, -1, 10, a1);
	add(f, KINETO_CAT_CPU_OP, "record_param_comms", 1, 1200000, 100000, -1, -1, 10, a2);
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaLaunchKernel", 1, 1050000, 0, -1, 10, 10, 0);
	add(f, KINETO_CAT_KERNEL, k, 7, 2000000, 5000, 7, 10, 10, a1);
	add(f, KINETO_CAT_KERNEL, k, 7, 2000000, 5000, 7, 10, 10, a2);
	/* a coalesced op of PyTorch: one op, one launch, one kernel */
	add(f, KINETO_CAT_CPU_OP, "record_param_comms", 1, 3000000, 100000, -1, -1, 12, a1);
	add(f, KINETO_CAT_CUDA_RUNTIME, "cudaLaunchKernel", 1, 3050000, 0, -1, 12, 12, 0);
	add(f, KINETO_CAT_KERNEL, k, 7, 4000000, 5000, 7, 12, 12, a1);
	m = map_of(f);
	collect(m, &r);
	assert_int_equal(r.ncolls, 3);
	assert_int_equal(r.colls[0].group_id, 1);
	assert_int_equal(r.colls[1].group_id, 1);
	assert_int_equal(r.colls[2].group_id, 0);
	assert_int_equal(r.colls[0].count + r.colls[1].count, 400);
	assert_int_equal(r.ngroups, 1);
	assert_int_equal(r.groups[0].group_id, 1);
	assert_int_equal(r.groups[0].calls, 2);
	assert_int_equal(r.groups[0].end_enter_ns, 1050000); /* the shared launch */
	assert_true(r.group_at[0] > r.coll_at[1] && r.group_at[0] < r.coll_at[2]);
	assert_int_equal(kineto_map_info(m)->groups, 1);
	assert_int_equal(r.figures.allgather_kernels, 3); /* kernels are counted as the file has them */
	kineto_map_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_args_and_groups), cmocka_unit_test(test_kernel_names_and_inferred),
	    cmocka_unit_test(test_host_view),	    cmocka_unit_test(test_annotation_host_op),
	    cmocka_unit_test(test_ranges),	    cmocka_unit_test(test_hta_overlap),
	    cmocka_unit_test(test_kernel_classes),    cmocka_unit_test(test_shared_launch_group),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
