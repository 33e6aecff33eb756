/*
 * live_fields.c - the field tables of live_fields.h, and the encoder they
 * drive.
 *
 * The names of the enumerations are the report's (cli/report_json.c) where
 * it has them. The collector cannot call rules/ (the layers go one way), so
 * the severities and wait evidences are named here as rules/ names them.
 */
#include "collector/live_fields.h"

#include "collector/live.h"
#include "collector/source.h"
#include "common/record.h"

#include <inttypes.h>
#include <string.h>

/* ---- names -------------------------------------------------------------------- */

static const char *op_name(int v)
{
	return record_op_name((uint8_t)v);
}

static const char *dtype_name(int v)
{
	return record_dtype_name((uint8_t)v);
}

static const char *redop_name(int v)
{
	return record_redop_name((uint8_t)v);
}

/* enum rule_severity (rules/findings.c) */
static const char *severity_name(int v)
{
	static const char *const names[] = {"info", "warning", "error"};

	return v >= 0 && v < 3 ? names[v] : "unknown";
}

/* enum analysis_wait_evidence (rules/flight_text.c) */
static const char *evidence_name(int v)
{
	static const char *const names[] = {"none", "host", "gpu", "sync"};

	return v >= 0 && v < 4 ? names[v] : "none";
}

/* enum analysis_wait_end (rules/flight_text.c) */
static const char *wait_end_name(int v)
{
	static const char *const names[] = {"waiting", "gave-up", "died"};

	return v >= 0 && v < 3 ? names[v] : "waiting";
}

/* A hang's end: none (null) while a rank still waits. */
static const char *hang_ended_name(int v)
{
	return v == ANALYSIS_WAIT_GAVE_UP ? "gave-up" : v == ANALYSIS_WAIT_DIED ? "died" : NULL;
}

/* Only the two phases have a name: any other is not known (null). */
static const char *phase_name(int v)
{
	return v == ANALYSIS_PHASE_FORWARD || v == ANALYSIS_PHASE_BACKWARD ? analysis_phase_name(v) : NULL;
}

static const char *rank_from_name(int v)
{
	return source_rank_from_name((enum source_rank_from)v);
}

static const char *exposure_source_name(int v)
{
	return analysis_exposure_source_name((enum analysis_exposure_source)v);
}

/* ---- derived fields, absent objects, readers' starts ----------------------------- */

static int flight_hang(const void *object)
{
	return ((const struct analysis_flight *)object)->nhangs > 0;
}

static int flight_shows_waits(const void *object)
{
	const struct analysis_flight *f = object;

	return f->sources_enter > 0 || f->sources_cupti > 0;
}

/* A rank's last step before its first: ordinal 0 and no time (live.h). */
static int step_absent(const void *object)
{
	const struct live_step *s = object;

	return s->ordinal == 0 && s->step_ns == 0;
}

static void flight_rank_init(void *object)
{
	struct analysis_flight_rank *r = object;

	memset(r, 0, sizeof(*r));
	r->global_rank = -1; /* not in a snapshot */
}

/* A mismatch's signature a or b with its ranks, and back. */
static void signature_load(struct live_signature *s, const struct analysis_signature *sig, uint32_t n,
			   const int32_t *ranks)
{
	memset(s, 0, sizeof(*s));
	s->sig = *sig;
	s->ranks_total = n;
	memcpy(s->ranks, ranks, sizeof(s->ranks));
}

static void signature_store(const struct live_signature *s, struct analysis_signature *sig, uint32_t *n, int32_t *ranks)
{
	*sig = s->sig;
	*n = s->ranks_total;
	memcpy(ranks, s->ranks, sizeof(s->ranks));
}

static void load_a(const void *parent, void *object)
{
	const struct analysis_mismatch *m = parent;

	signature_load(object, &m->a, m->na, m->a_ranks);
}

static void load_b(const void *parent, void *object)
{
	const struct analysis_mismatch *m = parent;

	signature_load(object, &m->b, m->nb, m->b_ranks);
}

static void store_a(void *parent, const void *object)
{
	struct analysis_mismatch *m = parent;

	signature_store(object, &m->a, &m->na, m->a_ranks);
}

static void store_b(void *parent, const void *object)
{
	struct analysis_mismatch *m = parent;

	signature_store(object, &m->b, &m->nb, m->b_ranks);
}

