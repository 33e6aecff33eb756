/*
 * session.c - a live session: the private folder, the ingest, the streamed
 * analysis and the end (cli/session.h). `fsdpscope run` and `fsdpscope
 * collect` differ only in what they do around it: run launches and reaps a
 * job, collect waits for ranks started elsewhere.
 *
 * Why the analysis is fed from the ingest's record callback rather than
 * from the trace once written: a live view (and the end of a long job)
 * must not re-read gigabytes, and what is shown live must be what lint
 * says at the end. The callback gives the records in the trace's order
 * with the trace's source numbers, so the streamed analyzer sees exactly
 * what a reader of the finished trace sees.
 */
#include "cli/session.h"

#include "cli/lint.h"
#include "cli/report_sources.h"

#include "cli/hang_lines.h"

#include "collector/analyze.h"
#include "collector/keep.h"
#include "collector/live.h"
#include "collector/metrics.h"
#include "collector/viewer.h"
#include "common/error.h"
#include "common/record.h"
#include "common/wire.h"
#include "rules/diagnosis.h"
#include "tui/feeds.h"

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

/* How often the unfinished trace is flushed to disk: what a killed session
 * loses of what it had received. */
#define SESSION_FLUSH_EVERY_MS 1000
/* Readers get a new view at most this often (after steps only). */
#define SESSION_PUBLISH_EVERY_MS 100
/* A diagnosis of what the analyzer holds (a snapshot and the rules): its
 * cost follows the analyzer's state, not the trace's length. */
#define SESSION_DIAGNOSE_EVERY_MS 1000

