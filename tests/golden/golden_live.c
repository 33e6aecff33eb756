/*
 * golden_live.c - the live view of a recorded trace, as a viewer and a
 * scraper see it: `golden_live TRACE...` replays the traces (top's replay
 * feed, --once: one view, at the end) and prints the view's snapshot line
 * (collector/viewer.h, docs/live-schema.json) and its /metrics text
 * (collector/metrics.h). tests/golden/golden_test.sh compares both with the
 * recorded expectations, so that a change of the live half's code keeps
 * what a viewer and Prometheus read byte for byte.
 */
#include "collector/metrics.h"
#include "collector/viewer.h"
#include "tui/feeds.h"

#include <stdio.h>
#include <stdlib.h>

/* Waits this long at most for the replay's one view. */
#define GOLDEN_WAIT_MS 60000

int main(int argc, char **argv)
{
	struct top_replay_options o = {.speed = 0, .only_end = 1};
	top_replay_feed_t *rf = NULL;
	const struct live_view *v = NULL;
	struct top_feed f;
	char err[512], *json = NULL, *text = NULL;
	size_t jlen = 0, tlen = 0;
	int rc = 1;

	if (argc < 2) {
		fprintf(stderr, "usage: golden_live TRACE...\n");
		return 2;
	}
	if (top_replay_feed_new(&rf, (const char *const *)argv + 1, (size_t)argc - 1, &o, err, sizeof(err))) {
		fprintf(stderr, "golden_live: %s\n", err);
		return 1;
	}
	top_replay_feed_bind(rf, &f);
	for (int waited = 0; !(v = f.acquire(f.ctx)) && waited < GOLDEN_WAIT_MS; waited += 100)
		if (f.wait(f.ctx, 100) < 0)
			break;
	if (!v) {
		fprintf(stderr, "golden_live: the replay published no view\n");
		goto out;
	}
	/* When it was published is the only figure that is not the trace's. */
	struct live_view fixed = *v;

	fixed.at_ns = 0;
	fixed.at_realtime_ns = 0;
	if (viewer_render(&fixed, &json, &jlen) || metrics_render(&fixed, &text, &tlen)) {
		fprintf(stderr, "golden_live: out of memory\n");
		goto out;
	}
	fwrite(json, 1, jlen, stdout);
	fputs("---- metrics\n", stdout);
	fwrite(text, 1, tlen, stdout);
	rc = 0;
out:
	if (v)
		f.release(f.ctx, v);
	free(json);
	free(text);
	top_replay_feed_free(rf);
	return rc;
}