/* ---- /metrics families (docs/metrics.md's table) ------------------------------------ */

/* A family of one sample per rank, `order`-th of them in the exposition. */
#define RANK_FAMILY(name_, type_, unit_, order_, attach, help_)                                                        \
	.metric = &(const struct live_metric)                                                                          \
	{                                                                                                              \
		.name = name_, .type = type_, .help = help_, .unit = unit_, .order = order_, .attach_unknown = attach  \
	}
/* A family whose samples collector/metrics.c writes by hand (labels, and when a figure is left out). */
#define FAMILY(name_, type_, unit_, help_) RANK_FAMILY(name_, type_, unit_, 0, 0, help_)
#define COUNT LIVE_METRIC_COUNT
#define SECONDS LIVE_METRIC_SECONDS

/* ---- the tables --------------------------------------------------------------------- */

#define SIZE(T, m) sizeof(((T *)0)->m)
/* Field `m` of struct T under JSON name `key`. */
#define AT(key, m, k) .name = key, .kind = k, .offset = offsetof(T, m), .size = SIZE(T, m)
#define UINT(key, m) AT(key, m, LIVE_FIELD_UINT)
#define INT(key, m) AT(key, m, LIVE_FIELD_INT)
#define BOOL(key, m) AT(key, m, LIVE_FIELD_BOOL)
#define TEXT(key, m) AT(key, m, LIVE_FIELD_TEXT)
#define HEX(key, m) AT(key, m, LIVE_FIELD_HEX)
#define ENUM(key, m, fn, n) AT(key, m, LIVE_FIELD_ENUM), .enum_name = fn, .enum_count = n
#define GUARD(m) .null = LIVE_NULL_GUARD, .guard = offsetof(T, m), .guard_size = SIZE(T, m)
/* An array of table `t` at m[], n of them used (at most the struct's room). */
#define ARRAY(key, m, t, n)                                                                                            \
	.name = key, .kind = LIVE_FIELD_ARRAY, .offset = offsetof(T, m), .size = sizeof(((T *)0)->m[0]), .object = &t, \
	.count = offsetof(T, n), .count_size = SIZE(T, n), .max = sizeof(((T *)0)->m) / sizeof(((T *)0)->m[0])
#define OBJECT(key, m, t)                                                                                              \
	.name = key, .kind = LIVE_FIELD_OBJECT, .offset = offsetof(T, m), .size = SIZE(T, m), .object = &t
/* The table of struct T: `known` the offset of its int that says its figures are known (-1: the parent says). */
#define TABLE(var, key, fields_, known_, absent_, init_)                                                               \
	const struct live_table var = {.name = key,                                                                    \
				       .size = sizeof(T),                                                              \
				       .fields = fields_,                                                              \
				       .nfields = sizeof(fields_) / sizeof(fields_[0]),                                \
				       .known = known_,                                                                \
				       .absent = absent_,                                                              \
				       .init = init_}

#define T struct live_step
static const struct live_field step_fields[] = {
    {UINT("ordinal", ordinal), RANK_FAMILY("fsdpscope_step_ordinal", "gauge", COUNT, 7, 0,
					   "Steps of the rank before its last analysed step, warm-up included.")},
    {BOOL("excluded", excluded)},
    {UINT("start_ns", start_ns)},
    {UINT("step_ns", step_ns),
     RANK_FAMILY("fsdpscope_step_seconds", "gauge", SECONDS, 6, 0, "Duration of the rank's last analysed step.")},
    {UINT("allgathers", allgathers), RANK_FAMILY("fsdpscope_allgathers_per_step", "gauge", COUNT, 8, 0,
						 "AllGathers in the rank's last analysed step.")},
    {UINT("microbatches", microbatches), .null = LIVE_NULL_AT, .null_value = 0,
     RANK_FAMILY("fsdpscope_microbatches_per_step", "gauge", COUNT, 9, 0,
		 "Micro-batches in the rank's last analysed step, when known.")},
    {UINT("allgather_ns", allgather_ns), RANK_FAMILY("fsdpscope_allgather_seconds_per_step", "gauge", SECONDS, 10, 1,
						     "AllGather time in the rank's last analysed step.")},
    {UINT("exposed_allgather_ns", exposed_allgather_ns),
     RANK_FAMILY("fsdpscope_allgather_exposed_seconds_per_step", "gauge", SECONDS, 11, 1,
		 "AllGather time with no compute under it in the rank's last analysed step.")},
    {UINT("compute_wait_ns", compute_wait_ns),
     RANK_FAMILY("fsdpscope_compute_wait_seconds_per_step", "gauge", SECONDS, 12, 1,
		 "Time compute waited on gathers in the rank's last analysed step.")},
    {UINT("compute_ns", compute_ns), RANK_FAMILY("fsdpscope_compute_seconds_per_step", "gauge", SECONDS, 13, 1,
						 "Compute time in the rank's last analysed step.")},
    {UINT("exposed_comm_ns", exposed_comm_ns),
     RANK_FAMILY("fsdpscope_comm_exposed_seconds_per_step", "gauge", SECONDS, 14, 1,
		 "Communication time with no compute under it in the rank's last analysed step.")},
};
TABLE(live_table_step, "step", step_fields, -1, step_absent, NULL);
#undef T

