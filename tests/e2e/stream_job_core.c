/*
 * tests/e2e/stream_job_core.c - the job of stream_job: failing, communicators, calls,
 * steps and the truth file, shared by every setup (stream_job.h).
 */
#include "stream_job.h"

/* ---- the model ------------------------------------------------------------ */

/* One block, in module.parameters() order of torchtitan's TransformerBlock. */
const struct sj_param sj_block_params[] = {
	{"attention.wq", SJ_HIDDEN, SJ_HIDDEN, TP_COLWISE, 0},
	{"attention.wk", SJ_HIDDEN, SJ_HIDDEN, TP_COLWISE, 0},
	{"attention.wv", SJ_HIDDEN, SJ_HIDDEN, TP_COLWISE, 0},
	{"attention.wo", SJ_HIDDEN, SJ_HIDDEN, TP_ROWWISE, 0},
	{"feed_forward.w1", SJ_FFN, SJ_HIDDEN, TP_COLWISE, 0},
	{"feed_forward.w2", SJ_HIDDEN, SJ_FFN, TP_ROWWISE, 0},
	{"feed_forward.w3", SJ_FFN, SJ_HIDDEN, TP_COLWISE, 0},
	{"attention_norm", SJ_HIDDEN, 1, TP_REPLICATE, 1},
	{"ffn_norm", SJ_HIDDEN, 1, TP_REPLICATE, 1},
};

const struct sj_param sj_tok_embeddings = {"tok_embeddings", SJ_VOCAB, SJ_HIDDEN, TP_COLWISE, 0};
const struct sj_param sj_final_norm = {"norm", SJ_HIDDEN, 1, TP_REPLICATE, 1};
const struct sj_param sj_output = {"output", SJ_VOCAB, SJ_HIDDEN, TP_COLWISE, 0};

const char *const sj_role_names[ROLE_COUNT] = {
    "fsdp",    "fsdp-regather", "replicate",	    "tensor-parallel", "pipeline",
    "step",    "allreduce",	    "one-off",	    "context-parallel", "all-to-all",
    "expert-parallel"};

/* ---- failing --------------------------------------------------------------- */

int sj_rank_for_messages = -1;

