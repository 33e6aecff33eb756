/*
 * trace_jobs.c - whether several traces are one job's (trace_jobs.h): the
 * relation between two files, followed across files (union-find), and the
 * words of a refusal.
 */
#include "collector/trace_jobs.h"

#include "common/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Why two files are not of one job (bits; 0: they are). */
enum apart {
	APART_TIME = 1u << 0,	   /* their times do not overlap */
	APART_NO_COMM = 1u << 1,   /* both show communicators, none of them shared */
	APART_SAME_RANK = 1u << 2, /* both hold one rank of a communicator (or of one world) */
	APART_WORLDS = 1u << 3,	   /* their worlds differ in size */
};

struct pair {
	unsigned apart;
	struct trace_jobs_rank same; /* APART_SAME_RANK: the rank both hold */
	int32_t size_a, size_b;	     /* APART_WORLDS: the two worlds' sizes */
};

static int has_comm(const struct trace_jobs_file *f)
{
	for (size_t i = 0; i < f->nranks; i++)
		if (f->ranks[i].comm)
			return 1;
	return 0;
}

static int time_known(const struct trace_jobs_file *f)
{
	return f->first_ns || f->last_ns;
}

static int times_apart(const struct trace_jobs_file *a, const struct trace_jobs_file *b)
{
	return time_known(a) && time_known(b) && (a->last_ns < b->first_ns || b->last_ns < a->first_ns);
}

static int share_comm(const struct trace_jobs_file *a, const struct trace_jobs_file *b)
{
	for (size_t i = 0; i < a->nranks; i++)
		for (size_t j = 0; a->ranks[i].comm && j < b->nranks; j++)
			if (a->ranks[i].comm == b->ranks[j].comm)
				return 1;
	return 0;
}

/* The largest world a file's processes say they are of, 0 unknown. */
static int32_t world_size(const struct trace_jobs_file *f)
{
	int32_t size = 0;

	for (size_t i = 0; i < f->nranks; i++)
		if (!f->ranks[i].comm && f->ranks[i].size > size)
			size = f->ranks[i].size;
	return size;
}

/* A rank both files hold: of a communicator they share, or (worlds) of
 * their worlds, whose sizes agree where both are known. */
static int same_rank(const struct trace_jobs_file *a, const struct trace_jobs_file *b, int worlds,
		     struct trace_jobs_rank *out)
{
	for (size_t i = 0; i < a->nranks; i++)
		for (size_t j = 0; j < b->nranks; j++) {
			const struct trace_jobs_rank *x = &a->ranks[i], *y = &b->ranks[j];

			if (x->rank != y->rank || x->comm != y->comm || (!x->comm && !worlds))
				continue;
			if (!x->comm && x->size && y->size && x->size != y->size)
				continue;
			*out = *x;
			return 1;
		}
	return 0;
}

static struct pair pair_of(const struct trace_jobs_file *a, const struct trace_jobs_file *b)
{
	struct pair p = {0};

	if (times_apart(a, b))
		p.apart |= APART_TIME;
	if (share_comm(a, b)) {
		/* the communicator decides; world ranks may repeat across an elastic restart's worlds */
		if (same_rank(a, b, 0, &p.same))
			p.apart |= APART_SAME_RANK;
	} else if (has_comm(a) && has_comm(b)) {
		p.apart |= APART_NO_COMM;
	} else {
		p.size_a = world_size(a);
		p.size_b = world_size(b);
		if (p.size_a && p.size_b && p.size_a != p.size_b)
			p.apart |= APART_WORLDS;
		else if (same_rank(a, b, 1, &p.same))
			p.apart |= APART_SAME_RANK;
	}
	return p;
}

static uint32_t find_root(uint32_t *parent, uint32_t i)
{
	while (parent[i] != i)
		i = parent[i] = parent[parent[i]];
	return i;
}

