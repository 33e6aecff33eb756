/* fsdp_ref_nvtx_inject: a minimal NVTX injection library for the nvtx
 * scenario of fsdp_ref_e2e. Loaded by NVTX through NVTX_INJECTION64_PATH, it
 * records the ranges pushed in the "fsdp_ref" domain, one line per push
 * ("push NAME") and pop ("pop"), to $FSDP_REF_NVTX_OUT.<pid>. Only the
 * trainer's compute thread calls NVTX, so no locking. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

struct domain {
	char name[64];
};

static FILE *out;

static FILE *out_file(void)
{
	if (!out) {
		const char *base = getenv("FSDP_REF_NVTX_OUT");
		char path[4096];
		snprintf(path, sizeof path, "%s.%d", base ? base : "nvtx", (int)getpid());
		out = fopen(path, "w");
	}
	return out;
}

static nvtxDomainHandle_t NVTX_API inject_domain_create(const char *name)
{
	struct domain *d = calloc(1, sizeof *d);
	if (d)
		snprintf(d->name, sizeof d->name, "%s", name);
	return (nvtxDomainHandle_t)d;
}

static int NVTX_API inject_push(nvtxDomainHandle_t h, const nvtxEventAttributes_t *a)
{
	struct domain *d = (struct domain *)h;
	if (d && strcmp(d->name, "fsdp_ref") == 0 && out_file() && a->messageType == NVTX_MESSAGE_TYPE_ASCII) {
		fprintf(out, "push %s\n", a->message.ascii);
		fflush(out);
	}
	return 0;
}

static int NVTX_API inject_pop(nvtxDomainHandle_t h)
{
	struct domain *d = (struct domain *)h;
	if (d && strcmp(d->name, "fsdp_ref") == 0 && out_file()) {
		fputs("pop\n", out);
		fflush(out);
	}
	return 0;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
	NvtxFunctionTable table = NULL;
	unsigned int size = 0;
	if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
	    size <= NVTX_CBID_CORE2_DomainCreateA)
		return 0;
	*table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)inject_domain_create;
	*table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)inject_push;
	*table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)inject_pop;
	return 1;
}
