/* fsdp_ref/nccl_cpu/error.h: the message behind ncclGetLastError.
 *
 * NCCL keeps one process-wide "last error" string; so do we. Writers take a
 * mutex; readers get a copy in a per-thread buffer so the pointer they hold
 * stays valid while other threads fail. */
#ifndef FSS_NCCL_CPU_ERROR_H
#define FSS_NCCL_CPU_ERROR_H

/* Record a failure message (printf format). Thread-safe. */
void error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The last message recorded by any thread, or "" when nothing failed yet.
 * The pointer is valid until this thread calls error_last() again. */
const char *error_last(void);

#endif
