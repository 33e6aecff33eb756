/*
 * session.c - a live session: the private folder, the readers, the rules
 * and what is said (cli/session.h). `fsdpscope run` and `fsdpscope
 * collect` differ only in what they do around it: run launches and reaps a
 * job, collect waits for ranks started elsewhere.
 *
 * The engine is collector/session.h with a live ingest as its input: the
 * ingest feeds the session's one per-source view, and its record callback
 * the analyzer, the live state and the keeper, so the streamed analyzer
 * sees exactly what a reader of the finished trace sees (a live view, and
 * the end of a long job, must not re-read gigabytes, and what is shown
 * live must be what lint says at the end). This file gives it the
 * diagnosis (the rules) and says what happened.
 */
#include "cli/session.h"
#include "cli/agent_fallback.h"

#include "cli/lint.h"
#include "cli/report_sources.h"

#include "cli/hang_lines.h"

#include "collector/analyze.h"
#include "collector/keep.h"
#include "collector/live.h"
#include "collector/metrics.h"
#include "collector/session.h"
#include "collector/viewer.h"
#include "common/error.h"
#include "common/out_file.h"
#include "common/record.h"
#include "common/wire.h"
#include "rules/diagnosis.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct session {
	struct session_options o;
	run_folder_t *rs;
	fss_session_t *fs;	 /* the engine: a live ingest, the view, the analyzer, the live state, the keeper */
	ingest_t *ing;		 /* the session's input (fs's) */
	char options_error[512]; /* an analysis option that does not fit the job (diagnosis_check) */
	int failed;		 /* the ingest failed: nothing more is written */
	int stop_asked;		 /* the user stopped the job (session_stop_asked) */
	long long started;	 /* Unix time of session_new: agents' files since then are its */
	char *private_sink;
	char **merged; /* files whose records are in the trace: removed once it is in place */
	size_t nmerged;
	char *trace_path;
	viewer_server_t *viewer;
	metrics_server_t *metrics;
	char *viewer_address;
	hang_lines_t *hang_lines;	 /* the stderr lines of calls in flight: what was said */
	struct diagnosis d;		 /* the streamed diagnosis, at the end */
	struct diagnosis_flags defaults; /* when the caller gave none */
	const struct diagnosis_flags *flags;
	int kept;
};

/* What the keeper has to say (the disk guard switched the policy, ...). */
static void keeper_messages(session_t *s)
{
	const char *m;

	keeper_t *k = s->fs ? fss_session_keeper(s->fs) : NULL;

	while (k && (m = keeper_take_message(k)))
		fprintf(stderr, "%s: %s\n", s->o.prog, m);
}

/* Result r and the findings the rules gave on it, into the live state. */
static void live_diagnose(session_t *s, const struct analysis_result *r, const findings_t *list)
{
	struct live_finding found[LIVE_FINDINGS_MAX];
	size_t n = diagnosis_live_findings(list, found, LIVE_FINDINGS_MAX);

	live_set_diagnosis(fss_session_live(s->fs), r, found, n);
}

/* The engine's diagnosis of what the analyzer holds now (it schedules it
 * and measures waits to the session's clock): the rules, into the live
 * state and the stderr lines of calls in flight. */
static int diagnose_live(void *ctx, const struct analysis_result *r, live_t *live, int final)
{
	session_t *s = ctx;
	struct live_finding found[LIVE_FINDINGS_MAX];
	findings_t *list = findings_new();
	size_t n;
	int rc = -ENOMEM;

	if (list && (rc = diagnosis_from_result(r, &s->flags->rules, list, found, LIVE_FINDINGS_MAX, &n)) == 0) {
		live_set_diagnosis(live, r, found, n);
		hang_lines_update(s->hang_lines, r, list, stderr);
	}
	findings_free(list);
	return rc;
}

/* The readers' side: the board, the viewer socket beside the agents', and
 * /metrics when asked. A reader that cannot start is said and left out:
 * the trace is what a session is for. */
