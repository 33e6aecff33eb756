/*
 * analyze.c - drives the analysis from records to a result (see analyze.h).
 *
 * Per rank (trace source) the analysis goes through three states:
 *   undecided: events accumulate (and feed the period search) until either
 *              an NVTX step range arrives (NVTX steps) or the period is
 *              found (period steps);
 *   stepping:  each complete step is summarised (counts, exposure per
 *              gather, step figures) and its events, ranges and GPU
 *              intervals are released;
 *   at finish: the steady-state step of the headline rank is analysed for
 *              units, reshard policy, ledger and breakdown.
 * A step is complete when its events are in and, for a rank with CUPTI,
 * the GPU intervals up to its end have arrived (CUPTI delivers in buffers).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "collector/analyze.h"
#include "collector/breakdown.h"
#include "collector/comm_roles.h"
#include "collector/ledger.h"
#include "collector/median.h"
#include "collector/overlap.h"
#include "collector/phases.h"
#include "collector/ranks.h"
#include "collector/reshard.h"
#include "collector/step_summaries.h"
#include "collector/steps.h"
#include "collector/timeline.h"
#include "collector/units.h"
#include "common/arith.h"
#include "common/error.h"
#include "common/trace_parser.h"

/* Events of a rank looked at before its communicators get their roles:
 * several steps of any job seen so far (a 32-block per-Linear step is about
 * 800 events, with tensor parallelism about 1100). */
#define ANALYZE_ROLE_WINDOW 4096
#define ANALYZE_ROLE_STEPS 3
/* NVTX steps buffered before the steady-state step is chosen among them. */
#define ANALYZE_EARLY_STEPS 8
/* Steps that may wait for late GPU intervals before they are analysed anyway. */
#define ANALYZE_MAX_WAITING_STEPS 16

/* Calls may reach the trace a little out of seq order (one thread's call
 * entered before another's that was recorded ahead of it): a stretch is
 * checked for lost calls against this many events on either side of it. */
#define ANALYZE_SEQ_LOOK 64

enum rank_mode { MODE_UNDECIDED = 0, MODE_NVTX = 1, MODE_PERIOD = 2 };

/* Seq numbers of a collective event's calls. */
struct seq_range {
	uint64_t lo, hi;
};

/* What one step's gathers did (per event of the step). */
struct ev_info {
	uint64_t duration, exposed, hidden, queued; /* FSDP gathers: as struct analysis_gather's */
	uint64_t compute_wait, call;                /* duration_ns, exposed_ns, hide_ns, queued_ns, ... */
	uint32_t name;  /* forward gathers: the unit's NVTX range name (source name id) */
	uint8_t phase;  /* FSDP gathers: enum analysis_phase, else 0 */
	uint8_t cause;
	uint8_t timed;  /* has an interval (GPU or host) */
	uint8_t reserved;
	int32_t cycle;  /* FSDP gathers: the step's micro-batch, -1 */
	int32_t unit;   /* FSDP gathers: the forward unit gathered, -1 */
	uint8_t fsdp;   /* an event of the FSDP group (shard or re-gather communicator) */
	uint8_t recompute; /* FSDP gathers: a unit's second backward gather in its cycle */
	uint8_t in_steps;  /* an event of the data-parallel side (comm_role_in_steps) */
	uint8_t reserved2;
};

/* Per-step figures that get medians. */
enum step_figure {
	FIG_STEP,
	FIG_AG,
	FIG_AG_EXPOSED,
	FIG_FWD_EXPOSED,
	FIG_BWD_EXPOSED,
	FIG_RS,
	FIG_RS_EXPOSED,
	FIG_AR,
	FIG_AR_EXPOSED,
	FIG_COMPUTE,
	FIG_COMM_EXPOSED,
	FIG_EXPOSED_GATHERS,
	FIG_CAUSE_N,                           /* + cause */
	FIG_CAUSE_NS = FIG_CAUSE_N + ANALYSIS_CAUSE_MAX, /* + cause: exposed */
	FIG_CAUSE_WAIT = FIG_CAUSE_NS + ANALYSIS_CAUSE_MAX, /* + cause: compute wait */
	FIG_AG_WAIT = FIG_CAUSE_WAIT + ANALYSIS_CAUSE_MAX,
	FIG_FWD_WAIT,
	FIG_BWD_WAIT,
	FIG_OTHER_WAIT, /* compute waits that belong to collectives other than the gathers */
	FIG_MAX
};

struct step_summary {
	struct phases_result phases; /* the FSDP group's cycles */
	uint64_t hash;          /* of the event signatures: equal steps, equal hashes */
	size_t nev;
	struct tl_event *ev;    /* [nev] copies */
	struct ev_info *info;   /* [nev] */
	uint64_t fig[FIG_MAX];
	int exposure_source;    /* enum analysis_exposure_source */
	int has_names;
	uint32_t ordinal;       /* as analysis_step_info's */
	uint32_t reserved;
};

/* One gather in one step, as the step sample keeps it. */
struct gather_fig {
	uint64_t duration, exposed, compute_wait, queued, call;
	uint8_t cause, timed;
	uint8_t reserved[6];
};

/* A bounded uniform sample of a rank's analysed steps (algorithm R with a
 * fixed seed, as median.h, so a report is reproducible): the step figures
 * of each, and with detail the figures of each of its gathers. The
 * representative step, whose figures the exposure section and the gathers
 * table report together, is chosen among them. */
#define STEP_SAMPLE_SLOTS MEDIAN_SLOTS
struct step_sample {
	uint64_t seen, rng;
	uint32_t ordinal[STEP_SAMPLE_SLOTS];
	uint64_t fig[STEP_SAMPLE_SLOTS][FIG_MAX];
	struct gather_fig *gathers; /* [STEP_SAMPLE_SLOTS][nev] when detail */
};

struct rank_state {
	struct tl_source *src;
	enum rank_mode mode;
	steps_cutter_t *cutter;
	struct comm_roles roles; /* what each communicator carries, once decided */
	int roles_decided;
	uint64_t roled;          /* source events (absolute) whose role is set */
	uint64_t fed;            /* source events (absolute) looked at for the cutter */
	uint64_t filtered_taken; /* events of the data-parallel side consumed by cuts */
	uint64_t *comm_events;   /* [ncomm_events] events seen per communicator slot */
	size_t ncomm_events;
	uint64_t nvtx_seen;      /* the source's step ranges when they were last looked at */
	uint64_t nvtx_gpu_wait;  /* the oldest step's end the GPU intervals must reach, 0 */
	struct steps_cut held;   /* a cut waiting to be analysed */
	int have_held;
	uint64_t last_t1;        /* end of the last NVTX step analysed */
	uint32_t skip_left;      /* options.warmup_steps still to skip */

	/* NVTX steps: the first ones, until the steady state is chosen */
	struct step_summary *early[ANALYZE_EARLY_STEPS];
	unsigned nearly;
	int decided;
	uint64_t tmpl_hash;

	/* the steady-state step and its figures */
	struct phases_result phases;
	size_t nev;
	struct tl_event *tev;    /* [nev] */
	struct ev_info *tinfo;   /* [nev]: phase, names */
	int detail;              /* per-gather figures kept (headline candidate) */
	struct step_sample sample;
	struct median fig[FIG_MAX];
	int exposure_source;

	uint32_t analyzed, warmup, irregular, trailing;
	uint64_t outside_events;
	uint32_t ordinal; /* steps seen so far */

	/* what the trace can vouch for (struct analysis_trust) */
	uint64_t seq_max;        /* highest collective seq among the events taken */
	uint64_t calls_taken;    /* collective calls among them */
	struct seq_range recent[ANALYZE_SEQ_LOOK]; /* seq numbers of the latest events taken */
	unsigned nrecent, recent_at;
	int unmatched_from_loss; /* a gap was met: later events are not matched across ranks (their
	                            per-communicator numbers are shifted by the calls lost) */
	int has_end;             /* its process_end arrived: its records are whole (a process_exit alone
	                            says it was reaped, not that its agent wrote everything) */
	uint64_t seq_end;        /* calls its process_end counted, 0 before one */
	int reaped;              /* a process_exit arrived: wait_status says how it ended */
	int32_t wait_status;
	uint32_t steps_lost, steps_cut;
	struct lost_example {
		uint32_t ordinal;
		uint64_t count, seq_lo, seq_hi;
	} lost_first;            /* the first step left out for lost collectives (count 0: none) */
	uint32_t cut_ordinal;    /* the step left out as cut off (steps_cut > 0) */
	uint64_t ring_dropped, sink_dropped, cupti_dropped, nvtx_dropped; /* its latest drops record */
	int nvtx_event_wait;     /* the oldest NVTX step waits for the event after it (its edge) */
	uint64_t nvtx_events_seen; /* source events when it began to wait */
	struct seq_range summarised[ANALYZE_SEQ_LOOK]; /* seq numbers of summarised steps (--keep summary)
	                                                  not yet passed, in order */
	unsigned nsummarised;
};

/* Why a step is left out (analysis_step_info.excluded). */
enum step_exclusion {
	STEP_CLEAN = 0,
	STEP_LOST = 1, /* its source lost collectives in it or at its edges */
	STEP_CUT = 2,  /* in progress where its source's records stop */
};

struct analyzer {
	struct analysis_options opt;
	timeline_t *tl;
	ranks_t *ranks;
	struct rank_state **rs; /* parallel to the timeline's sources */
	size_t nrs;
	int truncated;
	int finished;
	int32_t min_rank_seen;
	analysis_step_fn on_step;
	void *on_step_ctx;
	size_t pending_max;
	struct step_summaries kept; /* what a --keep trace left out (keep_records) */
};

/* ---- options and names ------------------------------------------------- */

void analysis_options_init(struct analysis_options *o)
{
	memset(o, 0, sizeof *o);
	o->rank = 0;
	o->prefetch = ANALYSIS_DEFAULT_PREFETCH;
	o->warmup_steps = -1;
	o->param_bytes = ANALYSIS_DEFAULT_PARAM_BYTES;
	o->grad_bytes = ANALYSIS_DEFAULT_GRAD_BYTES;
	o->master_bytes = ANALYSIS_DEFAULT_MASTER_BYTES;
	o->optimizer_bytes = ANALYSIS_DEFAULT_OPTIMIZER_BYTES;
	o->step_ranges = ANALYSIS_DEFAULT_STEP_RANGES;
	o->compute_ranges = ANALYSIS_DEFAULT_COMPUTE_RANGES;
	o->exposed_min_ns = ANALYSIS_DEFAULT_EXPOSED_MIN_NS;
}

void analysis_result_free(struct analysis_result *r)
{
	if (!r)
		return;
	free(r->gathers);
	free(r->per_rank);
	free(r->sources);
	free(r);
}

const char *analysis_step_detection_name(enum analysis_step_detection d)
{
	switch (d) {
	case ANALYSIS_STEPS_NVTX:
		return "nvtx";
	case ANALYSIS_STEPS_PERIOD:
		return "period";
	default:
		return "none";
	}
}

const char *analysis_exposure_source_name(enum analysis_exposure_source s)
{
	switch (s) {
	case ANALYSIS_EXPOSURE_CUPTI:
		return "cupti";
	case ANALYSIS_EXPOSURE_HOST:
		return "host";
	default:
		return "none";
	}
}

const char *analysis_comm_role_name(int role)
{
	static const char *const names[ANALYSIS_ROLE_MAX] = {
	    [ANALYSIS_ROLE_UNKNOWN] = "unknown",
	    [ANALYSIS_ROLE_FSDP] = "fsdp",
	    [ANALYSIS_ROLE_FSDP_REGATHER] = "fsdp-regather",
	    [ANALYSIS_ROLE_REPLICATE] = "replicate",
	    [ANALYSIS_ROLE_TENSOR_PARALLEL] = "tensor-parallel",
	    [ANALYSIS_ROLE_PIPELINE] = "pipeline",
	    [ANALYSIS_ROLE_EXPERT] = "expert-parallel",
	    [ANALYSIS_ROLE_ALLREDUCE] = "allreduce",
	    [ANALYSIS_ROLE_STEP] = "step",
	    [ANALYSIS_ROLE_ONE_OFF] = "one-off",
	    [ANALYSIS_ROLE_IDLE] = "idle",
	};
	return role >= 0 && role < ANALYSIS_ROLE_MAX ? names[role] : "unknown";
}

const char *analysis_verdict_name(int verdict)
{
	return verdict == ANALYSIS_DIAGNOSED ? "diagnosed" : verdict == ANALYSIS_BUCKETED ? "bucketed" : "undecided";
}

const char *analysis_undecided_name(int reason)
{
	static const char *const names[ANALYSIS_UNDECIDED_MAX] = {
	    [ANALYSIS_UNDECIDED_NONE] = "none",
	    [ANALYSIS_UNDECIDED_NO_COLLECTIVES] = "no-collectives",
	    [ANALYSIS_UNDECIDED_NO_FSDP] = "no-fsdp-group",
	    [ANALYSIS_UNDECIDED_NO_STEP] = "no-step",
	    [ANALYSIS_UNDECIDED_NO_REDUCTION] = "no-reduce-scatter",
	    [ANALYSIS_UNDECIDED_PATTERN] = "unknown-pattern",
	    [ANALYSIS_UNDECIDED_INCOMPLETE] = "incomplete",
	};
	return reason >= 0 && reason < ANALYSIS_UNDECIDED_MAX ? names[reason] : "none";
}

const char *analysis_phase_source_name(int source)
{
	return source == ANALYSIS_PHASES_STRUCTURE ? "structure" : "none";
}

const char *analysis_phase_name(int phase)
{
	return phase == ANALYSIS_PHASE_FORWARD ? "forward" : phase == ANALYSIS_PHASE_BACKWARD ? "backward" : "none";
}

const char *analysis_cause_name(int cause)
{
	switch (cause) {
	case ANALYSIS_CAUSE_HIDDEN:
		return "hidden";
	case ANALYSIS_CAUSE_FIRST_OF_PHASE:
		return "first-of-phase";
	case ANALYSIS_CAUSE_NO_PREFETCH:
		return "no-prefetch";
	case ANALYSIS_CAUSE_BANDWIDTH_BOUND:
		return "bandwidth-bound";
	case ANALYSIS_CAUSE_HOST_LATE:
		return "host-late";
	default:
		return "unknown";
	}
}

char *analysis_reshard_format(const struct analysis_reshard_info *r, char *buf, size_t len)
{
	if (len == 0)
		return buf;
	switch (r->policy) {
	case ANALYSIS_RESHARD_TRUE:
		snprintf(buf, len, "true");
		break;
	case ANALYSIS_RESHARD_FALSE:
		snprintf(buf, len, "false");
		break;
	case ANALYSIS_RESHARD_GROUP:
		snprintf(buf, len, "group:%u", r->group_size);
		break;
	case ANALYSIS_RESHARD_MIXED:
		snprintf(buf, len, "mixed");
		break;
	default:
		snprintf(buf, len, "unknown");
		break;
	}
	return buf;
}