#define T struct live_totals
static const struct live_field totals_fields[] = {
    {UINT("steps", steps),
     RANK_FAMILY("fsdpscope_steps_total", "counter", COUNT, 15, 0, "Steps of the rank analysed.")},
    {UINT("steps_excluded", steps_excluded),
     RANK_FAMILY("fsdpscope_steps_excluded_total", "counter", COUNT, 16, 0,
		 "Steps of the rank left out of the analysis (lost collectives, cut off).")},
    {UINT("step_ns_sum", step_ns_sum), RANK_FAMILY("fsdpscope_analysed_step_seconds_total", "counter", SECONDS, 17, 0,
						   "Duration of the rank's analysed steps, summed.")},
    {UINT("step_ns_min", step_ns_min), GUARD(steps)},
    {UINT("step_ns_max", step_ns_max), GUARD(steps)},
    {UINT("allgathers_sum", allgathers_sum),
     RANK_FAMILY("fsdpscope_allgathers_total", "counter", COUNT, 18, 0, "AllGathers in the rank's analysed steps.")},
    {UINT("exposed_allgather_ns_sum", exposed_allgather_ns_sum),
     RANK_FAMILY("fsdpscope_allgather_exposed_seconds_total", "counter", SECONDS, 19, 1,
		 "AllGather time with no compute under it in the rank's analysed steps, summed.")},
    {UINT("compute_wait_ns_sum", compute_wait_ns_sum),
     RANK_FAMILY("fsdpscope_compute_wait_seconds_total", "counter", SECONDS, 20, 1,
		 "Time compute waited on gathers in the rank's analysed steps, summed.")},
    {UINT("compute_ns_sum", compute_ns_sum), RANK_FAMILY("fsdpscope_compute_seconds_total", "counter", SECONDS, 21, 1,
							 "Compute time in the rank's analysed steps, summed.")},
};
TABLE(live_table_totals, "totals", totals_fields, -1, NULL, NULL);
#undef T

#define T struct live_comm
static const struct live_field comm_fields[] = {
    {HEX("id_hash", id_hash)},
    {UINT("nranks", nranks)},
    {INT("rank", rank)},
    {ENUM("role", role, analysis_comm_role_name, ANALYSIS_ROLE_MAX),
     FAMILY("fsdpscope_comm_role", "gauge", COUNT, "1 for the communicator's role as the latest diagnosis gave it.")},
    {UINT("collectives", collectives), FAMILY("fsdpscope_comm_collectives_total", "counter", COUNT,
					      "Collective calls the rank recorded on the communicator.")},
    {UINT("last_seq", last_seq)},
    {UINT("entered", entered)},
    {UINT("left", left)},
};
TABLE(live_table_comm, "comm", comm_fields, -1, NULL, NULL);
#undef T

#define T struct live_event
static const struct live_field event_fields[] = {
    {UINT("start_ns", start_ns)},   {UINT("end_ns", end_ns)},
    {ENUM("op", op, op_name, 256)}, {ENUM("phase", phase, phase_name, 8), .null = LIVE_NULL_UNNAMED, .null_value = 0},
    {UINT("calls", calls)},	    {UINT("unit", unit), .null = LIVE_NULL_AT, .null_value = UINT32_MAX},
    {UINT("bytes", bytes)},	    {UINT("exposed_ns", exposed_ns)},
};
TABLE(live_table_event, "event", event_fields, -1, NULL, NULL);
#undef T

