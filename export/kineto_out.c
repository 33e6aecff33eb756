/*
 * kineto_out.c - one Kineto-shaped trace file per rank (kineto_out.h).
 */
#include "export/kineto_out.h"

#include "export/trace_events.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The streams of the export, as Kineto numbers them (small integers): the
 * compute leaves on PyTorch's default stream, a call's cudaStream_t (no
 * GPU data) from KO_STREAM_CALLS on. */
#define KO_STREAM_COMPUTE 7
#define KO_STREAM_CALLS 20

/* Correlation ids: a call's is twice its number (a call in a group: its group's first
 * call's, the one launch of the group), a compute kernel's odd. */
#define KO_CALL_CORRELATION(number) ((int64_t)(number)*2)

struct ko_comm {
	uint64_t id_hash;
	int32_t nranks;
	int32_t rank;		       /* the source's rank in it */
	char name[SOURCE_TEXT_MAX];    /* the job's (commName), "" */
	char pg_name[SOURCE_TEXT_MAX]; /* the name on the events: commName, else the id */
	char *ranks;		       /* its members' global ranks "[0, 1]" once all are known, NULL */
	uint64_t ranks_tried;	       /* the export's comm_version when they were last looked for */
};

struct ko_source {
	int open;
	FILE *f;
	trace_events_t *te;
	char tmp[64];
	uint32_t pid;
	int32_t rank; /* the view's, latest seen */
	int64_t realtime_offset;
	uint64_t events;
	uint64_t compute; /* compute kernels so far */
	int64_t launched; /* the correlation of the latest launch written */
	struct ko_comm *comms;
	size_t ncomms, comms_cap;
	uint64_t *streams; /* cudaStream_t of calls, index + KO_STREAM_CALLS */
	size_t nstreams, streams_cap;
};

struct kineto_export {
	int dirfd;
	char *dir;
	int made_dir;
	struct ko_source *src; /* by source id */
	size_t nsrc;
	size_t files;
	uint64_t comm_version; /* communicators taken in so far: members may have become known */
	int finished;
	int error;
};

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*v, c * size);
	if (!p)
		return -ENOMEM;
	memset((char *)p + *cap * size, 0, (c - *cap) * size);
	*v = p;
	*cap = c;
	return 0;
}

/* dir holds nothing (but . and ..)? 1, 0, or -errno. */
static int dir_empty(int fd)
{
	int dup_fd = dup(fd);
	DIR *d;
	struct dirent *e;
	int empty = 1;

	if (dup_fd < 0)
		return -errno;
	d = fdopendir(dup_fd);
	if (!d) {
		close(dup_fd);
		return -errno;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			empty = 0;
			break;
		}
	closedir(d);
	return empty;
}

int kineto_export_new(kineto_export_t **out, const char *dir)
{
	kineto_export_t *k = calloc(1, sizeof(*k));
	int err = -ENOMEM, empty;

	*out = NULL;
	if (!k || !(k->dir = strdup(dir)))
		goto fail;
	k->dirfd = -1;
	if (mkdir(dir, 0755) == 0)
		k->made_dir = 1;
	else if (errno != EEXIST) {
		err = -errno;
		goto fail;
	}
	k->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (k->dirfd < 0) {
		err = errno == ENOTDIR && !k->made_dir ? -ENOTDIR : -errno;
		goto fail;
	}
	empty = dir_empty(k->dirfd);
	if (empty <= 0) {
		err = empty < 0 ? empty : -ENOTEMPTY;
		goto fail;
	}
	*out = k;
	return 0;
fail:
	if (k) {
		if (k->dirfd >= 0)
			close(k->dirfd);
		if (k->made_dir)
			rmdir(dir);
		free(k->dir);
	}
	free(k);
	return err;
}

static struct ko_source *ko_source(kineto_export_t *k, uint32_t id)
{
	if (grow((void **)&k->src, &k->nsrc, (size_t)id + 1, sizeof(*k->src)))
		return NULL;
	return &k->src[id];
}

static int fail(kineto_export_t *k, int rc)
{
	if (rc && !k->error)
		k->error = rc;
	return rc;
}