/* ---- life cycle ---------------------------------------------------------- */

int analyzer_new(analyzer_t **out, const struct analysis_options *opts)
{
	*out = NULL;
	analyzer_t *a = calloc(1, sizeof *a);
	if (!a)
		return -ENOMEM;
	if (opts)
		a->opt = *opts;
	else
		analysis_options_init(&a->opt);
	if (!a->opt.step_ranges)
		a->opt.step_ranges = ANALYSIS_DEFAULT_STEP_RANGES;
	if (!a->opt.compute_ranges)
		a->opt.compute_ranges = ANALYSIS_DEFAULT_COMPUTE_RANGES;
	if (a->opt.prefetch < 0)
		a->opt.prefetch = 0;
	a->min_rank_seen = INT32_MAX;
	a->tl = timeline_new(a->opt.step_ranges, a->opt.compute_ranges);
	a->ranks = ranks_new();
	if (!a->tl || !a->ranks) {
		analyzer_free(a);
		return -ENOMEM;
	}
	*out = a;
	return 0;
}

static void summary_free(struct step_summary *s)
{
	if (!s)
		return;
	free(s->ev);
	free(s->info);
	free(s);
}

static void rank_state_free(struct rank_state *rs)
{
	if (!rs)
		return;
	comm_roles_release(&rs->roles);
	free(rs->comm_events);
	steps_cutter_free(rs->cutter);
	for (unsigned i = 0; i < rs->nearly; i++)
		summary_free(rs->early[i]);
	free(rs->tev);
	free(rs->tinfo);
	free(rs->sample.gathers);
	free(rs);
}

void analyzer_free(analyzer_t *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nrs; i++)
		rank_state_free(a->rs[i]);
	free(a->rs);
	ranks_free(a->ranks);
	timeline_free(a->tl);
	free(a);
}

void analyzer_set_truncated(analyzer_t *a)
{
	a->truncated = 1;
}

void analyzer_on_step(analyzer_t *a, analysis_step_fn fn, void *ctx)
{
	a->on_step = fn;
	a->on_step_ctx = ctx;
}

static struct rank_state *state_for(analyzer_t *a, struct tl_source *src)
{
	for (size_t i = 0; i < a->nrs; i++)
		if (a->rs[i]->src == src)
			return a->rs[i];
	struct rank_state **v = realloc(a->rs, (a->nrs + 1) * sizeof *v);
	if (!v)
		return NULL;
	a->rs = v;
	struct rank_state *rs = calloc(1, sizeof *rs);
	if (!rs)
		return NULL;
	rs->src = src;
	rs->cutter = steps_cutter_new(0);
	if (!rs->cutter) {
		free(rs);
		return NULL;
	}
	rs->skip_left = a->opt.warmup_steps > 0 ? (uint32_t)a->opt.warmup_steps : 0;
	a->rs[a->nrs++] = rs;
	return rs;
}

/* ---- one step ------------------------------------------------------------ */

static uint64_t hash_events(const struct tl_event *ev, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	for (size_t i = 0; i < n; i++) {
		h ^= ev[i].sig;
		h *= 0x100000001b3ull;
		h ^= h >> 31;
	}
	return h;
}

static int u64_cmp(const void *x, const void *y)
{
	uint64_t p = *(const uint64_t *)x, q = *(const uint64_t *)y;
	return p < q ? -1 : p > q;
}

/* What a collective is to compute (overlap.h): the FSDP group's parameter
 * gathers; its gradient reductions and the replicas' all-reduces, which
 * compute does not wait for mid-step; the rest (activation collectives, the
 * loss and norm all-reduces, point-to-point), which it waits for at once. */
static enum overlap_kind collective_kind(const struct tl_event *e, const struct ev_info *in)
{
	if (!in->timed)
		return OVERLAP_BACKGROUND;
	if (in->fsdp && e->op == FSS_OP_ALLGATHER)
		return OVERLAP_GATHER;
	if ((in->fsdp && e->op == FSS_OP_REDUCESCATTER) || e->role == ANALYSIS_ROLE_REPLICATE)
		return OVERLAP_BACKGROUND;
	return OVERLAP_AWAITED;
}

struct seq_span {
	uint64_t seq, start, end;
};

static int seq_span_cmp(const void *a, const void *b)
{
	const struct seq_span *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Clip a merged set to [t0, t1) in place. */
static size_t clip(struct interval *v, size_t n, uint64_t t0, uint64_t t1)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t s = v[i].start > t0 ? v[i].start : t0;
		uint64_t e = v[i].end < t1 ? v[i].end : t1;
		if (e > s)
			v[o++] = (struct interval){s, e};
	}
	return o;
}

/* The classes of communication the step figures sum. */
enum iv_class {
	IV_FSDP_ALLGATHER,     /* the FSDP group's parameter gathers */
	IV_FSDP_REDUCESCATTER, /* its gradient reduce-scatters */
	IV_DP_ALLREDUCE,       /* all-reduces of the data-parallel side (HSDP, loss, norm) */
	IV_ALL,                /* every collective, tensor-parallel ones included */
};

static int in_class(const struct tl_event *e, const struct ev_info *in, enum iv_class cls)
{
	switch (cls) {
	case IV_FSDP_ALLGATHER:
		return e->op == FSS_OP_ALLGATHER && in->fsdp;
	case IV_FSDP_REDUCESCATTER:
		return e->op == FSS_OP_REDUCESCATTER && in->fsdp;
	case IV_DP_ALLREDUCE:
		return e->op == FSS_OP_ALLREDUCE && in->in_steps;
	default:
		return 1;
	}
}

/* The merged intervals of the events of a class that have timing. */
static size_t op_intervals(const struct tl_event *ev, const struct ev_info *info, size_t n, enum iv_class cls,
			   const struct interval *iv, struct interval *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (info[i].timed && in_class(&ev[i], &info[i], cls))
			out[k++] = iv[i];
	return interval_merge(out, k);
}

/* Which range does each forward gather's unit run in? The first module
 * range (see module_ranges) that starts after the gather completed and
 * after the previous unit's range started (FSDP runs a unit right after its
 * gather lands). */
static void name_forward_gathers(const struct tl_source *src, const struct tl_event *ev, struct ev_info *info,
				 size_t n, const struct tl_range *const *ranges, size_t nranges)
{
	size_t r = 0;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op != FSS_OP_ALLGATHER || !info[i].fsdp || info[i].phase != ANALYSIS_PHASE_FORWARD)
			continue;
		while (r < nranges && ranges[r]->start < ev[i].exit_ns)
			r++;
		if (r == nranges)
			break;
		info[i].name = ranges[r]->name;
		r++;
	}
	(void)src;
}

static int range_ptr_cmp(const void *a, const void *b)
{
	const struct tl_range *x = *(const struct tl_range *const *)a, *y = *(const struct tl_range *const *)b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;
}

/* Keep, of v[0..n) (sorted by range_ptr_cmp), the ranges that hold another
 * range of their thread: modules. The leaves are ops (fsdp_ref's op ranges
 * and its hooks' "fsdp.*" ranges; PyTorch's per-op ranges when
 * --compute-ranges takes them) and name no unit: a unit's range holds its
 * ops. (A trace that marks units but not ops names only the units that hold
 * other units.) Returns how many are kept, in order. */