int trace_jobs_group(const struct trace_jobs_file *files, size_t n, uint32_t *job, uint32_t *njobs)
{
	uint32_t *parent = n ? malloc(n * sizeof(*parent)) : NULL;
	uint32_t jobs = 0;

	*njobs = 0;
	if (n && !parent)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		parent[i] = (uint32_t)i;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			uint32_t ri = find_root(parent, (uint32_t)i), rj = find_root(parent, (uint32_t)j);

			if (ri != rj && !pair_of(&files[i], &files[j]).apart)
				parent[rj > ri ? rj : ri] = rj > ri ? ri : rj;
		}
	/* jobs numbered by when they started (a run before the next), then by
	 * their first files (a root is its job's first file) */
	for (size_t i = 0; i < n; i++)
		job[i] = UINT32_MAX;
	for (;;) {
		size_t best = n;
		int64_t best_at = INT64_MAX;

		for (size_t i = 0; i < n; i++) {
			uint32_t r = find_root(parent, (uint32_t)i);
			int64_t at = time_known(&files[i]) ? files[i].first_ns : INT64_MAX;

			if (job[r] != UINT32_MAX)
				continue;
			if (best == n || at < best_at || (at == best_at && r < best)) {
				best = r;
				best_at = at;
			}
		}
		if (best == n)
			break;
		job[best] = jobs++;
	}
	for (size_t i = 0; i < n; i++)
		job[i] = job[find_root(parent, (uint32_t)i)];
	free(parent);
	*njobs = jobs;
	return 0;
}

/* ---- the words ----------------------------------------------------------- */

struct words {
	char *buf;
	size_t len, off;
};

static void say(struct words *w, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (!w->len || w->off >= w->len)
		return;
	va_start(ap, fmt);
	k = vsnprintf(w->buf + w->off, w->len - w->off, fmt, ap);
	va_end(ap);
	if (k > 0)
		w->off += (size_t)k;
}

static void say_rank(struct words *w, const struct trace_jobs_rank *r)
{
	if (r->comm)
		say(w, "both hold rank %d of communicator %016" PRIx64, r->rank, r->comm);
	else if (r->size)
		say(w, "both are rank %d of a world of %d", r->rank, r->size);
	else
		say(w, "both are rank %d", r->rank);
}

static void say_apart(struct words *w, const struct pair *p)
{
	const char *sep = "";

	if (p->apart & APART_NO_COMM)
		say(w, "%sno communicator in common", sep), sep = ", ";
	if (p->apart & APART_WORLDS)
		say(w, "%sworlds of %d and %d ranks", sep, p->size_a, p->size_b), sep = ", ";
	if (p->apart & APART_SAME_RANK)
		say(w, "%s", sep), say_rank(w, &p->same), sep = ", ";
	if (p->apart & APART_TIME)
		say(w, "%stheir times do not overlap", sep);
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Job j's world ranks, as "ranks 0-3", "rank 2", "5 ranks from 0 to 9". */
static int say_job_ranks(struct words *w, const struct trace_jobs_file *files, size_t n, const uint32_t *job,
			 uint32_t j)
{
	size_t count = 0, distinct = 0;
	int32_t *ranks;

	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; job[i] == j && k < files[i].nranks; k++)
			count += !files[i].ranks[k].comm;
	if (!count) {
		say(w, "ranks not known");
		return 0;
	}
	ranks = malloc(count * sizeof(*ranks));
	if (!ranks)
		return -ENOMEM;
	count = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; job[i] == j && k < files[i].nranks; k++)
			if (!files[i].ranks[k].comm)
				ranks[count++] = files[i].ranks[k].rank;
	qsort(ranks, count, sizeof(*ranks), cmp_i32);
	for (size_t k = 0; k < count; k++)
		distinct += !k || ranks[k] != ranks[k - 1];
	if (distinct == 1)
		say(w, "rank %d", ranks[0]);
	else if ((int64_t)ranks[count - 1] - ranks[0] + 1 == (int64_t)distinct)
		say(w, "ranks %d-%d", ranks[0], ranks[count - 1]);
	else
		say(w, "%zu ranks from %d to %d", distinct, ranks[0], ranks[count - 1]);
	free(ranks);
	return 0;
}