#define T struct live_rank
static const struct live_field rank_fields[] = {
    {INT("rank", rank), .null = LIVE_NULL_NEGATIVE, .null_value = -1},
    {UINT("source", source)},
    {UINT("pid", pid)},
    {TEXT("host", host)},
    {TEXT("command", command)},
    {BOOL("ended", ended),
     RANK_FAMILY("fsdpscope_rank_ended", "gauge", COUNT, 0, 0, "1 once the rank's process has ended.")},
    {UINT("records", records), RANK_FAMILY("fsdpscope_rank_records_total", "counter", COUNT, 1, 0,
					   "Records the session received from the rank.")},
    {UINT("dropped", dropped),
     RANK_FAMILY("fsdpscope_records_dropped_total", "counter", COUNT, 2, 0,
		 "Records the rank lost before they reached the collector (ring, sink, CUPTI, NVTX).")},
    /* observed by fsdpscope attach: what it cannot measure is n/a, and its rank may be inferred */
    {BOOL("attached", attached), .optional = 1},
    {ENUM("rank_from", rank_from, rank_from_name, SOURCE_RANK_GUESSED_ORDER + 1), .optional = 1},
    {UINT("collectives_missing", collectives_missing),
     RANK_FAMILY("fsdpscope_collectives_missing_total", "counter", COUNT, 4, 0,
		 "Collective calls the rank made that were not recorded (sequence gaps).")},
    {UINT("collectives", collectives),
     RANK_FAMILY("fsdpscope_collectives_total", "counter", COUNT, 3, 0, "Collective calls recorded from the rank.")},
    {UINT("last_ns", last_ns)},
    {INT("lateness_ns", lateness_ns),
     RANK_FAMILY("fsdpscope_rank_lateness_seconds", "gauge", SECONDS, 5, 0,
		 "How late the rank enters the FSDP collectives against the earliest rank (latest diagnosis).")},
    {OBJECT("last_step", last, live_table_step), .null = LIVE_NULL_ABSENT},
    {OBJECT("totals", totals, live_table_totals)},
    {ARRAY("window", window, live_table_step, nwindow)},
    {ARRAY("comms", comms, live_table_comm, ncomms)},
    {ARRAY("strip", strip, live_table_event, nstrip)},
};
TABLE(live_table_rank, "rank", rank_fields, -1, NULL, NULL);
#undef T

#define T struct live_finding
static const struct live_field finding_fields[] = {
    {TEXT("rule", rule)},	{ENUM("severity", severity, severity_name, 3)}, {TEXT("title", title), .optional = 1},
    {TEXT("message", message)}, {TEXT("fix", fix), .null = LIVE_NULL_AT},	{TEXT("evidence", evidence)},
};
TABLE(live_table_finding, "finding", finding_fields, -1, NULL, NULL);
#undef T

#define T struct live_gather
static const struct live_field gather_fields[] = {
    {UINT("unit", unit), .null = LIVE_NULL_AT, .null_value = UINT32_MAX},
    {UINT("bytes", bytes)},
    {UINT("exposed_ns", exposed_ns)},
    {TEXT("name", name)},
    /* added within fsdpscope.live/2 */
    {UINT("nranks", nranks), .null = LIVE_NULL_AT, .null_value = 0, .optional = 1},
};
TABLE(live_table_gather, "gather", gather_fields, -1, NULL, NULL);
#undef T

#define T struct analysis_flight_rank
static const struct live_field flight_rank_fields[] = {
    {INT("rank", rank)},
    {UINT("source", source)},
    {UINT("pid", pid)},
    {UINT("since_ns", since_ns)},
    {UINT("last_seq", last_seq), .null = LIVE_NULL_AT, .null_value = 0},
    {ENUM("last_op", last_op, op_name, 256), GUARD(last_seq)},
    /* a waiting rank's evidence; a missing rank's is not written */
    {ENUM("evidence", evidence, evidence_name, 4), .null = LIVE_NULL_UNKNOWN},
    /* how a waiting rank's wait stands: an ended one is still the hang's */
    {ENUM("wait_end", end, wait_end_name, 3), .null = LIVE_NULL_UNKNOWN, .optional = 1},
};
TABLE(live_table_flight_rank, "flight_rank", flight_rank_fields, -1, NULL, flight_rank_init);
#undef T

