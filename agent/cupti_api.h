/*
 * cupti_api.h - the CUPTI functions cupti.c calls, resolved at run time.
 *
 * The agent never links libcupti: the toolkit headers give it the types,
 * and cupti_api_load() dlopens the library and fills this table with
 * dlsym. Calls go through the table, so a test can replace any entry
 * (tests/unit/agent_cupti_test.c fakes a CUPTI that is held by another
 * subscriber, and feeds buffers to the real record walker).
 *
 * Only cupti.c and its test include this header; the rest of the agent
 * uses the cupti_* functions declared in agent/agent.h.
 */
#ifndef FSS_AGENT_CUPTI_API_H
#define FSS_AGENT_CUPTI_API_H

#include <stddef.h>
#include <stdint.h>

#include <cupti.h> /* types only: the agent never links libcupti */

/* Every CUPTI function the agent uses. Entries marked optional may be NULL
 * (older CUPTI); the others are required for CUPTI to be used at all. */
struct cupti_api {
	CUptiResult (*get_version)(uint32_t *version);
	CUptiResult (*subscribe)(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata);
	/* optional: names the subscriber that already holds CUPTI */
	CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata,
				    CUpti_SubscriberParams *params);
	CUptiResult (*unsubscribe)(CUpti_SubscriberHandle subscriber);
	CUptiResult (*activity_register_callbacks)(CUpti_BuffersCallbackRequestFunc requested,
						   CUpti_BuffersCallbackCompleteFunc completed);
	CUptiResult (*activity_enable)(CUpti_ActivityKind kind);
	CUptiResult (*activity_disable)(CUpti_ActivityKind kind);
	CUptiResult (*activity_get_next_record)(uint8_t *buffer, size_t valid_size, CUpti_Activity **record);
	CUptiResult (*activity_get_num_dropped_records)(CUcontext context, uint32_t stream_id, size_t *dropped);
	CUptiResult (*activity_flush_all)(uint32_t flag);
	/* optional: periodic delivery of completed buffers by CUPTI's thread */
	CUptiResult (*activity_flush_period)(uint32_t period_ms);
	CUptiResult (*activity_push_external_correlation_id)(CUpti_ExternalCorrelationKind kind, uint64_t id);
	CUptiResult (*activity_pop_external_correlation_id)(CUpti_ExternalCorrelationKind kind, uint64_t *last_id);
	CUptiResult (*get_timestamp)(uint64_t *timestamp);
	/* optional: the runtime-API callbacks for host waits (synchronizes); without it none are recorded */
	CUptiResult (*enable_callback)(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
				       CUpti_CallbackId cbid);
};

/*
 * cupti_api_load - dlopen libcupti (one already loaded in the process
 * first, then libcupti.so.13, .so.12, .so, then the CUDA toolkit paths) and
 * resolve every entry. On success *handle is the library (never closed:
 * CUPTI keeps threads and callbacks into it) and 0 is returned; -ENOENT
 * when no library loads, -ENOSYS when a required symbol is missing (the
 * library is closed again then). Not for the hot path.
 */
int cupti_api_load(struct cupti_api *api, void **handle);

/*
 * cupti_kernel_is_nccl - 1 when a CUPTI kernel name is one of NCCL's
 * kernels (ncclDevKernel_*, ncclKernel_*, plain or Itanium-mangled as
 * `_Z<len>ncclDevKernel_...`), else 0. NULL is not NCCL's.
 */
int cupti_kernel_is_nccl(const char *name);

/*
 * cupti_device_handle - write one device record (format 1.5) for a
 * CUPTI_ACTIVITY_KIND_DEVICE activity record, the first time its device id
 * comes; nothing for figures no GPU has (a struct of another CUPTI).
 * Called with cupti.c's lock held (agent/cupti_device.c).
 */
void cupti_device_handle(const void *activity);

/* cupti_device_reset - forget which devices were written (tests, fork). */
void cupti_device_reset(void);

/* ---- test hooks (tests/unit/agent_cupti_test.c) ----------------------- */

/*
 * cupti_test_use_api - make cupti_start() use a copy of *api instead of
 * loading libcupti, and make cupti_handle_buffer() walk buffers with
 * api->activity_get_next_record right away. NULL goes back to the loader.
 */
void cupti_test_use_api(const struct cupti_api *api);

/* cupti_test_reset - forget everything (status, pool, correlation map,
 * held intervals, the once-only messages) so a test can start again. The
 * pool buffers are freed: no CUPTI may hold one. */
void cupti_test_reset(void);

/* cupti_test_set_hold_ns - how long an NCCL kernel / copy waits for its
 * external correlation record before it is emitted without a collective
 * seq (default CUPTI_HOLD_NS in cupti.c). */
void cupti_test_set_hold_ns(uint64_t hold_ns);

/* cupti_test_held - intervals waiting for their external correlation. */
size_t cupti_test_held(void);

/*
 * cupti_test_api_callback - the callback the agent subscribes with, so a
 * test can play CUPTI's runtime-API callbacks with CUpti_CallbackData
 * structs of its own (cupti_start must have subscribed: status ON).
 */
void cupti_test_api_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *data);

/* cupti_test_sync_cbids - the runtime-API callback ids cupti_start enables
 * (*n of them), in the order it enables them. */
const CUpti_CallbackId *cupti_test_sync_cbids(size_t *n);

#endif