static size_t module_ranges(const struct tl_range **v, size_t n)
{
	uint8_t *parent = calloc(n ? n : 1, 1);
	if (!parent)
		return n; /* no memory to tell them apart: name from every range */
	for (size_t i = 1; i < n; i++) {
		/* a range that holds others is followed, in start order on its
		 * thread, by its first child: marking the range just before each
		 * one when it starts inside it finds every parent */
		for (size_t j = i; j-- > 0;) {
			if (v[j]->thread != v[i]->thread)
				continue;
			if (v[i]->start < v[j]->end)
				parent[j] = 1;
			break;
		}
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (parent[i])
			v[k++] = v[i];
	free(parent);
	return k;
}

/* A unit's range by name and start, to find where a unit runs next. */
struct name_start {
	uint32_t name;
	uint32_t reserved;
	uint64_t start;
};

static int name_start_cmp(const void *a, const void *b)
{
	const struct name_start *x = a, *y = b;
	if (x->name != y->name)
		return x->name < y->name ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* unit_opens_ns of each FSDP gather (overlap.h): the start of the first
 * range of the unit it gathers (the name of its forward gather) that opens
 * after it ends. mods[0..nmods) are the step's module ranges. */
static int unit_opens(const struct tl_event *ev, const struct ev_info *info, size_t n, const struct tl_range **mods,
		      size_t nmods, struct overlap_collective *coll)
{
	struct name_start *v = malloc((nmods ? nmods : 1) * sizeof *v);
	uint32_t *unit_name = calloc(n ? n : 1, sizeof *unit_name); /* by forward unit index (< n) */
	if (!v || !unit_name) {
		free(v);
		free(unit_name);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nmods; i++)
		v[i] = (struct name_start){mods[i]->name, 0, mods[i]->start};
	qsort(v, nmods, sizeof *v, name_start_cmp);
	for (size_t i = 0; i < n; i++)
		if (info[i].phase == ANALYSIS_PHASE_FORWARD && info[i].unit >= 0 && (size_t)info[i].unit < n &&
		    info[i].name && !unit_name[info[i].unit])
			unit_name[info[i].unit] = info[i].name;
	for (size_t i = 0; i < n; i++) {
		if (coll[i].kind != OVERLAP_GATHER || info[i].unit < 0 || (size_t)info[i].unit >= n)
			continue;
		uint32_t name = unit_name[info[i].unit];
		if (!name)
			continue;
		struct name_start key = {name, 0, ev[i].exit_ns > coll[i].end_ns ? ev[i].exit_ns : coll[i].end_ns};
		size_t lo = 0, hi = nmods;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (name_start_cmp(&v[mid], &key) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < nmods && v[lo].name == name)
			coll[i].unit_opens_ns = v[lo].start;
	}
	free(v);
	free(unit_name);
	return 0;
}

/*
 * Summarise the events ev[0..n) of one step spanning [t0, t1): counts,
 * exposure per gather and step figures. Uses the source's pending ranges and
 * GPU intervals as they are.
 */
static int summarise(analyzer_t *a, struct rank_state *rs, const struct tl_event *ev, size_t n, uint64_t t0,
		     uint64_t t1, struct step_summary **out)
{
	struct tl_source *src = rs->src;
	int rc = -ENOMEM;
	*out = NULL;
	struct step_summary *s = calloc(1, sizeof *s);
	struct interval *iv = calloc(n ? n : 1, sizeof *iv);
	struct interval *tmp = calloc(n ? n : 1, sizeof *tmp);
	struct interval *compute = NULL, *units = NULL;
	size_t ncompute = 0, nunits = 0;
	struct seq_span *spans = NULL;
	struct overlap_range *ranges = NULL;
	struct overlap_collective *coll = NULL;
	struct overlap_figures *figs = NULL;
	const struct tl_range **named = NULL;
	struct phases_event *pe = NULL;
	struct phases_gather *pg = NULL;
	if (!s || !iv || !tmp)
		goto fail;
	s->nev = n;
	s->ev = malloc((n ? n : 1) * sizeof *s->ev);
	s->info = calloc(n ? n : 1, sizeof *s->info);
	if (!s->ev || !s->info)
		goto fail;
	if (n)
		memcpy(s->ev, ev, n * sizeof *ev); /* a step may have no events: ev is NULL then */
	s->hash = hash_events(ev, n);
	s->fig[FIG_STEP] = t1 > t0 ? t1 - t0 : 0;

	/* the FSDP group's events, and the phases of its gathers from their
	 * structure (phases.h) */
	pe = calloc(n ? n : 1, sizeof *pe);
	pg = calloc(n ? n : 1, sizeof *pg);
	if (!pe || !pg)
		goto fail;
	size_t npe = 0;
	for (size_t i = 0; i < n; i++) {
		struct ev_info *in = &s->info[i];
		in->fsdp = (uint8_t)comm_role_is_fsdp(ev[i].role);
		in->in_steps = (uint8_t)comm_role_in_steps(ev[i].role);
		in->cycle = in->unit = -1;
		if (in->fsdp && (ev[i].op == FSS_OP_ALLGATHER || ev[i].op == FSS_OP_REDUCESCATTER))
			pe[npe++] = (struct phases_event){ev[i].elements, ev[i].nranks, ev[i].op, {0}};
	}
	if (phases_parse(pe, npe, pg, &s->phases) < 0)
		goto fail;
	for (size_t i = 0, k = 0; i < n; i++) {
		if (!s->info[i].fsdp || ev[i].op != FSS_OP_ALLGATHER)
			continue;
		s->info[i].phase = pg[k].phase;
		s->info[i].cycle = pg[k].cycle;
		s->info[i].unit = pg[k].unit;
		s->info[i].recompute = pg[k].recompute;
		k++;
	}

	/* intervals: GPU kernels when this rank has them, else host calls */
	int use_gpu = !a->opt.force_host_timing && src->gpu_comm_seen > 0;
	if (use_gpu) {
		size_t ng = tl_array_len(&src->gpu), nspan = 0;
		compute = malloc((ng ? ng : 1) * sizeof *compute);
		spans = malloc((ng ? ng : 1) * sizeof *spans);
		if (!compute || !spans)
			goto fail;
		/* the rank's device: the one its NCCL kernels run on (a process
		 * may touch others; their kernels do not hide this rank's gathers) */
		uint32_t device = 0, votes = 0;
		for (size_t i = 0; i < ng; i++) {
			const struct tl_gpu *g = tl_array_at(&src->gpu, i);
			if (g->kind != FSS_GPU_COMM || g->end <= t0 || g->start >= t1)
				continue;
			if (votes == 0)
				device = g->device;
			votes += g->device == device ? 1 : -1u;
		}
		for (size_t i = 0; i < ng; i++) {
			const struct tl_gpu *g = tl_array_at(&src->gpu, i);
			if (g->end <= t0 || g->start >= t1)
				continue;
			if (g->kind == FSS_GPU_COMPUTE && g->device == device)
				compute[ncompute++] = (struct interval){g->start, g->end};
			else if (g->kind == FSS_GPU_COMM && g->collective_seq)
				spans[nspan++] = (struct seq_span){g->collective_seq, g->start, g->end};
		}
		ncompute = interval_merge(compute, ncompute);
		ncompute = clip(compute, ncompute, t0, t1);
		qsort(spans, nspan, sizeof *spans, seq_span_cmp);
		for (size_t i = 0; i < n; i++) {
			/* the first span with seq >= seq_first */
			size_t lo = 0, hi = nspan;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (spans[mid].seq < ev[i].seq_first)
					lo = mid + 1;
				else
					hi = mid;
			}
			uint64_t st = UINT64_MAX, en = 0;
			for (size_t j = lo; j < nspan && spans[j].seq <= ev[i].seq_last; j++) {
				if (spans[j].start < st)
					st = spans[j].start;
				if (spans[j].end > en)
					en = spans[j].end;
			}
			if (en > st) {
				iv[i] = (struct interval){st, en};
				s->info[i].timed = 1;
				s->ev[i].gpu_start = st;
				s->ev[i].gpu_end = en;
			}
		}
		s->exposure_source = ANALYSIS_EXPOSURE_CUPTI;
	} else {
		size_t nr = tl_array_len(&src->ranges), m = 0;
		ranges = malloc((nr ? nr : 1) * sizeof *ranges);
		if (!ranges)
			goto fail;
		for (size_t i = 0; i < nr; i++) {
			const struct tl_range *r = tl_array_at(&src->ranges, i);
			if (r->is_compute && r->end > t0 && r->start < t1)
				ranges[m++] = (struct overlap_range){r->start, r->end, r->thread, 0};
		}
		for (size_t i = 0; i < n; i++) {
			iv[i] = (struct interval){ev[i].launch_ns, ev[i].exit_ns};
			s->info[i].timed = ev[i].exit_ns > ev[i].launch_ns;
		}
		if (m > 0) {
			if (overlap_host_compute(ranges, m, &compute, &ncompute) < 0 ||
			    overlap_host_units(ranges, m, &units, &nunits) < 0)
				goto fail;
			ncompute = clip(compute, ncompute, t0, t1);
			s->exposure_source = ANALYSIS_EXPOSURE_HOST;
		}
	}

	/* unit names from NVTX, while this rank has none; with host timing in
	 * every step (where each gathered unit's range opens tells a wait for
	 * the gather from a stall of another unit's compute) */
	size_t nnamed = 0;
	if (!use_gpu || !rs->tinfo || !rs->tinfo[0].reserved) {
		size_t nr = tl_array_len(&src->ranges);
		named = malloc((nr ? nr : 1) * sizeof *named);
		if (!named)
			goto fail;
		for (size_t i = 0; i < nr; i++) {
			const struct tl_range *r = tl_array_at(&src->ranges, i);
			if (r->is_compute && r->start >= t0 && r->start < t1)
				named[nnamed++] = r;
		}
		qsort(named, nnamed, sizeof *named, range_ptr_cmp);
		nnamed = module_ranges(named, nnamed);
		name_forward_gathers(src, ev, s->info, n, named, nnamed);
		s->has_names = nnamed > 0;
	}

	if (s->exposure_source != ANALYSIS_EXPOSURE_NONE) {
		coll = calloc(n ? n : 1, sizeof *coll);
		figs = malloc((n ? n : 1) * sizeof *figs);
		if (!coll || !figs)
			goto fail;
		/* A gather queued behind other collectives on its stream (or the
		 * communication thread) waited from the moment the queue ahead of
		 * it started running (back to the previous gather at most). */
		for (size_t i = 0; i < n; i++) {
			uint64_t queue_start = iv[i].start;
			if (ev[i].op == FSS_OP_ALLGATHER && s->info[i].fsdp && s->info[i].timed) {
				for (size_t j = i; j-- > 0;) {
					int same = use_gpu ? ev[j].stream == ev[i].stream : ev[j].thread == ev[i].thread;
					if (!same || !s->info[j].timed)
						continue;
					if ((ev[j].op == FSS_OP_ALLGATHER && s->info[j].fsdp) ||
					    iv[j].end + OVERLAP_QUEUE_SLACK_NS < queue_start || iv[j].start >= queue_start)
						break;
					queue_start = iv[j].start;
				}
			}
			coll[i] = (struct overlap_collective){
				.issue_ns = ev[i].launch_ns,
				.start_ns = iv[i].start,
				.end_ns = iv[i].end,
				.queue_start_ns = queue_start,
				.kind = (uint8_t)collective_kind(&ev[i], &s->info[i]),
			};
		}
		int first_fwd = 1, first_bwd = 1;
		int32_t cycle = -1;
		for (size_t i = 0; i < n; i++) {
			if (coll[i].kind != OVERLAP_GATHER)
				continue;
			if (s->info[i].cycle != cycle) { /* each micro-batch has its own first gathers */
				cycle = s->info[i].cycle;
				first_fwd = first_bwd = 1;
			}
			int fwd = s->info[i].phase != ANALYSIS_PHASE_BACKWARD;
			coll[i].first_of_phase = (uint8_t)(fwd ? first_fwd : first_bwd);
			if (fwd)
				first_fwd = 0;
			else
				first_bwd = 0;
		}
		if (!use_gpu && unit_opens(ev, s->info, n, named, nnamed, coll) < 0)
			goto fail;
		uint64_t other_wait = 0;
		if (overlap_step(compute, ncompute, units, nunits, coll, n, t0, t1 > t0 ? t1 : t0, use_gpu,
				 a->opt.exposed_min_ns, figs, &other_wait) < 0)
			goto fail;
		s->fig[FIG_OTHER_WAIT] = other_wait;
		for (size_t i = 0; i < n; i++) {
			if (coll[i].kind != OVERLAP_GATHER)
				continue;
			const struct overlap_figures *x = &figs[i];
			struct ev_info *in = &s->info[i];
			int fwd = in->phase != ANALYSIS_PHASE_BACKWARD;
			in->duration = x->duration_ns;
			in->exposed = x->exposed_ns;
			in->hidden = x->hidden_ns;
			in->compute_wait = x->compute_wait_ns;
			in->queued = iv[i].start - coll[i].queue_start_ns;
			in->call = ev[i].exit_ns > ev[i].enter_ns ? ev[i].exit_ns - ev[i].enter_ns : 0;
			in->cause = (uint8_t)x->cause;
			s->fig[FIG_AG] += x->duration_ns;
			s->fig[FIG_AG_EXPOSED] += x->exposed_ns;
			s->fig[FIG_AG_WAIT] += x->compute_wait_ns;
			s->fig[fwd ? FIG_FWD_EXPOSED : FIG_BWD_EXPOSED] += x->exposed_ns;
			s->fig[fwd ? FIG_FWD_WAIT : FIG_BWD_WAIT] += x->compute_wait_ns;
			s->fig[FIG_CAUSE_N + x->cause]++;
			s->fig[FIG_CAUSE_NS + x->cause] += x->exposed_ns;
			s->fig[FIG_CAUSE_WAIT + x->cause] += x->compute_wait_ns;
			if (x->cause != ANALYSIS_CAUSE_HIDDEN)
				s->fig[FIG_EXPOSED_GATHERS]++;
		}
		/* the other classes: merged time, and merged time with no compute */
		static const struct {
			enum iv_class cls;
			int all, exposed;
		} classes[] = {
			{IV_FSDP_REDUCESCATTER, FIG_RS, FIG_RS_EXPOSED},
			{IV_DP_ALLREDUCE, FIG_AR, FIG_AR_EXPOSED},
			{IV_ALL, -1, FIG_COMM_EXPOSED},
		};
		for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
			size_t m = op_intervals(ev, s->info, n, classes[c].cls, iv, tmp);
			m = clip(tmp, m, t0, t1 > t0 ? t1 : t0);
			uint64_t total = interval_total(tmp, m);
			uint64_t hidden = interval_intersect_total(tmp, m, compute, ncompute);
			if (classes[c].all >= 0)
				s->fig[classes[c].all] = total;
			s->fig[classes[c].exposed] = total - hidden;
		}
		s->fig[FIG_COMPUTE] = interval_total(compute, ncompute);
	}

	rc = 0;
	*out = s;
	s = NULL;
fail:
	summary_free(s);
	free(iv);
	free(tmp);
	free(compute);
	free(units);
	free(spans);
	free(ranges);
	free(coll);
	free(figs);
	free(named);
	free(pe);
	free(pg);
	return rc;
}

/* The slot of the sample the next step goes into, or -1 when it is left
 * out (median.h's algorithm, so the sample is reproducible). */
static int sample_slot(struct step_sample *m)
{
	if (m->seen == 0)
		m->rng = 0x9e3779b97f4a7c15ull;
	if (m->seen < STEP_SAMPLE_SLOTS)
		return (int)m->seen++;
	m->seen++;
	uint64_t x = m->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	m->rng = x;
	uint64_t j = x % m->seen;
	return j < STEP_SAMPLE_SLOTS ? (int)j : -1;
}

/* The representative step: among the sampled steps, the one whose compute
 * wait on gathers (the figure fsdp_ref's gather_wait measures) is the lower
 * median, the earliest on ties. Returns its slot, -1 when none. */
static int representative_slot(const struct step_sample *m)
{
	unsigned n = m->seen < STEP_SAMPLE_SLOTS ? (unsigned)m->seen : STEP_SAMPLE_SLOTS;
	if (n == 0)
		return -1;
	unsigned order[STEP_SAMPLE_SLOTS];
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	/* insertion sort by (wait, ordinal): at most STEP_SAMPLE_SLOTS slots */
	for (unsigned i = 1; i < n; i++) {
		unsigned v = order[i], j = i;
		for (; j > 0; j--) {
			unsigned u = order[j - 1];
			uint64_t wu = m->fig[u][FIG_AG_WAIT], wv = m->fig[v][FIG_AG_WAIT];
			if (wu < wv || (wu == wv && m->ordinal[u] <= m->ordinal[v]))
				break;
			order[j] = u;
		}
		order[j] = v;
	}
	return (int)order[(n - 1) / 2];
}

/* Is this rank one whose per-gather figures may be reported? */
static int wants_detail(const analyzer_t *a, const struct rank_state *rs)
{
	if (a->opt.rank >= 0)
		return rs->src->rank == a->opt.rank || rs->src->rank < 0;
	return rs->src->rank <= a->min_rank_seen;
}

/* Add a steady-state step to the rank's figures. */
static int aggregate(analyzer_t *a, struct rank_state *rs, struct step_summary *s)
{
	if (rs->nev == 0 && !rs->tev) {
		size_t n = s->nev ? s->nev : 1;
		rs->nev = s->nev;
		rs->tev = malloc(n * sizeof *rs->tev);
		rs->tinfo = calloc(n, sizeof *rs->tinfo);
		if (!rs->tev || !rs->tinfo)
			return -ENOMEM;
		memcpy(rs->tev, s->ev, s->nev * sizeof *s->ev);
		for (size_t i = 0; i < s->nev; i++) {
			rs->tinfo[i] = s->info[i];
			rs->tinfo[i].reserved = 0;
		}
		rs->phases = s->phases;
		rs->detail = wants_detail(a, rs);
		if (rs->detail) {
			rs->sample.gathers = calloc(STEP_SAMPLE_SLOTS * n, sizeof *rs->sample.gathers);
			if (!rs->sample.gathers)
				return -ENOMEM;
		}
	}
	if (s->nev != rs->nev)
		return 0; /* cannot happen: equal hashes */
	/* names from the first step that has them ("reserved" marks it) */
	if (rs->nev && !rs->tinfo[0].reserved && s->has_names) {
		for (size_t i = 0; i < s->nev; i++)
			rs->tinfo[i].name = s->info[i].name;
		rs->tinfo[0].reserved = 1;
	}
	if (s->exposure_source && !rs->exposure_source)
		rs->exposure_source = s->exposure_source;
	int slot = sample_slot(&rs->sample);
	if (slot >= 0) {
		rs->sample.ordinal[slot] = s->ordinal;
		memcpy(rs->sample.fig[slot], s->fig, sizeof s->fig);
		for (size_t i = 0; rs->detail && i < s->nev; i++) {
			const struct ev_info *in = &s->info[i];
			rs->sample.gathers[(size_t)slot * s->nev + i] = (struct gather_fig){
				.duration = in->duration,
				.exposed = in->exposed,
				.compute_wait = in->compute_wait,
				.queued = in->queued,
				.call = in->call,
				.cause = in->cause,
				.timed = (uint8_t)(in->timed && s->exposure_source),
			};
		}
	}
	for (int f = 0; f < FIG_MAX; f++) {
		if (f != FIG_STEP && !s->exposure_source)
			continue;
		median_add(&rs->fig[f], s->fig[f]);
	}
	rs->analyzed++;
	return 0;
}

/* Choose the steady-state step among the early NVTX steps: the most common
 * one (the later on ties); earlier steps are warm-up, others irregular. */
static int decide_template(analyzer_t *a, struct rank_state *rs)
{
	unsigned n = rs->nearly;
	rs->decided = 1;
	if (n == 0)
		return 0;
	unsigned best = 0, best_count = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned c = 0;
		for (unsigned j = 0; j < n; j++)
			c += rs->early[j]->hash == rs->early[i]->hash;
		if (c >= best_count) {
			best_count = c;
			best = i;
		}
	}
	rs->tmpl_hash = rs->early[best]->hash;
	unsigned first = 0;
	while (rs->early[first]->hash != rs->tmpl_hash)
		first++;
	int rc = 0;
	for (unsigned i = 0; i < n; i++) {
		if (i < first)
			rs->warmup++;
		else if (rs->early[i]->hash != rs->tmpl_hash)
			rs->irregular++;
		else if (rc == 0)
			rc = aggregate(a, rs, rs->early[i]);
		summary_free(rs->early[i]);
		rs->early[i] = NULL;
	}
	rs->nearly = 0;
	return rc;
}

/* ---- what the trace can vouch for --------------------------------------- */

static int seq_range_cmp(const void *x, const void *y)
{
	const struct seq_range *p = x, *q = y;
	return p->lo < q->lo ? -1 : p->lo > q->lo;
}

/* How far a step can be trusted, as candidate_step takes it. */
struct step_trust {
	enum step_exclusion why;
	struct lost_example lost; /* STEP_LOST: what is missing */
};

/*
 * Collectives missing among the source's first n pending events or at their
 * edges. A source numbers its calls from 1 without a gap (docs/format.md):
 * a number missing is a call its agent could not record. Missing: seq numbers from just after the events taken before them
 * (seq_max) to just before the events after them (or, at the end, the calls
 * process_end counted), held by none of these events nor by the
 * ANALYZE_SEQ_LOOK taken before and pending after; a group whose calls span
 * more numbers than it holds lost the difference. Seq numbers do not say on
 * which side of a boundary a call was lost: a gap at an edge counts for the
 * stretches on both sides. The first and last missing numbers in *lo, *hi.
 * Returns -ENOMEM, else the count.
 */
