/* fsdp_ref/optim.h: AdamW on the local shards.
 *
 * Each rank updates only the shard it owns: its fp32 master slice, from the
 * reduce-scattered gradient slice, with its own slices of m and v; the new
 * master is cast to the parameter dtype for the next step's gathers. The
 * update is elementwise, so it does not care how parameters were cut into
 * units or shards. */
#ifndef FSDP_REF_OPTIM_H
#define FSDP_REF_OPTIM_H

#include "fsdp_ref/backend.h"

struct optim_config {
	float lr;	    /* --lr */
	float beta1, beta2; /* 0.9, 0.95 */
	float eps;	    /* 1e-8 */
	float weight_decay; /* 0 */
};

/* The scalars for step t (1-based): bias corrections 1 - beta^t computed in
 * double on the host, so every backend and rank uses identical values. */
struct fsdp_adam_params optim_adam_params(const struct optim_config *cfg, int t);

#endif /* FSDP_REF_OPTIM_H */