#define T struct analysis_hang
static const struct live_field hang_fields[] = {
    {HEX("comm", comm_id)},
    {INT("nranks", nranks)},
    {UINT("comm_seq", comm_seq)},
    {ENUM("op", op, op_name, 256)},
    {UINT("count", count)},
    {ENUM("dtype", dtype, dtype_name, 256), .null = LIVE_NULL_AT, .null_value = FSS_DTYPE_UNKNOWN},
    {UINT("waited_ns", waited_ns)},
    {ENUM("ended", ended, hang_ended_name, 3), .null = LIVE_NULL_UNNAMED, .null_value = ANALYSIS_WAIT_ON,
     .optional = 1},
    {UINT("waiting_total", nwaiting)},
    {ARRAY("waiting", waiting, live_table_flight_rank, nwaiting), .element_known = 1},
    {UINT("missing_total", nmissing)},
    {ARRAY("missing", missing, live_table_flight_rank, nmissing)},
    {UINT("died_total", ndied), .optional = 1},
    {ARRAY("died", died, live_table_flight_rank, ndied), .element_known = 1, .optional = 1},
};
TABLE(live_table_hang, "", hang_fields, -1, NULL, NULL);
#undef T

#define T struct live_signature
static const struct live_field signature_fields[] = {
    {ENUM("op", sig.op, op_name, 256)},
    {UINT("count", sig.count)},
    {ENUM("dtype", sig.dtype, dtype_name, 256), .null = LIVE_NULL_AT, .null_value = FSS_DTYPE_UNKNOWN},
    {INT("root", sig.root), .null = LIVE_NULL_NEGATIVE, .null_value = -1},
    {ENUM("redop", sig.redop, redop_name, 256), .null = LIVE_NULL_AT, .null_value = FSS_REDOP_NONE},
    {UINT("ranks_total", ranks_total)},
    {.name = "ranks",
     .kind = LIVE_FIELD_ARRAY,
     .offset = offsetof(T, ranks),
     .size = sizeof(int32_t),
     .count = offsetof(T, ranks_total),
     .count_size = SIZE(T, ranks_total),
     .max = ANALYSIS_FLIGHT_RANKS_MAX},
};
TABLE(live_table_signature, "flight_signature", signature_fields, -1, NULL, NULL);
#undef T

#define T struct analysis_mismatch
static const struct live_field mismatch_fields[] = {
    {HEX("comm", comm_id)},
    {INT("nranks", nranks)},
    {UINT("comm_seq", comm_seq)},
    /* the signatures' ranks sit beside them in the mismatch */
    {.name = "a", .kind = LIVE_FIELD_COMPOSED, .object = &live_table_signature, .load = load_a, .store = store_a},
    {.name = "b", .kind = LIVE_FIELD_COMPOSED, .object = &live_table_signature, .load = load_b, .store = store_b},
    {UINT("other_ranks", others)},
};
TABLE(live_table_mismatch, "", mismatch_fields, -1, NULL, NULL);
#undef T

#define T struct analysis_flight
static const struct live_field flight_fields[] = {
    {.name = "hang",
     .kind = LIVE_FIELD_DERIVED,
     .derive = flight_hang,
     FAMILY("fsdpscope_collective_hang", "gauge", COUNT,
	    "1 while the latest diagnosis holds a hang (ranks waiting in a collective past --hang-timeout that others "
	    "have not entered), else 0.")},
    {.name = "shows_waits", .kind = LIVE_FIELD_DERIVED, .derive = flight_shows_waits},
    {UINT("timeout_ns", timeout_ns)},
    {UINT("now_realtime_ns", now_realtime_ns), .null = LIVE_NULL_AT, .null_value = 0},
    {UINT("sources_enter", sources_enter)},
    {UINT("sources_cupti", sources_cupti)},
    {UINT("in_flight", in_flight)},
    {UINT("hangs_total", hangs_total)},
    {ARRAY("hangs", hangs, live_table_hang, nhangs)},
    {UINT("mismatches_total", mismatches_total)},
    {UINT("mismatched_collectives", mismatched_collectives)},
    {ARRAY("mismatches", mismatches, live_table_mismatch, nmismatches)},
};
TABLE(live_table_flight, "flight", flight_fields, -1, NULL, NULL);
#undef T

