/*
 * sender.c - the agent's one thread: drains the ring into the sink.
 *
 * Sinks (docs/agent.md):
 *   socket  FSDPSCOPE_SINK (common/wire.h address). The stream is a trace
 *           (trace_writer_open_fd). Writes time out after
 *           FSDPSCOPE_SINK_TIMEOUT_MS (SO_SNDTIMEO): a collector that stops
 *           reading costs the job nothing but the records that pile up in the
 *           ring meanwhile (dropped and counted there).
 *   file    <dir>/fsdpscope-<host>-<pid>.fss, dir being FSDPSCOPE_OUT, else
 *           a private per-user directory ($XDG_RUNTIME_DIR/fsdpscope or
 *           $TMPDIR/fsdpscope-<uid>), never the job's current one; created
 *           as ".partial" (O_EXCL | O_NOFOLLOW, mode 0600) and renamed at
 *           exit. Used when FSDPSCOPE_SINK is unset, when no collector
 *           answers at start, and after the collector went away mid-run;
 *           with FSDPSCOPE_SINK set the collector is tried again every
 *           FSDPSCOPE_RETRY_MS, and the file, sent whole to it, removed. No
 *           file at all: the ring is still drained, every record counted in
 *           sink_dropped.
 *   dormant FSDPSCOPE_DORMANT=1: no file; try the socket every 500 ms; on
 *           connect the state goes ON, when the collector goes away back to
 *           DORMANT.
 * Every new sink starts with the process hello, a sink record, the
 * definitions of all strings and all live communicators (so it stands
 * alone), then what it repeats of the sink before (docs/format.md, "Sinks
 * and resumption"), then the ring. A socket sink keeps each chunk it sent
 * until the collector's ack covers it (bounded: FSDPSCOPE_RETAIN_BYTES), so
 * that a file after a failure repeats what the collector did not confirm.
 * Records that could not be written nor repeated are counted in
 * agent_counters.sink_dropped; drops records go out every second and at the
 * end, then process_end.
 *
 * Producers never wake this thread (that would be a syscall on their hot
 * path): it polls the ring, sleeping 1 to 8 ms while the ring is empty. A
 * stop or flush request (exit, _exit) does wake it, and it wakes the
 * requester when it is done: the exit paths wait for the work, not for a
 * sleep to end (futexes: nothing a fork can leave locked). All
 * signals are blocked here, so a SIGPIPE from a vanished collector (a
 * thread-directed signal) stays with this thread instead of killing the job,
 * and the job's signal handlers never run on it.
 *
 * Files: sender.c the thread and the writing, sender_socket.c and
 * sender_file.c opening each sink, sender_begin.c a new sink's first
 * records, sender_retention.c the socket's retention and acks,
 * sender_failover.c one sink replaced by another; sender_state.h the state
 * they share.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/emit.h"
#include "agent/sender.h"
#include "agent/sender_begin.h"
#include "agent/sender_failover.h"
#include "agent/sender_file.h"
#include "agent/sender_retention.h"
#include "agent/sender_socket.h"
#include "agent/sender_state.h"
#include "common/clock.h"
#include "common/ring.h"
#include "common/trace_format.h"
#include "common/trace_writer.h"

#define SENDER_STACK_BYTES (256u << 10)
#define SENDER_CONNECT_TIMEOUT_MS 1000
#define SENDER_DORMANT_RETRY_NS 500000000ull
#define SENDER_FLUSH_EVERY_NS 100000000ull /* a busy ring still goes out 10 times a second */
#define SENDER_DROPS_EVERY_NS 1000000000ull
#define SENDER_BATCH 4096
#define SENDER_IDLE_MAX_MS 8
#define SENDER_ACK_EVERY_NS 10000000ull /* look for acks at most every 10 ms: a recv each time */

struct sender sender = {.fd = -1, .probe_fd = -1};

/* A fork child's copies of its parents' writers: never used again, kept
 * reachable so that a leak checker in the child does not report them. */
static trace_writer_t *sender_parents_writers[8] __attribute__((used));
static unsigned sender_nparents;

/* ---- writing ---------------------------------------------------------------- */

/* Append one record to the sink; on a write error the sink is given up
 * (and replaced, see sender_sink_failed). */
int sender_append(const void *record)
{
	uint64_t before;
	int err;

	if (!sender.w)
		return -EPIPE;
	before = trace_writer_bytes(sender.w);
	err = trace_writer_append(sender.w, record);
	if (err) {
		sender_sink_failed(err, record);
		return err;
	}
	/* A full chunk went out before this record: only it is pending now. */
	sender.pending = trace_writer_bytes(sender.w) != before ? 1 : sender.pending + 1;
	return 0;
}

