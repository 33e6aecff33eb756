/*
 * trace_jobs.h - whether several traces are one job's, the decision every
 * reader of several traces (or of a folder) gets: fss_session_open_files
 * reaches it through merge_open (fsdpscope traces) and kineto_input_open
 * (PyTorch profiler traces), so lint, report, ledger, dump, export and top
 * refuse the same inputs with the same words.
 *
 * A folder that two runs wrote into (trace.fss, trace-2.fss) holds two
 * jobs; read as one they would be a job of twice the ranks, every rank
 * twice. Two files are of one job when
 *   - their CLOCK_REALTIME spans overlap (a job's nodes run together; two
 *     runs one after the other do not), where both are known, and
 *   - they share a communicator (the hash of its NCCL unique id, the same
 *     on every rank of it and drawn anew by every run) and no rank of one
 *     (two processes that are rank 0 of one communicator are two runs whose
 *     ids happen to agree), or, where one of them shows no communicator (a
 *     PyTorch profiler trace without process group names, a process that
 *     made none), they are of one world (the same world size, where both
 *     are known) and hold no rank of it twice.
 * The relation is followed across files: A with B and B with C make one
 * job of A, B and C (an HSDP node shares only its replicate or world
 * communicator with the others, and a job of four nodes may be joined
 * node by node). A job so joined in which two files still hold one rank
 * of one communicator (or world) cannot be told apart and is refused too.
 *
 * Pure: no I/O; the callers say what each file holds.
 */
#ifndef FSS_COLLECTOR_TRACE_JOBS_H
#define FSS_COLLECTOR_TRACE_JOBS_H

#include <stddef.h>
#include <stdint.h>

/* A rank a file's process holds. */
struct trace_jobs_rank {
	uint64_t comm; /* the id hash of a communicator of more than one rank it is in (not one whose id
			  was inferred), 0: its world (distributedInfo, RANK / WORLD_SIZE, its largest
			  communicator) */
	int32_t size;  /* ranks of that communicator or world, 0 unknown */
	int32_t rank;  /* its rank there, >= 0 */
};

/* One trace file, as the decision sees it. */
struct trace_jobs_file {
	const char *path;		     /* named in the message (borrowed) */
	const struct trace_jobs_rank *ranks; /* borrowed */
	size_t nranks;
	int64_t first_ns, last_ns; /* its CLOCK_REALTIME span; both 0: not known */
};

/* Files of one job named in the message; more are counted. */
#define TRACE_JOBS_NAMED_FILES 8u

/*
 * trace_jobs_group - which job each of the n files is of: job[i] (the
 * caller's, n entries) numbered from 0 by when the jobs started (the
 * earliest first_ns of their files; unknown last), then in the order of
 * their first files; and *njobs. Returns 0 or -ENOMEM.
 */
int trace_jobs_group(const struct trace_jobs_file *files, size_t n, uint32_t *job, uint32_t *njobs);

/*
 * trace_jobs_check - 0 when the n files are one job (n < 2 always is);
 * else FSS_E_USAGE with err saying so: each job with its ranks, its time
 * and its files, why the first two are apart, and that one job is read at
 * a time (or which two files of a joined job hold the same rank).
 * -ENOMEM (err said).
 */
int trace_jobs_check(const struct trace_jobs_file *files, size_t n, char *err, size_t errlen);

#endif