#define T struct live_job
static const struct live_field job_fields[] = {
    {UINT("records_total", records_total),
     FAMILY("fsdpscope_records_total", "counter", COUNT, "Records the session wrote to its trace.")},
    {UINT("records_dropped_total", records_dropped_total),
     FAMILY("fsdpscope_job_records_dropped_total", "counter", COUNT,
	    "Records the ranks lost before they reached the collector, all ranks together.")},
    {UINT("diagnoses", diagnoses),
     FAMILY("fsdpscope_diagnoses_total", "counter", COUNT, "Diagnoses the session has made so far.")},
    {BOOL("diagnosed", diagnosed),
     FAMILY("fsdpscope_diagnosed", "gauge", COUNT, "1 when the live view holds a diagnosis, else 0.")},
    /* before the first diagnosis the figures below are not zeros but unknown */
    {ENUM("verdict", verdict, analysis_verdict_name, 16), .null = LIVE_NULL_UNKNOWN,
     FAMILY("fsdpscope_verdict", "gauge", COUNT,
	    "1 for the verdict of the latest diagnosis, 0 for the others (all 0 before one).")},
    {ENUM("undecided_reason", undecided_reason, analysis_undecided_name, ANALYSIS_UNDECIDED_MAX),
     .null = LIVE_NULL_UNKNOWN,
     FAMILY("fsdpscope_undecided_reason", "gauge", COUNT,
	    "1 for why the latest diagnosis could not decide, 0 for the other reasons.")},
    {ENUM("reshard", reshard, analysis_reshard_name, 8), .null = LIVE_NULL_UNKNOWN,
     FAMILY("fsdpscope_reshard", "gauge", COUNT, "1 for the reshard-after-forward policy of the latest diagnosis.")},
    {UINT("repeating_units", repeating_units), .null = LIVE_NULL_UNKNOWN,
     FAMILY("fsdpscope_repeating_units", "gauge", COUNT,
	    "Repeating units (L) of the FSDP forward gather sequence, latest diagnosis.")},
    {UINT("gathers_per_unit", gathers_per_unit), .null = LIVE_NULL_UNKNOWN,
     FAMILY("fsdpscope_gathers_per_unit", "gauge", COUNT,
	    "AllGathers per repeating unit per forward (k; above 1 is per-Linear wrapping).")},
    {UINT("allgathers_per_step", allgathers_per_step), .null = LIVE_NULL_UNKNOWN,
     FAMILY("fsdpscope_diagnosis_allgathers_per_step", "gauge", COUNT,
	    "AllGathers per step of the headline rank, latest diagnosis.")},
    {UINT("microbatches", microbatches), .null = LIVE_NULL_UNKNOWN | LIVE_NULL_AT, .null_value = 0,
     FAMILY("fsdpscope_diagnosis_microbatches_per_step", "gauge", COUNT, "Micro-batches per step, latest diagnosis.")},
    {UINT("exposed_allgather_ns_per_step", exposed_allgather_ns_per_step), .null = LIVE_NULL_UNKNOWN,
     FAMILY("fsdpscope_diagnosis_allgather_exposed_seconds_per_step", "gauge", SECONDS,
	    "AllGather time per step with no compute under it, headline rank, latest diagnosis.")},
    {UINT("compute_wait_ns_per_step", compute_wait_ns_per_step), .null = LIVE_NULL_UNKNOWN,
     FAMILY("fsdpscope_diagnosis_compute_wait_seconds_per_step", "gauge", SECONDS,
	    "Time per step compute waited on gathers, headline rank, latest diagnosis.")},
    {UINT("sources_attached", sources_attached), .optional = 1},
    {ENUM("exposure_source", exposure_source, exposure_source_name, 3), .optional = 1},
    {ARRAY("findings", findings, live_table_finding, nfindings),
     FAMILY("fsdpscope_findings", "gauge", COUNT, "Findings of the latest diagnosis, by rule and severity.")},
    {ARRAY("gathers", gathers, live_table_gather, ngathers)},
    /* the latest diagnosis' calls in flight (docs/live.md, "flight") */
    {OBJECT("flight", flight, live_table_flight), .null = LIVE_NULL_UNKNOWN},
};
TABLE(live_table_job, "job", job_fields, offsetof(struct live_job, diagnosed), NULL, NULL);
#undef T

