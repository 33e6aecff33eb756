/*
 * attach_capture.h - the capture side of `fsdpscope attach` (docs/attach.md):
 * which processes to probe, the probes (agent/bpf/attach.h), their events
 * made records (agent/bpf/attach_records.h), and one connection per
 * process into the session's private socket, so that an attached process
 * is a source of the session exactly like a process with the agent.
 *
 * Targets: each PID given is the root of a tree: the process itself when
 * it maps libnccl, and every descendant that does, now or later (a
 * launcher's ranks, an elastic restart's new ranks); with `all`, every
 * process of the machine that maps libnccl, now or later. /proc is looked
 * at again every ATTACH_RESCAN_MS.
 *
 * A process's stream opens at its first record that is not its hello or
 * one of its strings: a process that makes no NCCL call while attached (a
 * launcher that maps libnccl and never calls it) is no source.
 *
 * Threading: one thread (the capture's) calls everything here; the session
 * reads the connections on another (cli/cmd_attach.c).
 */
#ifndef FSS_CLI_ATTACH_CAPTURE_H
#define FSS_CLI_ATTACH_CAPTURE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ATTACH_RESCAN_MS 1000

typedef struct attach_capture attach_capture_t;

struct attach_capture_options {
	const char *prog;   /* prefix of every line said: "fsdpscope attach" */
	const pid_t *pids;  /* the roots given (none with all) */
	size_t npids;
	int all;            /* --all */
	size_t ring_bytes;  /* the probes' ring buffer, 0: the default */
};

/*
 * attach_capture_check - before any session exists: the privilege and the
 * kernel (attach_available), and each PID given: it exists, is a process,
 * and it or a descendant maps libnccl (or has descendants that may still
 * load it). Every failure said on stderr with what to do. 0, or a negative
 * errno (the CLI exits 2).
 */
int attach_capture_check(const struct attach_capture_options *o);

/*
 * attach_capture_new - load the probes and attach every target found now;
 * records go to sink (the session's "unix:PATH"). Said on stderr: each
 * process attached (pid, command, its libnccl, probes placed). 0 with *out,
 * or a negative errno (said).
 */
int attach_capture_new(attach_capture_t **out, const struct attach_capture_options *o, const char *sink);

/*
 * attach_capture_round - wait up to timeout_ms for events, make them
 * records, send them; look for new targets when ATTACH_RESCAN_MS have
 * passed. Returns 1 while there is something to watch, 0 once every root
 * and every attached process has ended (never with all), or a negative
 * errno of the probes.
 */
int attach_capture_round(attach_capture_t *c, int timeout_ms);

/*
 * attach_capture_detach - remove every probe, take in the events already
 * in the ring buffer, decide what was held, close every connection (the
 * processes are not touched). Said on stderr: what was seen and inferred.
 */
void attach_capture_detach(attach_capture_t *c);

/* What the capture has done so far (for the dashboard's header and the summary). */
struct attach_capture_status {
	uint32_t attached;  /* processes probed so far */
	uint32_t running;   /* of which still attached */
	uint32_t exited;    /* of which the kernel saw exit */
	uint32_t sources;   /* of which made an NCCL call (a source of the trace) */
	uint64_t events;    /* probe events taken */
	uint64_t lost;      /* events the ring buffer had no room for */
	char first_command[256]; /* the command line of the first process attached */
};
void attach_capture_status(const attach_capture_t *c, struct attach_capture_status *out);

/*
 * attach_capture_say_unattached - when no process was ever attached (the
 * roots and their descendants never mapped libnccl): say so, per root, on
 * stderr. The CLI then writes no trace and exits 2.
 */
void attach_capture_say_unattached(const attach_capture_t *c);

void attach_capture_free(attach_capture_t *c);

#endif
