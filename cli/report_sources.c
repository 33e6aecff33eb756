/*
 * report_sources.c - how each process of a trace ended, in words.
 */
#include "cli/report_sources.h"

#include "rules/rules.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int report_source_troubled(const struct source_summary *s)
{
	/* a process attach let go while it ran ended nothing: not a trouble */
	return !source_end_whole(s->end) || s->collectives_missing > 0;
}

uint32_t report_sources_troubled(const struct analysis_result *a)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < a->nsources; i++)
		n += report_source_troubled(&a->sources[i]) != 0;
	return n;
}

/* The end in words: "ended cleanly", "exited 1", "exited 0 without its
 * process_end ...", "killed by signal 9 (SIGKILL)", "cut off: no process_end". */
static char *end_words(const struct source_summary *s, char *buf, size_t len)
{
	const char *abbrev;

	switch (s->end) {
	case SOURCE_END_CLEAN:
		snprintf(buf, len, "ended cleanly");
		break;
	case SOURCE_END_EXITED:
		if (s->exit_code == 0 && !s->has_process_end)
			snprintf(buf, len, "exited 0 without its process_end (its last records may be missing)");
		else
			snprintf(buf, len, "exited %d", (int)s->exit_code);
		break;
	case SOURCE_END_SIGNALED:
		abbrev = sigabbrev_np(s->signal);
		snprintf(buf, len, "killed by signal %d (SIG%s)", (int)s->signal, abbrev ? abbrev : "?");
		break;
	case SOURCE_END_DETACHED:
		snprintf(buf, len, SOURCE_END_DETACHED_WORDS);
		break;
	case SOURCE_END_NOT_KNOWN:
		snprintf(buf, len, SOURCE_END_NOT_KNOWN_WORDS);
		break;
	default:
		snprintf(buf, len, "cut off: no process_end");
		break;
	}
	return buf;
}

/* "rank 1, pid 1001, host node-b" (what is known of it). */
static void who(const struct source_summary *s, char *buf, size_t len)
{
	int n = s->rank >= 0 ? snprintf(buf, len, "rank %d%s, pid %u", (int)s->rank,
					source_rank_is_guess((enum source_rank_from)s->rank_from) ? "?" : "", s->pid)
			     : snprintf(buf, len, "source %u (rank unknown), pid %u", s->source, s->pid);

	if (n > 0 && (size_t)n < len && s->host[0])
		snprintf(buf + n, len - (size_t)n, ", host %s", s->host);
}

/* " last record at 2026-12-01 11:40:02.123 UTC (2.1 s after its first)" */
static void last_record(const struct source_summary *s, char *buf, size_t len)
{
	char when[48] = "", span[32];
	struct tm tm;
	time_t sec;

	buf[0] = '\0';
	if (!s->last_ns)
		return;
	sec = (time_t)(s->last_realtime_ns / 1000000000ull);
	if (s->last_realtime_ns && gmtime_r(&sec, &tm)) {
		size_t n = strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);

		snprintf(when + n, sizeof(when) - n, ".%03u UTC",
			 (unsigned)(s->last_realtime_ns % 1000000000ull / 1000000ull));
	}
	rule_format_ns((double)(s->last_ns - s->first_ns), span, sizeof(span));
	if (when[0])
		snprintf(buf, len, ", last record at %s (%s after its first)", when, span);
	else
		snprintf(buf, len, ", last record %s after its first", span);
}

void report_sources_troubles(FILE *out, const struct analysis_result *a, const char *indent)
{
	if (!report_sources_troubled(a))
		return;
	fprintf(out, "%sprocesses that did not end cleanly or lost collectives:\n", indent);
	for (uint32_t i = 0; i < a->nsources; i++) {
		const struct source_summary *s = &a->sources[i];
		char name[160], end[128], last[128] = "";

		if (!report_source_troubled(s))
			continue;
		who(s, name, sizeof(name));
		end_words(s, end, sizeof(end));
		if (!source_end_whole(s->end))
			last_record(s, last, sizeof(last));
		fprintf(out, "%s  %s: %s%s", indent, name, end, last);
		if (s->collectives_missing)
			fprintf(out, "; %" PRIu64 " of its collectives missing (gaps in its sequence numbers)",
				s->collectives_missing);
		fputc('\n', out);
	}
}

/* By rank, a process without one (a launcher) last; then by host and pid. */
static int by_rank(const void *x, const void *y)
{
	const struct source_summary *a = *(const struct source_summary *const *)x;
	const struct source_summary *b = *(const struct source_summary *const *)y;
	int c = strcmp(a->host, b->host);

	if ((a->rank < 0) != (b->rank < 0))
		return a->rank < 0 ? 1 : -1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (c)
		return c;
	return (a->pid > b->pid) - (a->pid < b->pid);
}

