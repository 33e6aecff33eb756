/*
 * live_fields_test.c - collector/live_fields: the live view's field tables
 * against docs/live-schema.json, read from the source tree.
 *
 *   - every property of every object of the schema is a field of the
 *     object's table and every field is a property, required;
 *   - each field's kind and null rule match the property's type: integers
 *     (unsigned ones with a minimum), booleans, strings (identifiers with
 *     their hex pattern, the schema's constant), enumerations whose names
 *     the table reads back, nullable exactly where the table writes null;
 *   - nested objects and arrays lead to the tables of the schema's $defs by
 *     name, arrays bounded by the struct's room; every $defs entry has its
 *     table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/live_fields.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

enum {
	T_INTEGER = 1 << 0,
	T_STRING = 1 << 1,
	T_BOOLEAN = 1 << 2,
	T_NULL = 1 << 3,
	T_OBJECT = 1 << 4,
	T_ARRAY = 1 << 5,
};

static json_t *schema;
static json_t *defs;
static json_t *defs_seen; /* names of the $defs reached from the snapshot */

static unsigned type_bit(const char *t)
{
	static const char *const names[] = {"integer", "string", "boolean", "null", "object", "array"};

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(t, names[i]))
			return 1u << i;
	fail_msg("schema type \"%s\" the test does not know", t);
	return 0;
}

/* The $defs entry a {"$ref": "#/$defs/NAME"} names; NULL when p is no reference. */
static json_t *deref(json_t *p, const char **name)
{
	json_t *ref = json_object_get(p, "$ref");
	const char *s;
	json_t *d;

	if (!ref)
		return NULL;
	s = json_string_value(ref);
	assert_non_null(s);
	assert_int_equal(strncmp(s, "#/$defs/", 8), 0);
	d = json_object_get(defs, s + 8);
	assert_non_null(d);
	json_object_set_new(defs_seen, s + 8, json_true());
	if (name)
		*name = s + 8;
	return d;
}

/* The JSON types property p allows. */
static unsigned types_of(json_t *p)
{
	json_t *t = json_object_get(p, "type"), *e, *d = deref(p, NULL);
	unsigned bits = 0;
	size_t i;

	if (d)
		return types_of(d);
	if (json_is_string(t))
		bits |= type_bit(json_string_value(t));
	json_array_foreach(t, i, e) bits |= type_bit(json_string_value(e));
	json_array_foreach(json_object_get(p, "enum"), i, e) bits |= json_is_null(e) ? T_NULL : T_STRING;
	if (json_is_string(json_object_get(p, "const")))
		bits |= T_STRING;
	json_array_foreach(json_object_get(p, "oneOf"), i, e) bits |= types_of(e);
	return bits;
}

/* The object schema property p stands for (through $ref and oneOf's non-null option), with its $defs name. */
static json_t *object_of(json_t *p, const char **name)
{
	json_t *d, *e;
	size_t i;

	*name = "";
	d = deref(p, name);
	if (d)
		return d;
	json_array_foreach(json_object_get(p, "oneOf"), i, e) if (!(types_of(e) & T_NULL)) return object_of(e, name);
	return p;
}

/* A reader takes name s back, or s is what the writer names a value out of
 * the enumeration's range ("unknown" severity), which a reader refuses. */
static int name_reads_back(const struct live_field *f, const char *s)
{
	const char *outside = f->enum_name(-1);

	for (int i = 0; i < f->enum_count; i++)
		if (f->enum_name(i) && !strcmp(f->enum_name(i), s))
			return 1;
	return outside && !strcmp(outside, s);
}

static void check_table(const struct live_table *t, json_t *object, const char *path);

