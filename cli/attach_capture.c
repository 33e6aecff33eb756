/*
 * attach_capture.c - targets, probes, records and connections of `fsdpscope
 * attach` (cli/attach_capture.h).
 */
#include "cli/attach_capture.h"

#include "agent/bpf/attach.h"
#include "agent/bpf/attach_records.h"
#include "cli/attach_cut.h"
#include "cli/attach_procs.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/record.h"
#include "common/trace_writer.h"
#include "common/wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Records of one process kept until its stream opens: its hello and strings. */
#define PENDING_MAX 64
/* The socket's send buffer: a burst of held records goes out in one write. */
#define STREAM_SNDBUF (4u << 20)
/* No event for this long while calls are held (a hung or idle job): decide
 * the communicators with what was seen, so that the live view shows the
 * calls (a hang among them) rather than waiting for calls that do not come. */
#define IDLE_DECIDE_MS 3000

enum proc_state {
	PROC_NO_NCCL = 0, /* looked at, no libnccl mapped (yet): looked at again */
	PROC_ATTACHED,	  /* probes placed */
	PROC_ENDED,	  /* exited, or let go */
	PROC_FAILED,	  /* probes could not be placed: not tried again */
};

struct proc {
	pid_t pid;
	enum proc_state state;
	int exited; /* the kernel said it exited (its process_exit went out) */
	int fd;	    /* the connection, -1 before the first record */
	trace_writer_t *w;
	int stream_failed;
	int stream_closed; /* its stream ended: a later record (held ones decided late) is counted, not sent */
	uint64_t late;
	unsigned char (*pending)[FSS_RECORD_MAX_BYTES];
	size_t npending;
	uint64_t records;
	char command[256];
	char root_command[64]; /* a root's argv[0] when first looked at: said if nothing was attached */
};

struct attach_capture {
	const char *prog;
	char *sink;
	pid_t *roots;
	size_t nroots;
	int all;
	attach_t *probes;
	attach_records_t *rec;
	attach_cut_t *cut; /* holds each process's calls until the others made them too (cli/attach_cut.h) */
	struct attach_cut_result cut_result; /* what the cut at detach left out */
	struct proc *procs;
	size_t nprocs, capprocs;
	int64_t last_scan_ms;
	int64_t last_event_ms;
	int idle_decided; /* decided at the last idle stretch: not again until an event */
	uint64_t events;
	char host[256];
	char first_command[256];
	int first_error; /* a stream's first failure, said once */
};

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct proc *proc_find(attach_capture_t *c, pid_t pid)
{
	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].pid == pid)
			return &c->procs[i];
	return NULL;
}

static struct proc *proc_add(attach_capture_t *c, pid_t pid)
{
	struct proc *p;