#define T struct live_view
static const struct live_field snapshot_fields[] = {
    /* first, always: a client checks the version from the line's first bytes */
    {.name = "schema", .kind = LIVE_FIELD_CONST},
    {UINT("generation", generation),
     FAMILY("fsdpscope_live_generation", "gauge", COUNT,
	    "Publish count of the live view this scrape rendered (0 before the first).")},
    {UINT("at_ns", at_ns)},
    {UINT("at_realtime_ns", at_realtime_ns),
     FAMILY("fsdpscope_live_published_timestamp_seconds", "gauge", SECONDS,
	    "Wall-clock time (Unix seconds) at which the rendered live view was published.")},
    {OBJECT("job", job, live_table_job)},
    {.name = "ranks",
     .kind = LIVE_FIELD_ARRAY,
     .offset = offsetof(T, ranks),
     .size = sizeof(struct live_rank),
     .object = &live_table_rank,
     .count = offsetof(T, nranks),
     .count_size = SIZE(T, nranks),
     .max = 0,
     FAMILY("fsdpscope_ranks", "gauge", COUNT, "Processes (trace sources) the session has seen, ended ones included.")},
};
TABLE(live_table_snapshot, "", snapshot_fields, -1, NULL, NULL);
#undef T

/* ---- reading and writing fields ------------------------------------------------------ */

/* The integer of `size` bytes at p, sign-extended when is_signed. */
static uint64_t load(const void *p, size_t size, int is_signed)
{
	uint64_t v;

	switch (size) {
	case 1:
		v = *(const uint8_t *)p;
		break;
	case 2:
		v = *(const uint16_t *)p;
		break;
	case 4:
		v = *(const uint32_t *)p;
		break;
	default:
		return *(const uint64_t *)p;
	}
	if (is_signed && (v >> (8 * size - 1)) & 1)
		v |= UINT64_MAX << (8 * size);
	return v;
}

/* The low `size` bytes of v into the integer at p. */
static void store(void *p, size_t size, uint64_t v)
{
	switch (size) {
	case 1:
		*(uint8_t *)p = (uint8_t)v;
		break;
	case 2:
		*(uint16_t *)p = (uint16_t)v;
		break;
	case 4:
		*(uint32_t *)p = (uint32_t)v;
		break;
	default:
		*(uint64_t *)p = v;
		break;
	}
}

static const void *at(const void *object, size_t offset)
{
	return (const char *)object + offset;
}

/* Enumerations stored in a byte or two are unsigned, in an int signed. */
static int is_signed(const struct live_field *f)
{
	return f->kind == LIVE_FIELD_INT || (f->kind == LIVE_FIELD_ENUM && f->size >= 4);
}

uint64_t live_field_uint(const void *object, const struct live_field *f)
{
	uint64_t v = load(at(object, f->offset), f->size, is_signed(f));

	return f->kind == LIVE_FIELD_BOOL ? v != 0 : v;
}

int64_t live_field_int(const void *object, const struct live_field *f)
{
	return (int64_t)live_field_uint(object, f);
}

void live_field_set_uint(void *object, const struct live_field *f, uint64_t v)
{
	uint64_t max = f->size >= 8 ? UINT64_MAX : (UINT64_C(1) << (8 * f->size)) - 1;

	store((char *)object + f->offset, f->size, v > max ? max : v);
}

void live_field_set(void *object, const struct live_field *f, int64_t v)
{
	int64_t max = f->size >= 8 ? INT64_MAX : (INT64_C(1) << (8 * f->size - 1)) - 1;

	if (!is_signed(f)) {
		live_field_set_uint(object, f, v < 0 ? 0 : (uint64_t)v);
		return;
	}
	store((char *)object + f->offset, f->size, (uint64_t)(v > max ? max : v < -max - 1 ? -max - 1 : v));
}

const struct live_field *live_table_field(const struct live_table *t, const char *name)
{
	for (size_t i = 0; i < t->nfields; i++)
		if (!strcmp(t->fields[i].name, name))
			return &t->fields[i];
	return NULL;
}

int live_table_known(const struct live_table *t, const void *object, int parent_known)
{
	return t->known >= 0 ? *(const int *)at(object, (size_t)t->known) != 0 : parent_known;
}