void sj_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (sj_rank_for_messages >= 0)
		fprintf(stderr, "stream_job: rank %d: ", sj_rank_for_messages);
	else
		fprintf(stderr, "stream_job: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* A test program: an NCCL failure ends the rank, and the supervisor ends
 * the others (a half-run job has no truth to compare with). */
void sj_nccl(ncclResult_t res, const char *what)
{
	if (res != ncclSuccess)
		sj_die("%s: %s (%s)", what, ncclGetErrorString(res), ncclGetLastError(NULL));
}

uint64_t sj_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *sj_dtype_name(ncclDataType_t dt)
{
	switch (dt) {
	case ncclBfloat16:
		return "bf16";
	case ncclFloat32:
		return "fp32";
	case ncclFloat64:
		return "fp64";
	case ncclInt64:
		return "int64";
	case ncclInt8:
		return "int8";
	case ncclUint8:
		return "uint8";
	case ncclFloat8e4m3:
		return "fp8e4m3";
	default:
		return "?";
	}
}

size_t sj_dtype_size(ncclDataType_t dt)
{
	switch (dt) {
	case ncclBfloat16:
		return 2;
	case ncclFloat32:
		return 4;
	case ncclFloat64:
	case ncclInt64:
		return 8;
	default:
		return 1;
	}
}

/* Buffers come from two arenas, reset whenever no group is open: a grouped
 * call's buffers must stay valid until ncclGroupEnd runs it. */
void *sj_take(struct sj_job *j, int recv, size_t bytes)
{
	char *arena = recv ? j->recv_arena : j->send_arena;
	size_t *used = recv ? &j->recv_used : &j->send_used;
	size_t off = (*used + 255) & ~(size_t)255;
	if (bytes > SJ_ARENA_BYTES || off > SJ_ARENA_BYTES - bytes)
		sj_die("a call needs more than the %zu MiB buffer arena", SJ_ARENA_BYTES >> 20);
	*used = off + bytes;
	return arena + off;
}

void sj_before_call(struct sj_job *j, struct sj_comm *c)
{
	if (!j->in_group)
		j->send_used = j->recv_used = 0;
	c->calls++;
}

void sj_count_event(struct sj_job *j, struct sj_comm *c, enum sj_event_class cls)
{
	if (j->in_group) {
		if (c->group_seen & (1u << cls))
			return;
		c->group_seen |= 1u << cls;
	}
	c->cur[cls]++;
}

void sj_log(struct sj_job *j, const struct sj_comm *c, const char *op, size_t count, ncclDataType_t dt,
		   const char *extra)
{
	if (!j->log)
		return;
	fprintf(j->log, "%d %s %s %s %zu %s%s%s%s\n", j->step, j->phase, c->name, op, count, sj_dtype_name(dt),
		j->in_group ? " grouped" : "", extra ? " " : "", extra ? extra : "");
}

void sj_count_gather(struct sj_job *j, enum sj_kind kind)
{
	if (kind == KIND_OTHER || kind == KIND_GRAD)
		return;
	if (j->in_group) {
		if (!j->group_param_calls)
			j->group_kind = kind;
		j->group_param_calls++;
		return;
	}
	j->cur.param_gathers++;
	j->cur.param_gather_calls++;
	if (kind == KIND_PARAM_FORWARD)
		j->cur.forward_gathers++;
	else if (kind == KIND_PARAM_BACKWARD)
		j->cur.backward_gathers++;
}

void sj_allgather(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, enum sj_kind kind)
{
	sj_before_call(j, c);
	size_t es = sj_dtype_size(dt);
	void *send = sj_take(j, 0, count * es);
	void *recv = sj_take(j, 1, count * es * (size_t)c->nranks);
	sj_log(j, c, "AllGather", count, dt, NULL);
	sj_count_event(j, c, EV_ALLGATHER);
	sj_nccl(ncclAllGather(send, recv, count, dt, c->nccl, NULL), "ncclAllGather");
	sj_count_gather(j, kind);
}

void sj_reduce_scatter(struct sj_job *j, struct sj_comm *c, size_t recvcount, ncclDataType_t dt,
			      enum sj_kind kind)
{
	sj_before_call(j, c);
	size_t es = sj_dtype_size(dt);
	void *send = sj_take(j, 0, recvcount * es * (size_t)c->nranks);
	void *recv = sj_take(j, 1, recvcount * es);
	sj_log(j, c, "ReduceScatter", recvcount, dt, NULL);
	sj_count_event(j, c, EV_REDUCE_SCATTER);
	sj_nccl(ncclReduceScatter(send, recv, recvcount, dt, ncclSum, c->nccl, NULL), "ncclReduceScatter");
	if (kind == KIND_GRAD)
		j->cur.grad_reduce_scatters++;
}

/* step_mark: a collective issued once per optimizer step (it tells steps
 * from micro-batches). */
void sj_allreduce(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, ncclRedOp_t op,
			 int step_mark)
{
	sj_before_call(j, c);
	void *buf = sj_take(j, 1, count * sj_dtype_size(dt));
	sj_log(j, c, "AllReduce", count, dt, op == ncclMax ? "max" : NULL);
	sj_count_event(j, c, EV_ALLREDUCE);
	sj_nccl(ncclAllReduce(buf, buf, count, dt, op, c->nccl, NULL), "ncclAllReduce");
	if (step_mark)
		j->cur.step_marks++;
}

void sj_broadcast(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, int root)
{
	sj_before_call(j, c);
	void *buf = sj_take(j, 1, count * sj_dtype_size(dt));
	sj_log(j, c, "Broadcast", count, dt, NULL);
	sj_count_event(j, c, EV_BROADCAST);
	sj_nccl(ncclBroadcast(buf, buf, count, dt, root, c->nccl, NULL), "ncclBroadcast");
}

void sj_send(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, int peer)
{
	sj_before_call(j, c);
	void *buf = sj_take(j, 0, count * sj_dtype_size(dt));
	char extra[32];
	snprintf(extra, sizeof extra, "to %d", peer);
	sj_log(j, c, "Send", count, dt, extra);
	sj_count_event(j, c, EV_P2P);
	sj_nccl(ncclSend(buf, count, dt, peer, c->nccl, NULL), "ncclSend");
}

void sj_recv(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, int peer)
{
	sj_before_call(j, c);
	void *buf = sj_take(j, 1, count * sj_dtype_size(dt));
	char extra[32];
	snprintf(extra, sizeof extra, "from %d", peer);
	sj_log(j, c, "Recv", count, dt, extra);
	sj_count_event(j, c, EV_P2P);
	sj_nccl(ncclRecv(buf, count, dt, peer, c->nccl, NULL), "ncclRecv");
}

void sj_group_start(struct sj_job *j)
{
	if (j->in_group)
		sj_die("nested group (a bug of this program)");
	j->send_used = j->recv_used = 0;
	if (j->log)
		fprintf(j->log, "%d %s GroupStart\n", j->step, j->phase);
	sj_nccl(ncclGroupStart(), "ncclGroupStart");
	j->in_group = 1;
	j->group_param_calls = 0;
	for (int i = 0; i < j->ncomms; i++)
		j->comms[i].group_seen = 0;
}

void sj_group_end(struct sj_job *j)
{
	sj_nccl(ncclGroupEnd(), "ncclGroupEnd");
	if (j->log)
		fprintf(j->log, "%d %s GroupEnd\n", j->step, j->phase);
	j->in_group = 0;
	if (j->group_param_calls) { /* the calls of one group are one gather event */
		j->cur.param_gathers++;
		j->cur.param_gather_calls += j->group_param_calls;
		if (j->group_kind == KIND_PARAM_FORWARD)
			j->cur.forward_gathers++;
		else if (j->group_kind == KIND_PARAM_BACKWARD)
			j->cur.backward_gathers++;
	}
	j->group_param_calls = 0;
}

/* Emulated compute: a busy wait, so that the rank holds its CPU the way a
 * GPU stays busy; no math is done. */
void sj_compute(const struct sj_job *j, int matmuls)
{
	if (matmuls <= 0 || j->opt->compute_us <= 0)
		return;
	uint64_t end = sj_now_ns() + (uint64_t)matmuls * (uint64_t)j->opt->compute_us * 1000u;
	while (sj_now_ns() < end)
		;
}

struct sj_comm *sj_comm_slot(struct sj_job *j, enum sj_role role, const char *name)
{
	if (j->ncomms == SJ_MAX_COMMS)
		sj_die("too many communicators");
	struct sj_comm *c = &j->comms[j->ncomms++];
	memset(c, 0, sizeof *c);
	c->role = role;
	c->name = name;
	return c;
}

void sj_comm_describe(struct sj_comm *c)
{
	sj_nccl(ncclCommCount(c->nccl, &c->nranks), "ncclCommCount");
	sj_nccl(ncclCommUserRank(c->nccl, &c->rank), "ncclCommUserRank");
}

/* The default process group's communicator, as ProcessGroupNCCL makes it. */
struct sj_comm *sj_comm_world(struct sj_job *j, enum sj_role role, const char *name)
{
	struct sj_comm *c = sj_comm_slot(j, role, name);
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	sj_nccl(ncclCommInitRankConfig(&c->nccl, j->world, j->id, j->rank, &config), "ncclCommInitRankConfig");
	sj_comm_describe(c);
	return c;
}

/* One mesh dimension: every rank of the parent calls ncclCommSplit once,
 * with the index of its group as the color and its rank as the key (so a
 * group's ranks keep the parent's order). */
struct sj_comm *sj_comm_split(struct sj_job *j, struct sj_comm *parent, int color, enum sj_role role,
				     const char *name)
{
	struct sj_comm *c = sj_comm_slot(j, role, name);
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	sj_nccl(ncclCommSplit(parent->nccl, color, parent->rank, &c->nccl, &config), "ncclCommSplit");
	if (!c->nccl)
		sj_die("ncclCommSplit gave no communicator");
	sj_comm_describe(c);
	return c;
}

void sj_step_begin(struct sj_job *j, int step)
{
	j->step = step;
	memset(&j->cur, 0, sizeof j->cur);
	for (int i = 0; i < j->ncomms; i++)
		memset(j->comms[i].cur, 0, sizeof j->comms[i].cur);
	j->phase = "forward";
#ifdef STREAM_JOB_HAVE_NVTX
	if (j->opt->nvtx) {
		/* The PyTorch profiler's step range (record_function under emit_nvtx),
		 * in the default domain. */
		char name[32];
		snprintf(name, sizeof name, "ProfilerStep#%d", step);
		nvtxRangePushA(name);
	}
#endif
}

void sj_step_end(struct sj_job *j)
{
#ifdef STREAM_JOB_HAVE_NVTX
	if (j->opt->nvtx)
		nvtxRangePop();
#endif
	j->last = j->cur;
	for (int i = 0; i < j->ncomms; i++)
		memcpy(j->comms[i].last, j->comms[i].cur, sizeof j->comms[i].cur);
}

/* ---- the truth ------------------------------------------------------------- */
void sj_truth_init(struct sj_truth *t)
{
	memset(t, 0, sizeof *t);
	t->forward_allgathers = t->backward_allgathers = SJ_NULL;
	t->repeating_units = t->gathers_per_unit = SJ_NULL;
	t->fetches = t->calls = SJ_NULL;
	t->tp_degree = 1;
}

void sj_note(struct sj_truth *t, const char *fmt, ...)
{
	size_t len = strlen(t->note);
	if (len && len + 2 < sizeof t->note) {
		strcat(t->note, "; ");
		len += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->note + len, sizeof t->note - len, fmt, ap);
	va_end(ap);
}

void sj_truth_extra(struct sj_truth *t, const char *fmt, ...)
{
	size_t len = strlen(t->extra);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->extra + len, sizeof t->extra - len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n + 3 >= sizeof t->extra - len)
		sj_die("the truth's extra keys pass %zu bytes", sizeof t->extra);
	strcat(t->extra, ",\n");
}

