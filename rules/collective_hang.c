/*
 * collective_hang.c - rule collective-hang: ranks wait inside collective #N
 * of a communicator for longer than --hang-timeout while others have not
 * entered it (or every rank entered and none has come out).
 *
 * The analysis of calls in flight (result->flight, docs/hangs.md) decides
 * the hang from the ranks' enter records, their GPU kernels and their
 * synchronizes; this rule only words it, one finding per hang: who is
 * missing (rank, host, pid, the last collective each completed and how long
 * ago), who waits and since when, and what to look at. A collective is
 * named as PyTorch's Flight Recorder names it: by its process group
 * (communicator) and its sequence number there.
 */
#include "rules/flight_text.h"
#include "rules/rules.h"

#include "common/record.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The missing ranks, one line each: rank, host, pid, last collective. */
static void missing_lines(const struct analysis_result *a, const struct analysis_hang *h, char *buf, size_t len)
{
	uint32_t n = h->nmissing < ANALYSIS_FLIGHT_RANKS_MAX ? h->nmissing : ANALYSIS_FLIGHT_RANKS_MAX;
	size_t off = 0;

	buf[0] = 0;
	for (uint32_t i = 0; i < n && off < len; i++) {
		const struct analysis_flight_rank *r = &h->missing[i];
		const struct source_summary *s = flight_source(a, r->source);
		char who[160], ago[32];

		flight_rank_text(a, r, who, sizeof(who));
		if (r->late)
			off += (size_t)snprintf(buf + off, len - off,
						"\n  %s: entered #%" PRIu64
						" only after the waiting ranks had given up on it "
						"(too late: it could not run any more)",
						who, h->comm_seq);
		else if (r->last_seq)
			off +=
			    (size_t)snprintf(buf + off, len - off,
					     "\n  %s: has not entered #%" PRIu64 "; its last completed collective here "
					     "is #%" PRIu64 " (%s), %s ago",
					     who, h->comm_seq, r->last_seq, record_op_name(r->last_op),
					     rule_format_ns((double)r->since_ns, ago, sizeof(ago)));
		else
			off +=
			    (size_t)snprintf(buf + off, len - off,
					     "\n  %s: has not entered #%" PRIu64 "; it completed no collective on this "
					     "communicator",
					     who, h->comm_seq);
		if (off < len && r->evidence)
			off += (size_t)snprintf(buf + off, len - off,
						"; it is itself waiting in a collective of another communicator (%s): "
						"blocked there, not the cause",
						flight_evidence_name(r->evidence));
		if (off < len && s && s->end != SOURCE_END_CUT_OFF && s->end != SOURCE_END_DETACHED && s->end != SOURCE_END_NOT_KNOWN)
			off += (size_t)snprintf(buf + off, len - off, " (its process ended: %s)",
						source_end_name((enum source_end)s->end));
	}
	if (off < len && h->nmissing > n)
		snprintf(buf + off, len - off, "\n  and %" PRIu32 " more ranks missing", h->nmissing - n);
}

