/*
 * strtab.c - open-addressing hash table of assembled strings.
 */
#include "common/strtab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	uint64_t key;      /* source << 32 | id; 0 = empty (id is never 0) */
	char *text;        /* total_len + 1 bytes */
	uint32_t total_len;
	uint32_t have;     /* bytes received (parts may repeat: capped) */
	unsigned char *seen; /* one flag per part index, to count bytes once */
};

struct strtab {
	struct entry *slots;
	size_t cap; /* power of two */
	size_t used;
};

strtab_t *strtab_new(void)
{
	strtab_t *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->cap = 64;
	t->slots = calloc(t->cap, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	return t;
}

void strtab_free(strtab_t *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->cap; i++) {
		free(t->slots[i].text);
		free(t->slots[i].seen);
	}
	free(t->slots);
	free(t);
}

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static struct entry *lookup(const strtab_t *t, uint64_t key)
{
	size_t i = mix(key) & (t->cap - 1);

	while (t->slots[i].key && t->slots[i].key != key)
		i = (i + 1) & (t->cap - 1);
	return &t->slots[i];
}

static int grow(strtab_t *t)
{
	strtab_t bigger = {.cap = t->cap * 2};

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].key)
			*lookup(&bigger, t->slots[i].key) = t->slots[i];
	free(t->slots);
	t->slots = bigger.slots;
	t->cap = bigger.cap;
	return 0;
}

int strtab_add_part(strtab_t *t, const struct fss_rec_string *part)
{
	uint64_t key = (uint64_t)part->head.source << 32 | part->id;
	size_t len, index;
	struct entry *e;

	if (part->id == FSS_STRING_NONE || part->offset % FSS_STRING_PART_BYTES ||
	    part->offset > part->total_len || (part->offset == part->total_len && part->total_len))
		return -EINVAL;
	len = part->total_len - part->offset;
	if (len > FSS_STRING_PART_BYTES)
		len = FSS_STRING_PART_BYTES;
	if ((t->used + 1) * 4 > t->cap * 3 && grow(t))
		return -ENOMEM;
	e = lookup(t, key);
	if (e->key && e->total_len != part->total_len) {
		/* Redefined with another length: start over. */
		free(e->text);
		free(e->seen);
		e->text = NULL;
		e->seen = NULL;
		e->key = 0;
		t->used--;
	}
	if (!e->key) {
		size_t parts = part->total_len / FSS_STRING_PART_BYTES + 1;

		e->text = calloc(1, (size_t)part->total_len + 1);
		e->seen = calloc(parts, 1);
		if (!e->text || !e->seen) {
			free(e->text);
			free(e->seen);
			e->text = NULL;
			e->seen = NULL;
			return -ENOMEM;
		}
		e->key = key;
		e->total_len = part->total_len;
		e->have = 0;
		t->used++;
	}
	memcpy(e->text + part->offset, part->text, len);
	index = part->offset / FSS_STRING_PART_BYTES;
	if (!e->seen[index]) {
		e->seen[index] = 1;
		e->have += (uint32_t)len;
	}
	return 0;
}

const char *strtab_get(const strtab_t *t, uint32_t source, uint32_t id)
{
	const struct entry *e;

	if (id == FSS_STRING_NONE)
		return NULL;
	e = lookup(t, (uint64_t)source << 32 | id);
	if (!e->key || e->have < e->total_len)
		return NULL;
	return e->text;
}
