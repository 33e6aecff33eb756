/*
 * findings.c - the list of findings the rules produce.
 */
#include "rules/findings.h"
#include "rules/rules.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct findings {
	struct finding *items;
	size_t count;
	size_t capacity;
};

static const char *const severity_names[] = {"info", "warning", "error"};

const char *rule_severity_name(enum rule_severity s)
{
	if ((unsigned)s < sizeof(severity_names) / sizeof(severity_names[0]))
		return severity_names[s];
	return "unknown";
}

int rule_severity_parse(const char *text, enum rule_severity *out)
{
	for (unsigned i = 0; i < sizeof(severity_names) / sizeof(severity_names[0]); i++) {
		if (strcmp(text, severity_names[i]) == 0) {
			*out = (enum rule_severity)i;
			return 0;
		}
	}
	return -EINVAL;
}

findings_t *findings_new(void)
{
	return calloc(1, sizeof(struct findings));
}

static void finding_release(struct finding *f)
{
	free(f->message);
	free(f->evidence);
	free(f->fix_fsdp2);
	free(f->fix_fsdp1);
	free(f->fix_deepspeed);
}

void findings_free(findings_t *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++)
		finding_release(&list->items[i]);
	free(list->items);
	free(list);
}

size_t findings_count(const findings_t *list)
{
	return list->count;
}

const struct finding *findings_get(const findings_t *list, size_t i)
{
	return i < list->count ? &list->items[i] : NULL;
}

struct finding *findings_at(findings_t *list, size_t i)
{
	return i < list->count ? &list->items[i] : NULL;
}

const struct finding *findings_find(const findings_t *list, const char *id)
{
	for (size_t i = 0; i < list->count; i++)
		if (strcmp(list->items[i].rule->id, id) == 0)
			return &list->items[i];
	return NULL;
}

int findings_max_severity(const findings_t *list)
{
	int max = -1;

	for (size_t i = 0; i < list->count; i++)
		if ((int)list->items[i].severity > max)
			max = (int)list->items[i].severity;
	return max;
}

size_t findings_count_at_least(const findings_t *list, enum rule_severity s)
{
	size_t n = 0;

	for (size_t i = 0; i < list->count; i++)
		n += list->items[i].severity >= s;
	return n;
}

/* dup_or_null - strdup that lets NULL through; *failed set when out of memory. */
static char *dup_or_null(const char *s, int *failed)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*failed = 1;
	return d;
}

/* grow - room for one more finding: 0 or -ENOMEM. */
static int grow(findings_t *list)
{
	size_t cap;
	struct finding *items;

	if (list->count < list->capacity)
		return 0;
	cap = list->capacity ? 2 * list->capacity : 8;
	items = realloc(list->items, cap * sizeof(*items));
	if (!items)
		return -ENOMEM;
	list->items = items;
	list->capacity = cap;
	return 0;
}

struct finding *findings_add(findings_t *list, const struct rule *rule, enum rule_severity severity,
			     const char *message, const char *evidence, const char *fix_fsdp2,
			     const char *fix_fsdp1, const char *fix_deepspeed)
{
	struct finding f = {.rule = rule, .severity = severity};
	int failed = 0;

	if (grow(list))
		return NULL;
	f.message = dup_or_null(message ? message : "", &failed);
	f.evidence = dup_or_null(evidence ? evidence : "", &failed);
	f.fix_fsdp2 = dup_or_null(fix_fsdp2 ? fix_fsdp2 : "", &failed);
	f.fix_fsdp1 = dup_or_null(fix_fsdp1, &failed);
	f.fix_deepspeed = dup_or_null(fix_deepspeed, &failed);
	if (failed) {
		finding_release(&f);
		return NULL;
	}
	list->items[list->count] = f;
	return &list->items[list->count++];
}

struct finding *findings_take(findings_t *list, const struct rule *rule, enum rule_severity severity,
			      char *message, char *evidence, char *fix_fsdp2, char *fix_fsdp1,
			      char *fix_deepspeed)
{
	struct finding f = {
		.rule = rule,
		.severity = severity,
		.message = message,
		.evidence = evidence,
		.fix_fsdp2 = fix_fsdp2,
		.fix_fsdp1 = fix_fsdp1,
		.fix_deepspeed = fix_deepspeed,
	};

	if (!message || !evidence || !fix_fsdp2 || grow(list)) {
		finding_release(&f);
		return NULL;
	}
	list->items[list->count] = f;
	return &list->items[list->count++];
}

void finding_metric(struct finding *f, const char *name, double value)
{
	if (f->nmetrics >= FINDING_MAX_METRICS)
		return;
	f->metrics[f->nmetrics].name = name;
	f->metrics[f->nmetrics].value = value;
	f->nmetrics++;
}

void finding_gain(struct finding *f, const char *fix, enum finding_gain_kind kind, int64_t gain_ns, const char *why)
{
	if (f->ngains >= FINDING_MAX_GAINS)
		return;
	struct finding_gain *g = &f->gains[f->ngains++];
	snprintf(g->fix, sizeof g->fix, "%s", fix);
	g->kind = kind;
	g->gain_ns = gain_ns;
	snprintf(g->why, sizeof g->why, "%s", why ? why : "");
}

const char *finding_gain_kind_name(enum finding_gain_kind kind)
{
	static const char *const names[] = {"what-if", "at most", "not predicted"};

	return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

int finding_append_evidence(struct finding *f, const char *line)
{
	size_t old = f->evidence ? strlen(f->evidence) : 0, add = strlen(line);
	char *s = realloc(f->evidence, old + add + 2);

	if (!s)
		return -ENOMEM;
	if (old)
		s[old++] = '\n';
	memcpy(s + old, line, add + 1);
	f->evidence = s;
	return 0;
}

char *finding_printf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}