/* The waiting ranks: the longest wait first, how it is known. */
static void waiting_lines(const struct analysis_result *a, const struct analysis_hang *h, char *buf, size_t len)
{
	uint32_t n = h->nwaiting < ANALYSIS_FLIGHT_RANKS_MAX ? h->nwaiting : ANALYSIS_FLIGHT_RANKS_MAX;
	size_t off = 0;

	buf[0] = 0;
	for (uint32_t i = 0; i < n && off < len; i++) {
		const struct analysis_flight_rank *r = &h->waiting[i];
		char who[160], since[32], name[32];

		off += (size_t)snprintf(
		    buf + off, len - off, "\n  %s: %s %s (%s)", flight_rank_text(a, r, who, sizeof(who)),
		    r->end == ANALYSIS_WAIT_ON ? "waiting for" : "waited",
		    rule_format_ns((double)r->since_ns, since, sizeof(since)),
		    r->end == ANALYSIS_WAIT_GAVE_UP	? "host: blocked in the call until it failed"
		    : r->evidence == ANALYSIS_WAIT_HOST ? "host: entered, not returned"
		    : r->evidence == ANALYSIS_WAIT_GPU	? "gpu: its NCCL kernel has not completed"
		    : r->evidence == ANALYSIS_WAIT_SYNC ? "sync: the host waits in a synchronize after it"
							: "how: not known");
		if (off < len && r->end == ANALYSIS_WAIT_GAVE_UP)
			off += (size_t)snprintf(buf + off, len - off,
						", then gave up: the call returned %s (the job's own timeout)",
						flight_nccl_result_name(r->result, name, sizeof(name)));
		else if (off < len && r->end == ANALYSIS_WAIT_DIED)
			off += (size_t)snprintf(buf + off, len - off, ", then died inside it (its process ended)");
	}
	if (off < len && h->nwaiting > n)
		snprintf(buf + off, len - off, "\n  and %" PRIu32 " more ranks waiting", h->nwaiting - n);
}

/* The ranks of list[0..total) as "rank 2 (host h, pid 4242)" for one,
 * "ranks 2, 3" for more. */
static char *who_text(const struct analysis_result *a, const struct analysis_flight_rank *list, uint32_t total,
		      char *buf, size_t len)
{
	char ranks[160];
	uint32_t n = total < ANALYSIS_FLIGHT_RANKS_MAX ? total : ANALYSIS_FLIGHT_RANKS_MAX;

	if (total == 1)
		return flight_rank_text(a, &list[0], buf, len);
	snprintf(buf, len, "ranks %s", flight_rank_list(list, n, total, ranks, sizeof(ranks)));
	return buf;
}

/* The finding's message: who never entered it (or died in it, or is not in
 * this trace) and who waited, how long, and how the waits ended. */
static char *hang_message(const struct analysis_result *a, const struct analysis_hang *h, const char *coll,
			  const char *waited, const char *ended)
{
	char who[200];
	const char *then = h->ended ? "; then " : "";

	if (h->nmissing)
		return finding_printf(
		    "collective %s on communicator %016" PRIx64 " %s: %s never entered it, and "
		    "%" PRIu32 " rank%s %s %s in it%s%s%s",
		    coll, h->comm_id, h->ended ? "hung" : "hangs",
		    who_text(a, h->missing, h->nmissing, who, sizeof(who)), h->nwaiting, h->nwaiting == 1 ? "" : "s",
		    h->ended	       ? "waited"
		    : h->nwaiting == 1 ? "has waited"
				       : "have waited",
		    waited, h->cascade ? " (a cascade: the missing are stuck in another hang, listed first)" : "", then,
		    ended);
	if (h->ndied)
		/* every rank entered it; the ones that crashed in it are what the others waited for */
		return finding_printf("collective %s on communicator %016" PRIx64 " %s: %s died inside it (%s), "
				      "and %" PRIu32 " rank%s %s %s in it for %s%s%s",
				      coll, h->comm_id, h->ended ? "hung" : "hangs",
				      who_text(a, h->died, h->ndied, who, sizeof(who)),
				      h->ndied == 1 ? "its process ended" : "their processes ended", h->nwaiting,
				      h->nwaiting == 1 ? "" : "s",
				      h->ended		 ? "waited"
				      : h->nwaiting == 1 ? "has waited"
							 : "have waited",
				      waited, h->ndied == 1 ? "it" : "them", then, ended);
	if (h->nranks > 0 && h->nwaiting < (uint32_t)h->nranks)
		/* a node's trace alone: the others of the communicator are another collector's */
		return finding_printf(
		    "collective %s on communicator %016" PRIx64 " hangs: the %" PRIu32 " of its %" PRId32
		    " ranks in this trace entered it and none has come out for %s; the other %" PRIu32
		    " are not in this trace (another node's collector has them: lint every node's "
		    "trace together to see which of them never entered it)%s%s",
		    coll, h->comm_id, h->nwaiting, h->nranks, waited, (uint32_t)h->nranks - h->nwaiting, then, ended);
	return finding_printf("collective %s on communicator %016" PRIx64 " hangs: all %" PRIu32 " ranks "
			      "entered it and none has come out for %s%s%s",
			      coll, h->comm_id, h->nwaiting, waited, then, ended);
}

