/*
 * kineto_result.c - the finished analysis of PyTorch profiler traces
 * (analyze_traces.c hands it a session over a Kineto input): how each file
 * was read (a partial reading marks the result truncated and is a gap at
 * its byte offset), and the notes on what such a trace cannot tell and on
 * what was inferred (docs/kineto.md "What cannot be known").
 */
#include "collector/kineto_result.h"

#include "collector/analyze_note.h"
#include "collector/kineto_input.h"
#include "collector/session.h"
#include "common/error.h"

#include <stdio.h>
#include <string.h>

/* A partial reading of file k as a gap of the result. */
static void add_partial(struct analysis_result *r, const struct kineto_input_file *k)
{
	struct analysis_gap *g;

	r->trace.gaps_total++;
	if (r->trace.ngaps >= ANALYSIS_GAPS_MAX)
		return;
	g = &r->trace.gaps[r->trace.ngaps++];
	memset(g, 0, sizeof(*g));
	g->offset = k->read.offset;
	g->to_end = 1;
	snprintf(g->why, sizeof(g->why), "%s: %s at byte %llu%s%s", k->path, kineto_read_status_words(k->read.status),
		 (unsigned long long)k->read.offset, k->read.message[0] ? ": " : "", k->read.message);
}

/* The notes of the input's files. */
static void add_notes(struct analysis_result *r, const struct kineto_input_file *files, size_t n)
{
	uint32_t from_launch = 0, from_kernel = 0, inferred = 0, no_pid = 0;
	int32_t world = -1;

	for (size_t i = 0; i < n; i++) {
		const struct kineto_input_file *k = &files[i];

		if (k->read.status != KINETO_READ_OK)
			analyze_note(
			    r, "%s: a partial reading: %s at byte %llu of its JSON text; the events before it are read",
			    k->path, kineto_read_status_words(k->read.status), (unsigned long long)k->read.offset);
		if (k->skipped)
			analyze_note(r, "%s: %llu event%s left out as not understood, the first at byte %llu: %s", k->path,
				     (unsigned long long)k->skipped, k->skipped == 1 ? "" : "s",
				     (unsigned long long)k->read.skip_offset, k->read.skip_message);
		from_launch += k->info->host_from_launch;
		from_kernel += k->info->host_from_kernel;
		inferred += k->info->comms_inferred > 0;
		no_pid += k->info->pid == 0;
		if (k->info->world_size > world)
			world = k->info->world_size;
	}
	analyze_note(r, "read from PyTorch profiler traces: calls in flight (no enter records), drops and how each "
			"process ended cannot be known");
	if (world > 0 && (size_t)world > n)
		analyze_note(r, "%zu of the %d ranks of the job: the job is partial", n, world);
	if (inferred)
		analyze_note(r,
			     "%u file%s name%s no process group (names or ranks): communicators inferred, one per NCCL "
			     "stream",
			     inferred, inferred == 1 ? "" : "s", inferred == 1 ? "s" : "");
	if (from_launch || from_kernel)
		analyze_note(
		    r, "%u collective%s had no CPU-side op: host times from the launch (%u) or the kernel's start (%u)",
		    from_launch + from_kernel, from_launch + from_kernel == 1 ? "" : "s", from_launch, from_kernel);
	if (no_pid)
		analyze_note(r, "%u file%s name%s no host process (pid)", no_pid, no_pid == 1 ? "" : "s",
			     no_pid == 1 ? "s" : "");
}

/* A job without an FSDP group said for what it is: what its NCCL kernels
 * were, in place of the analysis' general words (and its note). */
static void say_not_sharded(struct analysis_result *r, const struct kineto_input_file *files, size_t n)
{
	uint64_t ag = 0, rs = 0, ar = 0, other = 0;
	char why[320], note[ANALYSIS_NOTE_BYTES + 16];
	const char *kind;

	if (r->verdict != ANALYSIS_UNDECIDED || r->undecided_reason != ANALYSIS_UNDECIDED_NO_FSDP)
		return;
	for (size_t i = 0; i < n; i++) {
		ag += files[i].figures->allgather_kernels;
		rs += files[i].figures->reduce_scatter_kernels;
		ar += files[i].figures->allreduce_kernels;
		other += files[i].figures->other_kernels;
	}
	if (ar && ar >= other && !ag && !rs)
		kind = "data-parallel (DDP), gradients all-reduced";
	else if (other > ar && !ag && !rs)
		kind = "all-to-all or point-to-point (TorchRec, MoE)";
	else
		kind = "no communicator with both AllGathers and ReduceScatters";
	snprintf(why, sizeof(why),
		 "not sharded training: %s (NCCL kernels: %llu all-reduce, %llu AllGather, %llu ReduceScatter, "
		 "%llu other)",
		 kind, (unsigned long long)ar, (unsigned long long)ag, (unsigned long long)rs,
		 (unsigned long long)other);
	snprintf(note, sizeof(note), "not diagnosed: %s", r->undecided_why);
	for (uint32_t i = 0; i < r->nnotes; i++)
		if (strcmp(r->notes[i], note) == 0)
			snprintf(r->notes[i], sizeof(r->notes[i]), "not diagnosed: %.140s", why);
	snprintf(r->undecided_why, sizeof(r->undecided_why), "%.150s", why);
}

int kineto_result_finish(fss_session_t *s, int rc, struct analysis_result **out, char *err, size_t errlen)
{
	size_t n;
	const struct kineto_input_file *files = kineto_input_files(s, &n);
	int partial = 0;

	rc = fss_session_finish_analysis(s, rc, out);
	if (rc < 0) {
		if (errlen)
			snprintf(err, errlen, "%s", fss_strerror(rc));
		return rc;
	}
	(*out)->trace.gaps_total = 0;
	(*out)->trace.ngaps = 0;
	for (size_t i = 0; i < n; i++)
		if (files[i].read.status != KINETO_READ_OK) {
			add_partial(*out, &files[i]);
			partial = 1;
		}
	(*out)->trace.end = partial ? "cut" : "clean";
	say_not_sharded(*out, files, n);
	add_notes(*out, files, n);
	return rc;
}
