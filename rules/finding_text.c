/*
 * finding_text.c - one finding as lines of text (finding_text.h).
 */
#include "rules/finding_text.h"

#include "common/text_buffer.h"

#include "rules/rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* fold - a paragraph cut at blanks into lines of at most `columns`
 * columns with their indent (a word longer than that is cut where it
 * reaches the edge). */
static void fold(const char *indent, int columns, const char *text, finding_text_line_fn line, void *ctx)
{
	size_t indent_len = strlen(indent);
	size_t width = columns > 0 && (size_t)columns > indent_len ? (size_t)columns - indent_len : 1;
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

/* title_known - the title is there to head the finding (a live copy from
 * an older session has none). */
static int title_known(const struct finding_text_parts *p)
{
	return p->title && p->title[0];
}

size_t finding_text_heading(const struct finding_text_parts *p, char *buf, size_t len)
{
	int n;

	if (!len)
		return 0;
	n = snprintf(buf, len, "%s %s: %s", rule_severity_name(p->severity), p->rule,
		     title_known(p) ? p->title : p->message);
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

void finding_text_parts_lines(const struct finding_text_parts *p, unsigned flags, int columns,
			      finding_text_line_fn line, void *ctx)
{
	char head[512]; /* an id and a title, or a live copy's message (255 bytes) */

	line(ctx, "", head, finding_text_heading(p, head, sizeof(head)));
	if (title_known(p))
		fold("  ", columns, p->message, line, ctx);
	heading("evidence:", line, ctx);
	each_line("    ", p->evidence, line, ctx);
	if ((flags & FINDING_TEXT_WHY) && p->explanation) {
		heading("why:", line, ctx);
		fold("    ", columns, p->explanation, line, ctx);
	}
	if (!p->fix_fsdp2) {
		heading("fix:", line, ctx);
		each_line("    ", "(this rule gives no fix)", line, ctx);
		return;
	}
	heading("fix (PyTorch FSDP2):", line, ctx);
	each_line("    ", p->fix_fsdp2, line, ctx);
	if (flags & FINDING_TEXT_FSDP2_ONLY)
		return;
	if (p->fix_fsdp1) {
		heading("fix (PyTorch FSDP1):", line, ctx);
		each_line("    ", p->fix_fsdp1, line, ctx);
	}
	if (p->fix_deepspeed) {
		heading("fix (DeepSpeed ZeRO-3):", line, ctx);
		each_line("    ", p->fix_deepspeed, line, ctx);
	}
}

void finding_text_parts_of(const struct finding *f, struct finding_text_parts *out)
{
	*out = (struct finding_text_parts){
	    .rule = f->rule->id,
	    .severity = f->severity,
	    .title = f->rule->title,
	    .message = f->message,
	    .evidence = f->evidence,
	    .explanation = f->rule->explanation,
	    .fix_fsdp2 = f->fix_fsdp2,
	    .fix_fsdp1 = f->fix_fsdp1,
	    .fix_deepspeed = f->fix_deepspeed,
	};
}

/* split_at - the text after `marker`'s line in s, found at s's start or
 * after a newline, s cut before it; NULL when s has none. */
static char *split_at(char *s, const char *marker)
{
	size_t n = strlen(marker);

	if (!strncmp(s, marker, n)) {
		*s = '\0';
		return s + n;
	}
	for (char *at = strstr(s, marker); at; at = strstr(at + 1, marker))
		if (at[-1] == '\n') {
			at[-1] = '\0';
			return at + n;
		}
	return NULL;
}

void finding_text_parts_of_live(const struct live_finding *l, struct finding_text_parts *out, char *buf, size_t len)
{
	char *fsdp1;

	*out = (struct finding_text_parts){
	    .rule = l->rule,
	    .severity = (enum rule_severity)l->severity,
	    .title = l->title,
	    .message = l->message,
	    .evidence = l->evidence,
	};
	if (!buf || !len || !l->fix[0])
		return;
	snprintf(buf, len, "%.*s", (int)strnlen(l->fix, sizeof(l->fix)), l->fix);
	fsdp1 = split_at(buf, "FSDP1:\n");
	out->fix_fsdp2 = buf;
	out->fix_fsdp1 = fsdp1;
	out->fix_deepspeed = split_at(fsdp1 ? fsdp1 : buf, "DeepSpeed:\n");
}

void finding_text_lines(const struct finding *f, unsigned flags, finding_text_line_fn line, void *ctx)
{
	struct finding_text_parts p;

	finding_text_parts_of(f, &p);
	finding_text_parts_lines(&p, flags, FINDING_TEXT_COLUMNS, line, ctx);
}

char *finding_text_fixes(const struct finding *f, char *buf, size_t len)
{
	struct text_buffer whole = {0};
	char *text;
	size_t n;

	if (!len)
		return buf;
	text_buffer_printf(&whole, "%s", f->fix_fsdp2 ? f->fix_fsdp2 : "");
	if (f->fix_fsdp1)
		text_buffer_printf(&whole, "%sFSDP1:\n%s", whole.len ? "\n" : "", f->fix_fsdp1);
	if (f->fix_deepspeed)
		text_buffer_printf(&whole, "%sDeepSpeed:\n%s", whole.len ? "\n" : "", f->fix_deepspeed);
	if (text_buffer_take(&whole, &text, &n) < 0) {
		text_fit(buf, len, "[the fix did not fit in memory; fsdpscope lint shows it]");
		return buf;
	}
	text_fit(buf, len, text);
	free(text);
	return buf;
}
