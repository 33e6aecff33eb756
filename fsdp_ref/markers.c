/* fsdp_ref/markers.c: NVTX ranges (see markers.h). NVTX3 is header-only: the
 * calls are no-ops unless a tool (nsys, the fsdpscope agent) injects itself
 * through NVTX_INJECTION64_PATH. */
#include "fsdp_ref/markers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int markers_enabled = 1;
static const char *markers_unit_prefix;

void markers_set_unit_prefix(const char *prefix)
{
	markers_unit_prefix = prefix;
}

void markers_push_unit(const char *name)
{
	static char *buf; /* compute thread only; grown, never freed: the names live as long as the job */
	static size_t cap;
	size_t need;

	if (!markers_unit_prefix || !markers_enabled) {
		markers_push(name);
		return;
	}
	need = strlen(markers_unit_prefix) + strlen(name) + 1;
	if (need > cap) {
		char *grown = realloc(buf, need);
		if (!grown) {
			markers_push(name);
			return;
		}
		buf = grown;
		cap = need;
	}
	snprintf(buf, cap, "%s%s", markers_unit_prefix, name);
	markers_push(buf);
}

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