struct session {
	struct session_options o;
	run_folder_t *rs;
	ingest_t *ing;
	analyzer_t *an;
	int analysis_error; /* the streamed analysis failed (out of memory): the trace goes on */
	char options_error[512]; /* an analysis option that does not fit the job (diagnosis_check) */
	int failed;	    /* the ingest failed: nothing more is written */
	int in_files;	    /* records now come from a merged file, not a connection */
	uint64_t agent_records;
	char *private_sink;
	int64_t last_flush_ms;
	char **merged; /* files whose records are in the trace: removed once it is in place */
	size_t nmerged;
	char *trace_path;
	keeper_t *keeper;
	struct keep_policy keep;
	live_t *live;
	live_board_t *board;
	viewer_server_t *viewer;
	metrics_server_t *metrics;
	char *viewer_address;
	int live_error; /* the live state ran out of memory: views stop, the trace goes on */
	uint64_t steps; /* steps the analyzer completed */
	uint64_t steps_published, steps_diagnosed;
	int64_t last_publish_ms, last_diagnosis_ms;
	int flight_pending;   /* the latest diagnosis had calls in flight or a hang: diagnose again, steps or not */
	int diagnosis_unpublished; /* a diagnosis the readers have not been shown */
	hang_lines_t *hang_lines; /* the stderr lines of calls in flight: what was said */
	struct diagnosis d;		 /* the streamed diagnosis, at the end */
	struct diagnosis_flags defaults; /* when the caller gave none */
	const struct diagnosis_flags *flags;
	int kept;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The ingest's record callback: every record the trace gets, in its order. */
static int on_record(void *ctx, const struct fss_record_head *rec, const struct source *src)
{
	session_t *s = ctx;

	(void)src;
	if (!s->in_files)
		s->agent_records++;
	if (s->an && !s->analysis_error) {
		int err = analyzer_feed(s->an, rec);

		if (err)
			s->analysis_error = err;
	}
	if (s->live && !s->live_error && live_on_record(s->live, rec, src) < 0)
		s->live_error = 1;
	/* After the analyzer: the step the record completes is known to the
	 * keeper when it places the record (collector/keep.h). */
	return s->keeper ? keeper_on_record(s->keeper, rec, src) : 0;
}

/* The analyzer's step callback: every completed step of every rank. */
static void on_step(void *ctx, const struct analysis_step_info *step)
{
	session_t *s = ctx;

	s->steps++;
	if (s->live)
		live_on_step(s->live, step);
	if (s->keeper)
		keeper_on_step(s->keeper, step);
}

/* What the keeper has to say (the disk guard switched the policy, ...). */
static void keeper_messages(session_t *s)
{
	const char *m;

	while (s->keeper && (m = keeper_take_message(s->keeper)))
		fprintf(stderr, "%s: %s\n", s->o.prog, m);
}

/* Result r and the findings the rules gave on it, into the live state. */
static void live_diagnose(session_t *s, const struct analysis_result *r, const findings_t *list)
{
	struct live_finding found[LIVE_FINDINGS_MAX];
	size_t n = diagnosis_live_findings(list, found, LIVE_FINDINGS_MAX);

	live_set_diagnosis(s->live, r, found, n);
}

/* A diagnosis of what the analyzer holds now, into the live state and the
 * stderr lines of calls in flight. Waits are measured to the session's
 * clock (the job is running: the trace has no end yet). */
static void diagnose_now(session_t *s)
{
	struct live_finding found[LIVE_FINDINGS_MAX];
	struct analysis_result *r = NULL;
	findings_t *list;
	size_t n;

	analyzer_set_now(s->an, realtime_ns());
	if (analyzer_snapshot(s->an, &r))
		return;
	list = findings_new();
	if (list && diagnosis_from_result(r, &s->flags->rules, list, found, LIVE_FINDINGS_MAX, &n) == 0) {
		live_set_diagnosis(s->live, r, found, n);
		hang_lines_update(s->hang_lines, r, list, stderr);
		s->flight_pending = r->flight.in_flight > 0 || r->flight.nhangs > 0;
		s->diagnosis_unpublished = 1;
	}
	findings_free(list);
	analysis_result_free(r);
}

/* Now and then: a diagnosis of what the analyzer holds, and a new view
 * for the readers. A diagnosis is due once steps completed, and, steps or
 * not, while a rank is inside a collective (a hung job completes none). */
static void live_tick(session_t *s)
{
	int64_t now;

	if (!s->live || s->live_error)
		return;
	now = now_ms();
	if (!s->analysis_error && now - s->last_diagnosis_ms >= SESSION_DIAGNOSE_EVERY_MS &&
	    (s->steps != s->steps_diagnosed || s->flight_pending || live_in_flight(s->live))) {
		diagnose_now(s);
		s->steps_diagnosed = s->steps;
		s->last_diagnosis_ms = now;
	}
	if ((s->steps != s->steps_published || s->diagnosis_unpublished) &&
	    now - s->last_publish_ms >= SESSION_PUBLISH_EVERY_MS) {
		if (live_publish(s->live, s->board) == 0) {
			s->steps_published = s->steps;
			s->diagnosis_unpublished = 0;
		}
		s->last_publish_ms = now;
	}
}

/* The readers' side: the board, the viewer socket beside the agents', and
 * /metrics when asked. A reader that cannot start is said and left out:
 * the trace is what a session is for. */
static int start_readers(session_t *s)
{
	char err[256] = "", *sock = NULL, *slash;
	struct sockaddr_un sun;
	int rc;

	if (live_new(&s->live) || live_board_new(&s->board) || hang_lines_new(&s->hang_lines))
		return -ENOMEM;
	/* A first view at once, empty: a viewer that connects to a session no
	 * rank has reached yet gets a snapshot (the protocol's first line comes
	 * at once), so it can tell a viewer socket from any other. */
	if (live_publish(s->live, s->board))
		return -ENOMEM;
	s->last_diagnosis_ms = now_ms();
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
		rc = viewer_server_start(&s->viewer, s->viewer_address + 5, s->board, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "%s: warning: no viewer endpoint: %s\n", s->o.prog,
				err[0] ? err : fss_strerror(rc));
			free(s->viewer_address);
			s->viewer_address = NULL;
		}
	}
	if (s->o.metrics) {
		err[0] = '\0';
		rc = metrics_server_start(&s->metrics, s->o.metrics, s->o.metrics_remote, s->board, err, sizeof(err));
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
	s->in_files = 1;
	err = ingest_add_file(s->ing, path);
	s->in_files = 0;
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
			"%s: merged what run %s left into %s: %" PRIu32 " source%s, %" PRIu64 " collectives, %" PRIu64
			" records%s\n",
			s->o.prog, l[i].id, path, rs.sources, rs.sources == 1 ? "" : "s",
			rs.by_type[FSS_REC_COLLECTIVE], rs.records,
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

int session_new(session_t **out, const struct session_options *o)
{
	session_t *s = calloc(1, sizeof(*s));
	char what[PATH_MAX + 64];
	int err;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->o = *o;
	diagnosis_flags_init(&s->defaults);
	s->flags = o->flags ? o->flags : &s->defaults;
	err = run_folder_new(&s->rs, o->dir, o->argv, what, sizeof(what));
	if (err) {
		fprintf(stderr, "%s: cannot create %s: %s\n", o->prog, what, fss_strerror(err));
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
	{
		struct ingest_options io = {.key = o->key};

		err = ingest_new(&s->ing, run_folder_output(s->rs), &io);
	}
	if (err) {
		fprintf(stderr, "%s: cannot create %s.partial: %s\n", o->prog, run_folder_output(s->rs),
			fss_strerror(err));
		goto fail;
	}
	if (o->keep)
		s->keep = *o->keep;
	else
		keep_policy_default(&s->keep);
	err = keeper_new(&s->keeper, &s->keep, s->ing, run_folder_output(s->rs), run_folder_path(s->rs));
	if (err) {
		fprintf(stderr, "%s: cannot start the --keep policy: %s\n", o->prog, fss_strerror(err));
		goto fail;
	}
	err = analyzer_new(&s->an, &s->flags->analysis);
	if (err) {
		fprintf(stderr, "%s: out of memory\n", o->prog);
		goto fail;
	}
	analyzer_on_step(s->an, on_step, s);
	err = start_readers(s);
	if (err) {
		if (err == -ENOMEM)
			fprintf(stderr, "%s: out of memory\n", o->prog);
		goto fail;
	}
	ingest_on_record(s->ing, on_record, s);
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
	s->last_flush_ms = now_ms();
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
	return s->agent_records;
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
	rc = ingest_poll(s->ing, timeout_ms);
	/* On disk at least once a second: what a killed session loses. */
	if (rc >= 0 && now_ms() - s->last_flush_ms >= SESSION_FLUSH_EVERY_MS) {
		rc = ingest_flush(s->ing);
		s->last_flush_ms = now_ms();
	}
	if (rc < 0)
		say_failed(s, rc);
	keeper_messages(s);
	live_tick(s);
	return 0;
}

/* The streamed analysis, finished, and the rules on it. */
static int diagnose(session_t *s)
{
	int err;

	memset(&s->d, 0, sizeof(s->d));
	s->d.trace_path = s->trace_path;
	if (s->analysis_error)
		return s->analysis_error;
	err = analyzer_finish(s->an, &s->d.result);
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
	return diagnosis_from_result(s->d.result, &s->flags->rules, s->d.findings, NULL, 0, NULL);
}

static int write_json_summary(session_t *s)
{
	FILE *out = fopen(s->o.json_summary, "we");
	int err = 0;

	if (!out)
		return -errno;
	diagnosis_print_json(out, &s->d, &s->flags->rules);
	if (ferror(out))
		err = -EIO;
	if (fclose(out) && !err)
		err = -errno;
	return err;
}

static void print_summary(session_t *s, const struct ingest_stats *st, session_notes_fn notes_fn, void *ctx)
{
	uint32_t processes = 0, unclean = 0;
	const char *prog = s->o.prog;

	for (size_t i = 0; i < st->ndamaged; i++)
		fprintf(stderr, "%s: warning: %s\n", prog, st->damage[i]);
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
	if (s->nmerged)
		fprintf(stderr, "%s: merged %zu per-process file(s) (removed)\n", prog, s->nmerged);
	fprintf(stderr, "%s: trace written to %s\n", prog, s->trace_path);
	fprintf(stderr,
		"%s: %" PRIu32 " process%s, %" PRIu64 " collectives, %" PRIu64 " NVTX ranges, %" PRIu64
		" GPU intervals, %" PRIu64 " records dropped",
		prog, processes, processes == 1 ? "" : "es", st->by_type[FSS_REC_COLLECTIVE],
		st->by_type[FSS_REC_NVTX_RANGE], st->by_type[FSS_REC_GPU_INTERVAL], st->dropped);
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
		fprintf(
		    stderr,
		    "%s: no process reported: the job made no NCCL call, or the agent could not load in it (a static "
		    "or setuid program, or one that clears LD_PRELOAD)\n",
		    prog);
}

int session_finish(session_t *s, int keep_folder, session_notes_fn notes_fn, void *ctx, struct session_outcome *out)
{
	const struct ingest_stats *stats = NULL;
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
	err = s->failed ? -EIO : keeper_drain(s->keeper);
	if (!err)
		err = ingest_finish(s->ing, &stats);
	if (!err) {
		const char *note = NULL;

		err = keeper_finish(s->keeper, &note);
		if (!err && note)
			fprintf(stderr, "%s: the trace holds %s\n", s->o.prog, note);
	}
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
		s->kept = 1;
		out->kept = 1;
		return err ? err : -EIO;
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
		if (s->live && !s->live_error) {
			live_diagnose(s, s->d.result, s->d.findings);
			live_publish(s->live, s->board);
		}
		/* A trace without collectives has nothing to lint. */
		if (stats->by_type[FSS_REC_COLLECTIVE]) {
			fputc('\n', stderr);
			lint_print_diagnosis(stderr, s->d.trace_path, &s->d);
		}
		if (s->o.json_summary) {
			int e = write_json_summary(s);

			if (e)
				fprintf(stderr, "%s: --json-summary %s: %s\n", s->o.prog, s->o.json_summary,
					fss_strerror(e));
		}
	}
	/* Processes still running write on into the folder: it stays, for the
	 * next session to merge. */
	s->kept = keep_folder;
	out->kept = keep_folder;
	return 0;
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
	if (s->board)
		live_board_close(s->board);
	viewer_server_stop(s->viewer);
	metrics_server_stop(s->metrics);
	live_board_free(s->board);
	live_free(s->live);
	hang_lines_free(s->hang_lines);
	free(s->viewer_address);
	keeper_free(s->keeper);
	ingest_free(s->ing);
	analyzer_free(s->an);
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
	return s->board;
}
