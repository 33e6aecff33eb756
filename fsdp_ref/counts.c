/* fsdp_ref/counts.c: the closed-form count of collectives per step (see
 * counts.h and docs/fsdp_ref.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/counts.h"
#include "fsdp_ref/wrap.h"

int fsdp_reshard_parse(const char *text, int shard_group, int *size, char *err, size_t errlen)
{
	char scratch[8];
	if (!err) {
		err = scratch;
		errlen = sizeof scratch;
	}
	if (!text || strcmp(text, "true") == 0) {
		*size = shard_group;
		return 0;
	}
	if (strcmp(text, "false") == 0) {
		*size = 0;
		return 0;
	}
	char *end = NULL;
	long g = strtol(text, &end, 10);
	if (end == text || *end != '\0' || g < 1 || g > shard_group || shard_group % g != 0) {
		snprintf(err, errlen,
			 "bad --reshard-after-forward '%s': use true, false, or a group size G that divides "
			 "the shard group size %d (G = %d is true, G = 1 is false)",
			 text, shard_group, shard_group);
		return -EINVAL;
	}
	*size = g == 1 ? 0 : (int)g; /* sharded over one rank = kept whole */
	return 0;
}

/* Units holding a tensor every tp rank holds whole: the root, and each unit
 * with a block's norms (every block or group unit; with linear, the unit of
 * the block's rest). */
static int replicated_units(const struct wrap_spec *spec)
{
	if (spec->model)
		return 1;
	int n = 1;
	for (int i = 0; i < spec->nranges; i++) {
		const struct wrap_range *r = &spec->ranges[i];
		n += r->policy == WRAP_LINEAR ? r->last - r->first + 1 : wrap_range_units(r);
	}
	return n;
}

int fsdp_expected_counts(const struct fsdp_count_config *cfg, struct fsdp_counts *out, char *err, size_t errlen)
{
	char scratch[8];
	if (!err) {
		err = scratch;
		errlen = sizeof scratch;
	}
	memset(out, 0, sizeof *out);
	int t = cfg->tp > 1 ? cfg->tp : 1;
	if (cfg->world_size < 1 || cfg->world_size % t != 0) {
		snprintf(err, errlen, "bad --tp %d: it must divide the world size %d", t, cfg->world_size);
		return -EINVAL;
	}
	/* the FSDP counts are those of the data-parallel dimension */
	int n = cfg->world_size / t, s = cfg->shard_group ? cfg->shard_group : n;
	if (s < 1 || n % s != 0) {
		snprintf(err, errlen, "bad --shard-group %d: it must divide the %s size %d", s,
			 t > 1 ? "data-parallel" : "world", n);
		return -EINVAL;
	}
	struct wrap_spec spec;
	int rc = wrap_parse(cfg->wrap ? cfg->wrap : "block", cfg->layers, &spec, err, errlen);
	if (rc < 0)
		return rc;
	int g;
	rc = fsdp_reshard_parse(cfg->reshard_after_forward, s, &g, err, errlen);
	if (rc < 0)
		return rc;

	int units = wrap_unit_count(&spec);
	int k = cfg->grad_accum > 0 ? cfg->grad_accum : 1;
	int syncs = cfg->grad_sync_last ? 1 : k;
	/* FSDP1 re-gathers a fully resharded unit for its recomputation */
	int recompute = cfg->activation_checkpoint && cfg->style == 1 && g == s ? units - 1 : 0;
	out->units = units;
	out->microbatches = k;
	out->sync_microbatches = syncs;
	out->forward_allgathers_per_microbatch = units;
	out->backward_allgathers_per_microbatch = (g > 0 ? units - 1 : 0) + recompute;
	out->recompute_allgathers = k * recompute;
	out->forward_allgathers = k * units;
	out->backward_allgathers = k * out->backward_allgathers_per_microbatch;
	out->allgathers = out->forward_allgathers + out->backward_allgathers;
	out->reduce_scatters = syncs * units;
	out->hsdp_allreduces = n / s > 1 ? syncs * units : 0;
	out->loss_allreduces = 1;
	out->clip_allreduces = cfg->clip_grad ? 1 : 0;
	out->allreduces = out->hsdp_allreduces + out->loss_allreduces + out->clip_allreduces;
	out->init_broadcasts = units * (n / s > 1 ? 2 : 1);
	out->eval_allgathers = units;
	out->eval_allreduces = 1;
	out->checkpoint_allgathers = 2;
	out->checkpoint_broadcasts = 2;
	out->checkpoint_allreduces = 1;
	out->tp = t;
	out->dp = n;
	if (t > 1) {
		int per_pass = 2 * cfg->layers; /* one gather and one reduction per block half */
		out->tp_replicated_units = replicated_units(&spec);
		out->tp_allgathers = k * 2 * per_pass;
		out->tp_reduce_scatters = k * 2 * per_pass;
		out->tp_clip_allreduces = cfg->clip_grad ? 1 : 0;
		out->tp_allreduces = k * out->tp_replicated_units + out->tp_clip_allreduces;
		out->eval_tp_allgathers = per_pass;
		out->eval_tp_reduce_scatters = per_pass;
	}
	return 0;
}
