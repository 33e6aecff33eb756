/*
 * viewer_fuzz.c - libFuzzer target for the viewer protocol's decoder
 * (top_viewer_decode, tui/feeds.h): what `top --connect` makes of a line a
 * session (or anyone on its socket) sends.
 *
 * A line that decodes is rendered again (viewer_render, as a session would
 * send it) and that line must decode too, to a view that renders to the
 * same bytes: the decoder keeps nothing the renderer cannot say, and what
 * it accepts is a view. A contradiction traps.
 *
 * Seeds (tests/fuzz/corpus_update.sh): the golden snapshots
 * (tests/fixtures/golden/expected/NAME.live.txt), one line each.
 */
#include "collector/live.h"
#include "collector/viewer.h"
#include "tui/feeds.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct live_view *v = NULL, *again = NULL;
	char err[512], *json = NULL, *json2 = NULL;
	size_t len = 0, len2 = 0;

	if (top_viewer_decode((const char *)data, size, &v, err, sizeof err) != 0)
		return 0;
	if (viewer_render(v, &json, &len) != 0)
		__builtin_trap();
	/* the rendered line without its '\n', as the feed hands a line over */
	if (top_viewer_decode(json, len - 1, &again, err, sizeof err) != 0)
		__builtin_trap();
	if (viewer_render(again, &json2, &len2) != 0 || len2 != len || memcmp(json, json2, len) != 0)
		__builtin_trap();
	free(json);
	free(json2);
	live_view_free(v);
	live_view_free(again);
	return 0;
}