static int64_t stretch_lost(const struct rank_state *rs, size_t n, uint64_t *lo, uint64_t *hi)
{
	const struct tl_source *src = rs->src;
	*lo = *hi = 0;
	if (n == 0)
		return 0;
	size_t ne = tl_array_len(&src->events), nl = ne - n < ANALYZE_SEQ_LOOK ? ne - n : ANALYZE_SEQ_LOOK;
	struct seq_range *v = malloc((rs->nrecent + rs->nsummarised + n + nl) * sizeof *v);
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	uint64_t first = UINT64_MAX, last = 0, next = 0, lost = 0;
	for (unsigned i = 0; i < rs->nrecent; i++)
		v[k++] = rs->recent[i];
	for (unsigned i = 0; i < rs->nsummarised; i++)
		v[k++] = rs->summarised[i];
	for (size_t i = 0; i < n + nl; i++) {
		const struct tl_event *e = tl_array_at(&src->events, i);
		uint64_t top = e->seq_last >= e->seq_first ? e->seq_last : e->seq_first;
		v[k++] = (struct seq_range){e->seq_first, top};
		if (i >= n) {
			if (next == 0 || e->seq_first < next)
				next = e->seq_first;
			continue;
		}
		if (e->seq_first < first)
			first = e->seq_first;
		if (top > last)
			last = top;
		if (top - e->seq_first + 1 > e->calls) {
			if (!lost)
				*lo = e->seq_first;
			*hi = top;
			lost += top - e->seq_first + 1 - e->calls;
		}
	}
	if (nl == 0 && rs->has_end && rs->seq_end)
		next = rs->seq_end + 1;
	uint64_t from = rs->seq_max + 1 < first ? rs->seq_max + 1 : first;
	uint64_t to = next > last + 1 ? next - 1 : last;
	qsort(v, k, sizeof *v, seq_range_cmp);
	uint64_t at = from;
	for (size_t i = 0; i < k && at <= to; i++) {
		if (v[i].hi < at)
			continue;
		if (v[i].lo > at) {
			uint64_t end = v[i].lo <= to ? v[i].lo - 1 : to;
			if (!lost || at < *lo)
				*lo = at;
			if (end > *hi)
				*hi = end;
			lost += end - at + 1;
		}
		at = v[i].hi + 1;
	}
	if (at <= to) {
		if (!lost || at < *lo)
			*lo = at;
		if (to > *hi)
			*hi = to;
		lost += to - at + 1;
	}
	free(v);
	return (int64_t)lost;
}

/* Check the source's first n pending events (a step, or a stretch outside
 * the steps when t is NULL) for lost collectives. A rank that lost some is
 * matched across ranks no further: its later calls' numbers on their
 * communicator are shifted by the calls lost. Returns 0 or -ENOMEM. */
static int check_lost(struct rank_state *rs, size_t n, struct step_trust *t)
{
	uint64_t lo, hi;
	int64_t lost = stretch_lost(rs, n, &lo, &hi);
	if (lost < 0)
		return (int)lost;
	if (lost)
		rs->unmatched_from_loss = 1;
	if (t) {
		t->why = lost ? STEP_LOST : STEP_CLEAN;
		t->lost = (struct lost_example){rs->ordinal, (uint64_t)lost, lo, hi};
	}
	return 0;
}

/* What the step callback is told of every step, analysed or left out. */
static struct analysis_step_info step_info(const struct rank_state *rs, uint32_t ordinal, const struct tl_event *ev,
					   size_t n, uint64_t t0)
{
	uint32_t nag = 0;
	for (size_t i = 0; i < n; i++)
		nag += ev[i].op == FSS_OP_ALLGATHER;
	return (struct analysis_step_info){
		.rank = rs->src->rank,
		.source = rs->src->id,
		.ordinal = ordinal,
		.start_ns = t0,
		.events = (uint32_t)n,
		.allgathers = nag,
	};
}

/* Count a step left out (after the warm-up it would have been skipped as). */
static void step_exclude(analyzer_t *a, struct rank_state *rs, uint32_t ordinal, const struct step_trust *t,
			 const struct tl_event *ev, size_t n, uint64_t t0, uint64_t t1)
{
	if (t->why == STEP_LOST) {
		if (rs->steps_lost++ == 0) {
			rs->lost_first = t->lost;
			rs->lost_first.ordinal = ordinal;
		}
	} else {
		if (rs->steps_cut++ == 0)
			rs->cut_ordinal = ordinal;
	}
	if (!a->on_step)
		return;
	struct analysis_step_info si = step_info(rs, ordinal, ev, n, t0);
	si.step_ns = t1 > t0 ? t1 - t0 : 0;
	si.excluded = (int)t->why;
	a->on_step(a->on_step_ctx, &si);
}

/* A source's drops and process_end records: what it says it lost, and how
 * many calls it made. */
static void trust_record(struct rank_state *rs, const struct fss_record_head *rec)
{
	if (rec->type == FSS_REC_DROPS) {
		const struct fss_rec_drops *d = (const void *)rec;
		rs->ring_dropped = d->ring_dropped;
		rs->sink_dropped = d->sink_dropped;
		rs->cupti_dropped = d->cupti_dropped;
		rs->nvtx_dropped = d->nvtx_dropped;
	} else if (rec->type == FSS_REC_PROCESS_END) {
		rs->has_end = 1;
		rs->seq_end = ((const struct fss_rec_process_end *)rec)->collectives;
	} else if (rec->type == FSS_REC_PROCESS_EXIT) {
		rs->reaped = 1;
		rs->wait_status = ((const struct fss_rec_process_exit *)rec)->wait_status;
	}
}

/* Collectives a source lost: the seq numbers its events (taken, and any
 * still pending) and its process_end account for, less the calls it has. */
static uint64_t source_lost(const struct rank_state *rs)
{
	uint64_t top = rs->seq_max, calls = rs->calls_taken;
	const struct tl_source *src = rs->src;
	for (size_t i = 0; i < tl_array_len(&src->events); i++) {
		const struct tl_event *e = tl_array_at(&src->events, i);
		calls += e->calls;
		if (e->seq_last > top)
			top = e->seq_last;
	}
	if (rs->has_end && rs->seq_end > top)
		top = rs->seq_end;
	return top > calls ? top - calls : 0;
}

