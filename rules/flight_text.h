/*
 * flight_text.h - calls in flight (result->flight: hangs and mismatches) in
 * words: what the rules collective-hang and collective-mismatch write, what
 * the report's "Calls in flight" block and a live session's stderr lines
 * say. One place, so that a finding, the report and the live line name a
 * rank, a communicator and a collective the same way.
 *
 * Every function writes at most len bytes (NUL included) into the caller's
 * buf and returns buf; none allocates.
 */
#ifndef FSS_RULES_FLIGHT_TEXT_H
#define FSS_RULES_FLIGHT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"

/* flight_shows_waits - the trace can show a rank waiting in a call: some
 * source wrote enter records, or CUPTI intervals. Without either, "no
 * hang" cannot be said (docs/hangs.md). */
int flight_shows_waits(const struct analysis_result *a);

/* flight_source - the summary of trace source `source`, NULL when the
 * result has none. */
const struct source_summary *flight_source(const struct analysis_result *a, uint32_t source);

/* flight_comm - the communicator entry of the headline rank with this id
 * hash (role, name), NULL when the analysis did not list it. */
const struct analysis_comm *flight_comm(const struct analysis_result *a, uint64_t id);

/* flight_evidence_name - "host", "gpu", "sync" for enum
 * analysis_wait_evidence; "none" otherwise. */
const char *flight_evidence_name(int evidence);

/* flight_wait_end_name - "waiting", "gave-up", "died" for enum
 * analysis_wait_end. */
const char *flight_wait_end_name(int end);

/* flight_nccl_result_name - "ncclRemoteError" for an ncclResult_t, or
 * "ncclResult 42" (in buf) for one nccl.h does not name. */
const char *flight_nccl_result_name(int32_t result, char *buf, size_t len);

/*
 * flight_hang_end_text - how hang h ended, "" while a listed rank still
 * waits: "the waiting ranks gave up (NCCL error ncclRemoteError on ranks 0,
 * 1, 3): the job's own timeout ended the hang, no rank arrived", or "the
 * waiting ranks died inside it (their processes ended): no rank arrived".
 */
char *flight_hang_end_text(const struct analysis_hang *h, char *buf, size_t len);

/* flight_comm_text - "0123456789abcdef (fsdp, \"dp\", 4 ranks)": the id
 * hash, with its role and name when the analysis knows them. */
char *flight_comm_text(const struct analysis_result *a, uint64_t id, int32_t nranks, char *buf, size_t len);

/* flight_rank_text - "rank 2 (host node1, pid 4242)"; the host is left out
 * when unknown. */
char *flight_rank_text(const struct analysis_result *a, const struct analysis_flight_rank *r, char *buf, size_t len);

/* flight_rank_list - the ranks of list[0..n) as "0, 1, 3", with "and K
 * more" when total > n. */
char *flight_rank_list(const struct analysis_flight_rank *list, uint32_t n, uint32_t total, char *buf, size_t len);

/* flight_int_list - the same for plain ranks (a mismatch's a_ranks). */
char *flight_int_list(const int32_t *ranks, uint32_t n, uint32_t total, char *buf, size_t len);

/* flight_collective_text - "#17 (AllGather, count 1048576, bf16)" of a
 * hang's collective. */
char *flight_collective_text(const struct analysis_hang *h, char *buf, size_t len);

/* flight_signature_text - "AllGather count 1048576 bf16", with root for
 * rooted collectives and redop for reductions. */
char *flight_signature_text(const struct analysis_signature *s, char *buf, size_t len);

/*
 * flight_hang_line - one line (no newline) of a hang for a live session's
 * stderr: "missing rank 2 (host h, pid 4242); collective #17 (AllGather) of
 * communicator 0123... ; ranks 0, 1, 3 have waited 75.0 s (host)", and
 * when the waits ended, "; " and flight_hang_end_text.
 */
char *flight_hang_line(const struct analysis_result *a, const struct analysis_hang *h, char *buf, size_t len);

/* flight_mismatch_line - one line of a mismatch: "communicator 0123...,
 * collective #5: ranks 0, 1 issued AllGather count 1000 bf16; rank 2 issued
 * AllGather count 999 bf16". */
char *flight_mismatch_line(const struct analysis_result *a, const struct analysis_mismatch *m, char *buf, size_t len);

#endif
