/* fsdp_ref/optim.c: AdamW scalars (see optim.h); the update itself is the
 * backend's adam_update, called per unit by fsdp_optimizer_step. */
#include <math.h>

#include "fsdp_ref/optim.h"

struct fsdp_adam_params optim_adam_params(const struct optim_config *cfg, int t)
{
	struct fsdp_adam_params hp = {
	    .lr = cfg->lr,
	    .beta1 = cfg->beta1,
	    .beta2 = cfg->beta2,
	    .eps = cfg->eps,
	    .weight_decay = cfg->weight_decay,
	    .bias_correction1 = (float)(1.0 - pow((double)cfg->beta1, (double)t)),
	    .bias_correction2 = (float)(1.0 - pow((double)cfg->beta2, (double)t)),
	    .grad_scale = 1.0f,
	};
	return hp;
}
