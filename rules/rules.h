/*
 * rules.h - the lint rules over the collector's analysis: registry and
 * thresholds.
 *
 * Each rule lives in its own file (rules/<id with underscores>.c), reads only
 * the plain structs of collector/analysis.h and appends findings
 * (rules/findings.h): a stable id, a title, a severity, the evidence as
 * numbers, a one-paragraph explanation and the fix as code for FSDP2, and
 * for FSDP1 / DeepSpeed ZeRO-3 where it differs.
 *
 * Thresholds have defaults (the table below: one place, so `lint --help`,
 * the docs and the code cannot disagree) and are overridden by name from the
 * command line (`--threshold NAME=VALUE`).
 */
#ifndef FSS_RULES_RULES_H
#define FSS_RULES_RULES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collector/analysis.h"
#include "rules/findings.h"

/*
 * The thresholds: X(ID, "name", default, "unit", "what it decides").
 * The default is written as a plain number literal: the help text shows it
 * as written (#default), the code uses its value.
 */
#define RULE_THRESHOLDS(X)                                                                                   \
	X(RULE_T_FINE_GATHERS_PER_UNIT, "fine_gathers_per_unit", 2, "gathers",                                  \
	  "wrap-too-fine: gathers per repeating unit at which the wrap is finer than the unit (error)")         \
	X(RULE_T_MIN_UNITS, "min_units", 2, "units",                                                            \
	  "wrap-too-fine: repeats of the motif needed before the wrap is judged (without --layers)")            \
	X(RULE_T_COARSE_FRACTION, "coarse_fraction", 0.5, "fraction",                                           \
	  "wrap-too-coarse: share of all parameters in one gather that makes it a warning")                    \
	X(RULE_T_COARSE_ERROR_FRACTION, "coarse_error_fraction", 0.9, "fraction",                               \
	  "wrap-too-coarse: share of all parameters in one gather that makes it an error (whole model)")       \
	X(RULE_T_COARSE_UNIT_RATIO, "coarse_unit_ratio", 1.5, "ratio",                                          \
	  "wrap-too-coarse: a non-root unit this many times the repeating unit (or one layer) is too coarse")  \
	X(RULE_T_EXPOSED_FRACTION, "exposed_fraction", 0.2, "fraction",                                         \
	  "exposed-gather: exposed AllGather time / all AllGather time at which it warns")                     \
	X(RULE_T_EXPOSED_STEP_FRACTION, "exposed_step_fraction", 0.02, "fraction",                              \
	  "exposed-gather: and exposed AllGather time / step time at least this")                              \
	X(RULE_T_SMALL_GATHER_BYTES, "small_gather_bytes", 1048576, "bytes",                                    \
	  "small-collectives: median gathered bytes per AllGather (output, all ranks) below this")             \
	X(RULE_T_FP32_GATHER_FRACTION, "fp32_gather_fraction", 0.05, "fraction",                                \
	  "fp32-gather: share of gathered bytes in fp32 (with 16-bit compute) at which it warns")              \
	X(RULE_T_SKEW_STEP_FRACTION, "skew_step_fraction", 0.05, "fraction",                                    \
	  "rank-skew: arrival spread across ranks per step / step time at which it reports")                   \
	X(RULE_T_SKEW_SLOWEST_SHARE, "skew_slowest_share", 0.5, "fraction",                                     \
	  "rank-skew: share of collectives one rank enters last to be named the straggler (warning)")          \
	X(RULE_T_FIX_GAIN_FRACTION, "fix_gain_fraction", 0.02, "fraction",                                      \
	  "a warning whose every fix is predicted to gain under this share of the step is info")

enum rule_threshold_id {
#define RULE_X_ENUM(id, name, def, unit, help) id,
	RULE_THRESHOLDS(RULE_X_ENUM)
#undef RULE_X_ENUM
	RULE_THRESHOLD_COUNT
};

/* One threshold's description (from the table above). */
struct rule_threshold_def {
	const char *name;         /* as given to --threshold */
	double default_value;
	const char *default_text; /* the default as written in the table */
	const char *unit;         /* "fraction", "bytes", "ratio", "gathers", ... */
	const char *help;
};

/* rule_thresholds - the table, *n set to RULE_THRESHOLD_COUNT. */
const struct rule_threshold_def *rule_thresholds(size_t *n);

/* rule_threshold_range - the values t takes, [*lo, *hi] by its unit (a
 * fraction 0..1, a ratio >= 1, bytes >= 0, a count a whole number >= 1),
 * and their words for an error message. */
const char *rule_threshold_range(const struct rule_threshold_def *t, double *lo, double *hi);

/* The help text lines for the thresholds, built from the table at compile
 * time for the commands' static help strings: "    name  [default unit]\n
 * <tab>help\n" per threshold. */
#define RULE_X_HELP(id, name, def, unit, help) "    " name " [" #def " " unit "]\n        " help "\n"
#define RULE_THRESHOLDS_HELP RULE_THRESHOLDS(RULE_X_HELP)

/* What the rules are run with. */
struct rule_config {
	double threshold[RULE_THRESHOLD_COUNT];
	uint64_t disabled; /* bit i set: rule i of the registry does not run */
};

/* rule_config_init - every threshold at its default, every rule enabled. */
void rule_config_init(struct rule_config *c);

/*
 * rule_config_set - apply "NAME=VALUE". VALUE is a number with an optional
 * suffix: '%' (divided by 100), k / M / G / T (powers of 1000) or Ki / Mi /
 * Gi / Ti (powers of 1024), optionally followed by 'B'. Returns 0, -ENOENT
 * for an unknown name, -EINVAL for a malformed assignment or value, -ERANGE
 * for a negative or non-finite value, -EDOM for one outside the threshold's
 * range (rule_threshold_range).
 */
