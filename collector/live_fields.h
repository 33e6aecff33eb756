/*
 * live_fields.h - the fields of the live view (live.h) as its readers name
 * them: one table per object of a viewer snapshot (docs/live-schema.json,
 * docs/live.md), each field with its JSON name, where it sits in the view's
 * struct, how it is written, when it is null, and its /metrics family
 * (docs/metrics.md) when it has one.
 *
 * One table drives the viewer's encoder (live_fields_write, viewer_render),
 * the dashboard's decoder (tui/feed_viewer.c) and the per-rank families of
 * /metrics (collector/metrics.c); live_fields_test checks it against the
 * schema, so a field added to the view and not to the table, or to the
 * table and not to the schema, fails a test rather than a reader.
 */
#ifndef FSS_COLLECTOR_LIVE_FIELDS_H
#define FSS_COLLECTOR_LIVE_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "common/json_writer.h"

/* The protocol a snapshot names in its "schema" field, always its first. */
#define LIVE_SCHEMA "fsdpscope.live/2"

enum live_field_kind {
	LIVE_FIELD_UINT,     /* an unsigned integer of `size` bytes */
	LIVE_FIELD_INT,	     /* a signed integer of `size` bytes */
	LIVE_FIELD_BOOL,     /* an int, true when not 0 */
	LIVE_FIELD_TEXT,     /* a char array of `size` bytes, NUL-ended only when shorter */
	LIVE_FIELD_ENUM,     /* an integer of `size` bytes (signed from 4 up), written by name (enum_name) */
	LIVE_FIELD_HEX,	     /* a u64 identifier, written as 16 hex digits */
	LIVE_FIELD_DERIVED,  /* a bool computed from the object (derive), not stored: readers check and skip it */
	LIVE_FIELD_CONST,    /* the string LIVE_SCHEMA, not stored */
	LIVE_FIELD_OBJECT,   /* an object of table `object` at offset */
	LIVE_FIELD_ARRAY,    /* elements of table `object` (integers of `size` bytes when NULL) at offset */
	LIVE_FIELD_COMPOSED, /* an object of table `object` composed of parts of its parent (load, store); a
				struct live_signature, the one such object */
};

/* When a field is written as null, and what a reader makes of a null. */
enum live_null {
	LIVE_NULL_NEVER = 0,
	LIVE_NULL_AT = 1 << 0,	     /* the value is null_value ("" for text) */
	LIVE_NULL_NEGATIVE = 1 << 1, /* the value is below 0 */
	LIVE_NULL_UNKNOWN = 1 << 2,  /* the object's figures are not known (the job before its first diagnosis) */
	LIVE_NULL_UNNAMED = 1 << 3,  /* enum_name gives NULL for the value */
	LIVE_NULL_GUARD = 1 << 4,    /* the integer at `guard` is 0 (the minimum of no steps) */
	LIVE_NULL_ABSENT = 1 << 5,   /* an object its table says is absent (a rank's last step before the first) */
};

/* How /metrics writes a field's value. */
enum live_metric_unit {
	LIVE_METRIC_COUNT,   /* the integer as it is */
	LIVE_METRIC_SECONDS, /* nanoseconds written as seconds */
};

/* A Prometheus family (docs/metrics.md). Those of a rank's fields, of its
 * step's and of its totals' have one sample per rank, in `order`; the
 * others' samples collector/metrics.c writes by hand. */
struct live_metric {
	const char *name;
	const char *type; /* "gauge" or "counter" */
	const char *help;
	enum live_metric_unit unit;
	unsigned order;	    /* per rank: position among the per-rank families of the exposition, from 0 */
	int attach_unknown; /* per rank: not measured for a rank observed by attach: left out then */
};

struct live_table;