/* Register a step's events with the cross-rank matcher. */
static int register_events(analyzer_t *a, struct rank_state *rs, const struct tl_event *ev, size_t n,
			   int with_index)
{
	int32_t gi = 0;
	if (rs->unmatched_from_loss)
		return 0;
	for (size_t i = 0; i < n; i++) {
		int32_t idx = -1;
		if (ev[i].op == FSS_OP_ALLGATHER && comm_role_is_fsdp(ev[i].role)) {
			if (with_index)
				idx = gi;
			gi++;
		}
		int rc = ranks_add(a->ranks, ev[i].comm_hash, ev[i].comm_index, ev[i].nranks, rs->src->rank,
				   ev[i].enter_ns + (uint64_t)rs->src->realtime_offset, idx);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Drop the first k events of the source (they have been used). */
static void take_events(struct rank_state *rs, size_t k)
{
	for (size_t i = 0; i < k; i++) {
		const struct tl_event *e = tl_array_at(&rs->src->events, i);
		rs->calls_taken += e->calls;
		if (e->seq_last > rs->seq_max)
			rs->seq_max = e->seq_last;
		rs->recent[rs->recent_at] = (struct seq_range){e->seq_first, e->seq_last};
		rs->recent_at = (rs->recent_at + 1) % ANALYZE_SEQ_LOOK;
		if (rs->nrecent < ANALYZE_SEQ_LOOK)
			rs->nrecent++;
	}
	tl_array_take(&rs->src->events, k);
	rs->src->events_base += k;
}

/* Release ranges and GPU intervals that ended by t (keep step ranges not
 * yet analysed when keep_steps). */
static void release_before(struct tl_source *src, uint64_t t, int keep_steps)
{
	struct tl_array *a = &src->ranges;
	size_t o = 0, n = tl_array_len(a);
	for (size_t i = 0; i < n; i++) {
		struct tl_range *r = tl_array_at(a, i);
		if (r->end <= t && !(keep_steps && r->is_step && r->start >= t))
			continue;
		*(struct tl_range *)tl_array_at(a, o++) = *r;
	}
	a->n = a->head + o;
	struct tl_array *g = &src->gpu;
	n = tl_array_len(g);
	o = 0;
	for (size_t i = 0; i < n; i++) {
		struct tl_gpu *x = tl_array_at(g, i);
		if (x->end <= t)
			continue;
		*(struct tl_gpu *)tl_array_at(g, o++) = *x;
	}
	g->n = g->head + o;
}

/* A candidate steady-state step of a rank: summarise, then aggregate or
 * buffer it (NVTX) or count it. */
static int candidate_step(analyzer_t *a, struct rank_state *rs, const struct tl_event *ev, size_t n, uint64_t t0,
			  uint64_t t1, const struct step_trust *trust)
{
	uint32_t ordinal = rs->ordinal++;
	if (rs->skip_left > 0) {
		rs->skip_left--;
		rs->warmup++;
		return 0;
	}
	if (trust->why != STEP_CLEAN) {
		step_exclude(a, rs, ordinal, trust, ev, n, t0, t1);
		return 0;
	}
	struct step_summary *s;
	int rc = summarise(a, rs, ev, n, t0, t1, &s);
	if (rc < 0)
		return rc;
	s->ordinal = ordinal;
	if (a->on_step) {
		struct analysis_step_info si = step_info(rs, ordinal, ev, n, t0);
		si.step_ns = s->fig[FIG_STEP];
		si.allgather_ns = s->fig[FIG_AG];
		si.exposed_allgather_ns = s->fig[FIG_AG_EXPOSED];
		si.compute_ns = s->fig[FIG_COMPUTE];
		si.exposed_comm_ns = s->fig[FIG_COMM_EXPOSED];
		si.exposure_source = s->exposure_source;
		si.compute_wait_ns = s->fig[FIG_AG_WAIT];
		si.other_compute_wait_ns = s->fig[FIG_OTHER_WAIT];
		a->on_step(a->on_step_ctx, &si);
	}
	if (rs->mode == MODE_PERIOD) {
		rc = aggregate(a, rs, s);
		summary_free(s);
		return rc;
	}
	if (!rs->decided) {
		rs->early[rs->nearly++] = s;
		if (rs->nearly == ANALYZE_EARLY_STEPS)
			return decide_template(a, rs);
		return 0;
	}
	if (s->hash == rs->tmpl_hash)
		rc = aggregate(a, rs, s);
	else
		rs->irregular++;
	summary_free(s);
	return rc;
}

/* Does this rank have GPU data up to t (or no GPU data to wait for)? */
static int gpu_ready(const analyzer_t *a, const struct tl_source *src, uint64_t t)
{
	if (a->opt.force_host_timing)
		return 1;
	int has_gpu = (src->features & FSS_FEATURE_CUPTI) || tl_array_len(&src->gpu) > 0;
	return !has_gpu || src->gpu_seen_end >= t || src->ended;
}

/* ---- NVTX steps ---------------------------------------------------------- */

static int nvtx_steps(analyzer_t *a, struct rank_state *rs, int final)
{
	struct tl_source *src = rs->src;
	/* Nothing new to look at (the scan below reads every pending range):
	 * no step range since the last look, and the GPU intervals the oldest
	 * step waited for have not come. */
	uint64_t have = src->events_base + tl_array_len(&src->events);
	int new_event = rs->nvtx_event_wait && have > rs->nvtx_events_seen;
	if (!final && src->step_ranges == rs->nvtx_seen && !new_event &&
	    (rs->nvtx_gpu_wait == 0 || !gpu_ready(a, src, rs->nvtx_gpu_wait)))
		return 0;
	rs->nvtx_seen = src->step_ranges;
	rs->nvtx_gpu_wait = 0;
	rs->nvtx_event_wait = 0;
	for (;;) {
		/* the oldest step range not analysed, and how many wait */
		struct tl_range step = {0};
		size_t waiting = 0, nr = tl_array_len(&src->ranges);
		for (size_t i = 0; i < nr; i++) {
			const struct tl_range *r = tl_array_at(&src->ranges, i);
			if (!r->is_step)
				continue;
			if (r->start < rs->last_t1 && rs->last_t1) {
				continue; /* nested in or overlapping one analysed: a second marker */
			}
			if (waiting++ == 0)
				step = *r;
		}
		if (waiting == 0)
			return 0;
		if (!final && !gpu_ready(a, src, step.end) && waiting < ANALYZE_MAX_WAITING_STEPS) {
			rs->nvtx_gpu_wait = step.end;
			return 0;
		}
		/* events before the step: outside any step */
		size_t ne = tl_array_len(&src->events), before = 0, in = 0;
		while (before < ne && ((struct tl_event *)tl_array_at(&src->events, before))->enter_ns < step.start)
			before++;
		while (before + in < ne &&
		       ((struct tl_event *)tl_array_at(&src->events, before + in))->enter_ns < step.end)
			in++;
		/* the event after the step shows whether calls were lost at its end */
		if (!final && before + in == ne && !src->ended && waiting == 1) {
			rs->nvtx_event_wait = 1;
			rs->nvtx_events_seen = have;
			return 0;
		}
		int rc = check_lost(rs, before, NULL);
		if (before && rc == 0) {
			rc = register_events(a, rs, tl_array_at(&src->events, 0), before, 0);
			rs->outside_events += before;
			take_events(rs, before);
		}
		const struct tl_event *ev = in ? tl_array_at(&src->events, 0) : NULL;
		int is_headline = wants_detail(a, rs);
		struct step_trust trust;
		if (rc == 0)
			rc = check_lost(rs, in, &trust);
		if (rc == 0)
			rc = register_events(a, rs, ev, in, is_headline);
		if (rc == 0)
			rc = candidate_step(a, rs, ev, in, step.start, step.end, &trust);
		if (rc < 0)
			return rc;
		take_events(rs, in);
		rs->last_t1 = step.end;
		release_before(src, step.end, 1);
	}
}

/* ---- period steps ------------------------------------------------------- */

static int period_steps(analyzer_t *a, struct rank_state *rs, int final)
{
	struct tl_source *src = rs->src;
	for (;;) {
		if (!rs->have_held) {
			int got = steps_cutter_next(rs->cutter, final, &rs->held);
			if (got < 0)
				return got;
			if (!got)
				return 0;
			rs->have_held = 1;
		}
		struct steps_cut *c = &rs->held;
		if (c->first != rs->filtered_taken)
			return -EINVAL; /* cuts follow the events: a bug */
		/* The cutter sees the data-parallel side only: the cut's source
		 * events run up to the next data-parallel event after its own (the
		 * tensor-parallel traffic in between belongs to the step). */
		size_t ne = tl_array_len(&src->events), span;
		uint64_t seen = 0;
		int next_known = 0;
		for (span = 0; span < ne; span++) {
			const struct tl_event *e = tl_array_at(&src->events, span);
			if (!comm_role_in_steps(e->role))
				continue;
			if (seen == c->count) {
				next_known = 1;
				break;
			}
			seen++;
		}
		if (!next_known && !final)
			return 0;
		const struct tl_event *ev = span ? tl_array_at(&src->events, 0) : NULL;
		uint64_t t0 = span ? ev[0].enter_ns : 0, t1 = t0;
		if (next_known) {
			t1 = ((const struct tl_event *)tl_array_at(&src->events, span))->enter_ns;
		} else {
			for (size_t i = 0; i < span; i++)
				if (ev[i].exit_ns > t1)
					t1 = ev[i].exit_ns;
		}
		if (!final && !gpu_ready(a, src, t1))
			return 0;
		struct step_trust trust;
		int rc = check_lost(rs, span, &trust);
		if (rc < 0)
			return rc;
		switch (c->kind) {
		case STEPS_REGULAR:
			/* no event after it, no process_end: the trace stops in or right after it */
			if (trust.why == STEP_CLEAN && !next_known && !rs->has_end)
				trust.why = STEP_CUT;
			rc = register_events(a, rs, ev, span, wants_detail(a, rs));
			if (rc == 0)
				rc = candidate_step(a, rs, ev, span, t0, t1, &trust);
			break;
		case STEPS_WARMUP:
			rs->warmup += c->steps;
			rs->ordinal += c->steps;
			rs->skip_left = rs->skip_left > c->steps ? rs->skip_left - c->steps : 0;
			rs->outside_events += span;
			rc = register_events(a, rs, ev, span, 0);
			break;
		case STEPS_IRREGULAR:
			/* a stretch that lost calls no longer matches the step: it is
			 * the steps it stands for that lost them */
			if (trust.why == STEP_LOST) {
				for (uint32_t k = 0; k < (c->steps ? c->steps : 1); k++)
					step_exclude(a, rs, rs->ordinal++, &trust, ev, span, t0, t1);
			} else {
				rs->irregular += c->steps;
				rs->ordinal += c->steps;
			}
			rs->outside_events += span;
			rc = register_events(a, rs, ev, span, 0);
			break;
		default:
			rs->trailing++;
			if (span && !rs->has_end) { /* the step its records stop in */
				trust.why = STEP_CUT;
				step_exclude(a, rs, rs->ordinal++, &trust, ev, span, t0, t1);
			}
			rs->outside_events += span;
			rc = register_events(a, rs, ev, span, 0);
			break;
		}
		if (rc < 0)
			return rc;
		rs->filtered_taken += c->count;
		take_events(rs, span);
		release_before(src, t1, 0);
		rs->have_held = 0;
	}
}

/* Move a rank forward as far as its records allow. */
static int service(analyzer_t *a, struct rank_state *rs, int final)
{
	struct tl_source *src = rs->src;
	if (src->rank >= 0 && src->rank < a->min_rank_seen)
		a->min_rank_seen = src->rank;
	uint64_t have = src->events_base + tl_array_len(&src->events);
	if (!rs->roles_decided) {
		/* roles first, from a window of events (nothing is cut before): the
		 * window, or three NVTX steps' events (steps wait, with their ranges,
		 * until then) */
		size_t len = tl_array_len(&src->events);
		if (!final && len < ANALYZE_ROLE_WINDOW && src->step_ranges < ANALYZE_ROLE_STEPS)
			return 0;
		int rc = comm_roles_decide(a->tl, src, len ? tl_array_at(&src->events, 0) : NULL, len, a->opt.fsdp_comm,
					   &rs->roles);
		if (rc < 0)
			return rc;
		rs->roles_decided = 1;
	}
	if (rs->ncomm_events < src->ncomms) {
		uint64_t *v = realloc(rs->comm_events, src->ncomms * sizeof *v);
		if (!v)
			return -ENOMEM;
		memset(v + rs->ncomm_events, 0, (src->ncomms - rs->ncomm_events) * sizeof *v);
		rs->comm_events = v;
		rs->ncomm_events = src->ncomms;
	}
	for (uint64_t i = rs->roled; i < have; i++) {
		struct tl_event *e = tl_array_at(&src->events, (size_t)(i - src->events_base));
		e->role = comm_roles_of(&rs->roles, e->comm_slot);
		if (e->comm_slot < rs->ncomm_events)
			rs->comm_events[e->comm_slot]++;
	}
	rs->roled = have;
	if (rs->mode != MODE_NVTX) {
		for (uint64_t i = rs->fed; i < have; i++) {
			const struct tl_event *e = tl_array_at(&src->events, (size_t)(i - src->events_base));
			if (!comm_role_in_steps(e->role))
				continue;
			int rc = steps_cutter_push(rs->cutter, e->sig, e->op);
			if (rc < 0)
				return rc;
		}
		rs->fed = have;
	}
	if (rs->mode == MODE_UNDECIDED) {
		if (src->step_ranges > 0) {
			rs->mode = MODE_NVTX;
			steps_cutter_free(rs->cutter); /* not needed: release its window */
			rs->cutter = NULL;
		} else {
			/* run the period search; a first cut (or giving up) decides */
			int got = steps_cutter_next(rs->cutter, final, &rs->held);
			if (got < 0)
				return got;
			rs->have_held = got;
			if (!got && !final && steps_cutter_period(rs->cutter) == 0)
				return 0;
			rs->mode = MODE_PERIOD;
		}
	}
	if (rs->mode == MODE_NVTX) {
		int rc = nvtx_steps(a, rs, final);
		if (rc < 0)
			return rc;
		if (final) {
			/* events after the last step range: not a step; without a
			 * process_end, the step its records stop in */
			size_t left = tl_array_len(&src->events);
			const struct tl_event *ev = left ? tl_array_at(&src->events, 0) : NULL;
			if (left && !rs->has_end) {
				struct step_trust cut = {.why = STEP_CUT};
				step_exclude(a, rs, rs->ordinal++, &cut, ev, left, ev[0].enter_ns, ev[left - 1].exit_ns);
			}
			rc = check_lost(rs, left, NULL);
			if (rc == 0)
				rc = register_events(a, rs, left ? tl_array_at(&src->events, 0) : NULL, left, 0);
			rs->outside_events += left;
			take_events(rs, left);
			if (rc == 0 && !rs->decided)
				rc = decide_template(a, rs);
		}
		return rc;
	}
	/* period mode: step ranges are not used, release them as we go */
	return period_steps(a, rs, final);
}

/* --keep (docs/keep.md): the collectives of a summarised step, and those
 * before the first of a last:N trace, are left out on purpose: taken as seen,
 * not as lost. */
static int keep_records(analyzer_t *a, struct tl_source *src, const struct fss_record_head *rec)
{
	struct rank_state *rs = state_for(a, src);
	if (!rs)
		return -ENOMEM;
	if (rec->type == FSS_REC_STEP_SUMMARY) {
		const struct fss_rec_step_summary *r = (const void *)rec;
		step_summaries_add(&a->kept, r);
		if (!r->collectives)
			return 0;
		/* forget ranges the taken events have passed; full: the last one grows */
		unsigned k = 0;
		for (unsigned i = 0; i < rs->nsummarised; i++)
			if (rs->summarised[i].hi > rs->seq_max)
				rs->summarised[k++] = rs->summarised[i];
		rs->nsummarised = k;
		struct seq_range *last = k ? &rs->summarised[k - 1] : NULL;
		if (last && (last->hi + 1 >= r->seq_first || k == ANALYZE_SEQ_LOOK)) {
			if (r->seq_last > last->hi)
				last->hi = r->seq_last;
			if (r->seq_first < last->lo)
				last->lo = r->seq_first;
		} else {
			rs->summarised[rs->nsummarised++] = (struct seq_range){r->seq_first, r->seq_last};
		}
		rs->calls_taken += r->collectives;
	} else if (rs->seq_max == 0 && rs->calls_taken == 0) {
		uint64_t seq = ((const struct fss_rec_collective *)rec)->seq;
		if (seq > 1)
			rs->seq_max = rs->calls_taken = seq - 1;
		/* its calls on each communicator are counted from where the trace
		 * starts, which differs from rank to rank: not matched across */
		rs->unmatched_from_loss = 1;
	}
	return 0;
}

/* --keep: what a source's seq numbers miss on purpose is not missing. */
static void keep_sources(const analyzer_t *a, struct analysis_result *r)
{
	if (!a->kept.steps && !a->kept.keep_flags)
		return;
	for (uint32_t i = 0; i < r->nsources; i++)
		for (size_t j = 0; j < a->nrs; j++)
			if (a->rs[j]->src->id == r->sources[i].source)
				r->sources[i].collectives_missing = source_lost(a->rs[j]);
}

void analyzer_set_keep(analyzer_t *a, uint32_t flags, uint32_t steps)
{
	a->kept.keep_flags = flags;
	a->kept.keep_steps = steps;
}

int analyzer_feed(analyzer_t *a, const struct fss_record_head *rec)
{
	struct tl_source *src;
	int rc = timeline_feed(a->tl, rec, &src);
	if (rc < 0 || !src)
		return rc;
	if (rec->type == FSS_REC_STEP_SUMMARY)
		return keep_records(a, src, rec);
	if (rec->type == FSS_REC_COLLECTIVE && (a->kept.keep_flags & FSS_FILE_KEEP_LAST) &&
	    (rc = keep_records(a, src, rec)) < 0)
		return rc;
	if (rec->type == FSS_REC_DROPS || rec->type == FSS_REC_PROCESS_END || rec->type == FSS_REC_PROCESS_EXIT) {
		struct rank_state *rs = state_for(a, src);
		if (!rs)
			return -ENOMEM;
		trust_record(rs, rec);
	}
	/* events complete at collective and group records; steps at ranges */
	if (rec->type != FSS_REC_COLLECTIVE && rec->type != FSS_REC_GROUP && rec->type != FSS_REC_NVTX_RANGE &&
	    rec->type != FSS_REC_GPU_INTERVAL && rec->type != FSS_REC_PROCESS_END)
		return 0;
	struct rank_state *rs = state_for(a, src);
	if (!rs)
		return -ENOMEM;
	rc = service(a, rs, 0);
	size_t pending = tl_array_len(&src->events) + tl_array_len(&src->ranges) + tl_array_len(&src->gpu) +
			 (rs->cutter ? steps_cutter_pending(rs->cutter) : 0);
	for (unsigned i = 0; i < rs->nearly; i++)
		pending += rs->early[i]->nev;
	if (pending > a->pending_max)
		a->pending_max = pending;
	return rc;
}

size_t analyzer_pending_max(const analyzer_t *a)
{
	return a->pending_max;
}

/* ---- the result ---------------------------------------------------------- */

static void note(struct analysis_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct analysis_result *r, const char *fmt, ...)
{
	if (r->nnotes >= ANALYSIS_NOTES_MAX)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->notes[r->nnotes++], ANALYSIS_NOTE_BYTES, fmt, ap);
	va_end(ap);
}

/* A step's counts: gathers and reduce-scatters of the FSDP group,
 * all-reduces of the data-parallel side (HSDP, loss, norm); the rest
 * (tensor-parallel, pipeline, other communicators) is in `other` and in the
 * per-communicator table. */
static void count_events(const struct tl_event *ev, const struct ev_info *info, size_t n,
			 struct analysis_step_counts *c)
{
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < n; i++) {
		int op = ev[i].op;
		if ((op == FSS_OP_ALLGATHER || op == FSS_OP_REDUCESCATTER) && !info[i].fsdp)
			op = -1;
		if (op == FSS_OP_ALLREDUCE && !info[i].in_steps)
			op = -1;
		switch (op) {
		case FSS_OP_ALLGATHER:
			c->allgathers++;
			c->allgather_calls += ev[i].calls;
			if (info[i].phase == ANALYSIS_PHASE_BACKWARD)
				c->backward_allgathers++;
			else
				c->forward_allgathers++;
			break;
		case FSS_OP_REDUCESCATTER:
			c->reduce_scatters++;
			c->reduce_scatter_calls += ev[i].calls;
			break;
		case FSS_OP_ALLREDUCE:
			c->allreduces++;
			c->allreduce_calls += ev[i].calls;
			break;
		default:
			c->other++;
			break;
		}
	}
}


static int rank_entry_cmp(const void *x, const void *y)
{
	const struct analysis_rank *p = x, *q = y;
	if (p->rank != q->rank)
		return p->rank < q->rank ? -1 : 1;
	return p->source < q->source ? -1 : p->source > q->source;
}

/* min, median, max of the elements of the FSDP group's gather events. */
static int fsdp_gather_elements(const struct tl_event *ev, const struct ev_info *ti, size_t n, uint64_t *mn,
				uint64_t *med, uint64_t *mx)
{
	*mn = *med = *mx = 0;
	uint64_t *v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (ev[i].op == FSS_OP_ALLGATHER && ti[i].fsdp)
			v[k++] = ev[i].elements;
	if (k) {
		qsort(v, k, sizeof *v, u64_cmp);
		*mn = v[0];
		*med = v[(k - 1) / 2];
		*mx = v[k - 1];
	}
	free(v);
	return 0;
}

/* What a bucketed job's step shows (verdict ANALYSIS_BUCKETED). */
static int fill_buckets(const struct tl_event *ev, const struct ev_info *ti, size_t n, struct analysis_buckets *b)
{
	memset(b, 0, sizeof *b);
	uint64_t *ag = malloc((n ? n : 1) * sizeof *ag);
	if (!ag)
		return -ENOMEM;
	size_t nag = 0;
	for (size_t i = 0; i < n; i++)
		if (ev[i].op == FSS_OP_ALLGATHER && ti[i].fsdp)
			ag[nag++] = ev[i].elements;
	qsort(ag, nag, sizeof *ag, u64_cmp);
	/* each reduce-scatter matched to a gather of its size not matched yet:
	 * in FSDP every one finds its unit's gather */
	uint8_t *taken = calloc(nag ? nag : 1, 1);
	if (!taken) {
		free(ag);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (!ti[i].fsdp)
			continue;
		if (ev[i].op == FSS_OP_ALLGATHER) {
			b->fetches_per_step++;
			b->calls_per_step += ev[i].calls;
			b->grouped_fetches += ev[i].calls > 1;
			if (ev[i].calls > b->max_calls_per_fetch)
				b->max_calls_per_fetch = ev[i].calls;
			b->gathered_elements_per_step += ev[i].elements;
		} else if (ev[i].op == FSS_OP_REDUCESCATTER) {
			b->reduce_buckets_per_step++;
			b->reduce_elements_per_step += ev[i].elements;
			if (ev[i].elements > b->reduce_elements_max)
				b->reduce_elements_max = ev[i].elements;
			const uint64_t *hit = nag ? bsearch(&ev[i].elements, ag, nag, sizeof *ag, u64_cmp) : NULL;
			if (hit) {
				size_t k = (size_t)(hit - ag);
				while (k > 0 && ag[k - 1] == ev[i].elements)
					k--;
				while (k < nag && ag[k] == ev[i].elements && taken[k])
					k++;
				if (k < nag && ag[k] == ev[i].elements) {
					taken[k] = 1;
					b->reduce_sizes_matching++;
				}
			}
		}
	}
	free(taken);
	free(ag);
	return fsdp_gather_elements(ev, ti, n, &b->fetch_elements_min, &b->fetch_elements_median,
				    &b->fetch_elements_max);
}

