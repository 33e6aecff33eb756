/*
 * kineto_gen.c - write a one-rank, FSDP-like PyTorch profiler (Kineto)
 * trace of about N events, for the Kineto reader's benchmark
 * (bench/kineto_bench.sh) and its tests.
 *
 * usage: kineto_gen [-n EVENTS] [-l LAYERS] [-s SEED] OUT.json
 *
 * Each step is a ProfilerStep#N user_annotation over, per layer, an
 * AllGather (record_param_comms on the host, its cudaLaunchKernel, an
 * ncclDevKernel_AllGather_RING_LL kernel on the comm stream with PyTorch
 * 2.x's NCCL args) issued one layer ahead, so that it runs beside the
 * previous layer's compute kernels (aten ops, their launches, kernels on
 * the compute stream, ac2g flows), then the backward pass with a
 * ReduceScatter per layer, a memset and a memcpy. Timestamps are
 * fractional µs (ns resolution), as Kineto writes them with
 * baseTimeNanoseconds; distributedInfo has a pg_config. The same seed
 * writes the same bytes. The default, 1 M events, is about 380 MB.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMPUTE_STREAM 7
#define COMM_STREAM 20
#define PID 1386200
#define TID 1386200
#define WORLD 8
#define MAX_LAYERS 512

struct gen {
	FILE *out;
	uint64_t rng;
	uint64_t events;
	int64_t cpu;	     /* host time, ns */
	int64_t gpu_compute; /* compute stream free from, ns */
	int64_t gpu_comm;    /* comm stream free from, ns */
	int64_t external_id, correlation, seq;
	int first;
	int layers;
};

static uint64_t next_random(struct gen *g)
{
	g->rng ^= g->rng << 13;
	g->rng ^= g->rng >> 7;
	g->rng ^= g->rng << 17;
	return g->rng;
}

/* ns in [lo, hi) */
static int64_t pick(struct gen *g, int64_t lo, int64_t hi) { return lo + (int64_t)(next_random(g) % (uint64_t)(hi - lo)); }

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* "1234.567": ns as fractional µs */
static void put_us(struct gen *g, const char *key, int64_t ns)
{
	fprintf(g->out, "\"%s\": %" PRId64 ".%03" PRId64, key, ns / 1000, ns % 1000);
}

static void begin(struct gen *g)
{
	fputs(g->first ? "\n  {\n" : ",\n  {\n", g->out);
	g->first = 0;
	g->events++;
}

static void host_op(struct gen *g, const char *cat, const char *name, int64_t ts, int64_t dur, const char *args)
{
	begin(g);
	fprintf(g->out, "    \"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d,\n    ", cat, name, PID, TID);
	put_us(g, "ts", ts);
	fputs(", ", g->out);
	put_us(g, "dur", dur);
	fprintf(g->out, ",\n    \"args\": {\n      %s\n    }\n  }", args);
}

static void flow(struct gen *g, char ph, int64_t ts, int pid, int tid, int64_t id)
{
	begin(g);
	fprintf(g->out, "    \"ph\": \"%c\", \"id\": %" PRId64 ", \"pid\": %d, \"tid\": %d, ", ph, id, pid, tid);
	put_us(g, "ts", ts);
	fprintf(g->out, ",\n    \"cat\": \"ac2g\", \"name\": \"ac2g\"%s\n  }", ph == 'f' ? ", \"bp\": \"e\"" : "");
}

static const char *compute_kernels[] = {
	"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
	"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
	"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
	"flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(flash::Flash_fwd_params)",
};
static const char *compute_ops[] = {"aten::mm", "aten::gelu", "aten::native_layer_norm", "aten::_flash_attention_forward"};

/* One aten op on the host, its launch, its kernel on the compute stream
 * (not before `ready`), and the ac2g flow between them. */