static void check_enum(const struct live_field *f, json_t *p, const char *path)
{
	json_t *names = json_object_get(p, "enum"), *e;
	size_t i;

	if (!names)
		return; /* a string the schema does not enumerate (an op's name) */
	json_array_foreach(names, i, e) if (json_is_string(e) && !name_reads_back(f, json_string_value(e)))
	    fail_msg("%s: the schema's name \"%s\" does not read back", path, json_string_value(e));
	/* and every name the writer can give is one of the schema's */
	for (int v = 0; v < f->enum_count; v++) {
		const char *s = f->enum_name(v);
		int found = 0;

		json_array_foreach(names, i, e) found |= s && json_is_string(e) && !strcmp(json_string_value(e), s);
		if (s && !found)
			fail_msg("%s: the name \"%s\" of %d is not in the schema's enum", path, s, v);
	}
}

static void check_nested(const struct live_field *f, json_t *p, const char *path)
{
	const char *def;
	json_t *o;

	if (f->kind == LIVE_FIELD_ARRAY) {
		json_t *items = json_object_get(p, "items"), *max = json_object_get(p, "maxItems");
		json_t *count = json_object_get(p, "x-count");

		assert_non_null(items);
		if (count)
			max = json_object_get(count, "max");
		if (f->max)
			assert_int_equal(json_integer_value(max), f->max);
		if (!f->object) {
			assert_int_equal(types_of(items), T_INTEGER);
			return;
		}
		p = items;
	}
	o = object_of(p, &def);
	assert_non_null(f->object);
	if (def[0] || f->object->name[0])
		assert_string_equal(def, f->object->name);
	check_table(f->object, o, path);
}

static void check_field(const struct live_field *f, json_t *p, const char *path)
{
	unsigned want = 0, got = types_of(p);

	switch (f->kind) {
	case LIVE_FIELD_UINT:
		assert_non_null(json_object_get(p, "minimum"));
		want = T_INTEGER;
		break;
	case LIVE_FIELD_INT:
		want = T_INTEGER;
		break;
	case LIVE_FIELD_BOOL:
	case LIVE_FIELD_DERIVED:
		want = T_BOOLEAN;
		break;
	case LIVE_FIELD_TEXT:
		want = T_STRING;
		break;
	case LIVE_FIELD_HEX:
		assert_string_equal(json_string_value(json_object_get(p, "pattern")), "^[0-9a-f]{16}$");
		want = T_STRING;
		break;
	case LIVE_FIELD_CONST:
		assert_string_equal(json_string_value(json_object_get(p, "const")), LIVE_SCHEMA);
		want = T_STRING;
		break;
	case LIVE_FIELD_ENUM:
		check_enum(f, p, path);
		want = T_STRING;
		break;
	case LIVE_FIELD_OBJECT:
	case LIVE_FIELD_COMPOSED:
		want = T_OBJECT;
		break;
	case LIVE_FIELD_ARRAY:
		want = T_ARRAY;
		break;
	}
	if (f->null)
		want |= T_NULL;
	if (got != want)
		fail_msg("%s: the schema's types 0x%x, the table's 0x%x", path, got, want);
	if (f->kind == LIVE_FIELD_OBJECT || f->kind == LIVE_FIELD_COMPOSED || f->kind == LIVE_FIELD_ARRAY)
		check_nested(f, p, path);
}

static void check_table(const struct live_table *t, json_t *object, const char *path)
{
	json_t *props = json_object_get(object, "properties"), *required = json_object_get(object, "required"), *p;
	const char *key;
	size_t i;
	json_t *e;

	assert_non_null(props);
	assert_non_null(required);
	json_object_foreach(props, key, p)
	{
		int found = 0;

		for (i = 0; i < t->nfields; i++)
			found |= !strcmp(t->fields[i].name, key);
		if (!found)
			fail_msg("%s.%s: in the schema, not in the table", path, key);
	}
	for (i = 0; i < t->nfields; i++) {
		const struct live_field *f = &t->fields[i];
		char sub[256];
		int is_required = 0;
		size_t k;

		snprintf(sub, sizeof(sub), "%s.%s", path, f->name);
		p = json_object_get(props, f->name);
		if (!p)
			fail_msg("%s: in the table, not in the schema", sub);
		json_array_foreach(required, k, e) is_required |= !strcmp(json_string_value(e), f->name);
		if (!is_required)
			fail_msg("%s: not required by the schema", sub);
		check_field(f, p, sub);
	}
}