void sender_flush_writer(void)
{
	int err;

	sender.last_flush_ns = clock_mono_ns();
	if (!sender.w || sender.pending == 0)
		return;
	err = trace_writer_flush(sender.w);
	if (err)
		sender_sink_failed(err, NULL);
	else
		sender.pending = 0;
}

static void sender_write_anchor(void)
{
	struct fss_rec_clock_anchor a;

	memset(&a, 0, sizeof(a));
	a.head.type = FSS_REC_CLOCK_ANCHOR;
	a.head.size = sizeof(a);
	a.domain = FSS_CLOCK_REALTIME;
	clock_anchor(&a.mono_ns, &a.other_ns);
	(void)sender_append(&a);
}

/* ring_dropped_extra: records still in the ring that will never be written
 * (the final drops record). */
static void sender_write_drops(ring_t *ring, uint64_t ring_dropped_extra)
{
	struct fss_rec_drops d;

	memset(&d, 0, sizeof(d));
	d.head.type = FSS_REC_DROPS;
	d.head.size = sizeof(d);
	d.at_ns = clock_mono_ns();
	d.ring_dropped = ring_drops(ring) + ring_dropped_extra;
	d.sink_dropped = atomic_load(&agent_counters.sink_dropped);
	d.cupti_dropped = atomic_load(&agent_counters.cupti_dropped);
	d.records_written = ring_pushed(ring);
	d.nvtx_dropped = atomic_load(&agent_counters.nvtx_dropped);
	sender.last_drops_ns = d.at_ns;
	(void)sender_append(&d);
}

void sender_close(void)
{
	if (sender.w) {
		int err = trace_writer_close(sender.w); /* a file: flushed and renamed */
		if (err)
			agent_debug("closing the sink: %s", strerror(-err));
	}
	if (sender.kind == SINK_SOCKET)
		agent_debug("socket sink %u closed: %llu chunks sent, %llu acked, %llu bad acks, %llu records "
			    "let go unconfirmed",
			    sender.serial, (unsigned long long)sender.chunks_sent,
			    (unsigned long long)sender.acked_chunks, (unsigned long long)atomic_load(&sender.bad_acks),
			    (unsigned long long)atomic_load(&agent_counters.unconfirmed));
	sender.w = NULL;
	if (sender.fd >= 0)
		close(sender.fd);
	sender.fd = -1;
	sender.kind = SINK_NONE;
	sender.pending = 0;
	sender_acks_reset();
}

/* Non-dormant start: the collector if it answers, else a file. */
static void sender_open_first(void)
{
	struct fss_rec_process_hello hello;
	int err = 0;

	if (agent_config.sink[0]) {
		err = sender_connect(SENDER_CONNECT_TIMEOUT_MS, &hello);
		if (err == 0) {
			agent_debug("connected to %s", agent_config.sink);
			sender_begin(&hello, NULL);
			return;
		}
	}
	if (sender_open_file(&hello) == 0) {
		/* A sink the user named and cannot be reached is said once: a
		 * job recorded only into a spool nobody merges looks unrecorded. */
		if (err)
			agent_warn("cannot reach the collector at FSDPSCOPE_SINK=%s (%s): recording into %s; "
				   "'fsdpscope lint %s' reads it, a collector started on that sink takes over "
				   "(docs/collect.md)",
				   agent_config.sink, strerror(-err), sender.path, sender.path);
		sender_begin(&hello, NULL);
	}
	/* else no sink: the loop drains the ring and counts every record lost */
}

/* ---- the thread ------------------------------------------------------------------ */

/* Pop up to max records into the sink (or count them lost when there is
 * none). Returns how many were popped. */
static size_t sender_drain(ring_t *ring, size_t max)
{
	_Alignas(8) unsigned char buf[FSS_RECORD_MAX_BYTES];
	const struct fss_record_head *head = (const void *)buf;
	size_t n = 0, len;

	while (n < max) {
		int r = ring_pop(ring, buf, sizeof(buf), &len);
		if (r <= 0)
			break;
		n++;
		if (!sender.w || len < sizeof(*head) || head->size != len || len % 8) {
			atomic_fetch_add_explicit(&agent_counters.sink_dropped, 1, memory_order_relaxed);
			continue;
		}
		(void)sender_append(buf);
	}
	return n;
}

