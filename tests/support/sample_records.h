/*
 * sample_records.h - one record of every type with every field set to a
 * distinct non-zero value, for round-trip tests, the dump test and the
 * fuzzer's seed corpus.
 */
#ifndef FSS_TESTS_SAMPLE_RECORDS_H
#define FSS_TESTS_SAMPLE_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace_writer.h"

/* sample_record - fill buf (FSS_RECORD_MAX_BYTES) with a record of `type`
 * for `source`, fields derived from `salt`; returns its size, 0 for a type
 * that has no sample. Reserved fields stay 0. */
size_t sample_record(uint16_t type, uint32_t source, uint32_t salt, void *buf);

/* sample_trace_write - append to w: for each source, a hello, the strings
 * the samples name (ids 1 and 2 for short names, 3 for a multi-part one),
 * then `rounds` records of every other type. Returns 0 or the writer's
 * error; *records gets the number appended. */
int sample_trace_write(trace_writer_t *w, uint32_t sources, uint32_t rounds, uint64_t *records);

#endif
