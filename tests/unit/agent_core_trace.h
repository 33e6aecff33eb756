/*
 * agent_core_trace.h - what the agent tests need to look at a trace: a
 * summary of one source's stream or file (through trace_parser, the one
 * decoder), and a unix socket listener that stands in for the collector.
 */
#ifndef FSS_TESTS_AGENT_CORE_TRACE_H
#define FSS_TESTS_AGENT_CORE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "common/record.h"
#include "common/strtab.h"
#include "common/trace_parser.h"

struct trace_summary {
	trace_parser_t *parser;
	strtab_t *strings;
	int header_seen;
	uint32_t header_flags;
	uint64_t records;
	uint64_t by_type[FSS_REC_TYPE_MAX];
	int first_is_hello;
	struct fss_rec_process_hello hello; /* the first one */
	struct fss_rec_collective *colls;
	size_t ncolls, colls_cap;
	struct fss_rec_comm *comms;
	size_t ncomms, comms_cap;
	struct fss_rec_group *groups;
	size_t ngroups, groups_cap;
	int have_drops;
	struct fss_rec_drops drops; /* the last one */
	int have_end;
	struct fss_rec_process_end end; /* the last one */
	int end_is_last; /* process_end was the last record */
	uint16_t last_type;
	int max_sources; /* largest source value seen + 1 */
};

/* summary_init - an empty summary with its parser. 0 or -ENOMEM. */
int summary_init(struct trace_summary *s);
void summary_free(struct trace_summary *s);
/* summary_feed - bytes of a stream, any split. 0 or the parser's error. */
int summary_feed(struct trace_summary *s, const void *data, size_t len);
/* summary_finish - end of input: 0 when it ended on a chunk boundary. */
int summary_finish(struct trace_summary *s);
/* summary_read_file - init + the whole file + finish. */
int summary_read_file(struct trace_summary *s, const char *path);
/* summary_string - the text of string id, or NULL. */
const char *summary_string(const struct trace_summary *s, uint32_t id);
/* summary_count_op - collectives of one op. */
size_t summary_count_op(const struct trace_summary *s, uint8_t op);

/*
 * listener_open - a listening unix socket at dir/name; writes the
 * FSDPSCOPE_SINK text ("unix:/...") into addr. 0 or -errno.
 */
int listener_open(const char *dir, const char *name, char *addr, size_t addrlen, int *fd);
/* listener_accept - accept one connection within timeout_ms: fd, or -errno. */
int listener_accept(int lfd, int timeout_ms);
/*
 * listener_read_available - feed whatever is readable now on fd (without
 * waiting) into s. Returns bytes read, or -1 at end of stream (the peer
 * closed), or -errno.
 */
long listener_read_available(int fd, struct trace_summary *s);
/* listener_read_to_eof - feed until the peer closes, waiting at most
 * timeout_ms in all. 0 at EOF, -ETIMEDOUT, or -errno. */
int listener_read_to_eof(int fd, struct trace_summary *s, int timeout_ms);

#endif