/* The cycle whose units and re-gathers describe the job: the first training
 * cycle (not a forward-only pass) of the typical step. */
static int32_t training_cycle(const struct tl_event *ev, const struct ev_info *ti, size_t n,
			      const struct phases_result *ph)
{
	if (ph->status != PHASES_OK || ph->cycles == 0)
		return -1;
	for (int32_t c = 0; c < (int32_t)ph->cycles; c++) {
		uint32_t bwd = 0, rs = 0;
		int32_t cur = -1;
		for (size_t i = 0; i < n; i++) {
			if (!ti[i].fsdp)
				continue;
			if (ev[i].op == FSS_OP_ALLGATHER)
				cur = ti[i].cycle;
			if (cur != c)
				continue;
			bwd += ev[i].op == FSS_OP_ALLGATHER && ti[i].phase == ANALYSIS_PHASE_BACKWARD;
			rs += ev[i].op == FSS_OP_REDUCESCATTER;
		}
		if (ph->forward_only == 0 || bwd || rs)
			return c;
	}
	return 0;
}

/* Units, reshard, gathers table, ledger of the headline rank. */
static int fill_structure(const analyzer_t *a, const struct rank_state *h, struct analysis_result *r)
{
	const struct analysis_options *o = &a->opt;
	size_t n = h->nev;
	const struct tl_event *ev = h->tev;
	const struct ev_info *ti = h->tinfo;
	int32_t c0 = training_cycle(ev, ti, n, &h->phases);
	size_t nag = 0, nf = 0, nb = 0;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op != FSS_OP_ALLGATHER || !ti[i].fsdp)
			continue;
		nag++;
		if (ti[i].cycle != c0 || c0 < 0)
			continue;
		if (ti[i].phase == ANALYSIS_PHASE_FORWARD)
			nf++;
		else if (!ti[i].recompute)
			nb++;
	}
	int rc = -ENOMEM;
	size_t *fidx = malloc((nf ? nf : 1) * sizeof *fidx); /* forward unit -> event */
	uint64_t *keys = malloc((nf ? nf : 1) * sizeof *keys);
	struct reshard_gather *fg = calloc(nf ? nf : 1, sizeof *fg);
	struct reshard_gather *bg = calloc(nb ? nb : 1, sizeof *bg);
	int32_t *bunit = malloc((nb ? nb : 1) * sizeof *bunit);
	r->gathers = calloc(nag ? nag : 1, sizeof *r->gathers);
	if (!fidx || !keys || !fg || !bg || !bunit || !r->gathers)
		goto out;
	size_t f = 0, b = 0;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op != FSS_OP_ALLGATHER || !ti[i].fsdp || ti[i].cycle != c0 || c0 < 0)
			continue;
		struct reshard_gather g = {ev[i].elements, ev[i].wire_bytes, ev[i].nranks, 0};
		if (ti[i].phase == ANALYSIS_PHASE_FORWARD) {
			fidx[f] = i;
			keys[f] = ev[i].elements;
			fg[f++] = g;
		} else if (!ti[i].recompute) {
			bg[b++] = g;
		} else {
			r->reshard.recompute_regathers++;
		}
	}

	/* units: the forward of one training cycle */
	struct analysis_units *u = &r->units;
	struct units_repeat inferred, rep;
	units_find_repeat(keys, nf, 0, &inferred);
	rep = inferred;
	u->layers_match = -1;
	if (o->layers > 0) {
		u->layers_given = 1;
		u->layers_match = units_find_repeat(keys, nf, o->layers, &rep) == 0;
		if (!u->layers_match)
			rep = inferred;
	}
	u->inferred_repeating_units = inferred.copies;
	u->inferred_gathers_per_unit = inferred.motif;
	u->repeating_units = o->layers > 0 ? (uint32_t)o->layers : rep.copies;
	u->gathers_per_unit = rep.motif;
	u->motif_start = rep.start;
	u->leading_gathers = rep.start;
	u->trailing_gathers = (uint32_t)nf - rep.start - rep.covered;
	u->root_gathers = u->leading_gathers + u->trailing_gathers;
	u->forward_units = (uint32_t)nf;
	if (o->layers > 0 && !u->layers_match && nf)
		note(r, "--layers %d: the forward gathers hold no repeat of exactly %d copies (they show %u x %u gathers "
			"plus %u)",
		     o->layers, o->layers, inferred.copies, inferred.motif, (unsigned)(nf - inferred.covered));
	uint64_t largest = 0;
	size_t largest_f = 0;
	for (size_t k = 0; k < nf; k++) {
		u->total_params += fg[k].elements;
		if (fg[k].elements > largest) {
			largest = fg[k].elements;
			largest_f = k;
		}
		if ((uint32_t)ev[fidx[k]].nranks > u->shard_ranks)
			u->shard_ranks = (uint32_t)ev[fidx[k]].nranks;
		if (k >= rep.start && k < rep.start + rep.motif)
			u->repeating_unit_params += fg[k].elements;
	}
	u->largest_unit_params = largest;
	uint64_t covered_params = u->repeating_unit_params * rep.copies;
	u->root_params = u->total_params > covered_params ? u->total_params - covered_params : 0;
	if (nf) {
		const char *n0 = timeline_name(h->src, ti[fidx[rep.start < nf ? rep.start : 0]].name);
		const char *n1 = rep.copies > 1 ? timeline_name(h->src, ti[fidx[rep.start + rep.motif]].name) : "";
		units_generalize_name(n0, n1, u->repeating_unit_name, sizeof u->repeating_unit_name);
		snprintf(u->largest_unit_name, sizeof u->largest_unit_name, "%s",
			 timeline_name(h->src, ti[fidx[largest_f]].name));
	}

	/* reshard: the re-gathers of that cycle (recomputation's left aside) */
	uint32_t recompute = r->reshard.recompute_regathers;
	reshard_detect(fg, nf, bg, nb, o->param_bytes, bunit, &r->reshard);
	r->reshard.recompute_regathers = recompute;
	if (r->reshard.policy == ANALYSIS_RESHARD_MIXED && rep.copies >= 3) {
		/* The blocks decide: torchtitan keeps the last block and the units
		 * around the blocks ([norm, output]) from forward to backward, since
		 * backward needs them at once, and reshards the rest. When all blocks
		 * but one agree, that is the policy and the others are exceptions.
		 * (Blocks of one size cannot say which one was kept: the matching
		 * re-gathers the last ones, so the table shows an earlier one kept.) */
		uint8_t *state = malloc(nf ? nf : 1);
		if (!state)
			goto out;
		reshard_unit_states(fg, nf, bg, nb, bunit, state);
		uint32_t count[3] = {0, 0, 0};
		for (uint32_t k = rep.start; k < rep.start + rep.covered; k++)
			count[state[k] < 3 ? state[k] : 0]++;
		for (uint8_t st = 0; st < 3; st++) {
			if (count[st] + rep.motif < rep.covered)
				continue;
			r->reshard.policy = st == RESHARD_STATE_KEPT	   ? ANALYSIS_RESHARD_FALSE
					    : st == RESHARD_STATE_RESHARDED ? ANALYSIS_RESHARD_TRUE
									   : ANALYSIS_RESHARD_GROUP;
			uint32_t blocks = (rep.covered - count[st] + rep.motif - 1) / rep.motif, around = 0;
			for (size_t k = r->reshard.root_resharded ? 0 : 1; k < nf; k++)
				around += (k < rep.start || k >= rep.start + rep.covered) && state[k] != st;
			r->reshard.exceptions = rep.covered - count[st] + around;
			char others[48] = "";
			if (around)
				snprintf(others, sizeof others, "%s%u unit%s around the blocks", blocks ? " and " : "", around,
					 around == 1 ? "" : "s");
			note(r, "reshard_after_forward=%s for the blocks, not for %s%s (as torchtitan keeps what backward "
				"needs at once)",
			     st == RESHARD_STATE_KEPT ? "False" : "True", blocks ? "one block" : "", others);
			break;
		}
		free(state);
	}
	/* what one cycle shows, times the cycles of a step */
	uint32_t cycles = r->microbatches.per_step ? r->microbatches.per_step : 1;
	r->reshard.regather_bytes_per_step *= cycles;
	r->reshard.reshard_extra_gathers *= cycles;
	r->reshard.reshard_extra_wire_bytes *= cycles;
	if (r->reshard.policy == ANALYSIS_RESHARD_UNKNOWN && nf == 1)
		note(r, "one FSDP unit (the root, never resharded): reshard_after_forward cannot be told");

	/* gathers table: every FSDP gather of the step, every cycle; the
	 * figures of the representative step */
	size_t gi = 0;
	int slot = representative_slot(&h->sample);
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op != FSS_OP_ALLGATHER || !ti[i].fsdp)
			continue;
		struct analysis_gather *g = &r->gathers[gi];
		g->index = (uint32_t)gi;
		g->phase = ti[i].phase;
		g->dtype = ev[i].dtype;
		g->nranks = ev[i].nranks;
		g->calls = ev[i].calls;
		g->bytes = ev[i].bytes;
		g->elements = ev[i].elements;
		g->microbatch = ti[i].cycle;
		g->recompute = ti[i].recompute;
		int32_t unit = c0 >= 0 && (uint32_t)ti[i].unit < nf ? ti[i].unit : -1;
		g->unit = unit;
		g->repeat = g->motif_pos = -1;
		if (unit >= 0 && (uint32_t)unit >= rep.start && (uint32_t)unit < rep.start + rep.covered && rep.motif) {
			g->repeat = (int32_t)((unit - rep.start) / rep.motif);
			g->motif_pos = (int32_t)((unit - rep.start) % rep.motif);
		}
		if (unit >= 0)
			snprintf(g->name, sizeof g->name, "%s", timeline_name(h->src, ti[fidx[unit]].name));
		if (h->detail && slot >= 0 && h->sample.gathers[(size_t)slot * n + i].timed) {
			const struct gather_fig *gf = &h->sample.gathers[(size_t)slot * n + i];
			g->duration_ns = gf->duration;
			g->exposed_ns = gf->exposed;
			g->hide_ns = gf->duration - gf->exposed;
			g->compute_wait_ns = gf->compute_wait;
			g->queued_ns = gf->queued;
			g->call_ns = gf->call;
			g->cause = gf->cause;
		}
		struct ranks_index_stats ri = ranks_index(a->ranks, (int32_t)gi);
		g->slowest_rank = ri.slowest_rank;
		g->skew_ns = ri.skew_median_ns;
		gi++;
	}
	r->ngathers = (uint32_t)gi;

	/* ledger: the model's parameters are the units' elements (each
	 * gradient reduced once per synchronisation: the same elements) times
	 * the tensor-parallel degree; bucketed jobs reduce every parameter once
	 * a step */
	uint64_t params = u->total_params;
	uint32_t ledger_units = (uint32_t)nf, shard_ranks = u->shard_ranks;
	if (r->verdict == ANALYSIS_BUCKETED) {
		params = r->buckets.reduce_elements_per_step;
		largest = r->buckets.fetch_elements_max;
		ledger_units = 0;
		for (size_t i = 0; i < n; i++)
			if (ti[i].fsdp && (uint32_t)ev[i].nranks > shard_ranks)
				shard_ranks = (uint32_t)ev[i].nranks;
	}
	struct ledger_input li;
	ledger_input_defaults(&li);
	li.params = (double)params * (r->tp_degree ? r->tp_degree : 1);
	li.ranks = shard_ranks * (r->tp_degree ? r->tp_degree : 1);
	li.units = ledger_units;
	li.largest_unit_params = (double)largest;
	li.prefetch = o->prefetch;
	li.param_bytes = o->param_bytes;
	li.grad_bytes = o->grad_bytes;
	li.master_bytes = o->master_bytes;
	li.optimizer_bytes = o->optimizer_bytes;
	li.gpu_mem_bytes = o->gpu_mem_bytes;
	if (o->param_bytes_from_trace && nf && record_dtype_bytes(ev[fidx[0]].dtype))
		li.param_bytes = (double)record_dtype_bytes(ev[fidx[0]].dtype);
	ledger_compute(&li, &r->ledger);
	uint64_t wire = 0;
	for (size_t i = 0; i < n; i++)
		if (ti[i].in_steps)
			wire += ev[i].wire_bytes;
	r->ledger.wire_bytes_per_step = wire;

	/* sizes and dtypes of the FSDP group's traffic */
	uint64_t *v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		goto out;
	for (int op = FSS_OP_ALLGATHER; op <= FSS_OP_ALLREDUCE; op++) {
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			int mine = op == FSS_OP_ALLREDUCE ? ti[i].in_steps : ti[i].fsdp;
			if (ev[i].op != op || !mine)
				continue;
			uint32_t bit = ev[i].dtype < 32 ? 1u << ev[i].dtype : 0;
			if (op == FSS_OP_ALLGATHER)
				r->sizes.allgather_dtypes |= bit;
			else if (op == FSS_OP_REDUCESCATTER)
				r->sizes.reduce_scatter_dtypes |= bit;
			else
				r->sizes.allreduce_dtypes |= bit;
			v[k++] = ev[i].bytes;
		}
		if (!k || op == FSS_OP_ALLREDUCE)
			continue;
		qsort(v, k, sizeof *v, u64_cmp);
		uint64_t *mn = op == FSS_OP_ALLGATHER ? &r->sizes.allgather_bytes_min : &r->sizes.reduce_scatter_bytes_min;
		uint64_t *md =
		    op == FSS_OP_ALLGATHER ? &r->sizes.allgather_bytes_median : &r->sizes.reduce_scatter_bytes_median;
		uint64_t *mx = op == FSS_OP_ALLGATHER ? &r->sizes.allgather_bytes_max : &r->sizes.reduce_scatter_bytes_max;
		*mn = v[0];
		*md = v[(k - 1) / 2];
		*mx = v[k - 1];
	}
	free(v);
	rc = 0;
out:
	free(fidx);
	free(keys);
	free(fg);
	free(bg);
	free(bunit);
	return rc;
}

/* The exposure section: every figure of the headline rank's representative
 * step, so that they add up (the gathers table is the same step's). */
