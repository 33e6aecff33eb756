/*
 * strings.h - string interning for the agent (host and command names, NVTX
 * messages and domains, kernel names). Part of the agent's core.
 */
#ifndef FSS_AGENT_STRINGS_H
#define FSS_AGENT_STRINGS_H

#include <stdint.h>

/*
 * agent_intern - the string id of s[0..len) (len < 0: strlen), defining it
 * with FSS_REC_STRING records the first time. Lock-free; returns
 * FSS_STRING_NONE when the table is full. The agent keeps every string it
 * defined so that a new collector connection can be sent all of them again.
 */
uint32_t agent_intern(const char *s, long len);

/* agent_strings_replay - emit the string records of every string defined
 * so far (sender_begin.c calls this first on each new sink). */
void agent_strings_replay(void (*emit)(void *ctx, const void *record), void *ctx);

/* agent_strings_after_fork - in a fork child (one thread): forget entries
 * another thread of the parent was still defining. */
void agent_strings_after_fork(void);

#endif
