/*
 * tui_views.c - hand-made live views and a board feed (tui_views.h).
 */
#include "tests/unit/tui_views.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analysis.h"
#include "common/record.h"

#define MS 1000000ull

struct live_view *tv_view(size_t n)
{
	struct live_view *v = calloc(1, sizeof *v);

	v->nranks = n;
	v->ranks = calloc(n ? n : 1, sizeof *v->ranks);
	for (size_t i = 0; i < n; i++) {
		struct live_rank *r = &v->ranks[i];
		uint64_t step = 100 * MS + (uint64_t)(i * 37 % n) * 1000;

		r->rank = (int32_t)i;
		r->source = (uint32_t)i;
		r->pid = 1000 + (uint32_t)i;
		r->dropped = i % 5;
		snprintf(r->host, sizeof r->host, "node%zu", i / 8);
		snprintf(r->command, sizeof r->command, "fsdp_ref");
		r->last.ordinal = 7;
		r->last.start_ns = 1000 * MS;
		r->last.step_ns = step;
		r->last.allgathers = 9 + (uint32_t)(i % 3);
		r->last.exposed_allgather_ns = (uint64_t)(i % 7) * MS;
		r->last.compute_ns = 80 * MS - (uint64_t)(i % 4) * MS;
		r->lateness_ns = (int64_t)(i % 6) * 100000;
		r->nwindow = 8;
		for (size_t w = 0; w < 8; w++) {
			r->window[w] = r->last;
			r->window[w].ordinal = (uint32_t)w;
			r->window[w].step_ns = step + w * MS;
		}
		r->totals.steps = 8;
		r->nstrip = 2;
		r->strip[0] = (struct live_event){.start_ns = 1000 * MS,
						  .end_ns = 1010 * MS + i * 1000,
						  .op = FSS_OP_ALLGATHER,
						  .phase = 1,
						  .calls = 1,
						  .unit = 0,
						  .bytes = 1 << 20,
						  .exposed_ns = 5 * MS};
		r->strip[1] = (struct live_event){.start_ns = 1080 * MS,
						  .end_ns = 1090 * MS,
						  .op = FSS_OP_REDUCESCATTER,
						  .phase = 2,
						  .calls = 1,
						  .unit = UINT32_MAX,
						  .bytes = 1 << 20,
						  .exposed_ns = 0};
		r->ncomms = 1;
		r->comms[0] = (struct live_comm){.id_hash = 0x00c0ffee00000001ull,
						 .nranks = (uint32_t)n,
						 .rank = (int32_t)i,
						 .role = ANALYSIS_ROLE_FSDP,
						 .collectives = 100,
						 .last_seq = 100,
						 .entered = 100,
						 .left = 100};
	}
	return v;
}

/* a finding of rule; title "" as from a session that did not send one */
static void add_finding(struct live_job *j, const char *rule, int severity, const char *title, const char *msg,
			const char *fix)
{
	struct live_finding *f = &j->findings[j->nfindings++];

	snprintf(f->rule, sizeof f->rule, "%s", rule);
	f->severity = severity;
	snprintf(f->title, sizeof f->title, "%s", title);
	snprintf(f->message, sizeof f->message, "%s", msg);
	snprintf(f->evidence, sizeof f->evidence, "evidence of %s", rule);
	snprintf(f->fix, sizeof f->fix, "%s", fix);
}