static void compute(struct gen *g, int k, int64_t ready)
{
	char args[1024];
	int64_t ext = ++g->external_id, corr = ++g->correlation;
	int64_t op_ts = g->cpu, op_dur = pick(g, 20000, 60000);
	/* the shapes and scalars that record_shapes=True writes, as much of a real op's bytes as its name */
	snprintf(args, sizeof(args),
		 "\"External id\": %" PRId64 ",\"Record function id\": 0, \"Concrete Inputs\": [\"\", \"\", \"1\", \"1\"], "
		 "\"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", \"Scalar\", \"Scalar\"], "
		 "\"Input Strides\": [[4096, 1], [1, 4096], [], []], \"Input Dims\": [[8192, 4096], [4096, 4096], [], []], "
		 "\"Ev Idx\": %" PRId64 ", \"Sequence number\": %" PRId64 ", \"Fwd thread id\": 0, "
		 "\"Module Hierarchy\": \"FSDPTransformer.layers.%d.FSDPBlock.mlp.Linear\", "
		 "\"Call stack\": \"torch/nn/modules/linear.py(125): forward;torch/nn/modules/module.py(1747): _call_impl;model.py(88): forward\"",
		 ext, ext - 1, ext / 3, (int)(ext % 32));
	host_op(g, "cpu_op", compute_ops[k], op_ts, op_dur, args);
	int64_t launch = op_ts + op_dur / 2, launch_dur = pick(g, 4000, 9000);
	snprintf(args, sizeof(args), "\"External id\": %" PRId64 ",  \"cbid\": 211, \"correlation\": %" PRId64, ext, corr);
	host_op(g, "cuda_runtime", "cudaLaunchKernel", launch, launch_dur, args);
	flow(g, 's', launch, PID, TID, corr);
	int64_t start = max64(max64(g->gpu_compute, launch + 3000), ready), dur = pick(g, 40000, 160000);
	g->gpu_compute = start + dur;
	begin(g);
	fprintf(g->out, "    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d,\n    ", compute_kernels[k],
		COMPUTE_STREAM);
	put_us(g, "ts", start);
	fputs(", ", g->out);
	put_us(g, "dur", dur);
	fprintf(g->out,
		",\n    \"args\": {\n      \"External id\": %" PRId64 ",\n      \"queued\": 0, \"device\": 0, \"context\": 1,\n"
		"      \"stream\": %d, \"correlation\": %" PRId64 ",\n      \"registers per thread\": 168,\n"
		"      \"shared memory\": 213248,\n      \"blocks per SM\": 1.0,\n      \"warps per SM\": 12.0,\n"
		"      \"grid\": [132, 1, 1],\n      \"block\": [384, 1, 1],\n      \"est. achieved occupancy %%\": 19\n    }\n  }",
		ext, COMPUTE_STREAM, corr);
	flow(g, 'f', start, 0, COMPUTE_STREAM, corr);
	g->cpu = op_ts + op_dur + pick(g, 2000, 8000);
}

/* One collective: record_param_comms, its launch, the NCCL kernel on the comm
 * stream; returns the kernel's end. */
