/*
 * log_line.h - read one field out of a line of fsdp_ref's JSON-lines log.
 *
 * The tests and benches that check fsdp_ref against its own log read flat
 * numeric fields by key; a strict JSON parse of every line is the accuracy
 * matrix's job (tests/e2e/accuracy_test.py), not theirs.
 */
#ifndef FSS_TESTS_LOG_LINE_H
#define FSS_TESTS_LOG_LINE_H

/* log_line_number - the number after "key": in line; 0, or -1 when the key
 * is absent or no number follows it. */
int log_line_number(const char *line, const char *key, double *out);

#endif
