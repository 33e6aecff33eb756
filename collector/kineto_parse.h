/*
 * kineto_parse.h - what the two halves of the Kineto reader share: the
 * state of one read (struct kparse) and the helpers that walk objects and
 * arrays. kineto_parse.c reads traceEvents; kineto_read.c the top level,
 * the job's metadata and the entry points of kineto_file.h. Internal to
 * the reader.
 */
#ifndef FSS_COLLECTOR_KINETO_PARSE_H
#define FSS_COLLECTOR_KINETO_PARSE_H

#include <string.h>

#include "collector/kineto_scan.h"

/* A string of the current event, in kparse.scratch. */
struct text_ref {
	size_t off, len;
	int have; /* the key was there (with a value of the right type) */
};

/* The keys of one object so far, copied, for duplicates: a table of
 * slots that a new object empties by moving to the next generation. */
struct keyset {
	uint32_t *slot_gen, *slot_entry; /* the slot's generation, its entry */
	size_t mask;			 /* slots - 1 */
	uint32_t gen;
	uint64_t *hash;			 /* per entry */
	size_t *off;			 /* per entry, and one past the last */
	size_t n, cap;
	char *text;
	size_t tlen, tcap;
};

/* One read of one file. */
struct kparse {
	struct kscan s;
	kineto_file_t *f;		/* what is read, filled as it goes */
	struct kineto_read_info *info;	/* the caller's: skip_offset, skip_message as it goes */
	int nomem;			/* an allocation failed: the read returns -ENOMEM */
	int saw_events;			/* a traceEvents array was read */
	int not_trace;			/* JSON, but not a Chrome trace: not_trace_why */
	char not_trace_why[96];
	char *scratch;			/* the current event's strings (or a metadata value's) */
	size_t slen, scap;
	struct keyset keys[5];		/* one per level of objects read: top, event or info, args or entry */
};

#define KEY_IS(k, lit) ((k).len == sizeof(lit) - 1 && memcmp((k).text, lit, sizeof(lit) - 1) == 0)

static inline int kparse_peek(struct kparse *p) { return kscan_peek(&p->s); }
static inline int kparse_number_start(int c) { return c == '-' || (c >= '0' && c <= '9'); }

/* kparse_nomem - keep "out of memory" as the error; -1. */
int kparse_nomem(struct kparse *p);
/* kparse_scratch_add - copy text into the current event's strings, *ref where. 0 or -1. */
int kparse_scratch_add(struct kparse *p, const char *text, size_t len, struct text_ref *ref);
void kparse_keyset_free(struct keyset *k);
/* kparse_enter - take an array's '[' (peeked), one level deeper. 0 or -1. */
int kparse_enter(struct kparse *p);
/* kparse_object_begin - take an object's '{' (peeked), its keys counted in ks. 0 or -1. */
int kparse_object_begin(struct kparse *p, struct keyset *ks);
/*
 * kparse_object_next - the next key of the object begun on ks: 1 with the
 * key in *key (valid until ks's next key) and its value's first byte
 * peeked; 0 at the object's end ('}' taken); -1 (a duplicate key among them).
 */
int kparse_object_next(struct kparse *p, struct keyset *ks, struct kscan_slice *key);
/* kparse_array_next - the next element (its first byte peeked): 1; 0 at ']' (taken); -1. */
int kparse_array_next(struct kparse *p, int *count);
/* kparse_ranks - a ranks value (a string, or an array of integers as "[0, 1]") into the scratch. */
int kparse_ranks(struct kparse *p, struct text_ref *ref, const char **bad);
/* kparse_intern - the string id of a scratch text (0 when absent). 0 or -1. */
int kparse_intern(struct kparse *p, const struct text_ref *t, uint32_t *id);
/* kparse_trace_events - the traceEvents array, at its '[' (peeked). 0 or -1. */
int kparse_trace_events(struct kparse *p);

#endif
