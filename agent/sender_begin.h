/*
 * sender_begin.h - the first records of a new sink (sender_begin.c): the
 * hello, the sink record, the replay of strings and communicators, then
 * what it repeats of the sink before. Sender thread only.
 */
#ifndef FSS_AGENT_SENDER_BEGIN_H
#define FSS_AGENT_SENDER_BEGIN_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace_format.h"

struct retained;

/* What a new sink repeats of the one before (docs/format.md): records
 * first .. first + count - 1 of sink prev_serial, taken from the retained
 * chunks and the dead writer's unsent chunk and record (socket -> file), or
 * from a closed file read back (file -> socket). */
struct sender_repeat {
	uint32_t prev_serial;
	uint16_t prev_kind;
	uint64_t first, count;
	struct retained *chunks; /* records of index < first in them are skipped */
	const void *unsent;	 /* the dead writer's unsent records */
	size_t unsent_len;
	const void *record; /* the record whose append failed, or NULL */
	const char *path;   /* the file to send */
	uint64_t written;   /* records repeated so far */
};

/*
 * sender_begin - start the sink just opened: hello, the sink record, every
 * string and live communicator and a clock anchor (so that it stands alone
 * whatever came before), then rep's records (rep NULL or rep->count 0:
 * none; rep->written counts those that went out). Stops early when the
 * sink fails meanwhile (sender.serial moves on).
 */
void sender_begin(const struct fss_rec_process_hello *hello, struct sender_repeat *rep);

#endif