/* Each communicator of rank 0 that carried a call, with its role and its
 * events of the last step by class, as report --json's communicators[]. */
static void sj_truth_comms(FILE *f, const struct sj_job *j)
{
	static const char *const classes[EV_CLASSES] = {"allgathers", "reduce_scatters", "allreduces",
							"broadcasts", "point_to_point", "alltoalls"};
	fprintf(f, "  \"comms\": [");
	int first = 1;
	for (int i = 0; i < j->ncomms; i++) {
		const struct sj_comm *c = &j->comms[i];
		if (!c->calls)
			continue;
		fprintf(f, "%s\n    {\"name\": \"%s\", \"role\": \"%s\", \"nranks\": %d, \"per_step\": {", first ? "" : ",",
			c->name, sj_role_names[c->role], c->nranks);
		for (int k = 0; k < EV_CLASSES; k++)
			fprintf(f, "%s\"%s\": %d", k ? ", " : "", classes[k], c->last[k]);
		fprintf(f, "}}");
		first = 0;
	}
	fprintf(f, "\n  ],\n");
}

void sj_json_int(FILE *f, const char *key, int v, int last)
{
	if (v == SJ_NULL)
		fprintf(f, "  \"%s\": null%s\n", key, last ? "" : ",");
	else
		fprintf(f, "  \"%s\": %d%s\n", key, v, last ? "" : ",");
}

