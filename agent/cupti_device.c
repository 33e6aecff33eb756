/*
 * cupti_device.c - one device record per GPU, from CUPTI's device activity
 * records.
 *
 * The agent is a guest: it makes no CUDA call of its own to learn which GPU
 * it runs on (a cuDeviceGet* call needs cuInit, may create state and could
 * fail or block the job). CUPTI writes a CUPTI_ACTIVITY_KIND_DEVICE record
 * per device into the same buffers as the kernels (cupti.c enables the
 * kind, optionally: a CUPTI that refuses it leaves the device unknown), and
 * this file turns each into one fss_rec_device, the first time a device id
 * is seen. A record whose figures are out of any real GPU's range (a newer
 * CUPTI whose struct no longer matches) is left out: no device record is
 * better than a wrong one.
 *
 * Called with cupti.c's lock held, on CUPTI's thread or a flushing thread:
 * never the job's hot path.
 */
#include <stdint.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/cupti_api.h"
#include "agent/emit.h"
#include "agent/strings.h"
#include "common/record.h"

/* CUPTI of CUDA 12 writes CUpti_ActivityDevice4, of CUDA 13 Device5; every
 * field read here sits at the same offset in both. */
typedef CUpti_ActivityDevice5 cupti_device_t;
#define SAME_OFFSET(f) static_assert(offsetof(CUpti_ActivityDevice5, f) == offsetof(CUpti_ActivityDevice4, f), \
				     "CUpti_ActivityDevice5." #f " moved")
SAME_OFFSET(globalMemoryBandwidth);
SAME_OFFSET(globalMemorySize);
SAME_OFFSET(coreClockRate);
SAME_OFFSET(numMultiprocessors);
SAME_OFFSET(computeCapabilityMajor);
SAME_OFFSET(computeCapabilityMinor);
SAME_OFFSET(id);
SAME_OFFSET(name);

/* Device ids already written (ids of 64 and over are written every time:
 * no machine has that many, and a repeat is harmless to a reader). */
static uint64_t devices_seen;

/* The figures of a GPU that exists: anything else is a struct we misread. */
static int device_plausible(const cupti_device_t *d)
{
	return d->numMultiprocessors >= 1 && d->numMultiprocessors <= 4096 && d->computeCapabilityMajor >= 1 &&
	       d->computeCapabilityMajor <= 99 && d->computeCapabilityMinor <= 99 && d->name && d->name[0];
}

void cupti_device_handle(const void *activity)
{
	const cupti_device_t *d = activity;
	struct fss_rec_device rec;

	if (!d || !device_plausible(d))
		return;
	if (d->id < 64) {
		if (devices_seen & (1ull << d->id))
			return;
		devices_seen |= 1ull << d->id;
	}
	record_init(&rec, FSS_REC_DEVICE, sizeof(rec), 0);
	rec.memory_bytes = d->globalMemorySize;
	rec.memory_bandwidth = d->globalMemoryBandwidth;
	rec.device = d->id;
	rec.name = agent_intern(d->name, -1);
	rec.sm_count = d->numMultiprocessors;
	rec.clock_khz = d->coreClockRate;
	rec.compute_major = (uint16_t)d->computeCapabilityMajor;
	rec.compute_minor = (uint16_t)d->computeCapabilityMinor;
	rec.origin = FSS_DEVICE_CUPTI;
	agent_emit(&rec);
}

void cupti_device_reset(void)
{
	devices_seen = 0;
}
