/*
 * flight.c - collectives in flight: hangs and mismatches (see flight.h and
 * docs/hangs.md for what each kind of source shows). The state is in
 * flight_state.h; records go to the sequence tracking (flight_calls.c) and
 * to the CUPTI ties (flight_gpu.c); the result is the mismatch decision
 * (flight_mismatch.c) and the hang decision (flight_hang.c) of each
 * communicator.
 */
#include "collector/flight.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/flight_calls.h"
#include "collector/flight_gpu.h"
#include "collector/flight_hang.h"
#include "collector/flight_mismatch.h"
#include "collector/flight_state.h"

/* ---- life cycle ----------------------------------------------------------- */

flight_t *flight_new(void)
{
	return calloc(1, sizeof(struct flight));
}

void flight_free(flight_t *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nsrcs; i++) {
		free(f->srcs[i]->rcs);
		free(f->srcs[i]);
	}
	for (size_t i = 0; i < f->ncomms; i++) {
		free(f->comms[i].members);
		free(f->comms[i].slots);
	}
	free(f->srcs);
	free(f->direct);
	free(f->comms);
	free(f);
}

void flight_set_stopped(flight_t *f, uint32_t source, uint64_t realtime_ns)
{
	for (size_t i = 0; realtime_ns && i < f->nsrcs; i++)
		if (f->srcs[i]->id == source && (!f->srcs[i]->stopped_rt || realtime_ns < f->srcs[i]->stopped_rt))
			f->srcs[i]->stopped_rt = realtime_ns;
}

size_t flight_footprint(const flight_t *f)
{
	size_t n = sizeof(*f) + f->capsrcs * sizeof(*f->srcs) + f->ndirect * sizeof(*f->direct) +
		   f->capcomms * sizeof(*f->comms);

	for (size_t i = 0; i < f->nsrcs; i++)
		n += sizeof(*f->srcs[i]) + f->srcs[i]->caprcs * sizeof(*f->srcs[i]->rcs);
	for (size_t i = 0; i < f->ncomms; i++)
		n += f->comms[i].capmembers * sizeof(struct fl_member) +
		     (f->comms[i].slots ? FL_SIG_WINDOW * sizeof(struct fl_slot) : 0);
	return n;
}

/* ---- records ---------------------------------------------------------------- */

int flight_feed(flight_t *f, const struct source *src, const struct fss_record_head *rec)
{
	struct fl_source *fs;

	if (!src)
		return 0;
	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO:
	case FSS_REC_CLOCK_ANCHOR:
	case FSS_REC_ENTER:
	case FSS_REC_SYNC_EXIT:
	case FSS_REC_COLLECTIVE:
	case FSS_REC_GROUP:
	case FSS_REC_GPU_INTERVAL:
	case FSS_REC_CORRELATION:
	case FSS_REC_PROCESS_END:
	case FSS_REC_PROCESS_EXIT:
	case FSS_REC_STEP_SUMMARY:
		break;
	default:
		return 0;
	}
	fs = flight_source_get(f, src);
	if (!fs)
		return -ENOMEM;
	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO: {
		const struct fss_rec_process_hello *h = (const void *)rec;

		fs->has_hello = 1;
		fs->rt_offset = (int64_t)(h->realtime_ns - h->mono_ns);
		if (h->features & FSS_FEATURE_ENTER)
			fs->has_enter = 1;
		return 0;
	}
	case FSS_REC_CLOCK_ANCHOR: {
		const struct fss_rec_clock_anchor *a = (const void *)rec;

		if (a->domain == FSS_CLOCK_REALTIME && a->mono_ns)
			fs->rt_offset = (int64_t)(a->other_ns - a->mono_ns);
		return 0;
	}
	case FSS_REC_ENTER:
		return flight_calls_enter(f, fs, (const void *)rec);
	case FSS_REC_SYNC_EXIT:
		flight_calls_sync_exit(fs, (const void *)rec);
		return 0;
	case FSS_REC_COLLECTIVE:
		return flight_calls_collective(f, fs, (const void *)rec);
	case FSS_REC_GROUP:
		flight_calls_group(fs, (const void *)rec);
		return 0;
	case FSS_REC_GPU_INTERVAL:
		flight_gpu_interval(fs, (const void *)rec);
		return 0;
	case FSS_REC_CORRELATION:
		flight_gpu_correlation(fs, (const void *)rec);
		return 0;
	case FSS_REC_STEP_SUMMARY:
		/* --keep summary left this step's calls out of the trace */
		if (((const struct fss_rec_step_summary *)rec)->collectives)
			fs->numbers_off = 1;
		return 0;
	case FSS_REC_PROCESS_END:
		if (!fs->ended || !fs->end_ns)
			fs->end_ns = ((const struct fss_rec_process_end *)rec)->at_ns;
		fs->ended = 1;
		return 0;
	case FSS_REC_PROCESS_EXIT:
		/* the session's clock, taken as the process's (the session that
		 * reaps a process runs on its host) */
		if (!fs->ended)
			fs->end_ns = ((const struct fss_rec_process_exit *)rec)->at_ns;
		fs->ended = 1;
		return 0;
	default:
		return 0;
	}
}

/* ---- the result ------------------------------------------------------------- */

static uint64_t trace_end(const flight_t *f)
{
	uint64_t end = 0;

	for (size_t i = 0; i < f->nsrcs; i++) {
		const struct fl_source *fs = f->srcs[i];
		uint64_t t = fs->has_hello ? fl_to_rt(fs, fs->src->last_ns) : 0;

		if (t > end)
			end = t;
		if (fs->has_hello && fs->src->has_exit && (t = fl_to_rt(fs, fs->src->exit_at_ns)) > end)
			end = t;
	}
	return end;
}

int flight_fill(const flight_t *f, uint64_t timeout_ns, uint64_t now_realtime_ns, struct analysis_flight *out)
{
	struct flight_waits w = {0};
	uint64_t rts[ANALYSIS_MISMATCHES_MAX] = {0};

	memset(out, 0, sizeof(*out));
	out->timeout_ns = timeout_ns ? timeout_ns : ANALYSIS_DEFAULT_HANG_TIMEOUT_NS;
	out->now_realtime_ns = now_realtime_ns ? now_realtime_ns : trace_end(f);
	for (size_t i = 0; i < f->nsrcs; i++) {
		out->sources_enter += f->srcs[i]->has_enter ? 1u : 0u;
		out->sources_cupti += f->srcs[i]->has_gpu ? 1u : 0u;
	}
	for (size_t ci = 0; ci < f->ncomms; ci++) {
		flight_mismatches_fill(&f->comms[ci], out, rts);
		if (flight_comm_hangs(f, &f->comms[ci], &w, out) < 0) {
			free(w.v);
			memset(out, 0, sizeof(*out));
			out->timeout_ns = timeout_ns ? timeout_ns : ANALYSIS_DEFAULT_HANG_TIMEOUT_NS;
			return -ENOMEM;
		}
	}
	free(w.v);
	flight_hangs_order(f, out);
	return 0;
}
