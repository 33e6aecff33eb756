/*
 * kineto_file.c - the storage of a read Kineto trace (kineto_file.h): the
 * kept events in one array, their NCCL arguments, the process groups, and
 * the strings, interned once each.
 *
 * Strings live in blocks that never move, so a pointer from
 * kineto_file_string stays valid while more strings are interned (the
 * builder and the readers may interleave in tests).
 */
#include "collector/kineto_file.h"
#include "collector/kineto_scan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define KINETO_STRING_BLOCK (64 * 1024)

struct string_block {
	struct string_block *next;
	size_t used, cap;
	char text[];
};

struct kineto_file {
	struct kineto_event *events;
	size_t nevents, cap_events;
	struct kineto_comm_args *args;
	size_t nargs, cap_args;
	struct kineto_pg *pgs;
	size_t npgs, cap_pgs;

	/* strings: strings[id] is the text of id (id 0 is "") */
	const char **strings;
	uint32_t *lengths;
	size_t nstrings, cap_strings;
	struct string_block *blocks;
	/* open addressing over ids, 0 empty; the hash of each id beside it */
	uint32_t *table;
	uint32_t *hashes;
	size_t table_mask;

	struct kineto_meta meta;
	struct kineto_counts counts;
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	void *q = realloc(*p, n * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

kineto_file_t *kineto_file_new(void)
{
	kineto_file_t *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->strings = malloc(64 * sizeof(*f->strings));
	f->lengths = malloc(64 * sizeof(*f->lengths));
	f->table = calloc(1024, sizeof(*f->table));
	f->hashes = calloc(1024, sizeof(*f->hashes));
	if (!f->strings || !f->lengths || !f->table || !f->hashes) {
		kineto_file_free(f);
		return NULL;
	}
	f->cap_strings = 64;
	f->strings[0] = "";
	f->lengths[0] = 0;
	f->nstrings = 1;
	f->table_mask = 1023;
	struct kineto_meta *m = &f->meta;
	m->rank = KINETO_NONE;
	m->world_size = KINETO_NONE;
	m->device_sms = KINETO_NONE;
	m->device_memory = KINETO_NONE;
	m->schema_version = KINETO_NONE;
	return f;
}

void kineto_file_free(kineto_file_t *f)
{
	if (!f)
		return;
	struct string_block *b = f->blocks;
	while (b) {
		struct string_block *next = b->next;
		free(b);
		b = next;
	}
	free(f->events);
	free(f->args);
	free(f->pgs);
	free(f->strings);
	free(f->lengths);
	free(f->table);
	free(f->hashes);
	free(f);
}

/* Twice the slots when the table is half full, so that probes stay short. */
static int table_grow(kineto_file_t *f)
{
	size_t n = (f->table_mask + 1) * 2;
	uint32_t *table = calloc(n, sizeof(*table));
	uint32_t *hashes = calloc(n, sizeof(*hashes));
	if (!table || !hashes) {
		free(table);
		free(hashes);
		return -ENOMEM;
	}
	for (size_t i = 0; i <= f->table_mask; i++) {
		if (!f->table[i])
			continue;
		size_t j = f->hashes[i] & (n - 1);
		while (table[j])
			j = (j + 1) & (n - 1);
		table[j] = f->table[i];
		hashes[j] = f->hashes[i];
	}
	free(f->table);
	free(f->hashes);
	f->table = table;
	f->hashes = hashes;
	f->table_mask = n - 1;
	return 0;
}

static char *string_store(kineto_file_t *f, const char *text, size_t len)
{
	struct string_block *b = f->blocks;
	if (!b || b->cap - b->used < len + 1) {
		size_t cap = len + 1 > KINETO_STRING_BLOCK ? len + 1 : KINETO_STRING_BLOCK;
		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->used = 0;
		b->cap = cap;
		/* a block of its own for a long string keeps the current block in use */
		if (cap > KINETO_STRING_BLOCK && f->blocks) {
			b->next = f->blocks->next;
			f->blocks->next = b;
		} else {
			b->next = f->blocks;
			f->blocks = b;
		}
	}
	char *p = b->text + b->used;
	if (len)
		memcpy(p, text, len);
	p[len] = 0;
	b->used += len + 1;
	return p;
}

int kineto_file_intern(kineto_file_t *f, const char *text, size_t len, uint32_t *id)
{
	if (len > UINT32_MAX - 1)
		return -ENOMEM;
	uint32_t h = (uint32_t)kscan_hash(text, len);
	size_t i = h & f->table_mask;
	while (f->table[i]) {
		uint32_t cand = f->table[i];
		if (f->hashes[i] == h && f->lengths[cand] == len && memcmp(f->strings[cand], text, len) == 0) {
			*id = cand;
			return 0;
		}
		i = (i + 1) & f->table_mask;
	}
	if (f->nstrings >= UINT32_MAX)
		return -ENOMEM;
	if (grow((void **)&f->strings, &f->cap_strings, f->nstrings + 1, sizeof(*f->strings)) < 0)
		return -ENOMEM;
	uint32_t *lengths = realloc(f->lengths, f->cap_strings * sizeof(*lengths));
	if (!lengths)
		return -ENOMEM;
	f->lengths = lengths;
	char *p = string_store(f, text, len);
	if (!p)
		return -ENOMEM;
	uint32_t nid = (uint32_t)f->nstrings++;
	f->strings[nid] = p;
	f->lengths[nid] = (uint32_t)len;
	f->table[i] = nid;
	f->hashes[i] = h;
	*id = nid;
	if (f->nstrings * 2 > f->table_mask + 1)
		return table_grow(f);
	return 0;
}

int kineto_file_add(kineto_file_t *f, const struct kineto_event *ev)
{
	if (grow((void **)&f->events, &f->cap_events, f->nevents + 1, sizeof(*f->events)) < 0)
		return -ENOMEM;
	f->events[f->nevents++] = *ev;
	return 0;
}

int kineto_file_add_comm_args(kineto_file_t *f, const struct kineto_comm_args *a, uint32_t *index1)
{
	if (f->nargs >= UINT32_MAX - 1)
		return -ENOMEM;
	if (grow((void **)&f->args, &f->cap_args, f->nargs + 1, sizeof(*f->args)) < 0)
		return -ENOMEM;
	f->args[f->nargs++] = *a;
	*index1 = (uint32_t)f->nargs;
	return 0;
}

int kineto_file_add_pg(kineto_file_t *f, const struct kineto_pg *pg)
{
	if (grow((void **)&f->pgs, &f->cap_pgs, f->npgs + 1, sizeof(*f->pgs)) < 0)
		return -ENOMEM;
	f->pgs[f->npgs++] = *pg;
	return 0;
}

const struct kineto_meta *kineto_file_meta(const kineto_file_t *f) { return &f->meta; }
const struct kineto_counts *kineto_file_counts(const kineto_file_t *f) { return &f->counts; }
struct kineto_meta *kineto_file_meta_mut(kineto_file_t *f) { return &f->meta; }
struct kineto_counts *kineto_file_counts_mut(kineto_file_t *f) { return &f->counts; }
size_t kineto_file_nevents(const kineto_file_t *f) { return f->nevents; }
const struct kineto_event *kineto_file_events(const kineto_file_t *f) { return f->events; }
size_t kineto_file_npgs(const kineto_file_t *f) { return f->npgs; }
const struct kineto_pg *kineto_file_pgs(const kineto_file_t *f) { return f->pgs; }

const struct kineto_comm_args *kineto_file_comm_args(const kineto_file_t *f, uint32_t index1)
{
	if (index1 == 0 || index1 > f->nargs)
		return NULL;
	return &f->args[index1 - 1];
}

const char *kineto_file_string(const kineto_file_t *f, uint32_t id)
{
	if (id >= f->nstrings)
		return "";
	return f->strings[id];
}