static void fill_exposure(const struct rank_state *h, struct analysis_result *r)
{
	struct analysis_exposure *x = &r->exposure;
	x->source = h->exposure_source;
	x->exposed_fraction = ANALYSIS_UNKNOWN;
	int slot = representative_slot(&h->sample);
	if (slot < 0)
		return;
	const uint64_t *f = h->sample.fig[slot];
	x->step = h->sample.ordinal[slot];
	x->allgather_ns_per_step = f[FIG_AG];
	x->exposed_allgather_ns_per_step = f[FIG_AG_EXPOSED];
	x->exposed_fraction = x->allgather_ns_per_step
				      ? (double)x->exposed_allgather_ns_per_step / (double)x->allgather_ns_per_step
				      : ANALYSIS_UNKNOWN;
	x->forward_exposed_ns_per_step = f[FIG_FWD_EXPOSED];
	x->backward_exposed_ns_per_step = f[FIG_BWD_EXPOSED];
	x->reduce_scatter_ns_per_step = f[FIG_RS];
	x->exposed_reduce_scatter_ns_per_step = f[FIG_RS_EXPOSED];
	x->allreduce_ns_per_step = f[FIG_AR];
	x->exposed_allreduce_ns_per_step = f[FIG_AR_EXPOSED];
	x->exposed_gathers = (uint32_t)f[FIG_EXPOSED_GATHERS];
	x->compute_wait_ns_per_step = f[FIG_AG_WAIT];
	x->forward_compute_wait_ns_per_step = f[FIG_FWD_WAIT];
	x->backward_compute_wait_ns_per_step = f[FIG_BWD_WAIT];
	x->other_compute_wait_ns_per_step = f[FIG_OTHER_WAIT];
	for (int c = 0; c < ANALYSIS_CAUSE_MAX; c++) {
		x->cause_gathers[c] = (uint32_t)f[FIG_CAUSE_N + c];
		x->cause_ns[c] = f[FIG_CAUSE_NS + c];
		x->cause_compute_wait_ns[c] = f[FIG_CAUSE_WAIT + c];
	}
}

/* Say why the trace could not be diagnosed (once), and note it. */
static void undecided(struct analysis_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void undecided(struct analysis_result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->undecided_why, sizeof r->undecided_why, fmt, ap);
	va_end(ap);
	note(r, "not diagnosed: %s", r->undecided_why);
}

/* Role order in the table: the FSDP group and its companions first. */
static int role_rank(uint8_t role)
{
	static const int order[ANALYSIS_ROLE_MAX] = {
	    [ANALYSIS_ROLE_FSDP] = 0,	   [ANALYSIS_ROLE_FSDP_REGATHER] = 1,	[ANALYSIS_ROLE_REPLICATE] = 2,
	    [ANALYSIS_ROLE_TENSOR_PARALLEL] = 3, [ANALYSIS_ROLE_PIPELINE] = 4,	[ANALYSIS_ROLE_EXPERT] = 5,
	    [ANALYSIS_ROLE_ALLREDUCE] = 6, [ANALYSIS_ROLE_STEP] = 7,		[ANALYSIS_ROLE_ONE_OFF] = 8,
	    [ANALYSIS_ROLE_UNKNOWN] = 9,   [ANALYSIS_ROLE_IDLE] = 10,
	};
	return role < ANALYSIS_ROLE_MAX ? order[role] : 10;
}

/* The communicators table of rank state v. */
static void fill_comms(const analyzer_t *a, const struct rank_state *v, struct analysis_result *r)
{
	const struct tl_source *src = v->src;
	size_t nc = src->ncomms;
	uint8_t done[ANALYSIS_COMMS_MAX * 4] = {0};
	if (nc > sizeof done)
		nc = sizeof done;
	for (uint32_t k = 0; k < nc && r->ncomms < ANALYSIS_COMMS_MAX; k++) {
		/* next: the lowest role rank, then the lowest slot */
		size_t pick = nc;
		for (size_t c = 0; c < nc; c++) {
			if (done[c])
				continue;
			uint8_t role = v->roles_decided ? comm_roles_of(&v->roles, (uint32_t)c) : ANALYSIS_ROLE_UNKNOWN;
			if (pick == nc || role_rank(role) < role_rank(comm_roles_of(&v->roles, (uint32_t)pick)))
				pick = c;
		}
		if (pick == nc)
			break;
		done[pick] = 1;
		const struct tl_comm *m = &src->comms[pick];
		struct analysis_comm *e = &r->comms[r->ncomms];
		e->id = m->id_hash;
		e->dimension = m->dimension;
		snprintf(e->name, sizeof e->name, "%s", timeline_string(a->tl, src->id, m->name));
		e->nranks = m->nranks;
		e->rank = m->rank;
		e->role = v->roles_decided ? comm_roles_of(&v->roles, (uint32_t)pick) : ANALYSIS_ROLE_UNKNOWN;
		e->role_given = v->roles.given && (int)pick == v->roles.fsdp;
		if (v->roles_decided && pick < v->roles.ncomms)
			snprintf(e->evidence, sizeof e->evidence, "%s", v->roles.evidence[pick]);
		uint64_t in_step = 0, el[64];
		size_t nel = 0;
		for (size_t i = 0; i < v->nev; i++) {
			const struct tl_event *x = &v->tev[i];
			if (x->comm_slot != pick)
				continue;
			in_step++;
			e->bytes_per_step += x->wire_bytes;
			if (nel < sizeof el / sizeof el[0])
				el[nel++] = x->elements;
			switch (x->op) {
			case FSS_OP_ALLGATHER:
				e->allgathers++;
				break;
			case FSS_OP_REDUCESCATTER:
				e->reduce_scatters++;
				break;
			case FSS_OP_ALLREDUCE:
				e->allreduces++;
				break;
			case FSS_OP_BROADCAST:
				e->broadcasts++;
				break;
			case FSS_OP_SEND:
			case FSS_OP_RECV:
				e->point_to_point++;
				break;
			case FSS_OP_ALLTOALL:
				e->alltoalls++;
				break;
			default:
				e->other++;
				break;
			}
		}
		if (nel) {
			qsort(el, nel, sizeof el[0], u64_cmp);
			e->elements_median = el[(nel - 1) / 2];
		}
		uint64_t total = v->comm_events && pick < v->ncomm_events ? v->comm_events[pick] : 0;
		uint64_t steady = in_step * v->analyzed;
		e->outside = total > steady ? (uint32_t)(total - steady) : 0;
		if ((int)pick == v->roles.fsdp)
			r->fsdp_comm = (int32_t)r->ncomms;
		if (e->role == ANALYSIS_ROLE_TENSOR_PARALLEL && m->nranks > 1)
			r->tp_degree *= (uint32_t)m->nranks;
		r->ncomms++;
	}
}

/* The rank a trust note names: the lowest with what `has` looks for. */
static const struct rank_state *lowest_rank(const analyzer_t *a, int (*has)(const struct rank_state *))
{
	const struct rank_state *best = NULL;
	for (size_t i = 0; i < a->nrs; i++)
		if (a->rs[i]->src->collectives && has(a->rs[i]) && (!best || a->rs[i]->src->rank < best->src->rank))
			best = a->rs[i];
	return best;
}

static int has_lost_step(const struct rank_state *rs)
{
	return rs->steps_lost > 0;
}

static int is_cut(const struct rank_state *rs)
{
	return !rs->has_end;
}

/* What the trace cannot vouch for, and the notes that say so. They come
 * before the other notes: a verdict is read with them. */
static void fill_trust(const analyzer_t *a, const struct rank_state *h, struct analysis_result *r)
{
	struct analysis_trust *t = &r->trust;
	for (size_t i = 0; i < a->nrs; i++) {
		const struct rank_state *rs = a->rs[i];
		t->ring_dropped += rs->ring_dropped;
		t->sink_dropped += rs->sink_dropped;
		t->cupti_dropped += rs->cupti_dropped;
		t->nvtx_dropped += rs->nvtx_dropped;
		if (!rs->has_end)
			r->trace.sources_cut++;
		if (!rs->src->collectives)
			continue;
		uint64_t lost = source_lost(rs);
		t->collectives_lost += lost;
		t->ranks_lost += lost > 0;
		t->ranks_cut += !rs->has_end;
		t->steps_lost_all += rs->steps_lost;
		t->steps_cut_all += rs->steps_cut;
	}
	if (h) {
		t->steps_lost = h->steps_lost;
		t->steps_cut = h->steps_cut;
	}
	uint64_t dropped = t->ring_dropped + t->sink_dropped + t->cupti_dropped + t->nvtx_dropped;
	t->records_unplaced = dropped > t->collectives_lost ? dropped - t->collectives_lost : 0;

	const struct rank_state *x = lowest_rank(a, has_lost_step);
	if (x) {
		const struct lost_example *e = &x->lost_first;
		char seqs[64];
		if (e->seq_hi - e->seq_lo + 1 == e->count)
			snprintf(seqs, sizeof seqs, "seq %llu-%llu", (unsigned long long)e->seq_lo,
				 (unsigned long long)e->seq_hi);
		else
			snprintf(seqs, sizeof seqs, "between seq %llu and %llu", (unsigned long long)e->seq_lo,
				 (unsigned long long)e->seq_hi);
		note(r, "step %u on rank %d lost %llu collective%s (%s): left out; %u step%s on %u rank%s left out so",
		     e->ordinal, x->src->rank, (unsigned long long)e->count, e->count == 1 ? "" : "s", seqs,
		     t->steps_lost_all, t->steps_lost_all == 1 ? "" : "s", t->ranks_lost, t->ranks_lost == 1 ? "" : "s");
	} else if (t->collectives_lost) {
		note(r, "%llu collectives lost outside the steps (gaps in the seq numbers): no step left out",
		     (unsigned long long)t->collectives_lost);
	}
	x = lowest_rank(a, is_cut);
	if (x && t->ranks_cut == 1) {
		char step[64] = "no step was in progress there", how[48] = "the trace was cut short, or the process died";
		if (x->steps_cut)
			snprintf(step, sizeof step, "step %u, in progress there, left out", x->cut_ordinal);
		if (x->reaped && WIFSIGNALED(x->wait_status))
			snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(x->wait_status));
		else if (x->reaped && WIFEXITED(x->wait_status))
			snprintf(how, sizeof how, "it exited with status %d", WEXITSTATUS(x->wait_status));
		note(r, "rank %d's records stop without its process_end (%s): %s", x->src->rank, how, step);
	} else if (x) {
		note(r, "the records of %u ranks stop without their process_end (the trace was cut short, or they died): "
			"%u step%s in progress there left out",
		     t->ranks_cut, t->steps_cut_all, t->steps_cut_all == 1 ? "" : "s");
	}
	if (t->records_unplaced)
		note(r, "%llu records dropped (ring %llu, sink %llu, CUPTI %llu, NVTX %llu), %llu not collectives: "
			"exposure, NVTX steps and unit names may be off",
		     (unsigned long long)dropped, (unsigned long long)t->ring_dropped, (unsigned long long)t->sink_dropped,
		     (unsigned long long)t->cupti_dropped, (unsigned long long)t->nvtx_dropped,
		     (unsigned long long)t->records_unplaced);
}

/* Every process of the trace as the per-source layer saw it: how it ended. */
static int result_sources(const analyzer_t *a, struct analysis_result *r)
{
	size_t n = 0;
	int rc = sources_summarize(timeline_layer(a->tl), &r->sources, &n);
	r->nsources = (uint32_t)n;
	return rc;
}

