/* fsdp_ref/units.c: FSDP units and their flat layout (see units.h).
 *
 * The unit order is FSDP2's: with --wrap linear, block l contributes its
 * "rest" unit (gathered at the block's pre-forward, resharded at its
 * post-forward) and then q, k, v, o, gate, up, down, each gathered right
 * before it runs; backward mirrors it: rest, down, up, gate, o, v, k, q. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/units.h"

static const struct model_module root_module = {-1, -1};

static struct model_module block_mod(int l)
{
	return (struct model_module){l, -1};
}

struct builder {
	struct unit_table *t;
	const struct model_tensor *tensors;
	int shard_ranks;
};

static size_t round_up(size_t n, size_t m)
{
	return (n + m - 1) / m * m;
}

static int new_unit(struct builder *b, const char *name, struct model_module fo, struct model_module fc,
		    struct model_module bo, struct model_module bc)
{
	struct unit_table *t = b->t;
	int u = t->nunits++;
	struct unit_info *ui = &t->units[u];
	snprintf(ui->name, sizeof ui->name, "%s", name);
	ui->is_root = u == 0;
	ui->fwd_open = fo;
	ui->fwd_close = fc;
	ui->bwd_open = bo;
	ui->bwd_close = bc;
	t->fwd_open[model_module_index(fo)] = u;
	t->fwd_close[model_module_index(fc)] = u;
	t->bwd_open[model_module_index(bo)] = u;
	t->bwd_close[model_module_index(bc)] = u;
	return u;
}

/* Membership only: the offsets are laid out once every unit is known. */
static void add_tensor(struct builder *b, int u, int id)
{
	b->t->tensor_unit[id] = u;
	b->t->units[u].numel += b->tensors[id].numel;
}

static void add_layer(struct builder *b, int u, int l)
{
	for (int p = 0; p < MODEL_PARTS; p++)
		add_tensor(b, u, model_tensor_id(l, p));
}

/* Offsets, each tensor at a multiple of UNITS_ALIGN: in each unit its
 * tensors in id order; with TP the split ones first, then the replicated
 * ones, whose span is recorded. (Without TP the order stays the plain one:
 * the clip norm sums the shard in layout order, and its bits would move.) */
static void lay_out(struct builder *b, int tp)
{
	struct unit_table *t = b->t;
	/* pass 0: split tensors, 1: replicated ones; without TP one pass, all */
	for (int pass = 0; pass < (tp > 1 ? 2 : 1); pass++) {
		for (int id = 0; id < t->ntensors; id++) {
			int replicated = b->tensors[id].split == MODEL_TP_REPLICATED;
			if (tp > 1 && replicated != pass)
				continue;
			struct unit_info *ui = &t->units[t->tensor_unit[id]];
			t->tensor_offset[id] = ui->padded;
			if (tp > 1 && replicated) {
				if (ui->replicated_begin == ui->replicated_end)
					ui->replicated_begin = ui->padded;
				ui->replicated_end = ui->padded + b->tensors[id].numel;
			}
			ui->padded = round_up(ui->padded + b->tensors[id].numel, UNITS_ALIGN);
		}
	}
}

void units_free(struct unit_table *t)
{
	if (!t)
		return;
	free(t->units);
	free(t->tensor_unit);
	free(t->tensor_offset);
	free(t->fwd_open);
	free(t->fwd_close);
	free(t->bwd_open);
	free(t->bwd_close);
	free(t->bwd_order);
	free(t->bwd_pos);
	free(t);
}

