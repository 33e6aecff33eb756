/* fsdp_ref/nccl_cpu/unique_id.c: generate, encode and derive unique ids. */
#include "fsdp_ref/nccl_cpu/unique_id.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const char unique_id_magic[8] = {'f', 's', 's', 'n', 'c', 'c', 'l', '1'};

int unique_id_generate(struct unique_id *out)
{
	memset(out, 0, sizeof(*out));
	out->chunk_bytes = UNIQUE_ID_CHUNK_DEFAULT;
	const char *env = getenv("FSDP_REF_NCCL_CHUNK_BYTES");
	if (env && *env) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(env, &end, 10);
		if (errno || *end || v < UNIQUE_ID_CHUNK_MIN || v > UNIQUE_ID_CHUNK_MAX)
			return -EINVAL;
		out->chunk_bytes = (uint32_t)(v & ~63ull); /* keep slots cache-line aligned */
	}
	size_t got = 0;
	while (got < sizeof(out->token)) {
		ssize_t n = getrandom(out->token + got, sizeof(out->token) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	return 0;
}

int unique_id_decode(const ncclUniqueId *in, struct unique_id *out)
{
	if (memcmp(in->internal, unique_id_magic, sizeof(unique_id_magic)) != 0)
		return -EINVAL;
	memcpy(out->token, in->internal + 8, sizeof(out->token));
	memcpy(&out->chunk_bytes, in->internal + 24, sizeof(out->chunk_bytes));
	if (out->chunk_bytes < UNIQUE_ID_CHUNK_MIN || out->chunk_bytes > UNIQUE_ID_CHUNK_MAX || out->chunk_bytes % 64)
		return -EINVAL;
	return 0;
}

void unique_id_encode(const struct unique_id *id, ncclUniqueId *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->internal, unique_id_magic, sizeof(unique_id_magic));
	memcpy(out->internal + 8, id->token, sizeof(id->token));
	memcpy(out->internal + 24, &id->chunk_bytes, sizeof(id->chunk_bytes));
}

/* splitmix64's finaliser: a cheap bijective mixer, good enough to keep
 * derived names apart (they are not secrets). */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void unique_id_derive(const struct unique_id *parent, uint64_t split_index, int color, struct unique_id *out)
{
	uint64_t a, b;
	memcpy(&a, parent->token, 8);
	memcpy(&b, parent->token + 8, 8);
	uint64_t h = mix64(a ^ 0x9e3779b97f4a7c15ull);
	h = mix64(h ^ b);
	h = mix64(h ^ split_index);
	h = mix64(h ^ (uint32_t)color);
	uint64_t lo = h;
	uint64_t hi = mix64(h ^ 0xd6e8feb86659fd93ull);
	memcpy(out->token, &lo, 8);
	memcpy(out->token + 8, &hi, 8);
	out->chunk_bytes = parent->chunk_bytes;
}

void unique_id_name(const struct unique_id *id, char name[UNIQUE_ID_NAME_MAX])
{
	int n = snprintf(name, UNIQUE_ID_NAME_MAX, "/fss-nccl-");
	for (size_t i = 0; i < sizeof(id->token); i++)
		n += snprintf(name + n, (size_t)(UNIQUE_ID_NAME_MAX - n), "%02x", id->token[i]);
}