void report_sources_table(FILE *out, const struct analysis_result *a)
{
	const struct source_summary **order = malloc((a->nsources ? a->nsources : 1) * sizeof *order);

	fprintf(out, "\nProcesses (%u)\n", a->nsources);
	fprintf(out, "  %4s %7s %-16s %-9s %9s %11s %7s %7s\n", "rank", "pid", "host", "end", "records", "collectives",
		"missing", "dropped");
	for (uint32_t i = 0; order && i < a->nsources; i++)
		order[i] = &a->sources[i];
	if (order)
		qsort(order, a->nsources, sizeof *order, by_rank);
	for (uint32_t i = 0; i < a->nsources; i++) {
		const struct source_summary *s = order ? order[i] : &a->sources[i]; /* unsorted without memory */
		char end[32], rank[16];

		/* a rank nothing measured says reads as a guess */
		snprintf(rank, sizeof(rank), "%d%s", (int)s->rank,
			 source_rank_is_guess((enum source_rank_from)s->rank_from) ? "?" : "");
		if (s->end == SOURCE_END_SIGNALED)
			snprintf(end, sizeof(end), "signal %d", (int)s->signal);
		else if (s->end == SOURCE_END_EXITED)
			snprintf(end, sizeof(end), "exit %d", (int)s->exit_code);
		else
			snprintf(end, sizeof(end), "%s", source_end_name((enum source_end)s->end));
		char missing[32];
		uint64_t in_flight = 0;

		for (uint32_t c = 0; c < a->attach.ncomms; c++)
			if (a->attach.comms[c].source == s->source)
				in_flight += a->attach.comms[c].in_flight;
		/* a call in flight at attach is missing too, though no sequence number says so */
		snprintf(missing, sizeof(missing), "%" PRIu64 "%s", s->collectives_missing + in_flight,
			 in_flight ? "*" : "");
		fprintf(out, "  %4s %7u %-16.16s %-9s %9" PRIu64 " %11" PRIu64 " %7s %7" PRIu64 "\n", rank, s->pid,
			s->host[0] ? s->host : "-", end, s->records, s->collectives, missing, s->dropped);
	}
	free(order);
	if (a->attach.calls_in_flight)
		fprintf(out,
			"  * with %llu call%s in flight at attach: entered before the probes, seen neither at entry "
			"nor at return, not in the trace (the other ranks were seen to make %s)\n",
			(unsigned long long)a->attach.calls_in_flight, a->attach.calls_in_flight == 1 ? "" : "s",
			a->attach.calls_in_flight == 1 ? "it" : "them");
	report_sources_troubles(out, a, "  ");
	if (a->attach.ranks_guessed)
		fprintf(out, "  a rank marked ? was guessed from pid order: nothing measured says it\n");
}

const char *report_rank_from_words(int from)
{
	switch (from) {
	case SOURCE_RANK_COMMUNICATOR:
		return "rank from its communicator";
	case SOURCE_RANK_ENV_RANK:
		return "rank from RANK";
	case SOURCE_RANK_SLURM_PROCID:
		return "rank from SLURM_PROCID";
	case SOURCE_RANK_OMPI_RANK:
		return "rank from OMPI_COMM_WORLD_RANK";
	case SOURCE_RANK_INFERRED_INPLACE:
		return analysis_inferred_words(2);
	case SOURCE_RANK_INFERRED_ENV:
		return analysis_inferred_words(3);
	case SOURCE_RANK_GUESSED_ORDER:
		return analysis_inferred_words(4);
	default:
		return "rank unknown";
	}
}

/* The inferred bits of a communicator in words, "; " between them. */
static void inferred_words(uint32_t bits, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int b = 0; b < ANALYSIS_INFER_KINDS && off < len; b++)
		if (bits & (1u << b))
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "; " : "", analysis_inferred_words(b));
}

void report_sources_attach(FILE *out, const struct analysis_result *a)
{
	const struct analysis_attach *x = &a->attach;
	char words[512];

	if (!x->sources)
		return;
	fprintf(out, "\nAttach (%u of %u processes observed by fsdpscope attach: uprobes on libnccl, host calls only)\n",
		x->sources, a->nsources);
	fprintf(out, "  ends        %u " SOURCE_END_DETACHED_WORDS " when attach let go, %u ended while attached\n",
		x->detached, x->sources - x->detached);
	fprintf(out, "  ranks       %u inferred from what the calls show, %u of them guessed from pid order\n",
		x->ranks_inferred, x->ranks_guessed);
	fprintf(out, "  communicators %u (%u first seen in use, fields inferred; %u seen made)\n", x->ncomms,
		x->comms_observed, x->ncomms - x->comms_observed);
	for (int b = 0; b < ANALYSIS_INFER_KINDS; b++)
		if (x->inferred[b])
			fprintf(out, "    %u of %u: %s\n", x->inferred[b], x->comms_observed, analysis_inferred_words(b));
	for (uint32_t i = 0; i < a->nsources; i++) {
		const struct source_summary *s = &a->sources[i];
		char end[128];

		if (s->path != FSS_PATH_UPROBE)
			continue;
		fprintf(out, "  rank %d%s (%s), pid %u: %s\n", (int)s->rank,
			source_rank_is_guess((enum source_rank_from)s->rank_from) ? "?" : "",
			report_rank_from_words(s->rank_from), s->pid, end_words(s, end, sizeof(end)));
		for (uint32_t c = 0; c < x->ncomms; c++) {
			const struct analysis_attach_comm *m = &x->comms[c];

			if (m->source != s->source)
				continue;
			inferred_words(m->inferred, words, sizeof(words));
			fprintf(out, "    communicator %016" PRIx64 ", %d ranks, rank %d: %s%s%s\n", m->id, (int)m->nranks,
				(int)m->rank, m->observed ? "first seen in use" : "seen made", words[0] ? "; " : "", words);
		}
	}
}
