/*
 * viewer.h - the viewer endpoint of a live session (docs/live.md): the
 * live view as a stream of snapshots for `fsdpscope top --connect` and
 * other tools.
 *
 * Protocol "fsdpscope.live/2": a viewer connects to the session's viewer
 * socket and writes nothing; the session writes one JSON object per line,
 * a whole snapshot each (docs/live-schema.json), the first at once, then
 * one per publish. A viewer that reads slowly misses snapshots (it always
 * gets the latest when it can take more, never a half of one) and never
 * makes the session wait: each viewer has one snapshot of output buffered
 * at most, and the server runs on its own thread.
 *
 * Access as for the agents' socket: a unix socket, mode 0600, in a folder
 * only the user can enter, and every peer's uid checked (SO_PEERCRED).
 */
#ifndef FSS_COLLECTOR_VIEWER_H
#define FSS_COLLECTOR_VIEWER_H

#include <stddef.h>
#include <stdint.h>

#include "collector/live.h"
#include "collector/live_fields.h"

#define VIEWER_PROTOCOL LIVE_SCHEMA

/* viewer_render - the snapshot JSON of view `v` (one line, '\n' ended) in a
 * malloc'd buffer. 0 or -ENOMEM. */
int viewer_render(const struct live_view *v, char **json, size_t *len);

typedef struct viewer_server viewer_server_t;

struct viewer_stats {
	uint64_t accepted;   /* viewers that connected */
	uint64_t refused;    /* peers of another user, refused */
	uint64_t over_cap;   /* viewers closed as they came: VIEWER_CONNECTIONS_MAX were open */
	uint64_t open;       /* connected now */
	uint64_t sent;       /* snapshots written whole */
	uint64_t skipped;    /* snapshots a slow viewer missed */
};

/*
 * viewer_server_start - listen on the unix socket `path` (its folder must
 * exist and be the user's own, 0700) and stream the board's views. 0 with
 * *out, or a negative errno with a message in err.
 */
int viewer_server_start(viewer_server_t **out, const char *path, live_board_t *board, char *err, size_t errlen);
void viewer_server_stats(viewer_server_t *s, struct viewer_stats *out);
/* viewer_server_stop - close every viewer, remove the socket, free (NULL ok). */
void viewer_server_stop(viewer_server_t *s);

/* ---- the client side (top, tests) ----------------------------------------- */

typedef struct viewer_client viewer_client_t;

/* viewer_client_connect - connect to a session's viewer socket ("unix:/path" or a path). 0 or -errno. */
int viewer_client_connect(viewer_client_t **out, const char *address);
/*
 * viewer_client_next - the next snapshot line (without its '\n'), valid
 * until the next call, waiting up to timeout_ms (-1: forever). Returns 1
 * with *json and *len, 0 on timeout, -EPIPE when the session ended, or
 * -EPROTO for a line that is not a snapshot of this protocol.
 */
int viewer_client_next(viewer_client_t *c, const char **json, size_t *len, int timeout_ms);
void viewer_client_close(viewer_client_t *c);

#endif
