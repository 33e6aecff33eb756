/*
 * hang_lines.h - the stderr lines a live session writes about calls in
 * flight (docs/hangs.md, "Live"): a hang once when a diagnosis first holds
 * it ("fsdpscope: collective-hang: ..."), once when its waits end past the
 * timeout, the waiting ranks giving up or dying ("fsdpscope: collective-hang
 * ended: ...": the hang stays), once when it clears because the missing
 * ranks arrived ("fsdpscope: collective-hang cleared: ..."), and each mismatch once
 * ("fsdpscope: collective-mismatch: ..."). What was said is remembered
 * here, bounded: a hang or a mismatch is told apart by its communicator and
 * its number there.
 */
#ifndef FSS_CLI_HANG_LINES_H
#define FSS_CLI_HANG_LINES_H

#include <stdio.h>

#include "collector/analysis.h"
#include "rules/findings.h"

/* Hangs and mismatches remembered at once; past these, further ones are
 * not said (a line says so for mismatches). */
#define HANG_LINES_HANGS_MAX 16
#define HANG_LINES_MISMATCHES_MAX 64

typedef struct hang_lines hang_lines_t;

/* hang_lines_new - nothing said yet. 0 or -ENOMEM; free with hang_lines_free. */
int hang_lines_new(hang_lines_t **out);
void hang_lines_free(hang_lines_t *h);

/*
 * hang_lines_update - the lines diagnosis r calls for, written to out, given
 * what was said before: a hang of r (a wait past its timeout) not said yet;
 * the end of a hang said before whose waits r holds as ended; a hang said
 * before that r no longer holds (only when r lists every hang
 * it found: one beyond its list is not known to be gone); a mismatch of r
 * not said yet. `list` is the rules' findings on r: a rule that did not
 * report (turned off with --disable) says nothing here either. Returns the
 * lines written.
 */
unsigned hang_lines_update(hang_lines_t *h, const struct analysis_result *r, const findings_t *list, FILE *out);

#endif
