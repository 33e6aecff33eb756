/*
 * findings.h - what the rules say: a list of findings, each with its
 * severity, the numbers it rests on and the fix.
 *
 * A finding is plain data once made: the CLI prints it as text or JSON
 * (docs/report-schema.md) and never looks back at the analysis. The list
 * owns every string in it; findings_free() releases them all.
 */
#ifndef FSS_RULES_FINDINGS_H
#define FSS_RULES_FINDINGS_H

#include <stddef.h>
#include <stdint.h>

/* Severities, ordered: a gate (lint --fail-on) compares with >=. */
enum rule_severity {
	RULE_INFO = 0,    /* a fact worth knowing; nothing to fix */
	RULE_WARNING = 1, /* costs time or memory; fix when convenient */
	RULE_ERROR = 2,   /* the job runs the FSDP lifecycle wrongly; fix first */
};

/* rule_severity_name - "info", "warning", "error"; "unknown" otherwise. */
const char *rule_severity_name(enum rule_severity s);

/* rule_severity_parse - the inverse of rule_severity_name. Returns 0, or
 * -EINVAL for any other text. */
int rule_severity_parse(const char *text, enum rule_severity *out);

/* One number of the evidence, for machines (the JSON "metrics" object). */
struct finding_metric {
	const char *name; /* static, snake_case: "gathers_per_unit" */
	double value;
};

#define FINDING_MAX_METRICS 16

/* How a fix's gain is known (the JSON "predicted_gains" kinds). */
enum finding_gain_kind {
	FINDING_GAIN_WHATIF = 0,        /* the what-if model replayed the change: gain_ns is the step it saves */
	FINDING_GAIN_AT_MOST = 1,       /* no replay: gain_ns bounds it (the exposed time the fix can hide) */
	FINDING_GAIN_NOT_PREDICTED = 2, /* neither: why says so */
};

/* The predicted gain of one of a finding's fixes (rules/fix_gains.c). */
struct finding_gain {
	char fix[40];                /* a what-if change ("prefetch=1") or the cause a fix removes ("host-late") */
	enum finding_gain_kind kind;
	int64_t gain_ns;             /* per step; negative: the change is predicted slower; 0 when not predicted */
	char why[160];               /* not predicted: why; otherwise what the figure is */
};

#define FINDING_MAX_GAINS 6

struct rule;

/* One finding. Strings are owned by the list; fix_fsdp1 / fix_deepspeed are
 * NULL when the FSDP2 fix says all there is to say. */
struct finding {
	const struct rule *rule;        /* id, title and explanation (static) */
	enum rule_severity severity;
	char *message;                  /* one line: what is wrong, with the key number */
	char *evidence;                 /* the numbers it rests on (may hold newlines) */
	char *fix_fsdp2;                /* code for PyTorch FSDP2 (fully_shard) */
	char *fix_fsdp1;                /* code for PyTorch FSDP1, or NULL */
	char *fix_deepspeed;            /* ds_config for DeepSpeed ZeRO-3, or NULL */
	size_t nmetrics;
	struct finding_metric metrics[FINDING_MAX_METRICS];
	size_t ngains;                  /* the fixes' gains, in the order the fixes are listed */
	struct finding_gain gains[FINDING_MAX_GAINS];
};

typedef struct findings findings_t;

/* findings_new - an empty list, NULL when out of memory. The caller frees it
 * with findings_free(). */
findings_t *findings_new(void);

/* findings_free - free the list and every string in it; NULL is allowed. */
void findings_free(findings_t *list);

/* findings_count - number of findings in the list. */
size_t findings_count(const findings_t *list);

/* findings_get - finding i (0 <= i < count), in the order they were added
 * (the registry runs rules in a fixed order, so output is stable). */
const struct finding *findings_get(const findings_t *list, size_t i);

/* findings_at - finding i to change (the gains pass of rules_run), NULL
 * out of range. */
struct finding *findings_at(findings_t *list, size_t i);

/* findings_find - the first finding of rule `id`, NULL when there is none. */
const struct finding *findings_find(const findings_t *list, const char *id);

/* findings_max_severity - the highest severity in the list, or -1 when the
 * list is empty. */
int findings_max_severity(const findings_t *list);

/* findings_count_at_least - findings with severity >= s. */
size_t findings_count_at_least(const findings_t *list, enum rule_severity s);

/*
 * findings_add - append a finding of `rule` with `severity` and the given
 * texts (printf formats are applied by the caller: see finding_printf). The
 * strings are copied; fsdp1 and deepspeed may be NULL. Returns the new
 * finding (to add metrics to), or NULL when out of memory.
 */
struct finding *findings_add(findings_t *list, const struct rule *rule, enum rule_severity severity,
			     const char *message, const char *evidence, const char *fix_fsdp2,
			     const char *fix_fsdp1, const char *fix_deepspeed);

/*
 * findings_take - findings_add for strings the caller malloc'ed (e.g. with
 * finding_printf): the list takes them over and frees them on failure too.
 * message, evidence and fix_fsdp2 must not be NULL (a NULL there is the
 * caller's failed allocation and makes this return NULL).
 */
struct finding *findings_take(findings_t *list, const struct rule *rule, enum rule_severity severity,
			      char *message, char *evidence, char *fix_fsdp2, char *fix_fsdp1,
			      char *fix_deepspeed);

/* finding_metric - attach one named number; the name must be static. Extra
 * metrics past FINDING_MAX_METRICS are dropped (a programming error that the
 * unit tests catch, never a user-visible failure). */
void finding_metric(struct finding *f, const char *name, double value);

/* finding_gain - attach one fix's gain (why may be NULL). Past
 * FINDING_MAX_GAINS it is dropped, as finding_metric's extras. */
void finding_gain(struct finding *f, const char *fix, enum finding_gain_kind kind, int64_t gain_ns,
		  const char *why);

/* finding_gain_kind_name - "what-if", "at most", "not predicted". */
const char *finding_gain_kind_name(enum finding_gain_kind kind);

/* finding_append_evidence - add a line to f's evidence. Returns 0 or
 * -ENOMEM (the evidence is then unchanged). */
int finding_append_evidence(struct finding *f, const char *line);

/*
 * finding_printf - a malloc'ed printf result (the caller frees it), NULL when
 * out of memory. A convenience for rules building their texts.
 */
char *finding_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