/* Sleep up to ms while *word still holds seen; a futex wake (or a change
 * made before the call) ends it early. */
static void sender_futex_wait(_Atomic uint32_t *word, uint32_t seen, unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

static void sender_futex_bump(_Atomic uint32_t *word)
{
	atomic_fetch_add(word, 1);
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static void sender_finish(ring_t *ring)
{
	struct fss_rec_process_end end;

	sender_probe_close();
	if (!sender.w) {
		sender_drain(ring, ring_capacity(ring)); /* counted lost */
		sender_close();
		return;
	}
	sender_drain(ring, ring_capacity(ring));
	/* Whatever a producer still pushes now will not be written. */
	uint64_t stuck = ring_pushed(ring) - ring_popped(ring);
	sender_write_anchor();
	sender_write_drops(ring, stuck);
	memset(&end, 0, sizeof(end));
	end.head.type = FSS_REC_PROCESS_END;
	end.head.size = sizeof(end);
	end.at_ns = clock_mono_ns();
	end.collectives = atomic_load(&agent_counters.collectives);
	end.exit_code = atomic_load(&agent_exit_status); /* -1 when not left through exit() */
	(void)sender_append(&end);
	sender_flush_writer();
	if (sender.kind == SINK_FILE)
		agent_debug("wrote %s", sender.path);
	sender_close();
}

/* The process's id for its sinks: random, so that a collector can tell
 * two processes apart whatever their pids and hosts. */
static void sender_draw_process_id(void)
{
	uint64_t id = 0;

	while (sender.process_id == 0) {
		if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id)) {
			/* No entropy yet (early boot): clock and pid, mixed. */
			id = clock_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&id;
			id *= 0x9e3779b97f4a7c15ull;
		}
		sender.process_id = id;
	}
}

static void sender_loop(void)
{
	ring_t *ring = agent_ring();
	unsigned idle_ms = 1;

	if (!ring)
		return;
	sender_draw_process_id();
	sender.retry_backoff = 1;
	sender.retry_wait_ns = sender_retry_ns();
	if (agent_config.dormant)
		sender_try_dormant();
	else
		sender_open_first();
	for (;;) {
		uint32_t wake_seen = atomic_load(&sender.wake); /* before the requests: a later one ends the sleep */
		int stop = atomic_load(&sender.stop_req);
		uint64_t flush_req = atomic_load(&sender.flush_req);
		uint64_t now;
		size_t n;

		if (atomic_load(&agent_state_now) == AGENT_OFF && !sender.w)
			break; /* turned off: nothing to write to any more */
		if (agent_config.dormant && !sender.w && !stop &&
		    clock_mono_ns() - sender.last_connect_ns >= SENDER_DORMANT_RETRY_NS)
			sender_try_dormant();
		if (!agent_config.dormant && sender.kind != SINK_SOCKET && agent_config.sink[0] &&
		    agent_config.retry_ms > 0 && !sender.socket_disabled && sender.probe_fd < 0 && !stop &&
		    atomic_load(&agent_state_now) == AGENT_ON &&
		    clock_mono_ns() - sender.last_connect_ns >= sender.retry_wait_ns)
			sender_try_reconnect();
		if (sender.probe_fd >= 0 && !stop)
			sender_probe();
		if (sender.kind == SINK_SOCKET && clock_mono_ns() - sender.last_ack_read_ns >= SENDER_ACK_EVERY_NS) {
			sender.last_ack_read_ns = clock_mono_ns();
			sender_read_acks();
		}
		n = sender_drain(ring, SENDER_BATCH);
		now = clock_mono_ns();
		if (sender.w && (n == 0 || now - sender.last_flush_ns >= SENDER_FLUSH_EVERY_NS))
			sender_flush_writer();
		if (sender.w && now - sender.last_drops_ns >= SENDER_DROPS_EVERY_NS)
			sender_write_drops(ring, 0);
		if (flush_req != atomic_load(&sender.flush_done)) {
			sender_drain(ring, ring_capacity(ring));
			sender_flush_writer();
			atomic_store(&sender.flush_done, flush_req);
			sender_futex_bump(&sender.progress);
		}
		if (stop)
			break;
		if (n == 0) {
			sender_futex_wait(&sender.wake, wake_seen, idle_ms);
			idle_ms = idle_ms * 2 > SENDER_IDLE_MAX_MS ? SENDER_IDLE_MAX_MS : idle_ms * 2;
		} else {
			idle_ms = 1;
		}
	}
	sender_finish(ring);
}

