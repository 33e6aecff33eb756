/*
 * flight_gpu.c - NCCL kernels tied to their calls (flight_gpu.h).
 */
#include "collector/flight_gpu.h"

/* CUPTI reported the kernel of the call seq (or of the group it opens):
 * it completed, and every call before it on its communicator. */
static void kernel_done(struct fl_source *fs, uint64_t seq)
{
	const struct fl_seq *e = &fs->seqs[seq % FL_SEQ_WINDOW];

	if (e->seq != seq || e->rc >= fs->nrcs)
		return;
	fs->cupti_tied = 1;
	if (!e->group_id) {
		if (e->comm_seq > fs->rcs[e->rc].gpu_done)
			fs->rcs[e->rc].gpu_done = e->comm_seq;
		return;
	}
	/* a group launches at ncclGroupEnd, tied to its first seq */
	for (size_t i = 0; i < fs->nrcs; i++) {
		struct fl_rank_comm *rc = &fs->rcs[i];

		for (unsigned j = 0; j < FL_CALL_RING; j++)
			if (rc->calls[j].comm_seq && rc->calls[j].group_id == e->group_id &&
			    rc->calls[j].comm_seq > rc->gpu_done)
				rc->gpu_done = rc->calls[j].comm_seq;
	}
}

static uint64_t untied_take(struct fl_untied *v, uint32_t corr)
{
	for (unsigned i = 0; i < FL_UNTIED_MAX; i++)
		if (v[i].corr == corr) {
			uint64_t seq = v[i].seq;

			v[i].corr = 0;
			return seq ? seq : 1;
		}
	return 0;
}

void flight_gpu_interval(struct fl_source *fs, const struct fss_rec_gpu_interval *g)
{
	uint64_t off = fs->src->have_cupti_anchor ? (uint64_t)fs->src->cupti_offset : 0;
	uint64_t end = fs->src->have_cupti_anchor ? g->end_ns + off : fs->src->last_ns;
	uint64_t seq = g->collective_seq;

	fs->has_gpu = 1;
	if (end > fs->gpu_latest_end)
		fs->gpu_latest_end = end;
	if (g->kind == FSS_GPU_COMPUTE)
		return;
	if (!seq && g->correlation_id) {
		uint64_t s = untied_take(fs->corrs, g->correlation_id);

		seq = s > 1 ? s : 0;
	}
	if (seq) {
		kernel_done(fs, seq);
		return;
	}
	if (g->kind != FSS_GPU_COMM)
		return;
	/* an NCCL kernel CUPTI could not tie (yet): a call launched before it
	 * started may be the one it ran, so no call before it is taken as stuck */
	uint64_t start = fs->src->have_cupti_anchor ? g->start_ns + off : fs->src->last_ns;

	if (start > fs->untied_start)
		fs->untied_start = start;
	if (g->correlation_id) {
		fs->untied[fs->untied_at] = (struct fl_untied){.corr = g->correlation_id};
		fs->untied_at = (fs->untied_at + 1) % FL_UNTIED_MAX;
	}
}

void flight_gpu_correlation(struct fl_source *fs, const struct fss_rec_correlation *c)
{
	if (!c->collective_seq || !c->correlation_id)
		return;
	if (untied_take(fs->untied, c->correlation_id)) {
		kernel_done(fs, c->collective_seq);
		return;
	}
	fs->corrs[fs->corr_at] = (struct fl_untied){.corr = c->correlation_id, .seq = c->collective_seq};
	fs->corr_at = (fs->corr_at + 1) % FL_UNTIED_MAX;
}
