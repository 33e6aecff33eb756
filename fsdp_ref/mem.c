/* fsdp_ref/mem.c: allocator accounting (see mem.h). */
#include <stdlib.h>

#include "fsdp_ref/mem.h"

struct mem_ledger {
	const struct fsdp_backend *be;
	size_t current[MEM_KINDS];
	size_t peak[MEM_KINDS];
	size_t total, peak_total;
};

struct mem_ledger *mem_new(const struct fsdp_backend *be)
{
	struct mem_ledger *m = calloc(1, sizeof *m);
	if (m)
		m->be = be;
	return m;
}

void mem_free_ledger(struct mem_ledger *m)
{
	free(m);
}

void *mem_alloc(struct mem_ledger *m, enum mem_kind kind, size_t bytes)
{
	if (bytes == 0)
		return NULL;
	void *p = m->be->alloc(bytes);
	if (!p)
		return NULL;
	m->current[kind] += bytes;
	if (m->current[kind] > m->peak[kind])
		m->peak[kind] = m->current[kind];
	m->total += bytes;
	if (m->total > m->peak_total)
		m->peak_total = m->total;
	return p;
}

void mem_free(struct mem_ledger *m, enum mem_kind kind, void *ptr, size_t bytes)
{
	if (!ptr)
		return;
	m->be->free(ptr);
	m->current[kind] -= bytes;
	m->total -= bytes;
}

size_t mem_current(const struct mem_ledger *m, enum mem_kind kind)
{
	return m->current[kind];
}
size_t mem_peak(const struct mem_ledger *m, enum mem_kind kind)
{
	return m->peak[kind];
}
size_t mem_peak_total(const struct mem_ledger *m)
{
	return m->peak_total;
}

void mem_reset_peaks(struct mem_ledger *m)
{
	for (int k = 0; k < MEM_KINDS; k++)
		m->peak[k] = m->current[k];
	m->peak_total = m->total;
}