/* The ranks that died inside it, one line each: how long they were in it,
 * how their process ended. */
static void died_lines(const struct analysis_result *a, const struct analysis_hang *h, char *buf, size_t len)
{
	uint32_t n = h->ndied < ANALYSIS_FLIGHT_RANKS_MAX ? h->ndied : ANALYSIS_FLIGHT_RANKS_MAX;
	size_t off = 0;

	buf[0] = 0;
	for (uint32_t i = 0; i < n && off < len; i++) {
		const struct analysis_flight_rank *r = &h->died[i];
		const struct source_summary *s = flight_source(a, r->source);
		char who[160], since[32];

		off += (size_t)snprintf(buf + off, len - off,
					"\n  %s: entered #%" PRIu64 "; its process ended %s later%s%s%s",
					flight_rank_text(a, r, who, sizeof(who)), h->comm_seq,
					rule_format_ns((double)r->since_ns, since, sizeof(since)), s ? " (" : "",
					s ? source_end_name((enum source_end)s->end) : "", s ? ")" : "");
	}
	if (off < len && h->ndied > n)
		snprintf(buf + off, len - off, "\n  and %" PRIu32 " more ranks", h->ndied - n);
}

static int one_hang(const struct rule *self, const struct analysis_result *a, const struct analysis_hang *h,
		    uint32_t more, findings_t *out)
{
	const struct analysis_flight *fl = &a->flight;
	char comm[200], coll[96], waited[32], timeout[32], missing[2048], waiting[4096], died[2048], more_text[96] = "";
	char ended[320], *message, *evidence, *fsdp2;
	struct finding *f;

	flight_comm_text(a, h->comm_id, h->nranks, comm, sizeof(comm));
	flight_collective_text(h, coll, sizeof(coll));
	rule_format_ns((double)h->waited_ns, waited, sizeof(waited));
	rule_format_ns((double)fl->timeout_ns, timeout, sizeof(timeout));
	missing_lines(a, h, missing, sizeof(missing));
	waiting_lines(a, h, waiting, sizeof(waiting));
	flight_hang_end_text(h, ended, sizeof(ended));
	if (more)
		snprintf(more_text, sizeof(more_text),
			 "\n%" PRIu32 " more hang%s beyond the %u listed (the report's flight)", more,
			 more == 1 ? "" : "s", ANALYSIS_HANGS_MAX);
	message = hang_message(a, h, coll, waited, ended);
	died_lines(a, h, died, sizeof(died));
	evidence = finding_printf("communicator %s, collective %s\n"
				  "the longest wait: %s, over --hang-timeout %s%s%s\n"
				  "missing (%" PRIu32 "):%s\n"
				  "%s%s%s"
				  "waiting (%" PRIu32 "):%s%s",
				  comm, coll, waited, timeout, h->ended ? "; how it ended: " : "", ended, h->nmissing,
				  h->nmissing ? missing
				  : h->ndied  ? " none: every rank entered it"
				  : h->nranks > 0 && h->nwaiting < (uint32_t)h->nranks
				      ? " none in this trace: the ranks it lacks are another node's"
				      : " none: every rank is inside it",
				  h->ndied ? "died inside it:" : "", died, h->ndied ? "\n" : "", h->nwaiting, waiting,
				  more_text);
	/* Not an FSDP setting: the same advice for every framework. */
	fsdp2 = finding_printf(
	    "# First find where the missing rank is (the waiting ones only wait for it):\n"
	    "#   py-spy dump --pid PID            # its Python stack (add --native for C frames)\n"
	    "#   gdb -p PID -batch -ex 'thread apply all bt'\n"
	    "# Usual causes: a data-loader or checkpoint stall on that rank (slow storage, a dead\n"
	    "#   worker), or a rank that took another branch: a collective under `if rank == 0:`,\n"
	    "#   an early `break` or a caught exception on one rank, a different number of batches.\n"
	    "%s"
	    "# Make a hang end, and leave evidence, instead of idling every GPU:\n"
	    "#   export TORCH_NCCL_ASYNC_ERROR_HANDLING=3      # (the default) tear down on a timed-out collective\n"
	    "#   dist.init_process_group(\"nccl\", timeout=datetime.timedelta(minutes=10))\n"
	    "#   export TORCH_NCCL_TRACE_BUFFER_SIZE=2000      # Flight Recorder: each rank's last collectives\n"
	    "#   export TORCH_NCCL_DUMP_ON_TIMEOUT=1           # dumped when the timeout fires\n"
	    "# and watch it live: fsdpscope collect --hang-timeout SEC --metrics PORT\n"
	    "#   (fsdpscope_collective_hang, fsdpscope_collective_seq)",
	    h->nmissing ? ""
	    : h->ndied	? "# A rank died inside it: its own end is the cause (its stderr, a core dump, dmesg for an\n"
			  "#   OOM kill or Xid errors); the others only waited for it.\n"
			: "# Every rank is inside it: a peer or link failure (NCCL_DEBUG=INFO), a GPU that stopped\n"
			  "#   (nvidia-smi, dmesg for Xid errors), or ranks that disagree on the call\n"
			  "#   (collective-mismatch).\n");
	f = findings_take(out, self, RULE_ERROR, message, evidence, fsdp2, NULL, NULL);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "comm_seq", (double)h->comm_seq);
	finding_metric(f, "waited_ns", (double)h->waited_ns);
	finding_metric(f, "timeout_ns", (double)fl->timeout_ns);
	finding_metric(f, "nranks", h->nranks);
	finding_metric(f, "waiting_ranks", h->nwaiting);
	finding_metric(f, "missing_ranks", h->nmissing);
	if (h->nmissing) {
		finding_metric(f, "first_missing_rank", h->missing[0].rank);
		finding_metric(f, "first_missing_last_seq", (double)h->missing[0].last_seq);
	}
	finding_metric(f, "hangs_total", fl->hangs_total);
	finding_metric(f, "cascade", h->cascade);
	finding_metric(f, "ended", h->ended);
	finding_metric(f, "died_ranks", h->ndied);
	return 0;
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c, findings_t *out)
{
	const struct analysis_flight *fl = &a->flight;
	uint32_t n = fl->nhangs < ANALYSIS_HANGS_MAX ? fl->nhangs : ANALYSIS_HANGS_MAX;

	(void)c;
	for (uint32_t i = 0; i < n; i++) {
		/* Only waits past the timeout are hangs: the analysis reports
		 * no other, and a hand-built result is held to the same. */
		if (fl->hangs[i].waited_ns <= fl->timeout_ns)
			continue;
		int err =
		    one_hang(self, a, &fl->hangs[i], i + 1 == n && fl->hangs_total > n ? fl->hangs_total - n : 0, out);
		if (err)
			return err;
	}
	return 0;
}

const struct rule rule_collective_hang = {
    .id = "collective-hang",
    .title = "Ranks wait in a collective that others never entered (a hang)",
    .explanation = "A collective completes only when every rank of its communicator has joined it. When some ranks "
		   "have been inside collective #N for longer than the hang timeout while others have not entered "
		   "it, the job is hung: every waiting GPU idles until NCCL's or PyTorch's timeout fires, if one is "
		   "set. The cause is on the missing ranks, not on the waiting ones: a rank stuck in data loading or "
		   "a checkpoint, a rank that took another code path and issues a different collective (or none), "
		   "or a dead process. Collectives are numbered per communicator in issue order, as PyTorch's Flight "
		   "Recorder numbers them per process group, so the numbers here can be matched with its dumps.",
    .max_severity = RULE_ERROR,
    .check = check,
};
