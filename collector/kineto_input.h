/*
 * kineto_input.h - PyTorch profiler (Kineto) traces as a session's input
 * (collector/session.h "How to add a reader"; docs/kineto.md).
 *
 * Each file is read whole into compact state (kineto_file_read), checked
 * to be of one job with the others (their distributedInfo worlds agree:
 * the same world_size, distinct ranks, overlapping times: trace_jobs.h),
 * and becomes one source whose records (kineto_map.h) go to the session in
 * host-time order across the files (CLOCK_REALTIME: baseTimeNanoseconds +
 * ts), after a synthetic file header. fss_session_open_files attaches this input when its files are
 * Kineto traces (told by their content, never by their names).
 */
#ifndef FSS_COLLECTOR_KINETO_INPUT_H
#define FSS_COLLECTOR_KINETO_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "collector/kineto_file.h"
#include "collector/kineto_map.h"

typedef struct fss_session fss_session_t;

/* What one file of the input was. */
struct kineto_input_file {
	const char *path;		    /* borrowed from the caller */
	struct kineto_read_info read;	    /* how its read ended: a status other than OK is a partial reading */
	const struct kineto_map_info *info; /* what it says of its job */
	const struct fss_rec_source_figures *figures;
	uint32_t source; /* its source id */
	uint64_t skipped; /* events left out as not understood (a value of the wrong type, a time too large):
			     the first is read.skip_offset / read.skip_message */
};

/* What a list of paths holds, for fss_session_open_files. */
enum kineto_input_kind {
	KINETO_INPUT_NONE = 0, /* no Kineto trace: fsdpscope traces (or files the trace reader words) */
	KINETO_INPUT_ALL,      /* every file is a Kineto trace */
};

/* kineto_input_sniff - 1 when the file at path reads as a Kineto trace
 * (Chrome-trace JSON, or gzip of it), else 0. */
int kineto_input_sniff(const char *path);

/*
 * kineto_input_classify - whether paths[0..n) are Kineto traces (by their
 * first bytes). A list mixing fsdpscope traces and Kineto files, or a
 * Kineto file with one that is neither, is refused: FSS_E_USAGE with err
 * naming one file of each kind. Returns an enum kineto_input_kind or that error.
 */
int kineto_input_classify(const char *const *paths, size_t n, char *err, size_t errlen);

/*
 * kineto_input_open - read the n Kineto traces at paths (borrowed: they
 * must outlive the session) and attach them as s's input. A file that
 * cannot be read at all, is not a Chrome trace, or is not of the others'
 * job is an error worded in err, naming it. Returns 0, -ENOMEM, -errno of
 * an unreadable file, FSS_E_NOT_TRACE or FSS_E_USAGE (another job).
 */
int kineto_input_open(fss_session_t *s, const char *const *paths, size_t n, char *err, size_t errlen);

/* kineto_input_files - the input's files (NULL for another input). */
const struct kineto_input_file *kineto_input_files(const fss_session_t *s, size_t *n);

/* kineto_input_read_info - the input's reads as one trace read's info
 * (fss_session_read_info): a trace, cut when a file was read in part,
 * the first partial reading's words; NULL for another input. */
struct trace_read_info;
const struct trace_read_info *kineto_input_read_info(const fss_session_t *s);

/* kineto_input_reread - the records again, to the tool alone (fss_session_reread). */
int kineto_input_reread(fss_session_t *s);

/* kineto_read_status_words - the words of a partial reading ("the file ends inside the document"). */
const char *kineto_read_status_words(enum kineto_read_status status);

#endif
