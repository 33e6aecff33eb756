/*
 * agent_fallback.h - the files a session's agents wrote into their own
 * folder when they could write neither to the session nor into
 * FSDPSCOPE_OUT (cli/agent_fallback.c).
 */
#ifndef FSS_CLI_AGENT_FALLBACK_H
#define FSS_CLI_AGENT_FALLBACK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * agent_fallback_say - look in the agents' default folders ($XDG_RUNTIME_DIR/
 * fsdpscope, $TMPDIR/fsdpscope-UID) for files of the session's processes
 * (pids[0..npids), written since `since`, Unix time) and name each on out,
 * with its size and how to read them. Returns how many were found.
 */
size_t agent_fallback_say(FILE *out, const char *prog, const uint32_t *pids, size_t npids, long long since);

#endif
