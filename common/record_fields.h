/*
 * record_fields.h - a description of every field of every record type.
 *
 * One table drives `fsdpscope dump` (every field, by name) and the test that
 * checks the table covers every byte of every record struct, so a field added
 * to record.h without a description fails the build's tests, not a user.
 */
#ifndef FSS_COMMON_RECORD_FIELDS_H
#define FSS_COMMON_RECORD_FIELDS_H

#include <stddef.h>
#include <stdint.h>

enum field_kind {
	FIELD_U64,       /* unsigned decimal */
	FIELD_HEX64,     /* an opaque handle or address, shown as "0x..." */
	FIELD_U32,
	FIELD_I32,
	FIELD_U16,
	FIELD_U8,
	FIELD_STRING_ID, /* u32 id of an interned string of the same source */
	FIELD_ENUM8,     /* u8 enum shown by name */
	FIELD_ENUM16,    /* u16 enum shown by name */
	FIELD_ENUM32,    /* u32 enum shown by name */
	FIELD_TEXT,      /* fixed char array (string parts) */
	FIELD_RESERVED,  /* padding kept zero; not shown */
};

/* What a time field is measured on. Every field named *_ns has one other
 * than FIELD_CLOCK_NONE (record_test checks it), so that whatever moves
 * the stamps of a trace onto another time base (collector/merge.c) finds
 * them all from the table, a new record type included. */
enum field_clock {
	FIELD_CLOCK_NONE = 0,  /* not a time */
	FIELD_CLOCK_MONO,      /* CLOCK_MONOTONIC of the writing host: the field to shift */
	FIELD_CLOCK_REALTIME,  /* CLOCK_REALTIME */
	FIELD_CLOCK_CUPTI,     /* the CUPTI time base (FSS_CLOCK_CUPTI anchors tie it to CLOCK_MONOTONIC) */
	FIELD_CLOCK_DOMAIN,    /* the clock named by the record's domain field (a clock anchor's other_ns) */
	FIELD_CLOCK_DURATION,  /* a length of time, on no clock */
};

struct record_field {
	const char *name;
	size_t offset;
	size_t size;
	enum field_kind kind;
	const char *(*enum_name)(unsigned value); /* for FIELD_ENUM* */
	enum field_clock clock;                   /* for time fields (u64 ns) */
};

/*
 * record_fields - the fields after the head of record type `type`, in
 * struct order; *count gets their number. NULL for an unknown type.
 */
const struct record_field *record_fields(uint16_t type, size_t *count);

/* record_field_uint - read an integer field of a record as uint64 (signed
 * fields are sign-extended then cast). */
uint64_t record_field_uint(const void *rec, const struct record_field *f);

/*
 * record_shift_clock - add delta_ns to every field of `rec` (a record of at
 * least record_known_size() bytes, of any type) measured on `clock`,
 * leaving 0 (no time) as it is and a time that would fall to 0 or below at
 * 1. Returns how many fields were moved (0 for an unknown type).
 */
unsigned record_shift_clock(void *rec, enum field_clock clock, int64_t delta_ns);

/*
 * record_latest_time - the largest non-zero field of `rec` measured on
 * `clock`, 0 when it has none (a string, an unknown type): when the event
 * the record describes was complete, for ordering records of several traces.
 */
uint64_t record_latest_time(const void *rec, enum field_clock clock);

#endif
