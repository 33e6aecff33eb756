/* fsdp_ref/nccl_cpu/link_model.c: latency + bytes / bandwidth, by sleeping. */
#include "fsdp_ref/nccl_cpu/link_model.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

static int env_double(const char *name, double fallback, double *out)
{
	const char *s = getenv(name);
	if (!s || !*s) {
		*out = fallback;
		return 0;
	}
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || isnan(v))
		return -EINVAL;
	*out = v;
	return 0;
}

int link_model_from_env(struct link_model *out, const char **bad_var)
{
	double latency_us, gbps;
	if (env_double("FSDP_REF_LINK_LATENCY_US", LINK_MODEL_DEFAULT_LATENCY_US, &latency_us) || latency_us < 0 ||
	    latency_us > 1e9) {
		*bad_var = "FSDP_REF_LINK_LATENCY_US";
		return -EINVAL;
	}
	if (env_double("FSDP_REF_LINK_GBPS", LINK_MODEL_DEFAULT_GBPS, &gbps) || !(gbps > 0)) {
		*bad_var = "FSDP_REF_LINK_GBPS";
		return -EINVAL;
	}
	out->latency_ns = (uint64_t)llround(latency_us * 1000.0);
	out->bytes_per_ns = gbps;
	return 0;
}

uint64_t link_model_deadline(const struct link_model *m, uint64_t t0_ns, uint64_t wire_bytes)
{
	double wire_ns = isinf(m->bytes_per_ns) ? 0.0 : ceil((double)wire_bytes / m->bytes_per_ns);
	return t0_ns + m->latency_ns + (uint64_t)wire_ns;
}

void link_model_sleep_until(uint64_t deadline_ns)
{
	struct timespec ts = {
	    .tv_sec = (time_t)(deadline_ns / 1000000000ull),
	    .tv_nsec = (long)(deadline_ns % 1000000000ull),
	};
	/* Absolute deadline: a signal just restarts the same wait; a step of
	 * the clock moves the wake-up with it, as it moves the stamps. */
	while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR) {
	}
}