static int start_readers(session_t *s)
{
	char err[256] = "", *sock = NULL, *slash;
	struct sockaddr_un sun;
	int rc;

	if (hang_lines_new(&s->hang_lines))
		return -ENOMEM;
	/* A first view at once, empty: a viewer that connects to a session no
	 * rank has reached yet gets a snapshot (the protocol's first line comes
	 * at once), so it can tell a viewer socket from any other. */
	if (fss_session_publish(s->fs))
		return -ENOMEM;
	sock = strdup(run_folder_socket(s->rs));
	slash = sock ? strrchr(sock, '/') : NULL;
	if (!slash) {
		free(sock);
		return -ENOMEM;
	}
	*slash = '\0';
	if (asprintf(&s->viewer_address, "unix:%s/" RUN_VIEWER_SOCKET, sock) < 0)
		s->viewer_address = NULL;
	free(sock);
	if (!s->viewer_address)
		return -ENOMEM;
	if (strlen(s->viewer_address) - 5 >= sizeof(sun.sun_path)) {
		fprintf(stderr, "%s: warning: no viewer endpoint: %s is too long for a socket\n", s->o.prog,
			s->viewer_address + 5);
		free(s->viewer_address);
		s->viewer_address = NULL;
	} else {
		rc = viewer_server_start(&s->viewer, s->viewer_address + 5, fss_session_board(s->fs), err, sizeof(err));
		if (rc) {
			fprintf(stderr, "%s: warning: no viewer endpoint: %s\n", s->o.prog,
				err[0] ? err : fss_strerror(rc));
			free(s->viewer_address);
			s->viewer_address = NULL;
		}
	}
	if (s->o.metrics) {
		err[0] = '\0';
		rc = metrics_server_start(&s->metrics, s->o.metrics, s->o.metrics_remote, fss_session_board(s->fs), err,
					  sizeof(err));
		if (rc) {
			fprintf(stderr, "%s: --metrics %s: %s\n", s->o.prog, s->o.metrics,
				err[0] ? err : fss_strerror(rc));
			return rc;
		}
	}
	return 0;
}

static void say_failed(session_t *s, int err)
{
	if (s->failed)
		return;
	s->failed = 1;
	fprintf(stderr, "%s: writing %s.partial failed: %s; the job goes on unrecorded\n", s->o.prog,
		run_folder_output(s->rs), fss_strerror(err));
}

/* Merge one file into the trace; files merged are remembered, to be
 * removed once their records are safe elsewhere. */
static int merge_file(session_t *s, char *path)
{
	char **merged;
	int err;

	if (s->failed)
		return -EIO;
	fss_session_in_files(s->fs, 1);
	err = ingest_add_file(s->ing, path);
	fss_session_in_files(s->fs, 0);
	if (err)
		return err;
	merged = realloc(s->merged, (s->nmerged + 1) * sizeof(*merged));
	if (!merged)
		return -ENOMEM;
	s->merged = merged;
	s->merged[s->nmerged++] = path;
	return 0;
}

/* Remove the files merged so far, once the trace holding their records is
 * on disk (a session killed from here on leaves that trace, which the next
 * session in DIR merges: nothing is read twice). */
static int flush_and_remove_merged(session_t *s)
{
	int err = ingest_flush(s->ing);

	if (err)
		return err;
	for (size_t i = 0; i < s->nmerged; i++) {
		unlink(s->merged[i]);
		free(s->merged[i]);
	}
	s->nmerged = 0;
	return 0;
}

/* The agent writing spool file `path` still runs on this host: its file is
 * not finished (it goes on, or replays it when it reconnects). */
