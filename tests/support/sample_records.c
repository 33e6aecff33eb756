/*
 * sample_records.c - sample records of every type.
 */
#include "tests/support/sample_records.h"

#include "common/record.h"
#include "common/record_fields.h"

#include <string.h>

/* Fill every integer field with a value derived from salt and its index, so
 * a field swapped with another or dropped is noticed; string ids point at
 * the ids sample_trace_write defines; enum fields get a valid value. */
size_t sample_record(uint16_t type, uint32_t source, uint32_t salt, void *buf)
{
	size_t size = record_known_size(type), n;
	const struct record_field *fields = record_fields(type, &n);

	if (!size || !fields)
		return 0;
	record_init(buf, type, (uint16_t)size, source);
	for (size_t i = 0; i < n; i++) {
		unsigned char *p = (unsigned char *)buf + fields[i].offset;
		uint64_t v = 0x0101010101010101ull * ((salt + i) % 200 + 1) + i;

		switch (fields[i].kind) {
		case FIELD_RESERVED:
			continue;
		case FIELD_TEXT:
			continue; /* set below for strings */
		case FIELD_STRING_ID:
			v = 1 + (salt + i) % 3;
			break;
		case FIELD_ENUM8:
		case FIELD_ENUM16:
		case FIELD_ENUM32:
			v = 1 + (salt + i) % 2; /* 1 and 2 are valid in every enum */
			break;
		default:
			break;
		}
		memcpy(p, &v, fields[i].size); /* little-endian: the low bytes */
	}
	if (type == FSS_REC_STRING) {
		struct fss_rec_string *s = buf;

		s->id = 1 + salt % 3;
		s->total_len = 5;
		s->offset = 0;
		memcpy(s->text, "hello", 5);
	}
	return size;
}

int sample_trace_write(trace_writer_t *w, uint32_t sources, uint32_t rounds, uint64_t *records)
{
	_Alignas(8) unsigned char buf[FSS_RECORD_MAX_BYTES];
	char long_name[300];
	uint64_t before = trace_writer_records(w);
	int err;

	for (size_t i = 0; i < sizeof(long_name); i++)
		long_name[i] = (char)('a' + i % 26);
	for (uint32_t s = 0; s < sources; s++) {
		struct fss_rec_process_hello *h = (void *)buf;

		sample_record(FSS_REC_PROCESS_HELLO, s, s, buf);
		h->rank = (int32_t)s;
		if ((err = trace_writer_append(w, buf)))
			return err;
		if ((err = trace_writer_string(w, s, 1, "layers.3.mlp.up", 15)) ||
		    (err = trace_writer_string(w, s, 2, "fsdp_ref", 8)) ||
		    (err = trace_writer_string(w, s, 3, long_name, sizeof(long_name))))
			return err;
	}
	for (uint32_t r = 0; r < rounds; r++)
		for (uint32_t s = 0; s < sources; s++)
			for (uint16_t t = FSS_REC_COMM; t < FSS_REC_TYPE_MAX; t++) {
				/* trace_end belongs to no source: the writer ends a file with it */
				if (t == FSS_REC_STRING || t == FSS_REC_TRACE_END || !sample_record(t, s, r * 31 + t, buf))
					continue;
				if ((err = trace_writer_append(w, buf)))
					return err;
			}
	if (records)
		*records = trace_writer_records(w) - before;
	return 0;
}