void tv_units(struct live_view *v, unsigned units, unsigned k)
{
	struct live_job *j = &v->job;

	j->diagnosed = 1;
	j->diagnoses = 3;
	j->verdict = ANALYSIS_DIAGNOSED;
	j->repeating_units = units;
	j->gathers_per_unit = k;
	j->allgathers_per_step = 2 * (units * k + 1);
	j->reshard = ANALYSIS_RESHARD_TRUE;
	j->ngathers = 0;
	j->gathers[j->ngathers++] = (struct live_gather){.unit = UINT32_MAX, .bytes = 4 << 20, .name = "embed"};
	for (unsigned u = 0; u < units; u++)
		for (unsigned g = 0; g < k; g++) {
			struct live_gather *x = &j->gathers[j->ngathers++];

			x->unit = u;
			x->bytes = k > 1 ? 64 << 10 : 1 << 20;
			x->nranks = 4;
			snprintf(x->name, sizeof x->name, "layers.%u%s", u, k > 1 ? ".attn.q" : "");
		}
	j->nfindings = 0;
	if (k > 1)
		add_finding(j, "wrap-too-fine", 2,
			    "More than one AllGather per repeating unit (wrapped per Linear, not per block)",
			    "8 gathers per repeating unit: the job wraps each Linear",
			    "fully_shard(block) for each transformer block, not each nn.Linear:\n"
			    "    for block in model.layers:\n        fully_shard(block)\n    fully_shard(model)\n"
			    "FSDP1:\nFSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}))");
	add_finding(j, "exposed-gather", 1, "", "gathers exposed 12% of the step", "");
}

void tv_hang(struct live_view *v)
{
	struct analysis_hang *h = &v->job.flight.hangs[0];

	v->job.flight.nhangs = 1;
	v->job.flight.hangs_total = 1;
	h->comm_id = 0x00c0ffee00000001ull;
	h->comm_seq = 57;
	h->op = FSS_OP_ALLGATHER;
	h->waited_ns = 63ull * 1000 * MS;
	h->nranks = 3;
	h->nwaiting = 2;
	h->nmissing = 1;
	h->waiting[0] = (struct analysis_flight_rank){.rank = 0, .global_rank = 0, .source = 0, .pid = 1000};
	h->waiting[1] = (struct analysis_flight_rank){.rank = 2, .global_rank = 2, .source = 2, .pid = 1002};
	h->missing[0] =
	    (struct analysis_flight_rank){.rank = 1, .global_rank = 1, .source = 1, .pid = 1001, .last_seq = 56};
	add_finding(&v->job, "collective-hang", 2, "", "rank 1 has not entered collective #57", "");
	v->job.diagnosed = 1;
}

static const struct live_view *f_acquire(void *ctx)
{
	return live_board_acquire(((struct tv_feed *)ctx)->board);
}

static void f_release(void *ctx, const struct live_view *v)
{
	live_board_release(((struct tv_feed *)ctx)->board, v);
}

static int f_wait(void *ctx, int timeout_ms)
{
	struct tv_feed *f = ctx;
	uint64_t g = live_board_wait(f->board, f->seen, timeout_ms);

	if (g == f->seen)
		return 0;
	f->seen = g;
	return 1;
}

static void f_info(void *ctx, struct top_info *out)
{
	*out = ((struct tv_feed *)ctx)->info;
}

static int f_step(void *ctx)
{
	((struct tv_feed *)ctx)->steps++;
	return 0;
}

static int f_quit(void *ctx, int how)
{
	struct tv_feed *f = ctx;

	f->quits++;
	f->quit_how = how;
	return 0;
}

void tv_feed_init(struct tv_feed *f, int mode)
{
	memset(f, 0, sizeof *f);
	live_board_new(&f->board);
	f->info.mode = mode;
	f->info.exit_status = -1;
	snprintf(f->info.command, sizeof f->info.command, "fsdp_ref --wrap linear");
	snprintf(f->info.source, sizeof f->info.source, "/tmp/job.log");
	f->feed = (struct top_feed){.ctx = f,
				    .acquire = f_acquire,
				    .release = f_release,
				    .wait = f_wait,
				    .fd = NULL,
				    .info = f_info,
				    .step = mode == TOP_MODE_REPLAY ? f_step : NULL,
				    .quit = mode == TOP_MODE_RUN ? f_quit : NULL};
}

void tv_feed_done(struct tv_feed *f)
{
	live_board_free(f->board);
}

void tv_feed_put(struct tv_feed *f, struct live_view *v)
{
	live_board_put(f->board, v);
}