struct live_field {
	const char *name; /* JSON key */
	enum live_field_kind kind;
	size_t offset, size;		     /* in the table's struct; an ARRAY's size is its element's (integers) */
	unsigned null;			     /* enum live_null flags, 0 never null */
	int64_t null_value;		     /* the value a null stands for (reading), LIVE_NULL_AT's value (writing) */
	size_t guard, guard_size;	     /* LIVE_NULL_GUARD: the integer that says whether the field is known */
	const char *(*enum_name)(int value); /* LIVE_FIELD_ENUM */
	int enum_count;			     /* LIVE_FIELD_ENUM: a reader tries names 0 .. enum_count - 1 */
	int (*derive)(const void *object);   /* LIVE_FIELD_DERIVED */
	const struct live_table *object;     /* OBJECT, ARRAY, COMPOSED: the elements' table */
	void (*load)(const void *parent, void *object);	 /* COMPOSED: the object from its parent's parts */
	void (*store)(void *parent, const void *object); /* COMPOSED: the object back into them */
	size_t count, count_size;			 /* ARRAY: the integer that holds how many elements are used */
	size_t max;			  /* ARRAY: elements the struct has room for; 0: a pointer, no bound */
	int element_known;		  /* ARRAY: the elements' figures are known (LIVE_NULL_UNKNOWN) */
	int optional;			  /* added within fsdpscope.live/2: a reader takes a snapshot without it */
	const struct live_metric *metric; /* its /metrics family, NULL none */
};

struct live_table {
	const char *name; /* its $defs name in docs/live-schema.json; "" inline (or the snapshot itself) */
	size_t size;	  /* of its struct */
	const struct live_field *fields;
	size_t nfields;
	ptrdiff_t known; /* offset of the int that says the object's figures are known, -1: the parent says */
	int (*absent)(const void *object); /* LIVE_NULL_ABSENT: the object is not there yet */
	void (*init)(void *object);	   /* how a reader starts an object: its fields not in a snapshot */
};

/* A mismatch's signature as a snapshot writes it (flight_signature): the
 * ranks that issued it sit beside it in struct analysis_mismatch. */
struct live_signature {
	struct analysis_signature sig;
	uint32_t ranks_total;
	int32_t ranks[ANALYSIS_FLIGHT_RANKS_MAX];
};

/* The tables: a snapshot (struct live_view) and its objects. */
extern const struct live_table live_table_snapshot;    /* struct live_view */
extern const struct live_table live_table_job;	       /* struct live_job */
extern const struct live_table live_table_finding;     /* struct live_finding */
extern const struct live_table live_table_gather;      /* struct live_gather */
extern const struct live_table live_table_rank;	       /* struct live_rank */
extern const struct live_table live_table_step;	       /* struct live_step */
extern const struct live_table live_table_totals;      /* struct live_totals */
extern const struct live_table live_table_comm;	       /* struct live_comm */
extern const struct live_table live_table_event;       /* struct live_event */
extern const struct live_table live_table_flight;      /* struct analysis_flight */
extern const struct live_table live_table_hang;	       /* struct analysis_hang */
extern const struct live_table live_table_flight_rank; /* struct analysis_flight_rank */
extern const struct live_table live_table_mismatch;    /* struct analysis_mismatch */
extern const struct live_table live_table_signature;   /* struct live_signature */

/* live_table_field - the field of t named `name` (its JSON key), NULL when none. */
const struct live_field *live_table_field(const struct live_table *t, const char *name);

/* live_field_uint / live_field_int - an integer field (UINT, INT, BOOL, ENUM, HEX) of `object`. */
uint64_t live_field_uint(const void *object, const struct live_field *f);
int64_t live_field_int(const void *object, const struct live_field *f);

/* live_field_set - store v in an integer field of `object`, at the field's
 * largest (or smallest) value when it does not fit. */
void live_field_set(void *object, const struct live_field *f, int64_t v);
void live_field_set_uint(void *object, const struct live_field *f, uint64_t v);

/* live_field_is_null - field f of `object` is written as null; `known`: the
 * object's figures are known (LIVE_NULL_UNKNOWN). */
int live_field_is_null(const void *object, const struct live_field *f, int known);

/* live_field_nullable - a reader takes null for f; `known` as above. */
int live_field_nullable(const struct live_field *f, int known);

/* live_field_elements - an ARRAY's first element and how many are used
 * (at most its max); NULL with 0 for a pointer that is NULL. */
const void *live_field_elements(const void *object, const struct live_field *f, size_t *n);

/* live_table_known - whether the figures of `object` of table t are known,
 * the parent's word `parent_known` when the table does not say. */
int live_table_known(const struct live_table *t, const void *object, int parent_known);

/*
 * live_fields_write - the members of `object` (of table t) in table order,
 * through w, nested objects and arrays included. The caller has opened the
 * object; `known` as for live_field_is_null.
 */
void live_fields_write(struct jw *w, const struct live_table *t, const void *object, int known);

#endif
