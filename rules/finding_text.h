/*
 * finding_text.h - one finding as lines of text, in the one layout every
 * text output shares (lint, report, the summary that ends run, collect and
 * attach), so that a finding reads the same wherever it is printed:
 *
 *   SEVERITY ID: TITLE
 *     the message, folded at 80 columns
 *     evidence:
 *       the evidence, line by line
 *     why:                        (with FINDING_TEXT_WHY)
 *       the rule's explanation, folded at 80 columns
 *     fix (PyTorch FSDP2):
 *       the code
 *     fix (PyTorch FSDP1):        (without FINDING_TEXT_FSDP2_ONLY, when
 *       the code                   the rule gives one)
 *     fix (DeepSpeed ZeRO-3):
 *       the config
 */
#ifndef FSS_RULES_FINDING_TEXT_H
#define FSS_RULES_FINDING_TEXT_H

#include <stddef.h>

#include "rules/findings.h"

/* What of a finding is written besides its heading, message, evidence and
 * FSDP2 fix. */
enum finding_text_flags {
	FINDING_TEXT_WHY = 1u << 0,	   /* the rule's explanation, under "why:" */
	FINDING_TEXT_FSDP2_ONLY = 1u << 1, /* leave out the FSDP1 and DeepSpeed fixes */
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
 * finding_text_fixes - f's fixes as one text, the form a live state keeps
 * and the dashboard's fix box and the viewer show: the FSDP2 fix, then
 * "FSDP1:" and "DeepSpeed:" each on a line of its own before its code.
 * Cut at len bytes (the FSDP2 fix, the one most jobs need, first); always
 * NUL-terminated when len > 0. Returns buf.
 */
char *finding_text_fixes(const struct finding *f, char *buf, size_t len);

#endif
