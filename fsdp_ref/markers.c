/* fsdp_ref/markers.c: NVTX ranges (see markers.h). NVTX3 is header-only: the
 * calls are no-ops unless a tool (nsys, the fsdpscope agent) injects itself
 * through NVTX_INJECTION64_PATH. */
#include "fsdp_ref/markers.h"

static int markers_enabled = 1;

void markers_set_enabled(int on)
{
	markers_enabled = on;
}

#ifdef FSDP_REF_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

static nvtxDomainHandle_t markers_domain(void)
{
	static nvtxDomainHandle_t domain; /* compute thread only */
	if (!domain)
		domain = nvtxDomainCreateA("fsdp_ref");
	return domain;
}

void markers_push(const char *name)
{
	if (!markers_enabled)
		return;
	nvtxEventAttributes_t a = {0};
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = name;
	nvtxDomainRangePushEx(markers_domain(), &a);
}

void markers_pop(void)
{
	if (markers_enabled)
		nvtxDomainRangePop(markers_domain());
}

#else

void markers_push(const char *name)
{
	(void)name;
	(void)markers_enabled;
}
void markers_pop(void) {}

#endif