static int setup(void **state)
{
	json_error_t je;

	(void)state;
	schema = json_load_file(FSS_LIVE_SCHEMA, JSON_REJECT_DUPLICATES, &je);
	if (!schema) {
		fprintf(stderr, "%s: %s (line %d)\n", FSS_LIVE_SCHEMA, je.text, je.line);
		return -1;
	}
	defs = json_object_get(schema, "$defs");
	defs_seen = json_object();
	return defs ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	json_decref(defs_seen);
	json_decref(schema);
	return 0;
}

static void test_snapshot_matches_schema(void **state)
{
	const char *key;
	json_t *d;

	(void)state;
	assert_string_equal(json_string_value(json_object_get(schema, "title")), LIVE_SCHEMA);
	check_table(&live_table_snapshot, schema, "snapshot");
	json_object_foreach(defs, key, d) if (!json_object_get(defs_seen, key))
	    fail_msg("$defs.%s: no table leads to it", key);
}

/* The tables' own consistency: what the schema cannot see. */
static void test_tables_hold_together(void **state)
{
	const struct live_table *const tables[] = {
	    &live_table_snapshot, &live_table_job,	 &live_table_finding, &live_table_gather,
	    &live_table_rank,	  &live_table_step,	 &live_table_totals,  &live_table_comm,
	    &live_table_event,	  &live_table_flight,	 &live_table_hang,    &live_table_flight_rank,
	    &live_table_mismatch, &live_table_signature,
	};
	unsigned orders = 0;
	const char *names[64];
	size_t nnames = 0;

	(void)state;
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (size_t i = 0; i < tables[t]->nfields; i++) {
			const struct live_field *f = &tables[t]->fields[i];

			if (f->kind <= LIVE_FIELD_HEX && f->kind != LIVE_FIELD_TEXT)
				assert_true(f->size == 1 || f->size == 2 || f->size == 4 || f->size == 8);
			if (f->kind == LIVE_FIELD_ENUM)
				assert_true(f->enum_name && f->enum_count > 0);
			if (f->kind == LIVE_FIELD_ARRAY)
				assert_true(f->offset + (f->max ? f->max * f->size : sizeof(void *)) <=
					    tables[t]->size);
			else if (f->kind != LIVE_FIELD_CONST && f->kind != LIVE_FIELD_DERIVED &&
				 f->kind != LIVE_FIELD_COMPOSED)
				assert_true(f->offset + f->size <= tables[t]->size);
			if (f->null & LIVE_NULL_UNNAMED)
				assert_int_equal(f->kind, LIVE_FIELD_ENUM);
			if (f->kind == LIVE_FIELD_COMPOSED)
				assert_true(f->object->size <= sizeof(struct live_signature) && f->load && f->store);
			if (f->null & LIVE_NULL_ABSENT)
				assert_true(f->kind == LIVE_FIELD_OBJECT && f->object->absent);
			if (f->metric) {
				int per_rank = tables[t] == &live_table_rank || tables[t] == &live_table_step ||
					       tables[t] == &live_table_totals;

				assert_int_equal(strncmp(f->metric->name, "fsdpscope_", 10), 0);
				assert_true(!strcmp(f->metric->type, "gauge") || !strcmp(f->metric->type, "counter"));
				for (size_t k = 0; k < nnames; k++)
					if (!strcmp(names[k], f->metric->name))
						fail_msg("%s: family %s twice", f->name, f->metric->name);
				assert_true(nnames < sizeof(names) / sizeof(names[0]));
				names[nnames++] = f->metric->name;
				/* per-rank families: each order once */
				if (!per_rank)
					continue;
				assert_true(f->metric->order < 32);
				assert_false(orders & (1u << f->metric->order));
				orders |= 1u << f->metric->order;
			}
		}
	/* the orders leave no hole: the exposition's per-rank families in a row */
	assert_int_equal(orders & (orders + 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_snapshot_matches_schema),
	    cmocka_unit_test(test_tables_hold_together),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
