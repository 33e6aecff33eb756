/*
 * metrics.h - Prometheus /metrics of a live session (docs/collect.md).
 *
 * The text exposition format (version 0.0.4) rendered from the latest live
 * view on the session's board, served by libmicrohttpd on its own thread:
 * a scrape copies nothing from the session's thread and never waits on it
 * longer than the board's pointer swap.
 */
#ifndef FSS_COLLECTOR_METRICS_H
#define FSS_COLLECTOR_METRICS_H

#include <stddef.h>

#include "collector/live.h"

/*
 * metrics_render - the exposition of view `v` (NULL: before the first
 * publish, only the session's own metrics) as a malloc'd NUL-terminated
 * text in *text (caller frees), its length in *len. 0 or -ENOMEM.
 */
int metrics_render(const struct live_view *v, char **text, size_t *len);

typedef struct metrics_server metrics_server_t;

/*
 * metrics_server_start - serve GET /metrics on `hostport` ("127.0.0.1:9464",
 * "[::1]:9464", port 0: any free port) from the board's latest view. An
 * address that is not loopback is served only with allow_remote (the
 * caller has warned the user). Returns 0 with *out, or a negative errno
 * with a message in err (bad address, port in use, ...).
 */
int metrics_server_start(metrics_server_t **out, const char *hostport, int allow_remote, live_board_t *board,
			 char *err, size_t errlen);

/* metrics_server_address - the address served, the port chosen filled in ("127.0.0.1:40123"). */
const char *metrics_server_address(const metrics_server_t *s);

/* metrics_server_scrapes - requests answered so far. */
unsigned long metrics_server_scrapes(const metrics_server_t *s);

/* metrics_server_stop - stop serving and free (NULL ok). */
void metrics_server_stop(metrics_server_t *s);

#endif
