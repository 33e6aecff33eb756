/*
 * sender_file.h - opening the file sink (sender_file.c). Sender thread only.
 */
#ifndef FSS_AGENT_SENDER_FILE_H
#define FSS_AGENT_SENDER_FILE_H

#include "common/trace_format.h"

/*
 * sender_open_file - the file sink, in FSDPSCOPE_OUT when set and usable,
 * else in the default directory; *hello built for it; sender.path its final
 * name. 0, or -errno when no file can be made (one line on stderr says so:
 * the caller goes on without a sink, every record counted in sink_dropped).
 */
int sender_open_file(struct fss_rec_process_hello *hello);

#endif
