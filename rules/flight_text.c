/*
 * flight_text.c - calls in flight in words (flight_text.h).
 */
#include "rules/flight_text.h"

#include "common/record.h"
#include "rules/rules.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int flight_shows_waits(const struct analysis_result *a)
{
	return a->flight.sources_enter > 0 || a->flight.sources_cupti > 0;
}

const struct source_summary *flight_source(const struct analysis_result *a, uint32_t source)
{
	for (uint32_t i = 0; a->sources && i < a->nsources; i++)
		if (a->sources[i].source == source)
			return &a->sources[i];
	return NULL;
}

const struct analysis_comm *flight_comm(const struct analysis_result *a, uint64_t id)
{
	for (uint32_t i = 0; i < a->ncomms && i < ANALYSIS_COMMS_MAX; i++)
		if (a->comms[i].id == id)
			return &a->comms[i];
	return NULL;
}

const char *flight_evidence_name(int evidence)
{
	switch (evidence) {
	case ANALYSIS_WAIT_HOST:
		return "host";
	case ANALYSIS_WAIT_GPU:
		return "gpu";
	case ANALYSIS_WAIT_SYNC:
		return "sync";
	default:
		return "none";
	}
}

const char *flight_wait_end_name(int end)
{
	switch (end) {
	case ANALYSIS_WAIT_GAVE_UP:
		return "gave-up";
	case ANALYSIS_WAIT_DIED:
		return "died";
	default:
		return "waiting";
	}
}

const char *flight_nccl_result_name(int32_t result, char *buf, size_t len)
{
	/* nccl.h's ncclResult_t, in its order */
	static const char *const names[] = {"ncclSuccess",	 "ncclUnhandledCudaError", "ncclSystemError",
					    "ncclInternalError", "ncclInvalidArgument",	   "ncclInvalidUsage",
					    "ncclRemoteError",	 "ncclInProgress"};

	if (result >= 0 && (size_t)result < sizeof(names) / sizeof(names[0]))
		return names[result];
	snprintf(buf, len, "ncclResult %" PRId32, result);
	return buf;
}

char *flight_hang_end_text(const struct analysis_hang *h, char *buf, size_t len)
{
	uint32_t n = h->nwaiting < ANALYSIS_FLIGHT_RANKS_MAX ? h->nwaiting : ANALYSIS_FLIGHT_RANKS_MAX;
	int32_t gave_up[ANALYSIS_FLIGHT_RANKS_MAX] = {0};
	uint32_t ngave = 0;
	int32_t result = 0;
	char list[200], name[32];

	if (len)
		buf[0] = 0;
	if (h->ended == ANALYSIS_WAIT_ON)
		return buf;
	if (h->ended == ANALYSIS_WAIT_DIED) {
		snprintf(buf, len,
			 "the waiting ranks died inside it (their processes ended): the hang ended with them, "
			 "no rank arrived");
		return buf;
	}
	for (uint32_t i = 0; i < n; i++)
		if (h->waiting[i].end == ANALYSIS_WAIT_GAVE_UP) {
			if (!ngave)
				result = h->waiting[i].result;
			gave_up[ngave++] = h->waiting[i].rank;
		}
	snprintf(buf, len,
		 "the waiting ranks gave up (NCCL error %s on rank%s %s%s): the job's own timeout ended the hang, no "
		 "rank arrived",
		 flight_nccl_result_name(result, name, sizeof(name)), ngave == 1 ? "" : "s",
		 flight_int_list(gave_up, ngave, ngave, list, sizeof(list)),
		 ngave < h->nwaiting ? "; the others died" : "");
	return buf;
}

char *flight_comm_text(const struct analysis_result *a, uint64_t id, int32_t nranks, char *buf, size_t len)
{
	const struct analysis_comm *c = flight_comm(a, id);
	size_t off = (size_t)snprintf(buf, len, "%016" PRIx64 " (", id);

	if (off >= len)
		return buf;
	if (c && c->role != ANALYSIS_ROLE_UNKNOWN)
		off += (size_t)snprintf(buf + off, len - off, "%s, ", analysis_comm_role_name(c->role));
	if (off < len && c && c->name[0])
		off += (size_t)snprintf(buf + off, len - off, "\"%s\", ", c->name);
	if (off < len)
		snprintf(buf + off, len - off, "%" PRId32 " rank%s)", nranks, nranks == 1 ? "" : "s");
	return buf;
}