	if (c->nprocs == c->capprocs) {
		size_t nc = c->capprocs ? c->capprocs * 2 : 16;
		struct proc *np = realloc(c->procs, nc * sizeof(*np));

		if (!np)
			return NULL;
		c->procs = np;
		c->capprocs = nc;
	}
	p = &c->procs[c->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->fd = -1;
	return p;
}

/* ---- streams: one connection per process into the session ---- */

static void stream_fail(attach_capture_t *c, struct proc *p, int err)
{
	if (!c->first_error) {
		c->first_error = err;
		fprintf(stderr,
			"%s: cannot send the records of pid %d to the session: %s (its later records are lost)\n",
			c->prog, (int)p->pid, fss_strerror(err));
	}
	p->stream_failed = 1;
}

static int stream_open(attach_capture_t *c, struct proc *p)
{
	struct trace_writer_options wo = {.features = FSS_FEATURE_UPROBE | FSS_FEATURE_ENTER};
	struct wire_address a;
	int err, size = STREAM_SNDBUF;

	err = wire_address_parse(c->sink, &a);
	if (!err)
		err = wire_connect(&a, 5000, &p->fd);
	if (err) {
		p->fd = -1;
		return err;
	}
	/* A larger buffer than the default is a convenience, not a need. */
	if (setsockopt(p->fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
		(void)setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	err = trace_writer_open_fd(&p->w, p->fd, &wo);
	if (err) {
		close(p->fd);
		p->fd = -1;
		p->w = NULL;
		return err;
	}
	for (size_t i = 0; i < p->npending && !err; i++)
		err = trace_writer_append(p->w, p->pending[i]);
	free(p->pending);
	p->pending = NULL;
	p->npending = 0;
	return err;
}

/* The acks the session sends back: read and let go (attach keeps no copy
 * to resend: the session is in this process, so a connection cannot fail
 * and come back the way an agent's can). */
static void stream_drain_acks(struct proc *p)
{
	unsigned char buf[4096];

	if (p->fd < 0)
		return;
	while (recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

static void stream_close(struct proc *p)
{
	if (p->w || p->fd >= 0)
		p->stream_closed = 1;
	if (p->w)
		(void)trace_writer_close(p->w); /* its trace_end: the stream ended as its writer meant */
	p->w = NULL;
	if (p->fd >= 0) {
		stream_drain_acks(p);
		close(p->fd);
	}
	p->fd = -1;
	free(p->pending);
	p->pending = NULL;
	p->npending = 0;
}

/* The cut lets a record go: into its process's stream. */
static void on_cut_record(void *ctx, size_t slot, const void *record)
{
	attach_capture_t *c = ctx;
	struct proc *p = &c->procs[slot];
	int err;

	if (!p->w || p->stream_failed)
		return;
	err = trace_writer_append(p->w, record);
	if (err)
		stream_fail(c, p, err);
	else
		p->records++;
}

static int on_record(void *ctx, uint32_t pid, const void *record)
{
	attach_capture_t *c = ctx;
	const struct fss_record_head *h = record;
	struct proc *p = proc_find(c, (pid_t)pid);
	int err;

	if (!p || p->stream_failed)
		return 0;
	if (p->stream_closed) {
		p->late++;
		return 0;
	}
	if (!p->w) {
		/* a process that ends without having made a call is no source */
		if (h->type == FSS_REC_PROCESS_END || h->type == FSS_REC_PROCESS_EXIT)
			return 0;
		if (h->type == FSS_REC_PROCESS_HELLO || h->type == FSS_REC_STRING) {
			if (!p->pending && !(p->pending = calloc(PENDING_MAX, sizeof(*p->pending))))
				return -ENOMEM;
			if (p->npending == PENDING_MAX || h->size > FSS_RECORD_MAX_BYTES) {
				stream_fail(c, p, -E2BIG);
				return 0;
			}
			memcpy(p->pending[p->npending++], record, h->size);
			return 0;
		}
		err = stream_open(c, p);
		if (err) {
			stream_fail(c, p, err);
			return 0;
		}
	}
	/* -ENOMEM: the record went uncut */
	(void)attach_cut_record(c->cut, (size_t)(p - c->procs), record);
	return 0;
}

/* ---- probe events ---- */

static int on_event(void *ctx, const struct attach_event *ev)
{
	attach_capture_t *c = ctx;
	struct proc *p;
	int err;

	c->events++;
	c->last_event_ms = clock_mono_ms();
	c->idle_decided = 0;
	err = attach_records_event(c->rec, ev);
	if (err)
		return err;
	if (ev->fn == ATTACH_FN_PROCESS_EXIT && (p = proc_find(c, (pid_t)ev->pid)) && p->state == PROC_ATTACHED)
		p->exited = 1;
	return 0;
}

/* ---- targets ---- */

/* Attach pid if it maps libnccl; a process without one is looked at again at the next scan. */
static int try_attach(attach_capture_t *c, pid_t pid, int said_missing)
{
	struct proc *p = proc_find(c, pid);
	struct attach_proc_info info;
	struct attach_process ap;
	struct attach_target *t;
	char err[1024] = "";
	int rc;

	if (pid == getpid() || (p && p->state != PROC_NO_NCCL))
		return 0;
	if (!p && !(p = proc_add(c, pid)))
		return -ENOMEM;
	if (attach_proc_read(pid, &info) || info.is_thread) {
		p->state = PROC_ENDED;
		return 0;
	}
	if (!p->root_command[0])
		snprintf(p->root_command, sizeof(p->root_command), "%.*s", (int)sizeof(p->root_command) - 1,
			 info.command);
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	rc = attach_pid(c->probes, pid, t, err, sizeof(err));
	if (rc == -ENOENT || rc == -ESRCH) {
		if (rc == -ESRCH)
			p->state = PROC_ENDED;
		else if (said_missing)
			fprintf(stderr, "%s: pid %d (%s): %s\n", c->prog, (int)pid, info.command, err);
		free(t);
		return 0;
	}
	if (rc) {
		p->state = PROC_FAILED;
		fprintf(stderr, "%s: pid %d (%s): not attached: %s\n", c->prog, (int)pid, info.command,
			err[0] ? err : fss_strerror(rc));
		free(t);
		return 0;
	}
	p->state = PROC_ATTACHED;
	snprintf(p->command, sizeof(p->command), "%.*s", (int)sizeof(p->command) - 1, info.cmdline);
	if (!c->first_command[0])
		snprintf(c->first_command, sizeof(c->first_command), "%.*s", (int)sizeof(c->first_command) - 1,
			 info.cmdline);
	fprintf(stderr, "%s: attached pid %d (%s): %s, %u functions, %u probes%s%s%s\n", c->prog, (int)pid,
		info.command, t->opened, t->functions, t->probes, t->missing[0] ? " (this NCCL has no " : "",
		t->missing, t->missing[0] ? ")" : "");
	memset(&ap, 0, sizeof(ap));
	ap.pid = (uint32_t)pid;
	ap.ppid = (uint32_t)info.ppid;
	ap.rank = info.rank;
	ap.local_rank = info.local_rank;
	ap.world_size = info.world_size;
	ap.slurm_procid = info.slurm_procid;
	ap.ompi_rank = info.ompi_rank;
	ap.command = info.command;
	ap.host = c->host;
	ap.mono_ns = clock_ns(CLOCK_MONOTONIC);
	ap.realtime_ns = clock_ns(CLOCK_REALTIME);
	free(t);
	rc = attach_records_add(c->rec, &ap);
	return rc == -EEXIST ? 0 : rc;
}

static int scan(attach_capture_t *c)
{
	pid_t *pids = NULL;
	size_t n = 0;
	int err = 0;

	c->last_scan_ms = clock_mono_ms();
	if (c->all) {
		err = attach_proc_all(&pids, &n);
		for (size_t i = 0; !err && i < n; i++)
			err = try_attach(c, pids[i], 0);
		free(pids);
		return err;
	}
	for (size_t r = 0; !err && r < c->nroots; r++) {
		if (!attach_proc_alive(c->roots[r]))
			continue;
		err = try_attach(c, c->roots[r], 0);
		if (err)
			break;
		err = attach_proc_descendants(c->roots[r], &pids, &n);
		for (size_t i = 0; !err && i < n; i++)
			err = try_attach(c, pids[i], 0);
		free(pids);
		pids = NULL;
	}
	return err;
}

/* ---- the CLI's calls ---- */

int attach_capture_check(const struct attach_capture_options *o)
{
	char err[1024] = "";
	int rc = attach_available(err, sizeof(err));

	if (rc) {
		fprintf(stderr, "%s: %s\n", o->prog, err[0] ? err : fss_strerror(rc));
		return rc;
	}
	for (size_t i = 0; i < o->npids; i++) {
		pid_t pid = o->pids[i], *desc = NULL;
		struct attach_proc_info info;
		char mapped[4096], opened[4096], what[1024] = "";
		size_t n = 0;
		int found = 0;

		rc = attach_proc_read(pid, &info);
		if (rc == -ESRCH) {
			fprintf(stderr,
				"%s: pid %d: no such process (see 'pgrep -f train.py' or 'ps -ef' for the job's "
				"ranks)\n",
				o->prog, (int)pid);
			return rc;
		}
		if (rc) {
			fprintf(stderr, "%s: pid %d: cannot read /proc/%d: %s\n", o->prog, (int)pid, (int)pid,
				fss_strerror(rc));
			return rc;
		}
		if (info.is_thread) {
			fprintf(stderr,
				"%s: %d is a thread of process %d, not a process: give the process's pid (%d)\n",
				o->prog, (int)pid, (int)info.tgid, (int)info.tgid);
			return -EINVAL;
		}
		rc = attach_find_nccl(pid, mapped, sizeof(mapped), opened, sizeof(opened), what, sizeof(what));
		if (rc == 0)
			continue;
		if (rc != -ENOENT) {
			fprintf(stderr, "%s: pid %d (%s): cannot read its mappings (/proc/%d/maps): %s\n", o->prog,
				(int)pid, info.command, (int)pid, fss_strerror(rc));
			return rc;
		}
		if (attach_proc_descendants(pid, &desc, &n) == 0) {
			for (size_t k = 0; k < n && !found; k++) {
				char w2[16];

				found = attach_find_nccl(desc[k], mapped, sizeof(mapped), opened, sizeof(opened), w2,
							 sizeof(w2)) == 0;
			}
			free(desc);
		}
		if (found || n > 0) {
			if (!found)
				fprintf(
				    stderr,
				    "%s: pid %d (%s) has no libnccl mapped, nor has any of its %zu descendants yet: "
				    "waiting for its ranks to load it\n",
				    o->prog, (int)pid, info.command, n);
			continue;
		}
		fprintf(
		    stderr,
		    "%s: pid %d (%s) maps no libnccl (checked /proc/%d/maps): it makes no NCCL calls to watch, or "
		    "loads NCCL later (attach once it has)\n"
		    "  mapped: %s\n"
		    "  attach places its probes on libnccl.so's symbols: a job whose NCCL is linked statically into\n"
		    "  another library or the executable has no libnccl to probe: run it under 'fsdpscope run'\n"
		    "  instead (the agent sees NCCL's own NVTX ranges there)\n",
		    o->prog, (int)pid, info.command, (int)pid, what[0] ? what : "nothing readable");
		return -ENOENT;
	}
	return 0;
}

int attach_capture_new(attach_capture_t **out, const struct attach_capture_options *o, const char *sink)
{
	attach_capture_t *c = calloc(1, sizeof(*c));
	char err[1024] = "";
	int rc;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->prog = o->prog;
	c->all = o->all;
	c->sink = strdup(sink);
	c->roots = o->npids ? malloc(o->npids * sizeof(pid_t)) : NULL;
	if (!c->sink || (o->npids && !c->roots)) {
		attach_capture_free(c);
		return -ENOMEM;
	}
	if (o->npids)
		memcpy(c->roots, o->pids, o->npids * sizeof(pid_t));
	c->nroots = o->npids;
	if (gethostname(c->host, sizeof(c->host) - 1) < 0)
		snprintf(c->host, sizeof(c->host), "unknown");
	rc = attach_records_new(&c->rec, on_record, c);
	if (!rc)
		rc = attach_cut_new(&c->cut, on_cut_record, c);
	if (rc) {
		attach_capture_free(c);
		return rc;
	}
	rc = attach_new(&c->probes, o->ring_bytes, on_event, c, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s: %s\n", c->prog, err[0] ? err : fss_strerror(rc));
		attach_capture_free(c);
		return rc;
	}
	rc = scan(c);
	if (rc) {
		fprintf(stderr, "%s: %s\n", c->prog, fss_strerror(rc));
		attach_capture_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* A process that ended: its probes go, its stream closes once its records are out. */
static void proc_end(attach_capture_t *c, struct proc *p)
{
	(void)attach_drop_pid(c->probes, p->pid);
	attach_cut_end(c->cut, (size_t)(p - c->procs));
	p->state = PROC_ENDED;
	stream_close(p);
}

int attach_capture_round(attach_capture_t *c, int timeout_ms)
{
	int rc = attach_poll(c->probes, timeout_ms), watching = 0;

	if (rc < 0)
		return rc;
	rc = attach_records_decide(c->rec, 0);
	if (rc < 0)
		return rc;
	if (!c->idle_decided && c->last_event_ms && clock_mono_ms() - c->last_event_ms >= IDLE_DECIDE_MS) {
		struct attach_records_stats rs;

		attach_records_stats(c->rec, &rs);
		if (rs.held) {
			rc = attach_records_decide(c->rec, 1);
			if (rc < 0)
				return rc;
		}
		/* a job that stopped calling: what one rank did past the others is the evidence, not to be cut */
		attach_cut_release(c->cut, 1);
		c->idle_decided = 1;
	}
	for (size_t i = 0; i < c->nprocs; i++) {
		struct proc *p = &c->procs[i];

		if (p->state != PROC_ATTACHED)
			continue;
		if (p->w && !p->stream_failed) {
			int err = trace_writer_flush(p->w);

			if (err)
				stream_fail(c, p, err);
		}
		stream_drain_acks(p);
		if (p->exited) {
			proc_end(c, p);
		} else if (!attach_proc_alive(p->pid)) {
			/* Gone without the kernel's word reaching us (the probe of its exit
			 * missed it): take in what is left of it first. */
			(void)attach_poll(c->probes, 0);
			(void)attach_records_decide(c->rec, 0);
			proc_end(c, p);
		}
	}
	if (clock_mono_ms() - c->last_scan_ms >= ATTACH_RESCAN_MS) {
		rc = scan(c);
		if (rc < 0)
			return rc;
	}
	if (c->all)
		return 1;
	for (size_t i = 0; i < c->nprocs && !watching; i++)
		watching = c->procs[i].state == PROC_ATTACHED;
	for (size_t r = 0; r < c->nroots && !watching; r++)
		watching = attach_proc_alive(c->roots[r]);
	return watching;
}

/* The cut at detach (cli/attach_cut.h), one line per communicator the processes still attached share. */
static void say_cut(const attach_capture_t *c)
{
	const struct attach_cut_result *r = &c->cut_result;

	for (size_t j = 0; j < r->ncomms; j++) {
		const struct attach_cut_comm *cc = &r->comms[j];
		int first = 1;

		fprintf(stderr,
			"%s: detached at collective #%" PRIu64 " of communicator %016" PRIx64
			" (%u processes), the last every rank completed: ",
			c->prog, cc->number, cc->id_hash, cc->nslots);
		if (!cc->cut_slots) {
			fprintf(stderr, "no rank had records past it\n");
			continue;
		}
		for (size_t k = 0; k < r->nslots; k++) {
			const struct attach_cut_slot *s = &r->slots[k];

			if (s->comm != cc->id_hash)
				continue;
			fprintf(stderr,
				first ? "cut %" PRIu64 " records of rank %d (pid %d)"
				      : ", %" PRIu64 " of rank %d (pid %d)",
				s->collectives, (int)s->rank, (int)c->procs[s->slot].pid);
			first = 0;
		}
		fprintf(stderr, " (made after the probes began to go, one process after another, when "
				"some ranks' calls are seen and others' not: left out, so that every rank's records "
				"end at the same call)\n");
	}
}

/* Calls in flight at attach (cli/attach_cut.h, attach_cut_unseen), in one line. */
static void say_unseen(const attach_capture_t *c)
{
	const struct attach_cut_result *r = &c->cut_result;

	if (!r->unseen_calls)
		return;
	fprintf(stderr,
		"%s: %" PRIu64 " call%s %s in flight at attach (entered before the probes, so neither %s entry nor "
		"%s return was seen; the other ranks were seen to make %s): not in the trace: ",
		c->prog, r->unseen_calls, r->unseen_calls == 1 ? "" : "s", r->unseen_calls == 1 ? "was" : "were",
		r->unseen_calls == 1 ? "its" : "their", r->unseen_calls == 1 ? "its" : "their",
		r->unseen_calls == 1 ? "it" : "them");
	for (size_t k = 0; k < r->nunseen; k++)
		fprintf(stderr, "%s%" PRIu64 " of rank %d (pid %d)", k ? ", " : "", r->unseen[k].calls,
			(int)r->unseen[k].rank, (int)c->procs[r->unseen[k].slot].pid);
	fputc('\n', stderr);
}

void attach_capture_detach(attach_capture_t *c)
{
	struct attach_records_stats rs;
	uint64_t lost;

	if (!c || !c->probes)
		return;
	attach_cut_freeze(c->cut, clock_ns(CLOCK_MONOTONIC));
	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].state == PROC_ATTACHED)
			(void)attach_drop_pid(c->probes, c->procs[i].pid);
	/* What the probes put in the ring before they went. */
	while (attach_poll(c->probes, 0) > 0)
		;
	(void)attach_records_decide(c->rec, 1);
	(void)attach_cut_detach(c->cut, &c->cut_result); /* -ENOMEM: nothing cut, every record sent */
	for (size_t i = 0; i < c->nprocs; i++) {
		struct proc *p = &c->procs[i];

		if (p->state == PROC_ATTACHED)
			p->state = PROC_ENDED;
		stream_close(p);
	}
	lost = attach_lost(c->probes);
	attach_free(c->probes);
	c->probes = NULL;
	attach_records_stats(c->rec, &rs);
	fprintf(stderr,
		"%s: detached: every probe removed; %u processes attached, %" PRIu64 " probe events, %" PRIu64
		" collectives recorded\n",
		c->prog, rs.processes, c->events, rs.collectives - c->cut_result.collectives);
	say_cut(c);
	say_unseen(c);
	if (rs.comms_observed)
		fprintf(
		    stderr,
		    "%s: %u communicators were made before the attach: their identity, size and this process's rank in "
		    "them are inferred (rank from in-place AllGathers: %u, from the environment: %u, guessed from pid "
		    "order: %u%s); the report says which\n",
		    c->prog, rs.comms_observed, rs.rank_inplace, rs.rank_env, rs.rank_order,
		    rs.members_guessed ? ", membership guessed among communicators with the same calls" : "");
	if (lost)
		fprintf(stderr,
			"%s: warning: %" PRIu64 " probe events were lost (the ring buffer was full): counts from this "
			"attach are low by up to that many calls\n",
			c->prog, lost);
	{
		uint64_t late = 0;

		for (size_t i = 0; i < c->nprocs; i++)
			late += c->procs[i].late;
		if (late)
			fprintf(stderr,
				"%s: %" PRIu64 " records came after their process's stream had ended: not recorded\n",
				c->prog, late);
	}
	if (rs.events_unknown)
		fprintf(stderr,
			"%s: %" PRIu64
			" probe events could not be paired (an exit without its entry, or an entry whose exit "
			"never came: while the probes of one process are removed, the others' can miss calls): not "
			"recorded\n",
			c->prog, rs.events_unknown);
}

void attach_capture_say_unattached(const attach_capture_t *c)
{
	if (c->all) {
		fprintf(stderr,
			"%s: no process of this machine mapped libnccl while attach watched: nothing to watch, "
			"no trace written\n",
			c->prog);
		return;
	}
	for (size_t r = 0; r < c->nroots; r++) {
		const struct proc *p = proc_find((attach_capture_t *)c, c->roots[r]);

		fprintf(stderr,
			"%s: pid %d (%s) maps no libnccl (checked /proc/%d/maps), nor did any of its descendants "
			"while attach watched: it makes no NCCL calls to watch, or loads NCCL later (attach once it "
			"has); no trace written\n",
			c->prog, (int)c->roots[r], p && p->root_command[0] ? p->root_command : "ended",
			(int)c->roots[r]);
	}
}

void attach_capture_status(const attach_capture_t *c, struct attach_capture_status *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < c->nprocs; i++) {
		const struct proc *p = &c->procs[i];

		if (p->state == PROC_NO_NCCL || p->state == PROC_FAILED)
			continue;
		if (p->state == PROC_ENDED && !p->command[0])
			continue; /* never attached */
		out->attached++;
		out->running += p->state == PROC_ATTACHED;
		out->exited += p->exited;
		out->sources += p->records > 0;
	}
	out->events = c->events;
	out->lost = c->probes ? attach_lost(c->probes) : 0;
	snprintf(out->first_command, sizeof(out->first_command), "%s", c->first_command);
}

void attach_capture_free(attach_capture_t *c)
{
	if (!c)
		return;
	attach_capture_detach(c);
	for (size_t i = 0; i < c->nprocs; i++)
		stream_close(&c->procs[i]);
	attach_records_free(c->rec);
	attach_cut_free(c->cut);
	attach_cut_result_free(&c->cut_result);
	free(c->procs);
	free(c->roots);
	free(c->sink);
	free(c);
}
