/*
 * finding_text.c - one finding as lines of text (finding_text.h).
 */
#include "rules/finding_text.h"

#include "rules/rules.h"

#include <stdio.h>
#include <string.h>

/* Columns of a folded paragraph, its indent included. */
#define FINDING_TEXT_COLUMNS 80

/* each_line - text split at its newlines, each line under indent. */
static void each_line(const char *indent, const char *text, finding_text_line_fn line, void *ctx)
{
	const char *p = text;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		line(ctx, indent, p, len);
		p += len + (nl ? 1 : 0);
	}
}

/* fold - a paragraph cut at blanks into lines of at most
 * FINDING_TEXT_COLUMNS columns with their indent (a word longer than that
 * is cut where it reaches the edge). */
static void fold(const char *indent, const char *text, finding_text_line_fn line, void *ctx)
{
	size_t width = FINDING_TEXT_COLUMNS - strlen(indent);
	const char *p = text;

	while (*p) {
		size_t len = strlen(p), cut = len;

		if (len > width) {
			cut = width;
			while (cut > 0 && p[cut] != ' ')
				cut--;
			if (cut == 0)
				cut = width;
		}
		line(ctx, indent, p, cut);
		p += cut;
		while (*p == ' ')
			p++;
	}
}

/* heading - a line of its own at the finding's first indent. */
static void heading(const char *text, finding_text_line_fn line, void *ctx)
{
	line(ctx, "  ", text, strlen(text));
}

void finding_text_lines(const struct finding *f, unsigned flags, finding_text_line_fn line, void *ctx)
{
	char head[512]; /* ids and titles are short static strings */
	int n = snprintf(head, sizeof(head), "%s %s: %s", rule_severity_name(f->severity), f->rule->id, f->rule->title);

	line(ctx, "", head, n < (int)sizeof(head) ? (size_t)n : sizeof(head) - 1);
	fold("  ", f->message, line, ctx);
	heading("evidence:", line, ctx);
	each_line("    ", f->evidence, line, ctx);
	if (flags & FINDING_TEXT_WHY) {
		heading("why:", line, ctx);
		fold("    ", f->rule->explanation, line, ctx);
	}
	heading("fix (PyTorch FSDP2):", line, ctx);
	each_line("    ", f->fix_fsdp2, line, ctx);
	if (flags & FINDING_TEXT_FSDP2_ONLY)
		return;
	if (f->fix_fsdp1) {
		heading("fix (PyTorch FSDP1):", line, ctx);
		each_line("    ", f->fix_fsdp1, line, ctx);
	}
	if (f->fix_deepspeed) {
		heading("fix (DeepSpeed ZeRO-3):", line, ctx);
		each_line("    ", f->fix_deepspeed, line, ctx);
	}
}

char *finding_text_fixes(const struct finding *f, char *buf, size_t len)
{
	size_t off;

	if (!len)
		return buf;
	/* snprintf stops at the buffer's end: what does not fit is cut there */
	off = (size_t)snprintf(buf, len, "%s", f->fix_fsdp2 ? f->fix_fsdp2 : "");
	if (f->fix_fsdp1 && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%sFSDP1:\n%s", off ? "\n" : "", f->fix_fsdp1);
	if (f->fix_deepspeed && off < len)
		snprintf(buf + off, len - off, "%sDeepSpeed:\n%s", off ? "\n" : "", f->fix_deepspeed);
	return buf;
}
