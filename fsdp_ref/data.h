/* fsdp_ref/data.h: the synthetic task.
 *
 * Every sequence is an arithmetic progression modulo the vocabulary:
 * x[0] random, x[t+1] = (x[t] + d) mod V with a per-sequence stride d in
 * {1, 2, 3}. The next token is half determined by the current one (a bigram
 * the embeddings and head learn within a few steps) and fully determined
 * once attention reads the stride from the previous token, so the loss
 * falls quickly from ln V and keeps falling.
 *
 * Sequence `s` of step `step` depends only on (seed, step, s): a rank
 * generates the slice of the global batch it owns, and N-rank runs see
 * exactly the same global batch as one rank. */
#ifndef FSDP_REF_DATA_H
#define FSDP_REF_DATA_H

#include <stdint.h>

/* Fill inputs and targets [count * seq] with sequences first .. first+count-1
 * of step `step`. */
void data_batch(uint64_t seed, int step, int first, int count, int seq, int vocab, int32_t *inputs, int32_t *targets);

#endif /* FSDP_REF_DATA_H */
