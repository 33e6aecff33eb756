/*
 * collective_mismatch.c - rule collective-mismatch: ranks of one
 * communicator issued different collectives as its N-th (op, count, dtype,
 * root or reduction op differ): a desync.
 *
 * The analysis of calls in flight (result->flight) compares what every rank
 * issued at each sequence number of each communicator, from the enter
 * records too, so that a mismatch is seen even when the calls never return
 * (NCCL hangs or errors out on one). One finding per mismatch, with both
 * signatures and the ranks of each: the ranks of the smaller group are the
 * ones that took another path, usually.
 */
#include "rules/flight_text.h"
#include "rules/rules.h"

#include "common/record.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What differs between a and b, in words: "count 1000 vs 999". */
static void differences(const struct analysis_signature *a, const struct analysis_signature *b, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	if (a->op != b->op && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%sop %s vs %s", off ? ", " : "", record_op_name(a->op),
					record_op_name(b->op));
	if (a->count != b->count && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%scount %" PRIu64 " vs %" PRIu64, off ? ", " : "",
					a->count, b->count);
	if (a->dtype != b->dtype && a->dtype != FSS_DTYPE_UNKNOWN && b->dtype != FSS_DTYPE_UNKNOWN && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%sdtype %s vs %s", off ? ", " : "",
					record_dtype_name(a->dtype), record_dtype_name(b->dtype));
	if (a->root != b->root && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%sroot %" PRId32 " vs %" PRId32, off ? ", " : "",
					a->root, b->root);
	if (a->redop != b->redop && off < len)
		snprintf(buf + off, len - off, "%sredop %s vs %s", off ? ", " : "", record_redop_name(a->redop),
			 record_redop_name(b->redop));
	if (!buf[0] && len)
		snprintf(buf, len, "the signatures differ");
}

static int one_mismatch(const struct rule *self, const struct analysis_result *a, const struct analysis_mismatch *m,
			int last, findings_t *out)
{
	const struct analysis_flight *fl = &a->flight;
	const struct source_summary *bs = flight_source(a, m->b_source);
	char comm[200], sa[96], sb[96], ra[200], rb[200], diff[160], more[160] = "", host[160] = "";
	char *message, *evidence, *fsdp2;
	struct finding *f;

	flight_comm_text(a, m->comm_id, m->nranks, comm, sizeof(comm));
	flight_signature_text(&m->a, sa, sizeof(sa));
	flight_signature_text(&m->b, sb, sizeof(sb));
	flight_int_list(m->a_ranks, m->na, m->na, ra, sizeof(ra));
	flight_int_list(m->b_ranks, m->nb, m->nb, rb, sizeof(rb));
	differences(&m->a, &m->b, diff, sizeof(diff));
	if (bs && bs->host[0])
		snprintf(host, sizeof(host), " (its first rank: host %s, pid %" PRIu32 ")", bs->host, bs->pid);
	else if (bs)
		snprintf(host, sizeof(host), " (its first rank: pid %" PRIu32 ")", bs->pid);
	if (last && (fl->mismatches_total > fl->nmismatches || fl->mismatched_collectives > fl->mismatches_total))
		snprintf(more, sizeof(more), "\n%" PRIu64 " mismatched collectives in all (%" PRIu32 " listed)",
			 fl->mismatched_collectives > fl->mismatches_total ? fl->mismatched_collectives
									   : (uint64_t)fl->mismatches_total,
			 fl->nmismatches);
	message =
	    finding_printf("ranks of communicator %016" PRIx64 " issued different collectives as #%" PRIu64
			   ": %s on rank%s %s, %s on rank%s %s (%s)",
			   m->comm_id, m->comm_seq, sa, m->na == 1 ? "" : "s", ra, sb, m->nb == 1 ? "" : "s", rb, diff);
	evidence = finding_printf("communicator %s, collective #%" PRIu64 "\n"
				  "signature a: %s, issued by %" PRIu32 " rank%s: %s\n"
				  "signature b: %s, issued by %" PRIu32 " rank%s: %s%s\n"
				  "%s%s",
				  comm, m->comm_seq, sa, m->na, m->na == 1 ? "" : "s", ra, sb, m->nb,
				  m->nb == 1 ? "" : "s", rb, host, m->others ? "" : "no rank issued a third signature",
				  m->others ? "other ranks issued a third signature (not listed)" : "");
	if (evidence && more[0]) {
		char *e = finding_printf("%s%s", evidence, more);

		free(evidence);
		evidence = e;
	}
	/* Not an FSDP setting: the same advice for every framework. */
	fsdp2 = finding_printf(
	    "# The ranks ran different code at this point. Look for:\n"
	    "#  - a collective under a condition that differs per rank: `if rank == 0: dist.all_reduce(...)`,\n"
	    "#    logging or metrics that reduce on some ranks only, an early exit from a loop\n"
	    "#  - different model configs or shapes per rank (a config read from a per-node file,\n"
	    "#    uneven last batches): every rank must build the same model\n"
	    "#  - a wrap policy that differs per rank (fully_shard applied to other modules, or in\n"
	    "#    another order): apply the same policy on every rank, before any forward\n"
	    "# PyTorch can check this at every call (slow; for debugging only):\n"
	    "#   export TORCH_DISTRIBUTED_DEBUG=DETAIL      # collective fingerprints compared across ranks\n"
	    "#   export TORCH_NCCL_TRACE_BUFFER_SIZE=2000   # Flight Recorder: sequence ids per process group");
	f = findings_take(out, self, RULE_ERROR, message, evidence, fsdp2, NULL, NULL);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "comm_seq", (double)m->comm_seq);
	finding_metric(f, "nranks", m->nranks);
	finding_metric(f, "a_ranks", m->na);
	finding_metric(f, "b_ranks", m->nb);
	finding_metric(f, "a_count", (double)m->a.count);
	finding_metric(f, "b_count", (double)m->b.count);
	finding_metric(f, "a_op", m->a.op);
	finding_metric(f, "b_op", m->b.op);
	if (m->nb)
		finding_metric(f, "first_b_rank", m->b_ranks[0]);
	finding_metric(f, "mismatched_collectives", (double)fl->mismatched_collectives);
	return 0;
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c, findings_t *out)
{
	const struct analysis_flight *fl = &a->flight;
	uint32_t n = fl->nmismatches < ANALYSIS_MISMATCHES_MAX ? fl->nmismatches : ANALYSIS_MISMATCHES_MAX;

	(void)c;
	for (uint32_t i = 0; i < n; i++) {
		int err = one_mismatch(self, a, &fl->mismatches[i], i + 1 == n, out);

		if (err)
			return err;
	}
	return 0;
}

const struct rule rule_collective_mismatch = {
    .id = "collective-mismatch",
    .title = "Ranks issued different collectives at the same point (a desync)",
    .explanation = "Every rank of a communicator must issue the same sequence of collectives with the same "
		   "arguments: NCCL matches them by order alone. When the N-th collective differs between ranks "
		   "(another operation, another element count or dtype, another root), the ranks took different "
		   "code paths: NCCL then hangs, corrupts data silently (a count that still fits the buffers) or "
		   "fails, depending on what differs. Compared per communicator and sequence number, as PyTorch's "
		   "Flight Recorder matches collectives by process group and sequence id; point-to-point calls "
		   "are left out (the two sides of a send differ by nature).",
    .max_severity = RULE_ERROR,
    .check = check,
};
