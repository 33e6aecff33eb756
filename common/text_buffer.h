/*
 * text_buffer.h - a growing text in memory: what the JSON writer
 * (json_writer.h) and the /metrics exposition (collector/metrics.c) build
 * their output in. An allocation that fails stops the growth and is
 * remembered, so the writers on top need no checks of their own: the
 * caller learns of it once, from text_buffer_take.
 */
#ifndef FSS_COMMON_TEXT_BUFFER_H
#define FSS_COMMON_TEXT_BUFFER_H

#include <stddef.h>

/* Zeroed, it is empty. */
struct text_buffer {
	char *text; /* malloc'd, NUL-ended once anything was appended */
	size_t len, cap;
	int oom; /* an allocation failed: what came after it was dropped */
};

/* text_buffer_append - n bytes of s at the end. */
void text_buffer_append(struct text_buffer *b, const char *s, size_t n);

/* text_buffer_printf - printf-formatted text at the end, whatever its length. */
__attribute__((format(printf, 2, 3))) void text_buffer_printf(struct text_buffer *b, const char *fmt, ...);

/*
 * text_buffer_take - the text (NUL-terminated, caller frees; "" when
 * nothing was appended) in *text and its length in *len: 0, or -ENOMEM
 * when an allocation failed (the text is freed then). b is empty after.
 */
int text_buffer_take(struct text_buffer *b, char **text, size_t *len);

/*
 * text_fit - src into dst[len], NUL-ended. Text that does not fit is cut
 * where a character starts (a line's end when one is near) and the cut is
 * marked, so no reader takes a part for the whole:
 *     "...\n[cut here: 4711 more bytes; fsdpscope lint shows the whole text]"
 * ("...[cut]" where that would take more than half the room, a name's).
 * Returns the bytes cut from src, 0 when it fit.
 */
size_t text_fit(char *dst, size_t len, const char *src);

#endif
