/*
 * tests/e2e/stream_job_tp_seq.c - tp with --seq-lens: torchtitan 2-D (FSDP2
 * on dp, sequence parallel on tp) whose sequence length changes from step to
 * step, as a dataloader that pads each batch to its longest sample gives
 * (stream_job.md, "tp --seq-lens").
 *
 * The stream is tp's (stream_job_fsdp2.c, run_tp), step by step the same
 * calls; only the sizes of the activation collectives on tp follow the
 * step's sequence: B x S/T x H for the sequence-parallel gathers and
 * reduce-scatters, B x S for loss parallel's all-reduces, B x S x V/T for the
 * logits gather without it. The FSDP group's gathers move parameters and do
 * not change.
 */
#include "stream_job.h"

void run_tp_seq(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int T = o->tp, dp_rank = j->rank / T, tp_rank = j->rank % T;
	struct sj_comm *world = sj_comm_world(j, ROLE_ONE_OFF, "world");
	struct sj_comm *dp = sj_comm_split(j, world, tp_rank, ROLE_FSDP, "dp");
	struct sj_comm *tp = sj_comm_split(j, world, dp_rank, ROLE_TENSOR_PARALLEL, "tp");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, dp, tp, 4 + 8 * o->layers, 1);
	const struct sj_param *emb[] = {&sj_tok_embeddings};
	int tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 1);
	for (int b = 0; b < o->layers; b++)
		fsdp2_add_block(&f, b, b < o->layers - 1 || o->reshard_last_block);
	const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
	int head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 0);
	size_t tp_elements_min = (size_t)-1, tp_elements_max = 0;
	for (int s = 0; s < o->steps; s++) {
		size_t seq = (size_t)o->seq_lens[s % o->nseq];
		size_t tokens = (size_t)SJ_BATCH * seq;
		f.activation_count = tokens / (size_t)T * SJ_HIDDEN;
		if (f.activation_count < tp_elements_min)
			tp_elements_min = f.activation_count;
		if (f.activation_count > tp_elements_max)
			tp_elements_max = f.activation_count;
		sj_step_begin(j, s);
		fsdp2_step_reset(&f);
		for (int mb = 0; mb < o->accum; mb++) {
			f.reduce_grads = !(o->no_sync && mb < o->accum - 1);
			j->phase = "forward";
			fsdp2_pre_forward(&f, tok);
			tp_reduce_scatter(&f);
			fsdp2_post_forward(&f, tok);
			for (int b = 0; b < o->layers; b++)
				fsdp2_block_forward(&f, b);
			fsdp2_pre_forward(&f, head);
			tp_gather(&f);
			sj_compute(j, 1);
			fsdp2_post_forward(&f, head);
			if (o->loss_parallel) {
				sj_allreduce(j, tp, tokens, ncclFloat32, ncclMax, 0);
				sj_allreduce(j, tp, tokens, ncclFloat32, ncclSum, 0);
				sj_allreduce(j, tp, tokens, ncclFloat32, ncclSum, 0);
			} else {
				sj_allgather(j, tp, tokens * (SJ_VOCAB / (size_t)T), ncclBfloat16, KIND_OTHER);
			}
			j->phase = "backward";
			fsdp2_pre_backward(&f, head);
			sj_compute(j, 2);
			tp_reduce_scatter(&f);
			fsdp2_post_backward(&f, head);
			for (int b = o->layers - 1; b >= 0; b--)
				fsdp2_block_backward(&f, b);
			fsdp2_pre_backward(&f, tok);
			tp_gather(&f);
			fsdp2_post_backward(&f, tok);
			fsdp2_end_backward(&f);
		}
		j->phase = "optimizer";
		sj_allreduce(j, dp, 1, ncclFloat32, ncclSum, 1);
		sj_allreduce(j, tp, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, o->accum);
	t->microbatches = o->accum;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0 || (o->no_sync && o->accum > 1);
	char lens[96] = "";
	for (int i = 0; i < o->nseq; i++) {
		size_t len = strlen(lens);
		snprintf(lens + len, sizeof lens - len, "%s%d", i ? ", " : "", o->seq_lens[i]);
	}
	sj_truth_extra(t, "\"sequence_lengths\": [%s]", lens);
	sj_truth_extra(t, "\"tp_sizes_vary\": %s", tp_elements_min != tp_elements_max ? "true" : "false");
	sj_note(t,
		"dp %d x tp %d; the sequence changes step by step (%s tokens): the tp collectives move %zu to %zu "
		"elements per rank, the dp gathers do not change",
		dp->nranks, T, lens, tp_elements_min, tp_elements_max);
	fsdp2_free(&f);
}