int analyzer_finish(analyzer_t *a, struct analysis_result **out)
{
	*out = NULL;
	if (a->finished)
		return -EINVAL;
	a->finished = 1;
	int rc = timeline_flush_groups(a->tl);
	/* sources that have records but no rank state yet */
	for (size_t i = 0; rc == 0 && i < timeline_sources(a->tl); i++)
		if (!state_for(a, timeline_source(a->tl, i)))
			rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < a->nrs; i++) {
		if (!a->rs[i]->has_end && a->rs[i]->cutter)
			steps_cutter_set_open_end(a->rs[i]->cutter);
		rc = service(a, a->rs[i], 1);
	}
	if (rc < 0)
		return rc;

	struct analysis_result *r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->schema = ANALYSIS_SCHEMA;
	r->options = a->opt;
	r->exposure.exposed_fraction = ANALYSIS_UNKNOWN;
	r->breakdown.mfu = ANALYSIS_UNKNOWN;
	r->spread.slowest_rank = -1;
	r->spread.slowest_rank_fraction = ANALYSIS_UNKNOWN;
	r->units.layers_match = -1;
	r->headline_rank = -1;

	struct timeline_stats ts;
	timeline_stats(a->tl, &ts);
	r->trace.records = ts.records;
	r->trace.collectives = ts.collectives;
	r->trace.gpu_intervals = ts.gpu_intervals;
	r->trace.nvtx_ranges = ts.nvtx_ranges;
	r->trace.sources = (uint32_t)timeline_sources(a->tl);
	r->trace.truncated = a->truncated;
	r->trace.has_cupti = ts.gpu_intervals > 0;
	r->trace.has_nvtx = ts.nvtx_ranges > 0;
	if (result_sources(a, r) < 0) {
		analysis_result_free(r);
		return -ENOMEM;
	}

	/* ranks with collectives */
	size_t nranked = 0;
	for (size_t i = 0; i < a->nrs; i++) {
		r->trace.dropped_records = u64_add_sat(r->trace.dropped_records, a->rs[i]->src->dropped);
		if (a->rs[i]->src->collectives)
			nranked++;
		if (a->rs[i]->src->world_size > r->world_size)
			r->world_size = a->rs[i]->src->world_size;
	}
	r->ranks = (uint32_t)nranked;
	r->per_rank = calloc(nranked ? nranked : 1, sizeof *r->per_rank);
	if (!r->per_rank) {
		analysis_result_free(r);
		return -ENOMEM;
	}

	/* the headline rank: the one asked for, else the lowest with steps */
	struct rank_state *h = NULL;
	for (size_t i = 0; i < a->nrs; i++) {
		struct rank_state *rs = a->rs[i];
		if (!rs->src->collectives)
			continue;
		if (a->opt.rank >= 0 && rs->src->rank == a->opt.rank && rs->analyzed) {
			h = rs;
			break;
		}
		if (rs->analyzed && (!h || rs->src->rank < h->src->rank))
			h = rs;
	}
	if (h && a->opt.rank >= 0 && h->src->rank != a->opt.rank)
		note(r, "rank %d has no analysed step: figures are rank %d's", a->opt.rank, h->src->rank);

	size_t k = 0;
	struct ranks_totals tot;
	ranks_totals(a->ranks, &tot);
	uint64_t step_min = UINT64_MAX, step_max = 0, exp_min = UINT64_MAX, exp_max = 0;
	uint64_t best_last = 0;
	for (size_t i = 0; i < a->nrs; i++) {
		struct rank_state *rs = a->rs[i];
		if (!rs->src->collectives)
			continue;
		struct analysis_rank *e = &r->per_rank[k++];
		e->rank = rs->src->rank;
		e->source = rs->src->id;
		e->pid = rs->src->pid;
		e->steps_analyzed = rs->analyzed;
		if (rs->tev)
			count_events(rs->tev, rs->tinfo, rs->nev, &e->per_step);
		e->step_ns = median_get(&rs->fig[FIG_STEP]);
		int rep = representative_slot(&rs->sample);
		if (rep >= 0) { /* the rank's representative step, as the exposure section */
			e->allgather_ns = rs->sample.fig[rep][FIG_AG];
			e->exposed_allgather_ns = rs->sample.fig[rep][FIG_AG_EXPOSED];
			e->compute_wait_ns = rs->sample.fig[rep][FIG_AG_WAIT];
		}
		e->compute_ns = median_get(&rs->fig[FIG_COMPUTE]);
		struct ranks_rank_stats st = ranks_rank(a->ranks, rs->src->rank);
		e->last_arrivals = (uint32_t)st.last_arrivals;
		e->matched_collectives = (uint32_t)st.matched;
		uint32_t steps = rs->analyzed + rs->warmup + rs->irregular;
		e->late_ns_per_step = steps ? st.late_ns / steps : st.late_ns;
		e->steps_seen = steps;
		e->dropped_records = rs->src->dropped;
		e->steps_lost = rs->steps_lost;
		e->steps_cut = rs->steps_cut;
		e->collectives_lost = source_lost(rs);
		e->cut = !rs->has_end;
		if (rs->analyzed) {
			r->spread.ranks++;
			if (e->step_ns < step_min)
				step_min = e->step_ns;
			if (e->step_ns > step_max)
				step_max = e->step_ns;
			if (e->exposed_allgather_ns < exp_min)
				exp_min = e->exposed_allgather_ns;
			if (e->exposed_allgather_ns > exp_max)
				exp_max = e->exposed_allgather_ns;
		}
		if (nranked > 1 && st.last_arrivals > best_last) {
			best_last = st.last_arrivals;
			r->spread.slowest_rank = e->rank;
		}
	}
	r->nper_rank = (uint32_t)k;
	qsort(r->per_rank, k, sizeof *r->per_rank, rank_entry_cmp);
	if (r->spread.ranks) {
		r->spread.step_ns_min = step_min;
		r->spread.step_ns_max = step_max;
		r->spread.exposed_ns_min = exp_min;
		r->spread.exposed_ns_max = exp_max;
	}
	r->spread.max_skew_ns = tot.max_skew_ns;
	if (tot.matched && r->spread.slowest_rank >= 0)
		r->spread.slowest_rank_fraction = (double)best_last / (double)tot.matched;
	fill_trust(a, h, r);

	/* the communicators, from the headline rank (or, without steps, the
	 * lowest rank that has collectives) */
	struct rank_state *view = h;
	for (size_t i = 0; !view && i < a->nrs; i++)
		if (a->rs[i]->src->collectives && (!view || a->rs[i]->src->rank < view->src->rank))
			view = a->rs[i];
	r->fsdp_comm = -1;
	r->tp_degree = 1;
	if (view)
		fill_comms(a, view, r);
	if (a->opt.fsdp_comm && view && view->roles_decided)
		r->fsdp_comm_match = view->roles.given ? 1 : view->roles.override_ambiguous ? -1 : 0;

	if (!h) {
		r->verdict = ANALYSIS_UNDECIDED;
		if (!nranked) {
			r->undecided_reason = ANALYSIS_UNDECIDED_NO_COLLECTIVES;
			undecided(r, "the trace holds no collective");
		} else if (view && view->roles_decided && view->roles.fsdp < 0) {
			r->undecided_reason = ANALYSIS_UNDECIDED_NO_FSDP;
			undecided(r, "no communicator carries both AllGathers and ReduceScatters: no FSDP shard group "
				     "(not a sharded data-parallel job, or --fsdp-comm names none)");
		} else if (r->trust.steps_lost_all || r->trust.steps_cut_all) {
			r->undecided_reason = ANALYSIS_UNDECIDED_INCOMPLETE;
			char lost[96] = "", cut[64] = "";
			if (r->trust.steps_lost_all)
				snprintf(lost, sizeof lost, "%u lost collectives (%llu of %llu missing)",
					 r->trust.steps_lost_all, (unsigned long long)r->trust.collectives_lost,
					 (unsigned long long)(r->trace.collectives + r->trust.collectives_lost));
			if (r->trust.steps_cut_all)
				snprintf(cut, sizeof cut, "%u %s in progress where the records stop",
					 r->trust.steps_cut_all, r->trust.steps_cut_all == 1 ? "was" : "were");
			undecided(r, "no step the trace vouches for: of the steps found, %s%s%s", lost,
				  lost[0] && cut[0] ? " and " : "", cut);
		} else {
			r->undecided_reason = ANALYSIS_UNDECIDED_NO_STEP;
			undecided(r, "no repeating training step among %llu collectives (too few steps recorded, or "
				     "none alike)",
				  (unsigned long long)r->trace.collectives);
		}
		*out = r;
		return 0;
	}
	r->headline_rank = h->src->rank;
	r->step_detection = h->mode == MODE_NVTX ? ANALYSIS_STEPS_NVTX : ANALYSIS_STEPS_PERIOD;
	r->steps_analyzed = h->analyzed;
	r->warmup_steps = h->warmup;
	r->irregular_steps = h->irregular;
	r->steps_seen = h->analyzed + h->warmup + h->irregular + h->steps_lost + h->steps_cut;
	r->step_period = (uint32_t)h->nev;
	r->step_ns = median_get(&h->fig[FIG_STEP]);
	if (h->mode == MODE_NVTX)
		snprintf(r->step_range_name, sizeof r->step_range_name, "%s", h->src->step_name);
	count_events(h->tev, h->tinfo, h->nev, &r->per_step);
	uint32_t steps = r->steps_seen ? r->steps_seen : 1;
	r->spread.skew_ns_per_step = tot.skew_ns / steps;

	/* the verdict: phases from the structure, bucketed fetching, or why not */
	const struct phases_result *ph = &h->phases;
	if (h->roles.fsdp < 0) {
		r->verdict = ANALYSIS_UNDECIDED;
		r->undecided_reason = ANALYSIS_UNDECIDED_NO_FSDP;
		undecided(r, "no communicator carries both AllGathers and ReduceScatters: no FSDP shard group (not a "
			     "sharded data-parallel job, or --fsdp-comm names none)");
	} else if (ph->status == PHASES_OK) {
		r->verdict = ANALYSIS_DIAGNOSED;
	} else if (ph->status == PHASES_NO_MIRROR) {
		if (fill_buckets(h->tev, h->tinfo, h->nev, &r->buckets) < 0) {
			analysis_result_free(r);
			return -ENOMEM;
		}
		const struct analysis_buckets *bk = &r->buckets;
		/* reduce buckets: reduce-scatters without a gather of their size
		 * (FSDP reduces each unit's gathered buffer: every one has one) */
		if (bk->reduce_buckets_per_step && bk->reduce_sizes_matching < bk->reduce_buckets_per_step) {
			r->verdict = ANALYSIS_BUCKETED;
		} else {
			r->verdict = ANALYSIS_UNDECIDED;
			r->undecided_reason = ANALYSIS_UNDECIDED_PATTERN;
			undecided(r, "the FSDP group's %u ReduceScatters per step (each of a gather's size) do not mirror "
				     "its %u gathers as FSDP units would: a pattern the analysis does not know",
				  bk->reduce_buckets_per_step, bk->fetches_per_step);
		}
	} else {
		r->verdict = ANALYSIS_UNDECIDED;
		r->undecided_reason = ANALYSIS_UNDECIDED_NO_REDUCTION;
		undecided(r, "the steps reduce no gradient on the FSDP group (no ReduceScatter): forward and "
			     "backward gathers cannot be told apart");
	}
	struct analysis_microbatches *mb = &r->microbatches;
	if (r->verdict == ANALYSIS_DIAGNOSED) {
		mb->phase_source = ANALYSIS_PHASES_STRUCTURE;
		mb->per_step = ph->cycles - ph->forward_only;
		mb->sync = ph->sync_cycles;
		mb->forward_only = ph->forward_only;
		mb->forward_allgathers = ph->forward_allgathers;
		mb->backward_allgathers = ph->backward_allgathers;
		mb->recompute_allgathers = ph->recompute_allgathers;
		/* cycles are told from steps when a step holds several, when NVTX
		 * marks steps, or when something happens once a step besides the
		 * FSDP group's own traffic (a loss or gradient-norm all-reduce) */
		int marker = 0;
		for (size_t i = 0; i < h->nev && !marker; i++)
			marker = h->tinfo[i].in_steps &&
				 !(h->tinfo[i].fsdp && (h->tev[i].op == FSS_OP_ALLGATHER ||
							h->tev[i].op == FSS_OP_REDUCESCATTER)) &&
				 h->tev[i].role != ANALYSIS_ROLE_REPLICATE;
		mb->told = mb->per_step > 1 || r->step_detection == ANALYSIS_STEPS_NVTX || marker;
		if (!mb->told)
			note(r, "each step is one forward / backward with its ReduceScatters and nothing marks an "
				"optimizer step: with gradient accumulation these steps are micro-batches (NVTX "
				"ProfilerStep# ranges would tell)");
		if (mb->forward_only)
			note(r, "%u forward-only pass%s inside each step (gathers, no backward, no reduction): not "
				"counted as micro-batches",
			     mb->forward_only, mb->forward_only == 1 ? "" : "es");
	}

	if (fill_structure(a, h, r) < 0) {
		analysis_result_free(r);
		return -ENOMEM;
	}
	if (r->verdict == ANALYSIS_BUCKETED)
		note(r, "bucketed fetching: the gathers follow fetch buckets, not modules; the unit, reshard and wrap "
			"analysis does not apply");
	for (uint32_t i = 0; i < r->ncomms; i++)
		if (r->comms[i].role == ANALYSIS_ROLE_PIPELINE) {
			note(r, "pipeline parallel (%d stages on rank %d's pipeline group): the units, P and the ledger "
				"are this stage's",
			     r->comms[i].nranks, r->headline_rank);
			break;
		}
	fill_exposure(h, r);
	/* the breakdown of the same step, so that its exposed communication
	 * holds the AllGathers' */
	int rep = representative_slot(&h->sample);
	const uint64_t *rf = rep >= 0 ? h->sample.fig[rep] : h->sample.fig[0];
	breakdown_compute(rep >= 0 ? rf[FIG_STEP] : r->step_ns, rf[FIG_COMPUTE], rf[FIG_COMM_EXPOSED], r->ledger.params,
			  r->world_size > 0 ? (uint32_t)r->world_size : r->ranks, &a->opt, &r->breakdown);
	if (r->exposure.source == ANALYSIS_EXPOSURE_HOST)
		note(r, "exposure from host timing: exact where collective calls block until done (the CPU "
			"stand-in NCCL); with real NCCL use CUPTI");
	if (r->exposure.source == ANALYSIS_EXPOSURE_NONE)
		note(r, "no compute intervals (no CUPTI kernels, no NVTX compute ranges): exposure not measured");
	if (!h->detail)
		note(r, "per-gather figures were kept for another rank: the gather table has no times");
	if (r->trace.truncated)
		note(r, "the trace is incomplete (cut short, not closed by its writer, or with damaged stretches "
			"skipped): analysed what could be read");
	if (tot.unmatched && r->ranks > 1)
		note(r, "%llu collectives were not matched across ranks", (unsigned long long)tot.unmatched);
	char kept[ANALYSIS_NOTE_BYTES];
	if (step_summaries_note(&a->kept, kept, sizeof kept))
		note(r, "%s", kept);
	keep_sources(a, r);
	*out = r;
	return 0;
}

/* ---- from a file ------------------------------------------------------- */

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	return analyzer_feed(ctx, rec);
}

static int on_header(void *ctx, const struct fss_file_header *h)
{
	analyzer_set_keep(ctx, h->flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), h->keep_steps);
	return 0;
}

/* How the file ended and what the reader skipped, for the report. */
static void result_set_read(struct analysis_result *r, const struct trace_read_info *info)
{
	static const char *const ends[] = {
		[TRACE_END_CLEAN] = "clean",
		[TRACE_END_NOT_MARKED] = "not-marked",
		[TRACE_END_MISSING] = "not-closed",
		[TRACE_END_CUT] = "cut",
	};

	r->trace.end = info->end < sizeof(ends) / sizeof(ends[0]) ? ends[info->end] : NULL;
	r->trace.gaps_total = info->damage.gaps;
	r->trace.ngaps = 0;
	for (size_t i = 0; i < info->ngaps && i < ANALYSIS_GAPS_MAX; i++) {
		struct analysis_gap *g = &r->trace.gaps[r->trace.ngaps++];

		g->offset = info->gaps[i].offset;
		g->bytes = info->gaps[i].bytes;
		g->first_missing = info->gaps[i].first_missing;
		g->chunks_missing = info->gaps[i].chunks_missing;
		g->to_end = info->gaps[i].to_end;
		snprintf(g->why, sizeof(g->why), "%s", info->gaps[i].why);
	}
}

int analyze_trace(const char *path, const struct analysis_options *opts, struct analysis_result **out, char *err,
		  size_t errlen)
{
	return analyze_trace_steps(path, opts, NULL, NULL, out, err, errlen);
}

int analyze_trace_steps(const char *path, const struct analysis_options *opts, analysis_step_fn fn, void *ctx,
			struct analysis_result **out, char *err, size_t errlen)
{
	*out = NULL;
	analyzer_t *a;
	int rc = analyzer_new(&a, opts);
	if (rc < 0) {
		if (errlen)
			snprintf(err, errlen, "out of memory");
		return rc;
	}
	analyzer_on_step(a, fn, ctx);
	struct trace_parser_ops ops = {.on_header = on_header, .on_record = on_record};
	struct trace_read_info info;
	rc = trace_read(path, &ops, a, &info);
	if (info.input != TRACE_INPUT_TRACE) {
		/* Empty, not a trace, an unreadable header, no records: nothing to
		 * analyse, and the reader's words say what the file is. */
		if (rc >= 0)
			rc = FSS_E_NOT_TRACE;
	} else if (rc == FSS_E_TRUNCATED || rc == FSS_E_CORRUPT) {
		/* Cut short, not closed by its writer, or damaged stretches
		 * skipped: analysed, and said to be incomplete. */
		analyzer_set_truncated(a);
		rc = 0;
	}
	if (rc == 0)
		rc = analyzer_finish(a, out);
	if (rc == 0)
		result_set_read(*out, &info);
	if (rc < 0 && errlen)
		snprintf(err, errlen, "%s", info.message[0] ? info.message : fss_strerror(rc));
	analyzer_free(a);
	return rc;
}