struct unit_table *units_build(const struct model_config *cfg, const struct wrap_spec *spec, int shard_ranks)
{
	struct unit_table *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	int max_units = wrap_unit_count(spec);
	t->ntensors = model_tensor_count(cfg);
	t->nmodules = model_modules(cfg);
	struct model_tensor *tensors = calloc((size_t)t->ntensors, sizeof *tensors);
	t->units = calloc((size_t)max_units, sizeof *t->units);
	t->tensor_unit = calloc((size_t)t->ntensors, sizeof *t->tensor_unit);
	t->tensor_offset = calloc((size_t)t->ntensors, sizeof *t->tensor_offset);
	t->fwd_open = malloc((size_t)t->nmodules * sizeof(int));
	t->fwd_close = malloc((size_t)t->nmodules * sizeof(int));
	t->bwd_open = malloc((size_t)t->nmodules * sizeof(int));
	t->bwd_close = malloc((size_t)t->nmodules * sizeof(int));
	t->bwd_order = calloc((size_t)max_units, sizeof(int));
	t->bwd_pos = calloc((size_t)max_units, sizeof(int));
	if (!tensors || !t->units || !t->tensor_unit || !t->tensor_offset || !t->fwd_open || !t->fwd_close ||
	    !t->bwd_open || !t->bwd_close || !t->bwd_order || !t->bwd_pos) {
		free(tensors);
		units_free(t);
		return NULL;
	}
	for (int i = 0; i < t->nmodules; i++)
		t->fwd_open[i] = t->fwd_close[i] = t->bwd_open[i] = t->bwd_close[i] = -1;
	model_tensors(cfg, tensors);
	struct builder b = {t, tensors, shard_ranks};

	int root = new_unit(&b, "root", root_module, root_module, root_module, root_module);
	for (int id = 0; id < MODEL_ROOT_TENSORS; id++)
		add_tensor(&b, root, id);
	if (spec->model) {
		for (int l = 0; l < cfg->layers; l++)
			add_layer(&b, root, l);
	}
	int nb = 1;
	t->bwd_order[0] = root;
	for (int r = 0; !spec->model && r < spec->nranges; r++) {
		const struct wrap_range *wr = &spec->ranges[r];
		char name[32];
		for (int l = wr->first; l <= wr->last;) {
			if (wr->policy == WRAP_BLOCK) {
				snprintf(name, sizeof name, "layers.%d", l);
				int u = new_unit(&b, name, block_mod(l), block_mod(l), block_mod(l), block_mod(l));
				add_layer(&b, u, l);
				l++;
			} else if (wr->policy == WRAP_GROUP) {
				int last = l + wr->group - 1 > wr->last ? wr->last : l + wr->group - 1;
				if (last == l)
					snprintf(name, sizeof name, "layers.%d", l);
				else
					snprintf(name, sizeof name, "layers.%d-%d", l, last);
				int u =
				    new_unit(&b, name, block_mod(l), block_mod(last), block_mod(last), block_mod(l));
				for (int k = l; k <= last; k++)
					add_layer(&b, u, k);
				l = last + 1;
			} else { /* WRAP_LINEAR */
				snprintf(name, sizeof name, "layers.%d", l);
				int u = new_unit(&b, name, block_mod(l), block_mod(l), block_mod(l), block_mod(l));
				add_tensor(&b, u, model_tensor_id(l, MODEL_PART_ATTN_NORM));
				add_tensor(&b, u, model_tensor_id(l, MODEL_PART_MLP_NORM));
				for (int p = 0; p < MODEL_LINEARS; p++) {
					struct model_module m = {l, p};
					u = new_unit(&b, tensors[model_tensor_id(l, p)].name, m, m, m, m);
					add_tensor(&b, u, model_tensor_id(l, p));
				}
				l++;
			}
		}
	}
	/* Backward order: the order in which pre-backward hooks run. The model's
	 * backward visits the root, then blocks from the last, and inside a block
	 * the block module before its linears in reverse (down ... q). */
	for (int l = cfg->layers - 1; !spec->model && l >= 0; l--) {
		int u = t->bwd_open[model_module_index(block_mod(l))];
		if (u >= 0)
			t->bwd_order[nb++] = u;
		for (int p = MODEL_LINEARS - 1; p >= 0; p--) {
			u = t->bwd_open[model_module_index((struct model_module){l, p})];
			if (u >= 0)
				t->bwd_order[nb++] = u;
		}
	}
	lay_out(&b, model_tp_size(cfg));
	for (int i = 0; i < t->nunits; i++) {
		struct unit_info *ui = &t->units[i];
		ui->padded = round_up(ui->padded, (size_t)UNITS_ALIGN * (size_t)shard_ranks);
		ui->shard = ui->padded / (size_t)shard_ranks;
		if (ui->numel > t->largest_unit)
			t->largest_unit = ui->numel;
		t->bwd_pos[t->bwd_order[i]] = i;
	}
	free(tensors);
	return t;
}