/* A file's pid when its process's is unknown or another file's already (two
 * hosts' processes in a merged trace): above any Linux pid (2^22). */
#define KO_PID_OTHER (1u << 30)

static int pid_taken(const kineto_export_t *k, uint32_t pid)
{
	for (size_t i = 0; i < k->nsrc; i++)
		if (k->src[i].open && k->src[i].pid == pid)
			return 1;
	return 0;
}

/* A source's file, made at its hello under a temporary name. */
static int ko_on_source(void *ctx, const struct source *src)
{
	kineto_export_t *k = ctx;
	struct ko_source *s = ko_source(k, src->id);
	int fd;

	if (!s)
		return fail(k, -ENOMEM);
	if (s->open)
		return 0;
	snprintf(s->tmp, sizeof(s->tmp), ".source-%" PRIu32 ".json.part", src->id);
	fd = openat(k->dirfd, s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(k, -errno);
	s->f = fdopen(fd, "w");
	if (!s->f) {
		close(fd);
		unlinkat(k->dirfd, s->tmp, 0);
		return fail(k, -ENOMEM);
	}
	s->te = trace_events_new(s->f);
	if (!s->te)
		return fail(k, -ENOMEM);
	s->open = 1;
	s->pid = src->pid && !pid_taken(k, src->pid) ? src->pid : KO_PID_OTHER + src->id;
	s->rank = src->rank;
	s->realtime_offset = src->realtime_offset;
	return 0;
}

static struct ko_comm *comm_of(struct ko_source *s, uint64_t id_hash)
{
	for (size_t i = 0; i < s->ncomms; i++)
		if (s->comms[i].id_hash == id_hash)
			return &s->comms[i];
	return NULL;
}

static int ko_on_comm(void *ctx, const struct source *src, const struct source_comm *c, const char *name)
{
	kineto_export_t *k = ctx;
	struct ko_source *s = ko_source(k, src->id);
	struct ko_comm *m;

	if (!s)
		return fail(k, -ENOMEM);
	s->rank = src->rank;
	m = comm_of(s, c->id_hash);
	if (!m) {
		if (grow((void **)&s->comms, &s->comms_cap, s->ncomms + 1, sizeof(*s->comms)))
			return fail(k, -ENOMEM);
		m = &s->comms[s->ncomms++];
	}
	k->comm_version++;
	if (m->id_hash != c->id_hash || m->nranks != c->nranks) {
		free(m->ranks);
		m->ranks = NULL;
	}
	m->id_hash = c->id_hash;
	m->nranks = c->nranks;
	m->rank = c->rank;
	snprintf(m->name, sizeof(m->name), "%s", name);
	if (name[0])
		snprintf(m->pg_name, sizeof(m->pg_name), "%s", name);
	else
		snprintf(m->pg_name, sizeof(m->pg_name), "%016" PRIx64, c->id_hash);
	return 0;
}

/*
 * The global ranks of communicator id_hash as "[0, 1, ...]" in its rank
 * order, when every member's records have shown it (else "" ). Sources'
 * ranks as the view knew them last.
 */
static void comm_ranks_text(const kineto_export_t *k, uint64_t id_hash, int32_t nranks, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	if (nranks <= 0)
		return;
	off += (size_t)snprintf(buf, len, "[");
	for (int32_t r = 0; r < nranks; r++) {
		int32_t global = -1;

		for (size_t i = 0; i < k->nsrc && global < 0; i++) {
			const struct ko_comm *m = comm_of(&k->src[i], id_hash);

			if (m && m->rank == r)
				global = k->src[i].rank;
		}
		if (global < 0 || off >= len) {
			buf[0] = 0;
			return;
		}
		off += (size_t)snprintf(buf + off, len - off, "%s%" PRId32, r ? ", " : "", global);
	}
	if (off + 2 > len) {
		buf[0] = 0;
		return;
	}
	snprintf(buf + off, len - off, "]");
}

/* m's members as comm_ranks_text says them, looked for again only when a
 * communicator came in since; NULL while some are not known. */
static const char *comm_ranks(kineto_export_t *k, struct ko_comm *m)
{
	size_t len;
	char *buf;

	if (m->ranks || m->ranks_tried == k->comm_version || m->nranks <= 0)
		return m->ranks;
	m->ranks_tried = k->comm_version;
	len = (size_t)m->nranks * 12 + 4;
	buf = malloc(len);
	if (!buf)
		return NULL;
	comm_ranks_text(k, m->id_hash, m->nranks, buf, len);
	if (!buf[0]) {
		free(buf);
		return NULL;
	}
	m->ranks = buf;
	return buf;
}

/* c10d's args of call c (inside an open args object). */
static void c10d_args(kineto_export_t *k, struct jw *w, const struct export_call *c)
{
	uint64_t in, out;
	struct ko_comm *m = c->rec.head.source < k->nsrc ? comm_of(&k->src[c->rec.head.source], c->comm_id) : NULL;
	const char *ranks;

	export_in_out_nelems(c->rec.op, c->rec.count, c->comm_nranks, &in, &out);
	jw_str(w, "Collective name",
	       c->rec.group_id ? export_pytorch_coalesced(c->rec.op) : export_pytorch_collective(c->rec.op));
	jw_u64(w, "In msg nelems", in);
	jw_u64(w, "Out msg nelems", out);
	jw_str(w, "dtype", export_pytorch_dtype(c->rec.dtype));
	jw_i64(w, "Group size", c->comm_nranks);
	if (m) {
		jw_str(w, "Process Group Name", m->pg_name);
		jw_str(w, "Process Group Description", m->name[0] ? m->name : "undescribed");
		ranks = comm_ranks(k, m);
		if (ranks)
			jw_str(w, "Process Group Ranks", ranks);
	}
	if (c->rec.seq)
		jw_u64(w, "Seq", c->rec.seq);
}

static int ko_on_call(void *ctx, const struct source *src, const struct export_call *c)
{
	kineto_export_t *k = ctx;
	struct ko_source *s = ko_source(k, c->rec.head.source);
	uint64_t end = c->rec.exit_ns > c->rec.enter_ns ? c->rec.exit_ns : c->rec.enter_ns;
	int64_t corr = KO_CALL_CORRELATION(c->group_first);
	struct jw *w;

	if (!s)
		return fail(k, -ENOMEM);
	if (!s->open && src && ko_on_source(k, src))
		return k->error;
	if (!s->open)
		return 0;
	if (src)
		s->rank = src->rank;
	w = trace_events_begin_event(s->te, "X", "record_param_comms", "cpu_op", c->rec.enter_ns, s->pid,
				     c->rec.thread);
	trace_events_time(w, "dur", end - c->rec.enter_ns);
	jw_open(w, "args", '{');
	jw_i64(w, "External id", corr);
	c10d_args(k, w, c);
	jw_close(w, '}');
	trace_events_end_event(s->te);
	s->events++;
	return 0;
}

/* The stream number of a kernel, as Kineto writes it. */
static int64_t stream_of(struct ko_source *s, const struct export_kernel *e)
{
	if (e->stream == EXPORT_STREAM_COMPUTE)
		return KO_STREAM_COMPUTE;
	if (e->from == EXPORT_FROM_DEVICE)
		return (int64_t)(e->stream & 0x7fffffff);
	for (size_t i = 0; i < s->nstreams; i++)
		if (s->streams[i] == e->stream)
			return KO_STREAM_CALLS + (int64_t)i;
	if (grow((void **)&s->streams, &s->streams_cap, s->nstreams + 1, sizeof(*s->streams)))
		return KO_STREAM_CALLS; /* out of memory: one stream for all */
	s->streams[s->nstreams] = e->stream;
	return KO_STREAM_CALLS + (int64_t)s->nstreams++;
}

/* A kernel's launch on the host (cudaLaunchKernel, or cudaMemcpyAsync for a
 * copy) at its launch time (job_events.h: overlap_hta_launch's rule, which
 * HTA's window reads), on the calling thread. */
static void kernel_launch(struct ko_source *s, const struct export_kernel *e, int64_t corr)
{
	const char *name =
	    e->kind == EXPORT_KERNEL_MEMCPY || e->kind == EXPORT_KERNEL_MEMSET ? "cudaMemcpyAsync" : "cudaLaunchKernel";
	struct jw *w = trace_events_begin_event(s->te, "X", name, "cuda_runtime", e->launch_ns, s->pid,
						e->thread ? e->thread : s->pid);

	trace_events_time(w, "dur", 0);
	jw_open(w, "args", '{');
	jw_i64(w, "External id", corr);
	jw_i64(w, "cbid", 211);
	jw_i64(w, "correlation", corr);
	jw_close(w, '}');
	trace_events_end_event(s->te);
}

static int ko_on_kernel(void *ctx, uint32_t source, const struct export_kernel *e)
{
	kineto_export_t *k = ctx;
	struct ko_source *s = ko_source(k, source);
	char name[128];
	const char *cat = e->kind == EXPORT_KERNEL_MEMCPY   ? "gpu_memcpy"
			  : e->kind == EXPORT_KERNEL_MEMSET ? "gpu_memset"
							    : "kernel";
	int64_t corr, stream;
	struct jw *w;

	if (!s)
		return fail(k, -ENOMEM);
	if (!s->open)
		return 0; /* no hello: no file */
	stream = stream_of(s, e);
	if (e->call) {
		/* a group's kernels share its one launch (the reader makes them one group again) */
		corr = KO_CALL_CORRELATION(e->call->group_first);
		export_nccl_kernel_name(e->call->rec.op, e->call->rec.dtype, e->call->rec.redop, name, sizeof(name));
	} else {
		corr = (int64_t)++s->compute * 2 + 1;
	}
	if (corr != s->launched)
		kernel_launch(s, e, corr);
	s->launched = corr;
	w = trace_events_begin_event(s->te, "X", e->call ? name : e->name, cat, e->start_ns, s->pid, stream);
	trace_events_time(w, "dur", e->end_ns - e->start_ns);
	jw_open(w, "args", '{');
	jw_i64(w, "External id", corr);
	jw_u64(w, "device", e->device);
	jw_i64(w, "stream", stream);
	jw_i64(w, "correlation", corr);
	if (e->call)
		c10d_args(k, w, e->call);
	jw_close(w, '}');
	trace_events_end_event(s->te);
	s->events += 2;
	return 0;
}

static void ko_on_step(void *ctx, const struct analysis_step_info *st)
{
	kineto_export_t *k = ctx;
	struct ko_source *s = ko_source(k, st->source);
	char name[40];
	struct jw *w;

	if (!s || !s->open)
		return;
	snprintf(name, sizeof(name), "ProfilerStep#%" PRIu32, st->ordinal);
	w = trace_events_begin_event(s->te, "X", name, "user_annotation", st->start_ns, s->pid, s->pid);
	trace_events_time(w, "dur", st->step_ns);
	jw_open(w, "args", '{');
	jw_u64(w, "External id", 0);
	jw_close(w, '}');
	trace_events_end_event(s->te);
	s->events++;
}

void kineto_export_sink(kineto_export_t *k, struct job_events_sink *out)
{
	memset(out, 0, sizeof(*out));
	out->ctx = k;
	out->on_source = ko_on_source;
	out->on_call = ko_on_call;
	out->on_kernel = ko_on_kernel;
	out->on_step = ko_on_step;
	out->on_comm = ko_on_comm;
}

static const struct source_summary *summary_of(const struct analysis_result *r, uint32_t id)
{
	for (uint32_t i = 0; i < r->nsources; i++)
		if (r->sources[i].source == id)
			return &r->sources[i];
	return NULL;
}

/* distributedInfo: what the job says of this rank and its groups. */
static void distributed_info(kineto_export_t *k, struct ko_source *s, int32_t rank, struct jw *w)
{
	int32_t world = 0;
	const char *ranks;

	for (size_t i = 0; i < s->ncomms; i++)
		if (s->comms[i].nranks > world)
			world = s->comms[i].nranks;
	jw_open(w, "distributedInfo", '{');
	jw_str(w, "backend", "nccl");
	jw_i64(w, "rank", rank);
	jw_i64(w, "world_size", world ? world : 1);
	jw_u64(w, "pg_count", s->ncomms);
	jw_open(w, "pg_config", '[');
	for (size_t i = 0; i < s->ncomms; i++) {
		struct ko_comm *m = &s->comms[i];

		jw_open(w, NULL, '{');
		jw_str(w, "pg_name", m->pg_name);
		jw_str(w, "pg_desc", m->name[0] ? m->name : "undescribed");
		jw_str(w, "backend_config", "cuda:nccl");
		jw_i64(w, "pg_size", m->nranks);
		m->ranks_tried = 0; /* every member's records are in now */
		ranks = comm_ranks(k, m);
		if (ranks) {
			jw_sep(w, "ranks");
			jw_raw(w, ranks, strlen(ranks));
		}
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_close(w, '}');
}

/* Close source i's file and give it its name. */
static int finish_one(kineto_export_t *k, uint32_t id, struct ko_source *s, const struct analysis_result *r)
{
	const struct source_summary *sum = summary_of(r, id);
	int32_t rank = sum ? sum->rank : s->rank;
	char name[64];
	struct jw *w;
	int rc, rc2;

	if (rank >= 0)
		s->rank = rank;
	w = trace_events_end_events(s->te);
	/* the closing keys as Kineto writes them, "key": value on lines of
	 * their own: HTA finds a file's rank with the pattern "rank":\s+N */
	w->compact = 0;
	distributed_info(k, s, s->rank, w);
	if (s->realtime_offset > 0)
		jw_i64(w, "baseTimeNanoseconds", s->realtime_offset);
	jw_str(w, "displayTimeUnit", "ms");
	if (s->rank >= 0)
		snprintf(name, sizeof(name), "rank-%" PRId32 ".json", s->rank);
	else
		snprintf(name, sizeof(name), "rank-unknown-pid%" PRIu32 ".json", s->pid);
	jw_str(w, "traceName", name);
	rc = trace_events_finish(s->te);
	rc2 = fclose(s->f);
	s->f = NULL;
	if (!rc && rc2)
		rc = -errno;
	if (rc)
		return rc;
	if (!s->events) /* a process with nothing to show (a launcher) */
		return unlinkat(k->dirfd, s->tmp, 0) ? -errno : 0;
	if (renameat2(k->dirfd, s->tmp, k->dirfd, name, RENAME_NOREPLACE)) {
		if (errno != EEXIST)
			return -errno;
		/* two processes claim the rank: keep both, say so */
		snprintf(name, sizeof(name), "rank-%" PRId32 "-pid%" PRIu32 ".json", s->rank, s->pid);
		if (renameat2(k->dirfd, s->tmp, k->dirfd, name, RENAME_NOREPLACE))
			return -errno;
		k->files++;
		return -EEXIST;
	}
	k->files++;
	return 0;
}

int kineto_export_finish(kineto_export_t *k, const struct analysis_result *r)
{
	int rc = k->error, dup = 0;

	for (size_t i = 0; i < k->nsrc && !rc; i++) {
		if (!k->src[i].open || !k->src[i].f)
			continue;
		rc = finish_one(k, (uint32_t)i, &k->src[i], r);
		if (rc == -EEXIST) {
			dup = 1;
			rc = 0;
		}
	}
	if (!rc && fsync(k->dirfd) && errno != EINVAL)
		rc = -errno;
	k->finished = !rc;
	return rc ? rc : dup ? -EEXIST : 0;
}

size_t kineto_export_files(const kineto_export_t *k)
{
	return k->files;
}

void kineto_export_free(kineto_export_t *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->nsrc; i++) {
		struct ko_source *s = &k->src[i];

		if (s->f) {
			fclose(s->f);
			unlinkat(k->dirfd, s->tmp, 0);
		}
		trace_events_free(s->te);
		for (size_t c = 0; c < s->ncomms; c++)
			free(s->comms[c].ranks);
		free(s->comms);
		free(s->streams);
	}
	if (!k->finished && k->made_dir && k->dirfd >= 0 && dir_empty(k->dirfd) == 1)
		rmdir(k->dir);
	if (k->dirfd >= 0)
		close(k->dirfd);
	free(k->src);
	free(k->dir);
	free(k);
}