/* Job j's time, "2026-12-04 19:52:40 to 19:52:41 UTC", nothing when no file knows it. */
static void say_job_time(struct words *w, const struct trace_jobs_file *files, size_t n, const uint32_t *job,
			 uint32_t j)
{
	int64_t first = INT64_MAX, last = INT64_MIN;
	char a[32], b[16];
	struct tm tm;
	time_t t;

	for (size_t i = 0; i < n; i++)
		if (job[i] == j && time_known(&files[i])) {
			first = files[i].first_ns < first ? files[i].first_ns : first;
			last = files[i].last_ns > last ? files[i].last_ns : last;
		}
	if (first == INT64_MAX)
		return;
	t = (time_t)(first / 1000000000);
	if (!gmtime_r(&t, &tm) || !strftime(a, sizeof(a), "%Y-%m-%d %H:%M:%S", &tm))
		return;
	t = (time_t)(last / 1000000000);
	if (!gmtime_r(&t, &tm) || !strftime(b, sizeof(b), "%H:%M:%S", &tm))
		return;
	say(w, ", %s to %s UTC", a, b);
}

/* "job 1 (ranks 0-1, ... UTC): a.fss, b.fss" */
static int say_job(struct words *w, const struct trace_jobs_file *files, size_t n, const uint32_t *job, uint32_t j)
{
	size_t named = 0, count = 0;
	int rc;

	say(w, "job %u (", j + 1);
	if ((rc = say_job_ranks(w, files, n, job, j)))
		return rc;
	say_job_time(w, files, n, job, j);
	say(w, "):");
	for (size_t i = 0; i < n; i++) {
		if (job[i] != j)
			continue;
		if (named++ < TRACE_JOBS_NAMED_FILES)
			say(w, "%s %s", named > 1 ? "," : "", files[i].path);
		count++;
	}
	if (count > TRACE_JOBS_NAMED_FILES)
		say(w, " and %zu more", count - TRACE_JOBS_NAMED_FILES);
	return 0;
}

/* Two files of one joined job that hold the same rank: said, FSS_E_USAGE; else 0. */
static int check_joined(const struct trace_jobs_file *files, size_t n, const uint32_t *job, struct words *w)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			struct pair p;

			if (job[i] != job[j])
				continue;
			p = pair_of(&files[i], &files[j]);
			if (!(p.apart & APART_SAME_RANK))
				continue;
			say(w, "%s and %s ", files[i].path, files[j].path);
			say_rank(w, &p.same);
			say(w, ", yet the other traces join them into one job: which job each is of cannot be told; "
			       "read them apart");
			return FSS_E_USAGE;
		}
	return 0;
}

int trace_jobs_check(const struct trace_jobs_file *files, size_t n, char *err, size_t errlen)
{
	struct words w = {.buf = err, .len = errlen};
	uint32_t *job, njobs = 0;
	size_t first = 0, second = 0;
	int rc;

	if (errlen)
		err[0] = 0;
	if (n < 2)
		return 0;
	job = malloc(n * sizeof(*job));
	if (!job || (rc = trace_jobs_group(files, n, job, &njobs))) {
		free(job);
		say(&w, "out of memory");
		return -ENOMEM;
	}
	if (njobs == 1) {
		rc = check_joined(files, n, job, &w);
		free(job);
		return rc;
	}
	while (job[first] != 0)
		first++;
	while (job[second] != 1)
		second++;
	struct pair p = pair_of(&files[first], &files[second]);

	say(&w, "the traces are of %u jobs, not one (%s and %s: ", njobs, files[first].path, files[second].path);
	say_apart(&w, &p);
	say(&w, "): ");
	for (uint32_t j = 0; j < njobs && !rc; j++) {
		say(&w, "%s", j ? "; " : "");
		rc = say_job(&w, files, n, job, j);
	}
	say(&w, "; read one job at a time, giving only its traces, e.g.");
	for (size_t i = 0, named = 0; i < n && named < TRACE_JOBS_NAMED_FILES; i++)
		if (job[i] == 0)
			say(&w, " %s", files[i].path), named++;
	free(job);
	if (rc) {
		w.off = 0;
		say(&w, "out of memory");
		return rc;
	}
	return FSS_E_USAGE;
}