static int64_t collective(struct gen *g, int gather, int64_t nelems)
{
	static const char ranks[] = "[0, 1, 2, 3, 4, 5, 6, 7]";
	const char *coll = gather ? "_allgather_base" : "_reduce_scatter_base";
	int64_t in = gather ? nelems : nelems * WORLD, out = gather ? nelems * WORLD : nelems;
	char common[512], args[768];
	snprintf(common, sizeof(common),
		 "\"Collective name\": \"%s\", \"In msg nelems\": %" PRId64 ", \"Out msg nelems\": %" PRId64
		 ", \"Group size\": %d, \"dtype\": \"BFloat16\", \"In split size\": \"[]\", \"Out split size\": \"[]\", "
		 "\"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\", \"Process Group Ranks\": \"%s\"",
		 coll, in, out, WORLD, ranks);
	int64_t ext = ++g->external_id, corr = ++g->correlation, seq = ++g->seq;
	int64_t op_ts = g->cpu, op_dur = pick(g, 30000, 70000);
	snprintf(args, sizeof(args), "\"External id\": %" PRId64 ",\"Record function id\": 0, \"Ev Idx\": %" PRId64 ", %s, \"Seq\": %" PRId64 ", \"Rank\": 0", ext,
		 ext - 1, common, seq);
	host_op(g, "cpu_op", "record_param_comms", op_ts, op_dur, args);
	int64_t launch = op_ts + op_dur / 2, launch_dur = pick(g, 5000, 12000);
	snprintf(args, sizeof(args), "\"External id\": %" PRId64 ",  \"cbid\": 211, \"correlation\": %" PRId64, ext, corr);
	host_op(g, "cuda_runtime", "cudaLaunchKernel", launch, launch_dur, args);
	flow(g, 's', launch, PID, TID, corr);
	/* reduce-scatters run longer (fp32 reductions): the next gather waits behind them, exposed */
	int64_t start = max64(g->gpu_comm, launch + 4000), dur = gather ? pick(g, 150000, 700000) : pick(g, 400000, 1600000);
	g->gpu_comm = start + dur;
	begin(g);
	fprintf(g->out, "    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d,\n    ",
		gather ? "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
		       : "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
		COMM_STREAM);
	put_us(g, "ts", start);
	fputs(", ", g->out);
	put_us(g, "dur", dur);
	fprintf(g->out,
		",\n    \"args\": {\n      \"External id\": %" PRId64 ",\n      \"queued\": 0, \"device\": 0, \"context\": 1,\n"
		"      \"stream\": %d, \"correlation\": %" PRId64 ",\n      \"registers per thread\": 96,\n"
		"      \"shared memory\": 0,\n      \"blocks per SM\": 0.181818,\n      \"warps per SM\": 0.727273,\n"
		"      \"grid\": [24, 1, 1],\n      \"block\": [512, 1, 1],\n      \"est. achieved occupancy %%\": 0,\n      %s\n    }\n  }",
		ext, COMM_STREAM, corr, common);
	flow(g, 'f', start, 0, COMM_STREAM, corr);
	g->cpu = op_ts + op_dur + pick(g, 2000, 8000);
	return start + dur;
}

static void gpu_mem(struct gen *g, const char *cat, const char *name)
{
	int64_t corr = ++g->correlation, ext = ++g->external_id;
	int64_t start = max64(g->gpu_compute, g->cpu), dur = pick(g, 2000, 30000);
	g->gpu_compute = start + dur;
	begin(g);
	fprintf(g->out, "    \"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d,\n    ", cat, name, COMPUTE_STREAM);
	put_us(g, "ts", start);
	fputs(", ", g->out);
	put_us(g, "dur", dur);
	fprintf(g->out,
		",\n    \"args\": {\n      \"External id\": %" PRId64 ",\n      \"device\": 0, \"context\": 1,\n"
		"      \"stream\": %d, \"correlation\": %" PRId64 ",\n      \"bytes\": 4194304, \"memory bandwidth (GB/s)\": 812.4\n    }\n  }",
		ext, COMPUTE_STREAM, corr);
}

static void step(struct gen *g, int n)
{
	int64_t ready[MAX_LAYERS + 1];
	int64_t begin_ns = g->cpu;
	/* the ProfilerStep span is written first, as Kineto does; its length is planned */
	int64_t planned = (int64_t)g->layers * 2400000;
	char name[64], args[96];
	snprintf(name, sizeof(name), "ProfilerStep#%d", n);
	snprintf(args, sizeof(args), "\"External id\": %" PRId64 ",\"Record function id\": 0, \"Ev Idx\": %" PRId64,
		 g->external_id + 1, g->external_id);
	g->external_id++;
	host_op(g, "user_annotation", name, begin_ns, planned, args);
	g->cpu += 10000;
	gpu_mem(g, "gpu_memset", "Memset (Device)");
	ready[0] = collective(g, 1, 4194304);
	for (int l = 0; l < g->layers; l++) {
		if (l + 1 < g->layers)
			ready[l + 1] = collective(g, 1, 4194304); /* prefetch the next layer */
		for (int k = 0; k < 6; k++)
			compute(g, k % 4, ready[l]);
	}
	for (int l = g->layers - 1; l >= 0; l--) {
		int64_t gathered = collective(g, 1, 4194304);
		for (int k = 0; k < 12; k++)
			compute(g, k % 4, gathered);
		collective(g, 0, 4194304);
	}
	gpu_mem(g, "gpu_memcpy", "Memcpy DtoD (Device -> Device)");
	g->cpu = max64(begin_ns + planned, max64(g->gpu_compute, g->gpu_comm)) + 50000;
}

