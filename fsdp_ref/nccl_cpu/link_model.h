/* fsdp_ref/nccl_cpu/link_model.h: how long a collective takes on the wire.
 *
 * Staging through shared memory on a busy CPU is neither as fast nor as
 * steady as NVLink; the model makes communication time a property of the
 * bytes moved instead: an operation (or a whole group) completes no earlier
 * than
 *     t_last + latency + wire_bytes / bandwidth
 * where t_last is when the last rank arrived. The caller sleeps until then
 * (an absolute CLOCK_REALTIME deadline: t_last is another process's stamp,
 * and CLOCK_REALTIME is the clock processes in different time namespaces
 * share), so the time is independent of CPU load and a compute thread keeps
 * the CPU meanwhile. */
#ifndef FSS_NCCL_CPU_LINK_MODEL_H
#define FSS_NCCL_CPU_LINK_MODEL_H

#include <stdint.h>

#define LINK_MODEL_DEFAULT_LATENCY_US 20.0
#define LINK_MODEL_DEFAULT_GBPS 10.0

struct link_model {
	uint64_t latency_ns; /* per operation or group */
	double bytes_per_ns; /* GB/s (1e9 bytes/s) is bytes per ns; may be +inf */
};

/* Read FSDP_REF_LINK_LATENCY_US (>= 0) and FSDP_REF_LINK_GBPS (> 0, "inf"
 * for no bandwidth term); unset or empty means the default. Returns 0, or
 * -EINVAL naming the bad variable in *bad_var. */
int link_model_from_env(struct link_model *out, const char **bad_var);

/* The completion deadline for wire_bytes leaving at t0_ns. */
uint64_t link_model_deadline(const struct link_model *m, uint64_t t0_ns, uint64_t wire_bytes);

/* Sleep until CLOCK_REALTIME reaches deadline_ns (no-op if it has). */
void link_model_sleep_until(uint64_t deadline_ns);

#endif