void sj_json_string(FILE *f, const char *key, const char *v, int last)
{
	if (!v || !*v) {
		fprintf(f, "  \"%s\": null%s\n", key, last ? "" : ",");
		return;
	}
	fprintf(f, "  \"%s\": \"", key);
	for (const char *p = v; *p; p++) {
		if (*p == '"' || *p == '\\')
			fputc('\\', f);
		if ((unsigned char)*p >= 0x20)
			fputc(*p, f);
	}
	fprintf(f, "\"%s\n", last ? "" : ",");
}

/* Written to a temporary name and renamed into place: a reader never sees
 * half a truth. */
void sj_truth_write(const struct sj_job *j, const struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", o->truth_path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		sj_die("cannot write %s: %s", tmp, strerror(errno));
	fprintf(f, "{\n");
	sj_json_string(f, "setup", o->setup_name, 0);
	sj_json_int(f, "ranks", o->nranks, 0);
	sj_json_int(f, "steps", o->steps, 0);
	sj_json_int(f, "layers", o->layers, 0);
	sj_json_string(f, "verdict", t->bucketed ? "bucketed" : "diagnosed", 0);
	sj_json_int(f, "fsdp_allgathers_per_step", t->fsdp_allgathers, 0);
	sj_json_int(f, "forward_allgathers", t->forward_allgathers, 0);
	sj_json_int(f, "backward_allgathers", t->backward_allgathers, 0);
	sj_json_int(f, "reduce_scatters", t->reduce_scatters, 0);
	sj_json_int(f, "microbatches", t->microbatches, 0);
	fprintf(f, "  \"microbatches_told\": %s,\n", t->microbatches_told ? "true" : "false");
	sj_json_int(f, "repeating_units", t->repeating_units, 0);
	sj_json_int(f, "gathers_per_unit", t->gathers_per_unit, 0);
	sj_json_string(f, "reshard", t->reshard, 0);
	fprintf(f, "  \"errors\": [%s],\n", t->wrap_too_fine ? "\"wrap-too-fine\"" : "");
	sj_json_int(f, "tp_degree", t->tp_degree, 0);
	/* Roles: communicators of rank 0 that carried any call, by what the
	 * setup uses them for (the world communicator that is only split is
	 * not counted). */
	int roles[ROLE_COUNT] = {0};
	for (int i = 0; i < j->ncomms; i++)
		if (j->comms[i].calls)
			roles[j->comms[i].role]++;
	fprintf(f, "  \"roles\": {");
	int first = 1;
	for (int r = 0; r < ROLE_COUNT; r++) {
		if (!roles[r])
			continue;
		fprintf(f, "%s\"%s\": %d", first ? "" : ", ", sj_role_names[r], roles[r]);
		first = 0;
	}
	fprintf(f, "},\n");
	sj_json_int(f, "fetches_per_step", t->fetches, 0);
	sj_json_int(f, "calls_per_step", t->calls, 0);
	fprintf(f, "  \"params\": %" PRIu64 ",\n", t->params);
	sj_truth_comms(f, j);
	fputs(t->extra, f);
	sj_json_string(f, "note", t->note, 1);
	fprintf(f, "}\n");
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		fclose(f);
		sj_die("cannot write %s: %s", tmp, strerror(errno));
	}
	fclose(f);
	if (rename(tmp, o->truth_path) != 0)
		sj_die("cannot rename %s to %s: %s", tmp, o->truth_path, strerror(errno));
}


void sj_alltoall(struct sj_job *j, struct sj_comm *c, const size_t *send, const size_t *recv, ncclDataType_t dt)
{
	sj_group_start(j);
	for (int r = 0; r < c->nranks; r++) {
		sj_send(j, c, send[r], dt, r);
		sj_recv(j, c, recv[r], dt, r);
	}
	sj_group_end(j);
}