char *flight_rank_text(const struct analysis_result *a, const struct analysis_flight_rank *r, char *buf, size_t len)
{
	const struct source_summary *s = flight_source(a, r->source);

	if (s && s->host[0])
		snprintf(buf, len, "rank %" PRId32 " (host %s, pid %" PRIu32 ")", r->rank, s->host, r->pid);
	else
		snprintf(buf, len, "rank %" PRId32 " (pid %" PRIu32 ")", r->rank, r->pid);
	return buf;
}

/* The tail of a list of ranks: "and K more". */
static void list_more(char *buf, size_t len, size_t off, uint32_t n, uint32_t total)
{
	if (off < len && total > n)
		snprintf(buf + off, len - off, " and %" PRIu32 " more", total - n);
}

char *flight_int_list(const int32_t *ranks, uint32_t n, uint32_t total, char *buf, size_t len)
{
	size_t off = 0;

	if (len)
		buf[0] = 0;
	if (n > ANALYSIS_FLIGHT_RANKS_MAX)
		n = ANALYSIS_FLIGHT_RANKS_MAX;
	for (uint32_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%" PRId32, i ? ", " : "", ranks[i]);
	list_more(buf, len, off, n, total);
	return buf;
}

char *flight_rank_list(const struct analysis_flight_rank *list, uint32_t n, uint32_t total, char *buf, size_t len)
{
	int32_t ranks[ANALYSIS_FLIGHT_RANKS_MAX];

	if (n > ANALYSIS_FLIGHT_RANKS_MAX)
		n = ANALYSIS_FLIGHT_RANKS_MAX;
	for (uint32_t i = 0; i < n; i++)
		ranks[i] = list[i].rank;
	return flight_int_list(ranks, n, total, buf, len);
}

char *flight_collective_text(const struct analysis_hang *h, char *buf, size_t len)
{
	if (h->dtype == FSS_DTYPE_UNKNOWN)
		snprintf(buf, len, "#%" PRIu64 " (%s)", h->comm_seq, record_op_name(h->op));
	else
		snprintf(buf, len, "#%" PRIu64 " (%s, count %" PRIu64 ", %s)", h->comm_seq, record_op_name(h->op),
			 h->count, record_dtype_name(h->dtype));
	return buf;
}

/* Collectives whose root is part of what the ranks must agree on. */
static int op_has_root(uint8_t op)
{
	return op == FSS_OP_BROADCAST || op == FSS_OP_REDUCE || op == FSS_OP_GATHER || op == FSS_OP_SCATTER;
}

/* Collectives that reduce, with a reduction op. */
static int op_has_redop(uint8_t op)
{
	return op == FSS_OP_ALLREDUCE || op == FSS_OP_REDUCESCATTER || op == FSS_OP_REDUCE;
}

char *flight_signature_text(const struct analysis_signature *s, char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "%s count %" PRIu64, record_op_name(s->op), s->count);

	if (off < len && s->dtype != FSS_DTYPE_UNKNOWN)
		off += (size_t)snprintf(buf + off, len - off, " %s", record_dtype_name(s->dtype));
	if (off < len && (op_has_root(s->op) || s->root >= 0))
		off += (size_t)snprintf(buf + off, len - off, " root %" PRId32, s->root);
	if (off < len && op_has_redop(s->op) && s->redop != FSS_REDOP_NONE)
		snprintf(buf + off, len - off, " redop %s", record_redop_name(s->redop));
	return buf;
}

