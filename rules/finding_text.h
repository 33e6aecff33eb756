/*
 * finding_text.h - one finding as lines of text, in the one layout every
 * text output shares (lint, report, the summary that ends run, collect and
 * attach, the dashboard's fix box), so that a finding reads the same
 * wherever it is printed:
 *
 *   SEVERITY ID: TITLE            (the message in the title's place, and
 *     the message, folded at 80 columns      not below, when the title is
 *                                             not known)
 *     evidence:
 *       the evidence, line by line
 *     why:                        (with FINDING_TEXT_WHY)
 *       the rule's explanation, folded at 80 columns
 *     fix (PyTorch FSDP2):        ("fix:" over "(this rule gives no fix)"
 *       the code                   when the finding has none)
 *     fix (PyTorch FSDP1):        (without FINDING_TEXT_FSDP2_ONLY, when
 *       the code                   the rule gives one)
 *     fix (DeepSpeed ZeRO-3):
 *       the config
 */
#ifndef FSS_RULES_FINDING_TEXT_H
#define FSS_RULES_FINDING_TEXT_H

#include <stddef.h>

#include "collector/live.h"
#include "rules/findings.h"

/* What of a finding is written besides its heading, message, evidence and
 * FSDP2 fix. */
enum finding_text_flags {
	FINDING_TEXT_WHY = 1u << 0,	   /* the rule's explanation, under "why:" */
	FINDING_TEXT_FSDP2_ONLY = 1u << 1, /* leave out the FSDP1 and DeepSpeed fixes */
};

/* Columns of a folded paragraph, its indent included, on a terminal. */
#define FINDING_TEXT_COLUMNS 80

/* A finding's parts, as the layout reads them: those of a struct finding
 * (finding_text_parts_of), or of the copy of one that a live view keeps. */
struct finding_text_parts {
	const char *rule; /* rule id: "wrap-too-fine" */
	enum rule_severity severity;
	const char *title;	   /* the rule's title, one line; "" or NULL not known */
	const char *message;	   /* one line: what is wrong */
	const char *evidence;	   /* the numbers it rests on (may hold newlines) */
	const char *explanation;   /* the rule's explanation (FINDING_TEXT_WHY), NULL none */
	const char *fix_fsdp2;	   /* code for PyTorch FSDP2, NULL: the finding has no fix */
	const char *fix_fsdp1;	   /* code for PyTorch FSDP1, NULL none */
	const char *fix_deepspeed; /* ds_config for DeepSpeed ZeRO-3, NULL none */
};

/* One line of a finding's text: indent, then len bytes of text (not
 * NUL-terminated, no newline). */
typedef void (*finding_text_line_fn)(void *ctx, const char *indent, const char *text, size_t len);

/*
 * finding_text_lines - the lines of finding f in the layout above (flags:
 * enum finding_text_flags), each passed to line(ctx, ...) in order.
 */
void finding_text_lines(const struct finding *f, unsigned flags, finding_text_line_fn line, void *ctx);

/*
 * finding_text_parts_lines - the lines of the finding made of parts p in
 * the layout above, its paragraphs folded at `columns` columns, their
 * indent included (finding_text_lines: FINDING_TEXT_COLUMNS). Evidence and
 * code keep their own lines, however long: a reader narrower than them
 * wraps them itself.
 */
void finding_text_parts_lines(const struct finding_text_parts *p, unsigned flags, int columns,
			      finding_text_line_fn line, void *ctx);

/* finding_text_parts_of - the parts of f, pointing into f and its rule. */
void finding_text_parts_of(const struct finding *f, struct finding_text_parts *out);

/*
 * finding_text_parts_of_live - the parts of l, a finding as a live view
 * keeps it (no explanation): its fixes split back into their frameworks
 * (finding_text_fixes' markers) in a copy written to buf, cut at len bytes;
 * with no buf the fixes are left NULL (what a heading needs). The parts
 * point into l and buf.
 */
void finding_text_parts_of_live(const struct live_finding *l, struct finding_text_parts *out, char *buf, size_t len);

/*
 * finding_text_heading - the first line of the layout, "SEVERITY ID: TITLE"
 * (the message in the title's place when that is not known), into buf
 * (NUL-terminated, cut at len bytes). Returns its length.
 */
size_t finding_text_heading(const struct finding_text_parts *p, char *buf, size_t len);

/*
 * finding_text_fixes - f's fixes as one text, the form a live state keeps
 * and the dashboard's fix box and the viewer show: the FSDP2 fix, then
 * "FSDP1:" and "DeepSpeed:" each on a line of its own before its code.
 * What does not fit in len bytes is cut with a mark (text_fit; the FSDP2
 * fix, the one most jobs need, first); always NUL-terminated when len > 0.
 * Returns buf.
 */
char *finding_text_fixes(const struct finding *f, char *buf, size_t len);

#endif
