/* fsdp_ref/data.c: the synthetic task (see data.h). */
#include "fsdp_ref/data.h"

static uint64_t data_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void data_batch(uint64_t seed, int step, int first, int count, int seq, int vocab, int32_t *inputs, int32_t *targets)
{
	for (int i = 0; i < count; i++) {
		uint64_t h = data_mix(data_mix(seed ^ 0x5eed0000ull) ^ ((uint64_t)step << 32) ^ (uint64_t)(first + i));
		int x = (int)(h % (uint64_t)vocab);
		int d = 1 + (int)((h >> 32) % 3);
		for (int t = 0; t < seq; t++) {
			inputs[(long)i * seq + t] = x;
			x = (x + d) % vocab;
			targets[(long)i * seq + t] = x;
		}
	}
}
