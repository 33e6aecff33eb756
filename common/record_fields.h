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

struct record_field {
	const char *name;
	size_t offset;
	size_t size;
	enum field_kind kind;
	const char *(*enum_name)(unsigned value); /* for FIELD_ENUM* */
};

/*
 * record_fields - the fields after the head of record type `type`, in
 * struct order; *count gets their number. NULL for an unknown type.
 */
const struct record_field *record_fields(uint16_t type, size_t *count);

/* record_field_uint - read an integer field of a record as uint64 (signed
 * fields are sign-extended then cast). */
uint64_t record_field_uint(const void *rec, const struct record_field *f);

#endif