int live_field_is_null(const void *object, const struct live_field *f, int known)
{
	if ((f->null & LIVE_NULL_UNKNOWN) && !known)
		return 1;
	if (f->null & LIVE_NULL_AT) {
		if (f->kind == LIVE_FIELD_TEXT && *(const char *)at(object, f->offset) == '\0')
			return 1;
		if (f->kind == LIVE_FIELD_UINT && live_field_uint(object, f) == (uint64_t)f->null_value)
			return 1;
		if ((f->kind == LIVE_FIELD_INT || f->kind == LIVE_FIELD_ENUM) &&
		    live_field_int(object, f) == f->null_value)
			return 1;
	}
	if ((f->null & LIVE_NULL_NEGATIVE) && live_field_int(object, f) < 0)
		return 1;
	if ((f->null & LIVE_NULL_UNNAMED) && !f->enum_name((int)live_field_int(object, f)))
		return 1;
	if ((f->null & LIVE_NULL_GUARD) && load(at(object, f->guard), f->guard_size, 0) == 0)
		return 1;
	if ((f->null & LIVE_NULL_ABSENT) && f->object->absent(at(object, f->offset)))
		return 1;
	return 0;
}

int live_field_nullable(const struct live_field *f, int known)
{
	/* A reader takes null wherever a writer may write one, whatever the
	 * object's figures say: only "not known" alone depends on them, and
	 * an object (the flight) is taken as null whenever it may be null. */
	if (f->kind == LIVE_FIELD_OBJECT || f->null != LIVE_NULL_UNKNOWN)
		return f->null != 0;
	return !known;
}

const void *live_field_elements(const void *object, const struct live_field *f, size_t *n)
{
	size_t count = (size_t)load(at(object, f->count), f->count_size, 0);
	const void *first;

	if (f->max == 0) {
		first = *(const void *const *)at(object, f->offset);
		*n = first ? count : 0;
		return first;
	}
	*n = count < f->max ? count : f->max;
	return at(object, f->offset);
}

/* ---- the encoder -------------------------------------------------------------------------- */

static void write_array(struct jw *w, const struct live_field *f, const void *object)
{
	size_t n, size = f->object ? f->object->size : f->size;
	const char *e = live_field_elements(object, f, &n);

	jw_open(w, f->name, '[');
	for (size_t i = 0; i < n; i++, e += size) {
		if (!f->object) {
			jw_sep(w, NULL);
			jw_rawf(w, "%" PRId64, (int64_t)load(e, f->size, 1));
			continue;
		}
		jw_open(w, NULL, '{');
		live_fields_write(w, f->object, e, live_table_known(f->object, e, f->element_known));
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

static void write_field(struct jw *w, const struct live_field *f, const void *object, int known)
{
	const void *p = at(object, f->offset);

	if (f->kind == LIVE_FIELD_CONST) {
		jw_str(w, f->name, LIVE_SCHEMA);
		return;
	}
	if (f->kind == LIVE_FIELD_COMPOSED) {
		struct live_signature composed; /* the one composed object there is */

		f->load(object, &composed);
		jw_open(w, f->name, '{');
		live_fields_write(w, f->object, &composed, known);
		jw_close(w, '}');
		return;
	}
	if (f->kind != LIVE_FIELD_DERIVED && f->kind != LIVE_FIELD_ARRAY && live_field_is_null(object, f, known)) {
		jw_null(w, f->name);
		return;
	}
	switch (f->kind) {
	case LIVE_FIELD_UINT:
		jw_u64(w, f->name, live_field_uint(object, f));
		break;
	case LIVE_FIELD_INT:
		jw_i64(w, f->name, live_field_int(object, f));
		break;
	case LIVE_FIELD_BOOL:
		jw_bool(w, f->name, (int)live_field_uint(object, f));
		break;
	case LIVE_FIELD_TEXT:
		jw_strn(w, f->name, p, f->size);
		break;
	case LIVE_FIELD_ENUM:
		jw_str(w, f->name, f->enum_name((int)live_field_int(object, f)));
		break;
	case LIVE_FIELD_HEX:
		jw_hex(w, f->name, live_field_uint(object, f));
		break;
	case LIVE_FIELD_DERIVED:
		jw_bool(w, f->name, f->derive(object));
		break;
	case LIVE_FIELD_OBJECT:
		jw_open(w, f->name, '{');
		live_fields_write(w, f->object, p, live_table_known(f->object, p, known));
		jw_close(w, '}');
		break;
	case LIVE_FIELD_ARRAY:
		write_array(w, f, object);
		break;
	default:
		break;
	}
}

void live_fields_write(struct jw *w, const struct live_table *t, const void *object, int known)
{
	for (size_t i = 0; i < t->nfields; i++)
		write_field(w, &t->fields[i], object, known);
}