static void header(struct gen *g)
{
	fputs("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n", g->out);
	for (int d = 0; d < WORLD; d++)
		fprintf(g->out,
			"    {\n      \"id\": %d, \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 85029158912,\n"
			"      \"computeMajor\": 9, \"computeMinor\": 0,\n      \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048,\n"
			"      \"regsPerBlock\": 65536, \"warpSize\": 32,\n      \"sharedMemPerBlock\": 49152, \"numSms\": 132\n"
			"    , \"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472\n    }%s\n",
			d, d + 1 < WORLD ? "," : "");
	fputs("  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8, \"pg_count\": 1, \"pg_config\": "
	      "[{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", \"pg_size\": 8, "
	      "\"ranks\": [0, 1, 2, 3, 4, 5, 6, 7]}], \"nccl_version\": \"2.21.5\"},\n  \"record_shapes\": 0,\n  \"traceEvents\": [",
	      g->out);
	g->first = 1;
	static const char *meta[][2] = {{"process_name", "python3"}, {"process_labels", "CPU"}, {"thread_name", "thread 1386200 (python3)"}};
	for (size_t i = 0; i < sizeof(meta) / sizeof(meta[0]); i++) {
		begin(g);
		fprintf(g->out, "    \"name\": \"%s\", \"ph\": \"M\", \"ts\": %" PRId64 ".000, \"pid\": %d, \"tid\": %d,\n    \"args\": {\n      \"name\": \"%s\"\n    }\n  }",
			meta[i][0], g->cpu / 1000, PID, i == 2 ? TID : 0, meta[i][1]);
	}
}

int main(int argc, char **argv)
{
	struct gen g = {.rng = 88172645463325252ull, .layers = 32};
	uint64_t want = 1000000;
	int opt;
	while ((opt = getopt(argc, argv, "n:l:s:")) != -1) {
		if (opt == 'n')
			want = strtoull(optarg, NULL, 10);
		else if (opt == 'l')
			g.layers = atoi(optarg);
		else if (opt == 's')
			g.rng = strtoull(optarg, NULL, 10) | 1;
		else
			goto usage;
	}
	if (optind + 1 != argc || g.layers < 1 || g.layers > MAX_LAYERS)
		goto usage;
	g.out = fopen(argv[optind], "w");
	if (!g.out) {
		fprintf(stderr, "kineto_gen: %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	static char buffer[1 << 20];
	setvbuf(g.out, buffer, _IOFBF, sizeof(buffer));
	g.cpu = 4458677009853422ll; /* ns: ts 4458677009853.422 µs */
	g.gpu_compute = g.gpu_comm = g.cpu;
	header(&g);
	int steps = 0;
	while (g.events < want)
		step(&g, ++steps);
	fprintf(g.out, "\n  ],\n  \"traceName\": \"%s\",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": 1733270400000000000\n}\n",
		argv[optind]);
	if (fclose(g.out) != 0) {
		fprintf(stderr, "kineto_gen: %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	fprintf(stderr, "kineto_gen: %s: %" PRIu64 " events, %d steps\n", argv[optind], g.events, steps);
	return 0;
usage:
	fprintf(stderr, "usage: kineto_gen [-n EVENTS] [-l LAYERS 1..%d] [-s SEED] OUT.json\n", MAX_LAYERS);
	return 2;
}