int rule_config_set(struct rule_config *c, const char *assignment);

/* rule_config_disable - stop rule `id` from running. Returns 0 or -ENOENT. */
int rule_config_disable(struct rule_config *c, const char *id);

/* rule_parse_number - the value syntax of rule_config_set, for other flags
 * (--gpu-mem 80G, --params 7e9). Returns 0, -EINVAL or -ERANGE. */
int rule_parse_number(const char *text, double *out);

/* One rule. */
struct rule {
	const char *id;          /* stable: "wrap-too-fine" */
	const char *title;       /* one line */
	const char *explanation; /* one paragraph: why it matters */
	enum rule_severity max_severity; /* the highest severity it can report */
	/* check - append this rule's findings about `a` to `out`. Returns 0, or
	 * -ENOMEM (the only failure: a rule never fails on odd input, it stays
	 * silent when the analysis does not know enough). */
	int (*check)(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		     findings_t *out);
};

/* The rules, one per file. */
extern const struct rule rule_collective_hang;
extern const struct rule rule_collective_mismatch;
extern const struct rule rule_restart;
extern const struct rule rule_duplicate_rank;
extern const struct rule rule_not_diagnosed;
extern const struct rule rule_bucketed_fetch;
extern const struct rule rule_wrap_too_fine;
extern const struct rule rule_wrap_too_coarse;
extern const struct rule rule_gather_count_mismatch;
extern const struct rule rule_exposed_gather;
extern const struct rule rule_reshard_policy;
extern const struct rule rule_small_collectives;
extern const struct rule rule_fp32_gather;
extern const struct rule rule_rank_skew;

/* rules_all - the registry in run order; *n set to its length. */
const struct rule *const *rules_all(size_t *n);

/* rules_find - the rule with this id, NULL when there is none. */
const struct rule *rules_find(const char *id);

/*
 * rules_run - run every enabled rule over `a`, appending to `out` in
 * registry order, then predict the fixes' gains (rules_predict_gains).
 * Returns 0 or -ENOMEM. `a` is read only.
 */
int rules_run(const struct analysis_result *a, const struct rule_config *c, findings_t *out);

/*
 * rules_predict_gains - rules_run's last pass (rules/fix_gains.c): each
 * finding's fixes get their predicted gains (struct finding_gain) from the
 * what-if model of `a`, with an evidence line, and a warning whose every
 * fix gains under fix_gain_fraction of the step becomes info. Returns 0 or
 * -ENOMEM.
 */
int rules_predict_gains(const struct analysis_result *a, const struct rule_config *c, findings_t *out);

/* rule_diagnosed - the unit analysis holds: units, phases and the reshard
 * policy were read from the stream (not bucketed, not undecided). The wrap
 * and reshard rules judge nothing otherwise. */
static inline int rule_diagnosed(const struct analysis_result *a)
{
	return a->steps_analyzed > 0 && a->verdict == ANALYSIS_DIAGNOSED;
}

/* rule_units_decided - the units were read from the forward gathers: a
 * diagnosis, or an undecided verdict whose phases alone could not be told
 * (no reduction). The wrap rules judge the units; the others need the
 * phases. */
static inline int rule_units_decided(const struct analysis_result *a)
{
	return a->steps_analyzed > 0 && (a->verdict == ANALYSIS_DIAGNOSED || a->units_decided);
}

/* rule_microbatches - forward / backward cycles per step (1 when the step
 * holds one, or when cycles are not known). */
static inline uint32_t rule_microbatches(const struct analysis_result *a)
{
	return a->microbatches.per_step ? a->microbatches.per_step : 1;
}

/* rule_per - "micro-batch" when a step holds several, else "step": what the
 * per-unit counts the rules quote are per. */
static inline const char *rule_per(const struct analysis_result *a)
{
	return rule_microbatches(a) > 1 ? "micro-batch" : "step";
}

/* rule_threshold - the value of threshold `id` in c. */
static inline double rule_threshold(const struct rule_config *c, enum rule_threshold_id id)
{
	return c->threshold[id];
}

/* Formatting helpers the rules share (rules/format.c): human units into a
 * caller's buffer, which is returned. Sizes are decimal (GB = 1e9 bytes), as
 * the FSDP ledger is usually written ("16 x 7e9 = 112 GB"). */
char *rule_format_bytes(double bytes, char *buf, size_t len);   /* "1.50 GB", "98.3 kB", "512 B" */
char *rule_format_ns(double ns, char *buf, size_t len);         /* "4.2 ms", "310 us", "12 ns" */
char *rule_format_count(double n, char *buf, size_t len);       /* "7.00B" / "218.8M" / "4096" (parameters) */

/*
 * rule_left_out - an evidence line (with its leading newline) saying how
 * many steps the figures are from when the analysis left some out (struct
 * analysis_trust: lost collectives, cut off); "" when it left none. Returns
 * buf.
 */
char *rule_left_out(const struct analysis_result *a, char *buf, size_t len);

/*
 * rule_unit_container - the Python expression of the module list that holds
 * the repeating units, for the fix code: "model.layers" from an NVTX unit
 * name "layers.3" or "layers.*" (the name up to its last ".<index>"),
 * "model.layers" when the name is empty or has no index. Returns buf.
 */
char *rule_unit_container(const char *unit_name, char *buf, size_t len);
#endif