static int spool_writer_alive(const char *path)
{
	const char *base = strrchr(path, '/');
	char host[256] = "";
	const char *dash;
	size_t hl;
	char *end;
	long pid;

	base = base ? base + 1 : path;
	hl = strlen(base);
	if (hl < 8 || strcmp(base + hl - 8, ".partial") != 0)
		return 0; /* closed by its writer: finished */
	/* fsdpscope-<host>-<pid>.fss.partial (docs/agent.md) */
	dash = strrchr(base, '-');
	if (!dash || strncmp(base, "fsdpscope-", 10) != 0)
		return 0;
	pid = strtol(dash + 1, &end, 10);
	if (pid <= 0 || strncmp(end, ".fss.partial", 12) != 0)
		return 0;
	gethostname(host, sizeof(host) - 1);
	if ((size_t)(dash - base) != 10 + strlen(host) || strncmp(base + 10, host, strlen(host)) != 0)
		return 0; /* another host's: its writer is not here */
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* Merge the spool's files whose writers are gone. Returns those left. */
static size_t merge_spool(session_t *s)
{
	char **names;
	size_t n, left = 0;
	int err;

	if (!s->o.spool)
		return 0;
	err = run_folder_list(s->o.spool, &names, &n);
	if (err) {
		fprintf(stderr, "%s: cannot read the spool %s: %s\n", s->o.prog, s->o.spool, fss_strerror(err));
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (spool_writer_alive(names[i])) {
			left++;
			free(names[i]);
			continue;
		}
		err = merge_file(s, names[i]);
		if (err) {
			if (!s->failed)
				fprintf(stderr, "%s: %s: not merged: %s\n", s->o.prog, names[i], fss_strerror(err));
			free(names[i]);
		}
	}
	free(names);
	return left;
}

/* run: what dead runs left in DIR goes into traces of their own. */
static void leftovers_recover(session_t *s, struct run_leftover *l, size_t n)
{
	const char *dir = run_folder_dir(s->rs);

	for (size_t i = 0; i < n; i++) {
		struct ingest_stats rs;
		char *path = NULL;
		int err;

		if (l[i].job_running)
			continue;
		err = run_leftover_recover(&l[i], dir, &path, &rs);
		if (err) {
			fprintf(stderr, "%s: could not merge what run %s left (%s); left it in place\n", s->o.prog,
				l[i].id, fss_strerror(err));
			continue;
		}
		fprintf(stderr,
			"%s: merged what run %s left into %s: %" PRIu32 " source%s, %" PRIu64 " collective%s, %" PRIu64
			" record%s%s\n",
			s->o.prog, l[i].id, path, rs.sources, rs.sources == 1 ? "" : "s",
			rs.by_type[FSS_REC_COLLECTIVE], rs.by_type[FSS_REC_COLLECTIVE] == 1 ? "" : "s", rs.records,
			rs.records == 1 ? "" : "s",
			rs.ndamaged ? " (its unfinished parts were cut where they ended)" : "");
		free(path);
	}
}

/* collect: what a dead session left in DIR goes into this session's trace
 * (a collector restarted mid-job: the same ranks continue). */
static void leftovers_merge(session_t *s, struct run_leftover *l, size_t n)
{
	for (size_t i = 0; i < n && !s->failed; i++) {
		char **files = NULL;
		size_t nfiles = 0;
		int err;

		if (l[i].job_running)
			continue;
		err = run_folder_list(l[i].folder, &files, &nfiles);
		if (err) {
			fprintf(stderr, "%s: cannot read %s: %s; left it in place\n", s->o.prog, l[i].folder,
				fss_strerror(err));
			continue;
		}
		if (l[i].partial) {
			char *p = strdup(l[i].partial);

			err = p ? merge_file(s, p) : -ENOMEM;
			if (err && p)
				free(p);
			if (err == -ENOENT)
				err = 0;
		}
		for (size_t j = 0; j < nfiles; j++) {
			int e = err ? err : merge_file(s, files[j]);

			if (e) {
				free(files[j]);
				err = e;
			}
		}
		free(files);
		if (!err)
			err = flush_and_remove_merged(s);
		if (err) {
			fprintf(stderr, "%s: could not merge what session %s left (%s); left it in place\n", s->o.prog,
				l[i].id, fss_strerror(err));
			continue;
		}
		run_leftover_remove(&l[i]);
		fprintf(stderr, "%s: merged what session %s left into this session's trace\n", s->o.prog, l[i].id);
	}
}

static void handle_leftovers(session_t *s)
{
	const char *dir = run_folder_dir(s->rs);
	struct run_leftover *l;
	size_t n;
	int err = run_leftovers_find(dir, &l, &n);

	if (err) {
		fprintf(stderr, "%s: warning: cannot look for what earlier sessions left in %s: %s\n", s->o.prog, dir,
			fss_strerror(err));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		fprintf(stderr, "%s: found ", s->o.prog);
		run_leftover_describe(&l[i], stderr);
		fputc('\n', stderr);
		if (l[i].job_running)
			fprintf(
			    stderr,
			    "%s: left it in place: its job still writes there; run again in %s once that job has ended "
			    "to merge it\n",
			    s->o.prog, dir);
	}
	if (s->o.leftovers == SESSION_LEFTOVERS_MERGE)
		leftovers_merge(s, l, n);
	else
		leftovers_recover(s, l, n);
	run_leftovers_free(l, n);
}

/* Listen on `address`; a unix socket file is 0600 whatever the umask. */
static int listen_on(session_t *s, const char *address)
{
	struct wire_address a;
	const struct sockaddr_un *sun = (const struct sockaddr_un *)&a.addr;
	mode_t old;
	int err = wire_address_parse(address, &a);

	if (err)
		return err;
	old = umask(0177);
	err = ingest_listen(s->ing, address);
	umask(old);
	if (!err && a.family == AF_UNIX && sun->sun_path[0] && chmod(sun->sun_path, 0600) < 0)
		err = -errno;
	return err;
}

/* The engine: a collector session on a live ingest writing the trace,
 * with its keeper, analyzer and live state; the rules are ours. */
static int engine_new(session_t *s)
{
	struct fss_session_options so = {
	    .analysis = &s->flags->analysis, .live = 1, .diagnose = diagnose_live, .diagnose_ctx = s};
	struct fss_session_ingest_options io = {.output_path = run_folder_output(s->rs),
						.folder = run_folder_path(s->rs),
						.ingest = {.key = s->o.key, .key_timeout_ms = s->o.key_timeout_ms},
						.keep = s->o.keep};
	const char *what;
	int err = fss_session_new(&s->fs, &so);

	if (err) {
		fprintf(stderr, "%s: out of memory\n", s->o.prog);
		return err;
	}
	err = fss_session_open_ingest(s->fs, &io, &s->ing, &what);
	if (err && !strcmp(what, "keeper"))
		fprintf(stderr, "%s: cannot start the --keep policy: %s\n", s->o.prog, fss_strerror(err));
	else if (err)
		fprintf(stderr, "%s: cannot create %s.partial: %s\n", s->o.prog, run_folder_output(s->rs),
			fss_strerror(err));
	return err;
}

int session_new(session_t **out, const struct session_options *o)
{
	session_t *s = calloc(1, sizeof(*s));
	char what[PATH_MAX + 64];
	int err;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->o = *o;
	s->started = (long long)time(NULL);
	diagnosis_flags_init(&s->defaults);
	s->flags = o->flags ? o->flags : &s->defaults;
	err = run_folder_new(&s->rs, o->dir, o->argv, what, sizeof(what));
	if (err) {
		fprintf(stderr, "%s: %s\n", o->prog, what);
		goto fail;
	}
	/* A run's leftovers are recovered before its trace exists: they are
	 * not its own. */
	if (o->leftovers == SESSION_LEFTOVERS_RECOVER)
		handle_leftovers(s);
	if (asprintf(&s->private_sink, "unix:%s", run_folder_socket(s->rs)) < 0) {
		s->private_sink = NULL;
		err = -ENOMEM;
		goto fail;
	}
	err = engine_new(s);
	if (err)
		goto fail;
	err = start_readers(s);
	if (err) {
		if (err == -ENOMEM)
			fprintf(stderr, "%s: out of memory\n", o->prog);
		goto fail;
	}
	/* Listening first: nothing is accepted before the first poll, and a
	 * session that cannot listen has merged (and removed) nothing. */
	err = run_folder_listen(s->rs, s->ing);
	if (err) {
		fprintf(stderr, "%s: cannot listen on %s: %s\n", o->prog, s->private_sink, fss_strerror(err));
		goto fail;
	}
	for (size_t i = 0; i < o->nlisten; i++) {
		err = listen_on(s, o->listen[i]);
		if (err) {
			fprintf(stderr, "%s: cannot listen on %s: %s\n", o->prog, o->listen[i], fss_strerror(err));
			goto fail;
		}
	}
	/* What a dead session and the spool hold goes first into the trace,
	 * so that the agents that reconnect continue their sources. */
	if (o->leftovers == SESSION_LEFTOVERS_MERGE)
		handle_leftovers(s);
	if (merge_spool(s) || s->nmerged) {
		err = flush_and_remove_merged(s);
		if (err) {
			say_failed(s, err);
			goto fail;
		}
	}
	*out = s;
	return 0;
fail:
	session_abandon(s);
	session_free(s);
	return err;
}

run_folder_t *session_run_folder(session_t *s)
{
	return s->rs;
}

ingest_t *session_ingest(session_t *s)
{
	return s->ing;
}

const char *session_private_sink(const session_t *s)
{
	return s->private_sink;
}

int session_failed(const session_t *s)
{
	return s->failed;
}

size_t session_open_connections(const session_t *s)
{
	return s->failed ? 0 : ingest_open_connections(s->ing);
}

size_t session_open_agents(const session_t *s)
{
	return s->failed ? 0 : ingest_open_agents(s->ing);
}

uint32_t session_agents_seen(const session_t *s)
{
	return ingest_agents_seen(s->ing);
}

const char *session_viewer_address(const session_t *s)
{
	return s->viewer_address;
}

const char *session_metrics_address(const session_t *s)
{
	return s->metrics ? metrics_server_address(s->metrics) : NULL;
}

uint64_t session_records_from_agents(const session_t *s)
{
	return fss_session_agent_records(s->fs);
}

int session_poll(session_t *s, int timeout_ms)
{
	int rc;

	if (s->failed) {
		/* Nothing to read into: just wait (the agents drop and count). */
		if (timeout_ms > 0)
			poll(NULL, 0, timeout_ms);
		return 0;
	}
	/* the ingest's poll, and the trace on disk at least once a second */
	rc = fss_session_read(s->fs, timeout_ms);
	if (rc < 0)
		say_failed(s, rc);
	keeper_messages(s);
	fss_session_tick(s->fs);
	return 0;
}

/* The streamed analysis, finished, and the rules on it. */
static int diagnose(session_t *s)
{
	int err;

	memset(&s->d, 0, sizeof(s->d));
	s->d.trace_path = s->trace_path;
	err = fss_session_finish_analysis(s->fs, 0, &s->d.result);
	if (err)
		return err;
	/* The ingest closed the trace it wrote: a reader finds it ended so. */
	s->d.result->trace.end = "clean";
	/* An option that does not fit the job is said, as lint says it. */
	if (diagnosis_check(s->flags, s->d.result, s->options_error, sizeof(s->options_error)))
		return -EINVAL;
	s->d.findings = findings_new();
	if (!s->d.findings)
		return -ENOMEM;
	err = diagnosis_from_result(s->d.result, &s->flags->rules, s->d.findings, NULL, 0, NULL);
	return err ? err : diagnosis_run_worlds(&s->d, &s->flags->rules);
}

static int write_json_summary(session_t *s, char *why, size_t whylen)
{
	out_file_t *f;
	int err = out_file_open(s->o.json_summary, 0644, &f, why, whylen);

	if (err)
		return err;
	diagnosis_print_json(out_file_stream(f), &s->d, &s->flags->rules);
	return out_file_commit(f, why, whylen);
}

/* The files this session's agents wrote into their own folder (they could
 * reach neither the session nor FSDPSCOPE_OUT): the processes from the
 * ingest's stats when it finished, else from the live view. */
static void say_agent_files(session_t *s, const struct ingest_stats *st)
{
	uint32_t *pids = NULL;
	size_t n = 0;

	if (st && st->sources) {
		pids = calloc(st->sources, sizeof *pids);
		for (uint32_t i = 0; pids && i < st->sources; i++)
			if (st->per_source[i].has_hello)
				pids[n++] = st->per_source[i].pid;
	} else if (s->fs && fss_session_board(s->fs)) {
		live_board_t *b = fss_session_board(s->fs);
		const struct live_view *v = live_board_acquire(b);

		if (v && v->nranks)
			pids = calloc(v->nranks, sizeof *pids);
		for (size_t i = 0; pids && i < v->nranks; i++)
			pids[n++] = v->ranks[i].pid;
		if (v)
			live_board_release(b, v);
	}
	if (n)
		agent_fallback_say(stderr, s->o.prog, pids, n, s->started);
	free(pids);
}

static void print_summary(session_t *s, const struct ingest_stats *st, session_notes_fn notes_fn, void *ctx)
{
	uint32_t processes = 0, unclean = 0, stopped = 0;
	const char *prog = s->o.prog;

	/* Processes a stop the user asked for ended between chunks lost nothing:
	 * one line for them, not a warning each. */
	for (size_t i = 0; i < st->ndamaged; i++) {
		if (s->stop_asked && st->damage_unclosed && st->damage_unclosed[i]) {
			stopped++;
			continue;
		}
		fprintf(stderr, "%s: warning: %s\n", prog, st->damage[i]);
	}
	if (stopped)
		fprintf(stderr,
			"%s: the stop asked for ended %u process%s before %s closed %s: every complete "
			"chunk %s sent is in the trace\n",
			prog, stopped, stopped == 1 ? "" : "es", stopped == 1 ? "it" : "they",
			stopped == 1 ? "its stream" : "their streams", stopped == 1 ? "it" : "they");
	for (uint32_t i = 0; i < st->sources; i++) {
		if (!st->per_source[i].has_hello)
			continue;
		processes++;
		unclean += !st->per_source[i].ended;
	}
	if (notes_fn)
		notes_fn(ctx, st);
	if (st->refused) {
		fprintf(stderr, "%s: warning: refused %" PRIu32 " connection%s from other users (", prog, st->refused,
			st->refused == 1 ? "" : "s");
		for (size_t i = 0; i < st->nrefused_named; i++) {
			if (st->refused_peers[i].uid == UINT32_MAX)
				fprintf(stderr, "%suser unknown, pid %" PRId32, i ? "; " : "",
					st->refused_peers[i].pid);
			else
				fprintf(stderr, "%suid %" PRIu32 ", pid %" PRId32, i ? "; " : "",
					st->refused_peers[i].uid, st->refused_peers[i].pid);
		}
		if (st->refused > st->nrefused_named)
			fprintf(stderr, "; and %zu more", (size_t)st->refused - st->nrefused_named);
		fprintf(stderr, "): only this user's processes may send records; none of theirs is in the trace\n");
	}
	if (st->keyless_unnamed)
		fprintf(stderr, "%s: warning: and %" PRIu32 " more tcp connection%s refused without the key (not named)\n",
			prog, st->keyless_unnamed, st->keyless_unnamed == 1 ? "" : "s");
	if (st->pending_over_cap)
		fprintf(stderr,
			"%s: warning: closed %" PRIu32 " tcp connection%s unread: %d of %s host, or %d in all, were "
			"already waiting for the connection key\n",
			prog, st->pending_over_cap, st->pending_over_cap == 1 ? "" : "s", INGEST_PENDING_PER_HOST,
			st->pending_over_cap == 1 ? "its" : "their", INGEST_PENDING_MAX);
	if (s->nmerged)
		fprintf(stderr, "%s: merged %zu per-process file(s) (removed)\n", prog, s->nmerged);
	fprintf(stderr, "%s: trace written to %s\n", prog, s->trace_path);
	fprintf(stderr,
		"%s: %" PRIu32 " process%s, %" PRIu64 " collective%s, %" PRIu64 " NVTX range%s, %" PRIu64
		" GPU interval%s, %" PRIu64 " record%s dropped",
		prog, processes, processes == 1 ? "" : "es", st->by_type[FSS_REC_COLLECTIVE],
		st->by_type[FSS_REC_COLLECTIVE] == 1 ? "" : "s", st->by_type[FSS_REC_NVTX_RANGE],
		st->by_type[FSS_REC_NVTX_RANGE] == 1 ? "" : "s", st->by_type[FSS_REC_GPU_INTERVAL],
		st->by_type[FSS_REC_GPU_INTERVAL] == 1 ? "" : "s", st->dropped, st->dropped == 1 ? "" : "s");
	/* Calls a process made but that never reached the trace (a crash or a
	 * kill lost its ring) show only as gaps in its sequence numbers. */
	if (st->collectives_missing)
		fprintf(stderr, ", %" PRIu64 " collective%s missing (gaps in the processes' call numbers)",
			st->collectives_missing, st->collectives_missing == 1 ? "" : "s");
	if (unclean)
		fprintf(stderr, " (%" PRIu32 " process%s without a clean exit)", unclean, unclean == 1 ? "" : "es");
	fputc('\n', stderr);
	/* The agent reports a process from its first NCCL call on. */
	if (processes == 0)
		fprintf(stderr, "%s: no process reported: %s\n", prog,
			s->o.no_source_words ? s->o.no_source_words
					     : "the job made no NCCL call, or the agent could not load in it (a static "
					       "or setuid program, or one that clears LD_PRELOAD)");
}

int session_finish(session_t *s, int keep_folder, session_notes_fn notes_fn, void *ctx, struct session_outcome *out)
{
	const struct ingest_stats *stats = NULL;
	const char *note = NULL;
	char **names;
	size_t n, spool_left;
	int err, taken = 0, written;

	memset(out, 0, sizeof(*out));
	out->lint_max_severity = -1;
	if (!s->failed) {
		ingest_poll(s->ing, 0); /* accept what is waiting in the backlog */
		err = run_folder_files(s->rs, &names, &n);
		if (err) {
			fprintf(stderr, "%s: cannot read %s for per-process files: %s\n", s->o.prog,
				run_folder_path(s->rs), fss_strerror(err));
			names = NULL;
			n = 0;
		}
		for (size_t i = 0; i < n; i++) {
			const char *base = strrchr(names[i], '/');

			/* The keeper's own segments are this trace's, not an agent's. */
			if (!strncmp(base ? base + 1 : names[i], "segment-", 8)) {
				free(names[i]);
				continue;
			}
			err = merge_file(s, names[i]);
			if (err) {
				if (!s->failed)
					fprintf(stderr, "%s: %s: not merged: %s\n", s->o.prog, names[i],
						fss_strerror(err));
				free(names[i]);
			}
		}
		free(names);
		spool_left = merge_spool(s);
		if (spool_left)
			fprintf(
			    stderr,
			    "%s: %zu file%s in %s %s still written by running processes: not merged; the next session "
			    "in %s merges %s\n",
			    s->o.prog, spool_left, spool_left == 1 ? "" : "s", s->o.spool,
			    spool_left == 1 ? "is" : "are", run_folder_dir(s->rs), spool_left == 1 ? "it" : "them");
	}
	err = s->failed ? -EIO : fss_session_end_ingest(s->fs, &stats, &note);
	if (!err && note)
		fprintf(stderr, "%s: the trace holds %s\n", s->o.prog, note);
	keeper_messages(s);
	written = !err;
	if (!err)
		err = run_folder_publish(s->rs, s->o.name, &s->trace_path, &taken);
	if (err || !stats) {
		/* A finished trace that could not be moved holds the files'
		 * records: they go, so that the next session reads them once. */
		for (size_t i = 0; written && i < s->nmerged; i++)
			unlink(s->merged[i]);
		if (!s->failed)
			fprintf(stderr, "%s: writing the trace failed: %s\n", s->o.prog, fss_strerror(err));
		fprintf(stderr, "%s: what was recorded is left in %s; the next session in %s merges it\n", s->o.prog,
			run_folder_path(s->rs), run_folder_dir(s->rs));
		say_agent_files(s, stats);
		s->kept = 1;
		out->kept = 1;
		out->write_error = err ? err : -EIO;
		return out->write_error;
	}
	/* The files' records are in the trace now: remove them, so that
	 * nothing reads them twice. */
	for (size_t i = 0; i < s->nmerged; i++)
		unlink(s->merged[i]);
	if (taken)
		fprintf(stderr,
			"%s: %s/%s%s already exists (not this session's): left it as it is, and wrote this session's "
			"trace under a new name\n",
			s->o.prog, run_folder_dir(s->rs), s->o.name,
			strlen(s->o.name) > 4 && !strcmp(s->o.name + strlen(s->o.name) - 4, ".fss") ? "" : ".fss");
	print_summary(s, stats, notes_fn, ctx);
	say_agent_files(s, stats);
	out->trace_path = s->trace_path;
	out->stats = stats;
	err = diagnose(s);
	if (err && s->options_error[0]) {
		fprintf(stderr,
			"%s: %s\n%s: the trace is written: 'fsdpscope lint %s' with options that fit it reads it\n",
			s->o.prog, s->options_error, s->o.prog, s->trace_path);
	} else if (err) {
		fprintf(stderr, "%s: the live analysis could not finish (%s); 'fsdpscope lint %s' reads the trace\n",
			s->o.prog, fss_strerror(err), s->trace_path);
	} else {
		out->result = s->d.result;
		out->lint_max_severity = findings_max_severity(s->d.findings);
		/* The readers' last view says what lint says. */
		if (!fss_session_live_failed(s->fs)) {
			live_diagnose(s, s->d.result, s->d.findings);
			fss_session_publish(s->fs);
		}
		/* A trace without collectives has nothing to lint. */
		if (stats->by_type[FSS_REC_COLLECTIVE]) {
			fputc('\n', stderr);
			lint_print_diagnosis(stderr, s->d.trace_path, &s->d);
		}
		if (s->o.json_summary) {
			char why[PATH_MAX + 300];
			int e = write_json_summary(s, why, sizeof why);

			if (e) {
				fprintf(stderr, "%s: --json-summary %s\n", s->o.prog, why);
				out->write_error = e;
			}
		}
	}
	/* Processes still running write on into the folder: it stays, for the
	 * next session to merge. */
	s->kept = keep_folder;
	out->kept = keep_folder;
	return 0;
}

void session_stop_asked(session_t *s)
{
	s->stop_asked = 1;
}

void session_abandon(session_t *s)
{
	if (!s)
		return;
	if (s->ing) {
		ingest_finish(s->ing, NULL);
		unlink(run_folder_output(s->rs));
	}
	s->kept = 0;
}

void session_free(session_t *s)
{
	if (!s)
		return;
	/* Readers first: they hold views of the board. */
	if (s->fs && fss_session_board(s->fs))
		live_board_close(fss_session_board(s->fs));
	viewer_server_stop(s->viewer);
	metrics_server_stop(s->metrics);
	free(s->viewer_address);
	fss_session_free(s->fs); /* the ingest, keeper, analyzer, live state and board */
	hang_lines_free(s->hang_lines);
	diagnosis_free(&s->d);
	run_folder_close(s->rs, !s->kept);
	for (size_t i = 0; i < s->nmerged; i++)
		free(s->merged[i]);
	free(s->merged);
	free(s->private_sink);
	free(s->trace_path);
	free(s);
}

struct live_board *session_board(session_t *s)
{
	return fss_session_board(s->fs);
}
