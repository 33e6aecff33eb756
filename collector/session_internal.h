/*
 * session_internal.h - the state a session's files share (collector/session.h
 * is the API): session.c the pipeline and schedule, session_files.c and
 * session_ingest.c its inputs.
 */
#ifndef FSS_COLLECTOR_SESSION_INTERNAL_H
#define FSS_COLLECTOR_SESSION_INTERNAL_H

#include "collector/session.h"
#include "collector/timeline.h"

struct fss_session {
	sources_t *view; /* the one per-source view: every record is decoded here once */
	analyzer_t *an;	 /* on the view (analyzer_new_on) */
	timeline_t *tl;	 /* the analyzer's: the view's callbacks pass on to it */
	live_t *live;	 /* NULL without fss_session_options.live */
	live_board_t *board;
	keeper_t *keeper; /* an ingest input's */
	struct fss_session_tool tool;
	fss_session_diagnose_fn diagnose;
	void *diagnose_ctx;
	const struct fss_session_input *input_ops;
	void *input;
	int tolerant;	     /* an ingest input: a failing consumer stops, the trace goes on */
	int analysis_error;  /* the streamed analysis failed (out of memory) */
	int live_error;	     /* the live state failed: views stop */
	int job_error;	     /* the job steps could not be tracked */
	int in_files;	     /* records now come from a merged file, not a connection */
	unsigned read_flags; /* fss_session_options.read_flags, for a file input */
	uint64_t agent_records;
	/* a trace file's keep policy, as the headers say (the narrowest) */
	uint32_t keep_flags, keep_steps;
	/* per trace source: steps the analyzer completed, and whether it has collectives */
	uint64_t *src_steps;
	uint8_t *has_coll;
	size_t nsrc;
	int step_seen;	   /* a step callback since the last check */
	uint64_t job_step; /* job steps handed to on_job_step */
	uint64_t trace_ns; /* the latest host time of any source's records */
	/* the live schedule */
	uint64_t steps; /* steps the analyzer completed */
	uint64_t steps_published, steps_diagnosed;
	int64_t last_publish_ms, last_diagnosis_ms;
	int flight_pending;	   /* the latest diagnosis had calls in flight or a hang: again, steps or not */
	int diagnosis_unpublished; /* a diagnosis the readers have not been shown */
};

/*
 * fss_session_after_view - a record the view has taken in already (an
 * ingest fed the session's view): the analyzer, the live state, the
 * keeper (*leave_out: it leaves the record out of the file), the tool and
 * the job steps. 0 or a negative errno (the ingest fails).
 */
int fss_session_after_view(fss_session_t *s, const struct fss_record_head *rec, const struct source *src,
			   int *leave_out);

/*
 * fss_session_tool_take / fss_session_tool_header - a record (a header) of
 * a second read, to the tool alone (fss_session_reread): the view holds it
 * already. 0 or the tool's value.
 */
int fss_session_tool_take(fss_session_t *s, const struct fss_record_head *rec);
int fss_session_tool_header(fss_session_t *s, const struct fss_file_header *h);

#endif