static void *sender_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "fsdpscope-send");
	sender_loop();
	atomic_store_explicit(&sender.finished, 1, memory_order_release);
	sender_futex_bump(&sender.progress);
	return NULL;
}

int sender_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int err;

	if (atomic_exchange(&sender.running, 1))
		return 0;
	atomic_store(&sender.finished, 0);
	atomic_store(&sender.stop_req, 0);
	if (pthread_attr_init(&attr) != 0) {
		atomic_store(&sender.running, 0);
		return -ENOMEM;
	}
	(void)pthread_attr_setstacksize(&attr, SENDER_STACK_BYTES);
	/* The thread inherits this mask: all signals blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&sender.thread, &attr, sender_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		atomic_store(&sender.running, 0);
		return -err;
	}
	return 0;
}

/* Non-zero while the sender thread of this process runs. */
static int sender_running(void)
{
	return atomic_load(&sender.running) && !atomic_load(&sender.finished);
}

/* Wait until done(arg) holds, for at most timeout_ms: woken by the
 * thread's progress, and looking again every 10 ms whatever happens. */
static int sender_wait(int (*done)(uint64_t arg), uint64_t arg, int timeout_ms)
{
	uint64_t deadline = clock_mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

	for (;;) {
		uint32_t seen = atomic_load(&sender.progress);
		uint64_t now;

		if (done(arg))
			return 0;
		now = clock_mono_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		uint64_t left_ms = (deadline - now + 999999) / 1000000;
		sender_futex_wait(&sender.progress, seen, left_ms < 10 ? (unsigned)left_ms : 10);
	}
}

static int sender_flushed(uint64_t want)
{
	return atomic_load(&sender.flush_done) >= want || atomic_load(&sender.finished);
}

static int sender_done(uint64_t unused)
{
	(void)unused;
	return atomic_load_explicit(&sender.finished, memory_order_acquire);
}

void sender_flush(int timeout_ms)
{
	if (!sender_running() || pthread_equal(pthread_self(), sender.thread))
		return;
	uint64_t want = atomic_fetch_add(&sender.flush_req, 1) + 1;
	sender_futex_bump(&sender.wake);
	if (sender_wait(sender_flushed, want, timeout_ms))
		agent_debug("flush: the sender did not answer within %d ms", timeout_ms);
}

void sender_stop(int timeout_ms)
{
	if (!atomic_load(&sender.running) || pthread_equal(pthread_self(), sender.thread))
		return;
	atomic_store(&sender.stop_req, 1);
	sender_futex_bump(&sender.wake);
	if (sender_wait(sender_done, 0, timeout_ms)) {
		/* Leave it: the process exits around it. */
		agent_debug("the sender did not finish within %d ms: exiting without it", timeout_ms);
		return;
	}
	pthread_join(sender.thread, NULL);
	atomic_store(&sender.running, 0);
}

void sender_after_fork_child(void)
{
	/* The child has no sender thread. The socket is the parent's
	 * connection: our copy is closed so that the collector sees the
	 * parent's end-of-stream when the parent is done, whatever the child
	 * does. The writer is left alone (never flushed: its bytes belong to
	 * the parent's stream); its memory is a copy-on-write page or two. */
	if (sender.fd >= 0)
		close(sender.fd);
	sender.fd = -1;
	sender_probe_close();
	if (sender.w)
		sender_parents_writers[sender_nparents++ % 8] = sender.w;
	sender.w = NULL;
	sender.kind = SINK_NONE;
	sender.pending = 0;
	/* A new process: its own id and sinks; the parent's retained chunks
	 * are the parent's to repeat. */
	sender_acks_reset();
	sender.process_id = 0;
	sender.serial = 0;
	sender.serial_kind = 0;
	sender.socket_disabled = 0;
	sender.last_connect_ns = 0;
	sender.copied_path[0] = '\0';
	atomic_store(&sender.bad_acks, 0);
	atomic_store(&sender.running, 0);
	atomic_store(&sender.finished, 0);
	atomic_store(&sender.stop_req, 0);
	atomic_store(&sender.flush_req, 0);
	atomic_store(&sender.flush_done, 0);
	atomic_store(&sender.wake, 0);
	atomic_store(&sender.progress, 0);
}

uint64_t sender_retained_bytes(void)
{
	return atomic_load(&sender.retained_bytes);
}

uint64_t sender_bad_acks(void)
{
	return atomic_load(&sender.bad_acks);
}