char *flight_hang_line(const struct analysis_result *a, const struct analysis_hang *h, char *buf, size_t len)
{
	char comm[160], who[320] = "", died[320] = "", waiting[200], waited[32], ended[320] = "";
	uint32_t nm = h->nmissing < ANALYSIS_FLIGHT_RANKS_MAX ? h->nmissing : ANALYSIS_FLIGHT_RANKS_MAX;
	size_t off = 0;

	for (uint32_t i = 0; i < nm && off < sizeof(who); i++) {
		char one[128];

		off += (size_t)snprintf(who + off, sizeof(who) - off, "%s%s%s%s%s%s", i ? ", " : "",
					flight_rank_text(a, &h->missing[i], one, sizeof(one)),
					h->missing[i].late ? " (came only after the others gave up)" : "",
					h->missing[i].evidence ? " (itself waiting elsewhere: " : "",
					h->missing[i].evidence ? flight_evidence_name(h->missing[i].evidence) : "",
					h->missing[i].evidence ? ")" : "");
	}
	if (off < sizeof(who) && h->nmissing > nm)
		snprintf(who + off, sizeof(who) - off, " and %" PRIu32 " more", h->nmissing - nm);
	off = 0;
	for (uint32_t i = 0; i < h->ndied && i < ANALYSIS_FLIGHT_RANKS_MAX && off < sizeof(died); i++) {
		char one[128];

		off += (size_t)snprintf(died + off, sizeof(died) - off, "%s%s", i ? ", " : "",
					flight_rank_text(a, &h->died[i], one, sizeof(one)));
	}
	flight_comm_text(a, h->comm_id, h->nranks, comm, sizeof(comm));
	flight_rank_list(h->waiting, h->nwaiting, h->nwaiting, waiting, sizeof(waiting));
	rule_format_ns((double)h->waited_ns, waited, sizeof(waited));
	if (h->ended) {
		size_t at = (size_t)snprintf(ended, sizeof(ended), "; ");

		flight_hang_end_text(h, ended + at, sizeof(ended) - at);
	}
	if (h->nmissing)
		snprintf(buf, len,
			 "%smissing %s; collective #%" PRIu64 " (%s) of communicator %s; rank%s %s %s waited %s (%s)%s",
			 h->cascade ? "follows from another hang: " : "", who, h->comm_seq, record_op_name(h->op), comm,
			 h->nwaiting == 1 ? "" : "s", waiting, h->nwaiting == 1 ? "has" : "have", waited,
			 flight_evidence_name(h->nwaiting ? h->waiting[0].evidence : 0), ended);
	else if (h->ndied)
		snprintf(buf, len,
			 "no rank missing: %s died inside collective #%" PRIu64
			 " (%s) of communicator %s; rank%s %s %s "
			 "waited %s (%s) for %s%s",
			 died, h->comm_seq, record_op_name(h->op), comm, h->nwaiting == 1 ? "" : "s", waiting,
			 h->nwaiting == 1 ? "has" : "have", waited,
			 flight_evidence_name(h->nwaiting ? h->waiting[0].evidence : 0), h->ndied == 1 ? "it" : "them",
			 ended);
	else if (h->nranks > 0 && h->nwaiting < (uint32_t)h->nranks)
		snprintf(
		    buf, len,
		    "no rank of this trace missing: the %" PRIu32 " of %" PRId32
		    " ranks here entered collective #%" PRIu64
		    " (%s) of communicator %s and none came out, the others are another node's; rank%s %s %s waited "
		    "%s (%s)%s",
		    h->nwaiting, h->nranks, h->comm_seq, record_op_name(h->op), comm, h->nwaiting == 1 ? "" : "s",
		    waiting, h->nwaiting == 1 ? "has" : "have", waited,
		    flight_evidence_name(h->nwaiting ? h->waiting[0].evidence : 0), ended);
	else
		snprintf(buf, len,
			 "no rank missing: every rank entered collective #%" PRIu64 " (%s) of communicator %s and "
			 "none came out; rank%s %s %s waited %s (%s)%s",
			 h->comm_seq, record_op_name(h->op), comm, h->nwaiting == 1 ? "" : "s", waiting,
			 h->nwaiting == 1 ? "has" : "have", waited,
			 flight_evidence_name(h->nwaiting ? h->waiting[0].evidence : 0), ended);
	return buf;
}

char *flight_mismatch_line(const struct analysis_result *a, const struct analysis_mismatch *m, char *buf, size_t len)
{
	char comm[160], ra[200], rb[200], sa[96], sb[96];

	flight_comm_text(a, m->comm_id, m->nranks, comm, sizeof(comm));
	flight_int_list(m->a_ranks, m->na, m->na, ra, sizeof(ra));
	flight_int_list(m->b_ranks, m->nb, m->nb, rb, sizeof(rb));
	snprintf(buf, len, "communicator %s, collective #%" PRIu64 ": rank%s %s issued %s; rank%s %s issued %s%s", comm,
		 m->comm_seq, m->na == 1 ? "" : "s", ra, flight_signature_text(&m->a, sa, sizeof(sa)),
		 m->nb == 1 ? "" : "s", rb, flight_signature_text(&m->b, sb, sizeof(sb)),
		 m->others ? " (and other ranks something else)" : "");
	return buf;
}
