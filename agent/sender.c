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
 *           answers at start, and for the rest of the run when the
 *           collector goes away mid-run. No file at all: the ring is still
 *           drained, every record counted in sink_dropped.
 *   dormant FSDPSCOPE_DORMANT=1: no file; try the socket every 500 ms; on
 *           connect the state goes ON, when the collector goes away back to
 *           DORMANT.
 * Every new sink starts with the process hello, the definitions of all
 * strings and all live communicators (so it stands alone), then the ring.
 * Records that were popped but could not be written (the chunk a failed
 * write carried) are counted in agent_counters.sink_dropped; drops records
 * go out every second and at the end, then process_end.
 *
 * Producers never wake this thread (that would be a syscall on their hot
 * path): it polls the ring, sleeping 1 to 8 ms while the ring is empty. A
 * stop or flush request (exit, _exit) does wake it, and it wakes the
 * requester when it is done: the exit paths wait for the work, not for a
 * sleep to end (futexes: nothing a fork can leave locked). All
 * signals are blocked here, so a SIGPIPE from a vanished collector (a
 * thread-directed signal) stays with this thread instead of killing the job,
 * and the job's signal handlers never run on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/comms.h"
#include "agent/emit.h"
#include "agent/sender.h"
#include "agent/strings.h"
#include "common/clock.h"
#include "common/ring.h"
#include "common/trace_writer.h"
#include "common/wire.h"

#define SENDER_STACK_BYTES (256u << 10)
#define SENDER_CONNECT_TIMEOUT_MS 1000
#define SENDER_DORMANT_RETRY_NS 500000000ull
#define SENDER_DORMANT_CONNECT_TIMEOUT_MS 250
#define SENDER_FLUSH_EVERY_NS 100000000ull /* a busy ring still goes out 10 times a second */
#define SENDER_DROPS_EVERY_NS 1000000000ull
#define SENDER_BATCH 4096
#define SENDER_IDLE_MAX_MS 8

enum sender_sink { SINK_NONE = 0, SINK_SOCKET, SINK_FILE };

struct sender {
	/* Shared with other threads. */
	pthread_t thread;
	_Atomic int running;  /* started, not joined */
	_Atomic int finished; /* the thread is done (or about to return) */
	_Atomic int stop_req;
	_Atomic uint64_t flush_req;
	_Atomic uint64_t flush_done;
	_Atomic uint32_t wake;	   /* futex: bumped by a stop or flush request, cuts the thread's sleep short */
	_Atomic uint32_t progress; /* futex: bumped by the thread when it answered a request or finished */

	/* The sender thread's own. */
	int kind;	   /* enum sender_sink */
	int fd;		   /* the socket, -1 otherwise */
	trace_writer_t *w; /* the sink's writer, NULL when there is none */
	uint64_t pending;  /* records appended since the last chunk went out */
	uint64_t last_flush_ns;
	uint64_t last_drops_ns;
	uint64_t last_connect_ns;
	char path[PATH_MAX]; /* the file sink's final name */
};

static struct sender snd = {.fd = -1};

/* A fork child's copies of its parents' writers: never used again, kept
 * reachable so that a leak checker in the child does not report them. */
static trace_writer_t *sender_parents_writers[8] __attribute__((used));
static unsigned sender_nparents;

/* ---- writing ---------------------------------------------------------------- */

static void sender_sink_failed(int err, uint64_t lost);

/* Append one record to the sink; on a write error the sink is given up
 * (and replaced, see sender_sink_failed). */
static int sender_append(const void *record)
{
	uint64_t before;
	int err;

	if (!snd.w)
		return -EPIPE;
	before = trace_writer_bytes(snd.w);
	err = trace_writer_append(snd.w, record);
	if (err) {
		sender_sink_failed(err, snd.pending + 1);
		return err;
	}
	/* A full chunk went out before this record: only it is pending now. */
	snd.pending = trace_writer_bytes(snd.w) != before ? 1 : snd.pending + 1;
	return 0;
}

static void sender_flush_writer(void)
{
	int err;

	snd.last_flush_ns = clock_mono_ns();
	if (!snd.w || snd.pending == 0)
		return;
	err = trace_writer_flush(snd.w);
	if (err)
		sender_sink_failed(err, snd.pending);
	else
		snd.pending = 0;
}

static void sender_emit_cb(void *ctx, const void *record)
{
	(void)ctx;
	(void)sender_append(record);
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
	snd.last_drops_ns = d.at_ns;
	(void)sender_append(&d);
}

/* ---- opening sinks ------------------------------------------------------------ */

static void sender_close(void)
{
	if (snd.w) {
		int err = trace_writer_close(snd.w); /* a file: flushed and renamed */
		if (err)
			agent_debug("closing the sink: %s", strerror(-err));
	}
	snd.w = NULL;
	if (snd.fd >= 0)
		close(snd.fd);
	snd.fd = -1;
	snd.kind = SINK_NONE;
	snd.pending = 0;
}

/* A new sink: hello first, then every string and live communicator, so it
 * stands alone whatever came before. */
static void sender_begin(const struct fss_rec_process_hello *hello)
{
	snd.pending = 0;
	snd.last_flush_ns = snd.last_drops_ns = clock_mono_ns();
	if (sender_append(hello))
		return;
	agent_strings_replay(sender_emit_cb, NULL);
	agent_comms_replay(sender_emit_cb, NULL);
	sender_write_anchor();
	sender_flush_writer();
}

static int sender_connect(int timeout_ms, struct fss_rec_process_hello *hello)
{
	struct wire_address addr;
	struct trace_writer_options opts = {0};
	struct timeval tv = {.tv_sec = agent_config.sink_timeout_ms / 1000,
			     .tv_usec = (agent_config.sink_timeout_ms % 1000) * 1000};
	int fd, err;

	err = wire_address_parse(agent_config.sink, &addr);
	if (err)
		return err;
	err = wire_connect(&addr, timeout_ms, &fd);
	if (err)
		return err;
	/* Bounded writes: a stalled collector fails the write, never the job. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	agent_hello_build(hello);
	opts.features = hello->features;
	err = trace_writer_open_fd(&snd.w, fd, &opts);
	if (err) {
		close(fd);
		return err;
	}
	snd.fd = fd;
	snd.kind = SINK_SOCKET;
	return 0;
}

/* ---- where per-process files go --------------------------------------------------- */

#define SENDER_NAME_TRIES 16 /* fsdpscope-<host>-<pid>.fss, then -1 ... -15 when a name is taken */

/*
 * A directory only this user can write into: made 0700 when missing (with
 * create), not a symlink, owned by the effective user, nothing granted to
 * group or others. 0, or -ENOTDIR / -EPERM (someone else's, or too open),
 * or the error of mkdir / lstat.
 */
static int sender_private_dir(const char *path, int create)
{
	struct stat st;

	if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid() || (st.st_mode & 077))
		return -EPERM;
	return 0;
}

/* The default directory when FSDPSCOPE_OUT is not set (docs/agent.md):
 * $XDG_RUNTIME_DIR/fsdpscope when that runtime directory is the user's
 * own, else $TMPDIR/fsdpscope-<uid> (/tmp without TMPDIR), each checked by
 * sender_private_dir. Never the job's current directory. */
static int sender_default_dir(char *out, size_t cap)
{
	const char *runtime = agent_config.runtime_dir;
	const char *tmp = agent_config.tmp_dir[0] ? agent_config.tmp_dir : "/tmp";
	int n;

	if (runtime[0] && sender_private_dir(runtime, 0) == 0) {
		n = snprintf(out, cap, "%s/fsdpscope", runtime);
		if (n > 0 && (size_t)n < cap && sender_private_dir(out, 1) == 0)
			return 0;
	}
	n = snprintf(out, cap, "%s/fsdpscope-%u", tmp, (unsigned)geteuid());
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	return sender_private_dir(out, 1);
}

/* FSDPSCOPE_OUT: the user's choice, so it may be shared (a group
 * directory): made 0700 when missing; it must be a writable directory. */
static int sender_out_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (access(dir, W_OK | X_OK) < 0)
		return -errno;
	return 0;
}

/* Create this process's file in dir. Never opens an existing name: the
 * writer creates "<name>.partial" with O_EXCL | O_NOFOLLOW, and a name
 * whose final file exists (a finished trace of an earlier process with the
 * same pid) is passed over for the next suffix. */
static int sender_create_in(const char *dir, const char *host, const struct trace_writer_options *opts)
{
	struct stat st;
	int err = -EEXIST;

	for (int attempt = 0; attempt < SENDER_NAME_TRIES; attempt++) {
		int n = attempt == 0
			    ? snprintf(snd.path, sizeof(snd.path), "%s/fsdpscope-%s-%d.fss", dir, host, (int)getpid())
			    : snprintf(snd.path, sizeof(snd.path), "%s/fsdpscope-%s-%d-%d.fss", dir, host,
				       (int)getpid(), attempt);
		if (n < 0 || (size_t)n >= sizeof(snd.path))
			return -ENAMETOOLONG;
		if (lstat(snd.path, &st) == 0)
			continue;
		err = trace_writer_open(&snd.w, snd.path, opts);
		if (err != -EEXIST)
			return err;
	}
	return err;
}

/* The file sink: in FSDPSCOPE_OUT when set and usable, else in the default
 * directory. When no file can be made the caller goes on without a sink:
 * every record is counted in sink_dropped, and one line on stderr says so. */
static int sender_open_file(struct fss_rec_process_hello *hello)
{
	const char *out = agent_config.out_dir;
	char host[256], dir[PATH_MAX];
	struct trace_writer_options opts = {0};
	int out_err = 0, err;

	if (gethostname(host, sizeof(host)) != 0)
		strcpy(host, "host");
	host[sizeof(host) - 1] = '\0';
	for (char *p = host; *p; p++)
		if (*p == '/')
			*p = '_';
	agent_hello_build(hello);
	opts.features = hello->features;
	opts.exclusive = 1;
	if (out[0]) {
		out_err = sender_out_dir(out);
		if (!out_err)
			out_err = sender_create_in(out, host, &opts);
		if (!out_err)
			goto opened;
	}
	err = sender_default_dir(dir, sizeof(dir));
	if (!err)
		err = sender_create_in(dir, host, &opts);
	if (err) {
		if (out[0])
			agent_warn(
			    "no trace file: FSDPSCOPE_OUT=%s: %s; %s: %s; the records of this process are dropped", out,
			    strerror(-out_err), dir, strerror(-err));
		else
			agent_warn("no trace file: %s: %s; the records of this process are dropped (set FSDPSCOPE_OUT "
				   "to a writable directory)",
				   dir, strerror(-err));
		return err;
	}
	if (out[0])
		agent_warn("cannot write into FSDPSCOPE_OUT=%s (%s): writing %s instead", out, strerror(-out_err),
			   snd.path);
opened:
	snd.kind = SINK_FILE;
	agent_debug("writing %s", snd.path);
	return 0;
}

/* Non-dormant start: the collector if it answers, else a file. */
static void sender_open_first(void)
{
	struct fss_rec_process_hello hello;
	int err;

	if (agent_config.sink[0]) {
		err = sender_connect(SENDER_CONNECT_TIMEOUT_MS, &hello);
		if (err == 0) {
			agent_debug("connected to %s", agent_config.sink);
			sender_begin(&hello);
			return;
		}
		agent_debug("no collector at %s (%s): writing a file instead", agent_config.sink, strerror(-err));
	}
	if (sender_open_file(&hello) == 0)
		sender_begin(&hello);
	/* else no sink: the loop drains the ring and counts every record lost */
}

/* Dormant: one connection attempt; on success the agent starts recording. */
static void sender_try_dormant(void)
{
	struct fss_rec_process_hello hello;
	int expected = AGENT_DORMANT;

	snd.last_connect_ns = clock_mono_ns();
	if (!agent_config.sink[0])
		return;
	if (sender_connect(SENDER_DORMANT_CONNECT_TIMEOUT_MS, &hello) != 0)
		return;
	/* ON before the replay: a string or communicator defined from here on
	 * goes into the ring, one defined before is in the replay. */
	if (!atomic_compare_exchange_strong(&agent_state_now, &expected, AGENT_ON)) {
		sender_close();
		return;
	}
	agent_debug("collector at %s: recording", agent_config.sink);
	agent_cupti_maybe_start();
	agent_hello_build(&hello); /* after ON: host and command strings are emitted */
	sender_begin(&hello);
}

/* The sink failed: count what it took with it and carry on elsewhere. */
static void sender_sink_failed(int err, uint64_t lost)
{
	struct fss_rec_process_hello hello;
	int kind = snd.kind;

	atomic_fetch_add(&agent_counters.sink_dropped, lost);
	agent_debug("%s sink failed: %s (%llu records lost)", kind == SINK_SOCKET ? "socket" : "file", strerror(-err),
		    (unsigned long long)lost);
	trace_writer_t *w = snd.w;
	snd.w = NULL; /* no recursion into a dead writer */
	if (w)
		(void)trace_writer_close(w);
	if (snd.fd >= 0)
		close(snd.fd);
	snd.fd = -1;
	snd.kind = SINK_NONE;
	snd.pending = 0;
	if (kind == SINK_SOCKET) {
		if (agent_config.dormant) {
			int expected = AGENT_ON;
			atomic_compare_exchange_strong(&agent_state_now, &expected, AGENT_DORMANT);
			return;
		}
		if (sender_open_file(&hello) == 0)
			sender_begin(&hello);
		return; /* else no sink: records from here on are counted lost */
	}
	agent_disable("the trace file failed");
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
		if (!snd.w || len < sizeof(*head) || head->size != len || len % 8) {
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

	if (!snd.w) {
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
	if (snd.kind == SINK_FILE)
		agent_debug("wrote %s", snd.path);
	sender_close();
}

static void sender_loop(void)
{
	ring_t *ring = agent_ring();
	unsigned idle_ms = 1;

	if (!ring)
		return;
	if (agent_config.dormant)
		sender_try_dormant();
	else
		sender_open_first();
	for (;;) {
		uint32_t wake_seen = atomic_load(&snd.wake); /* before the requests: a later one ends the sleep */
		int stop = atomic_load(&snd.stop_req);
		uint64_t flush_req = atomic_load(&snd.flush_req);
		uint64_t now;
		size_t n;

		if (atomic_load(&agent_state_now) == AGENT_OFF && !snd.w)
			break; /* turned off: nothing to write to any more */
		if (agent_config.dormant && !snd.w && !stop &&
		    clock_mono_ns() - snd.last_connect_ns >= SENDER_DORMANT_RETRY_NS)
			sender_try_dormant();
		n = sender_drain(ring, SENDER_BATCH);
		now = clock_mono_ns();
		if (snd.w && (n == 0 || now - snd.last_flush_ns >= SENDER_FLUSH_EVERY_NS))
			sender_flush_writer();
		if (snd.w && now - snd.last_drops_ns >= SENDER_DROPS_EVERY_NS)
			sender_write_drops(ring, 0);
		if (flush_req != atomic_load(&snd.flush_done)) {
			sender_drain(ring, ring_capacity(ring));
			sender_flush_writer();
			atomic_store(&snd.flush_done, flush_req);
			sender_futex_bump(&snd.progress);
		}
		if (stop)
			break;
		if (n == 0) {
			sender_futex_wait(&snd.wake, wake_seen, idle_ms);
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
	atomic_store_explicit(&snd.finished, 1, memory_order_release);
	sender_futex_bump(&snd.progress);
	return NULL;
}

int sender_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int err;

	if (atomic_exchange(&snd.running, 1))
		return 0;
	atomic_store(&snd.finished, 0);
	atomic_store(&snd.stop_req, 0);
	if (pthread_attr_init(&attr) != 0) {
		atomic_store(&snd.running, 0);
		return -ENOMEM;
	}
	(void)pthread_attr_setstacksize(&attr, SENDER_STACK_BYTES);
	/* The thread inherits this mask: all signals blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&snd.thread, &attr, sender_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		atomic_store(&snd.running, 0);
		return -err;
	}
	return 0;
}

int sender_running(void)
{
	return atomic_load(&snd.running) && !atomic_load(&snd.finished);
}

/* Wait until done(arg) holds, for at most timeout_ms: woken by the
 * thread's progress, and looking again every 10 ms whatever happens. */
static int sender_wait(int (*done)(uint64_t arg), uint64_t arg, int timeout_ms)
{
	uint64_t deadline = clock_mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

	for (;;) {
		uint32_t seen = atomic_load(&snd.progress);
		uint64_t now;

		if (done(arg))
			return 0;
		now = clock_mono_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		uint64_t left_ms = (deadline - now + 999999) / 1000000;
		sender_futex_wait(&snd.progress, seen, left_ms < 10 ? (unsigned)left_ms : 10);
	}
}

static int sender_flushed(uint64_t want)
{
	return atomic_load(&snd.flush_done) >= want || atomic_load(&snd.finished);
}

static int sender_done(uint64_t unused)
{
	(void)unused;
	return atomic_load_explicit(&snd.finished, memory_order_acquire);
}

void sender_flush(int timeout_ms)
{
	if (!sender_running() || pthread_equal(pthread_self(), snd.thread))
		return;
	uint64_t want = atomic_fetch_add(&snd.flush_req, 1) + 1;
	sender_futex_bump(&snd.wake);
	if (sender_wait(sender_flushed, want, timeout_ms))
		agent_debug("flush: the sender did not answer within %d ms", timeout_ms);
}

void sender_stop(int timeout_ms)
{
	if (!atomic_load(&snd.running) || pthread_equal(pthread_self(), snd.thread))
		return;
	atomic_store(&snd.stop_req, 1);
	sender_futex_bump(&snd.wake);
	if (sender_wait(sender_done, 0, timeout_ms)) {
		/* Leave it: the process exits around it. */
		agent_debug("the sender did not finish within %d ms: exiting without it", timeout_ms);
		return;
	}
	pthread_join(snd.thread, NULL);
	atomic_store(&snd.running, 0);
}

void sender_after_fork_child(void)
{
	/* The child has no sender thread. The socket is the parent's
	 * connection: our copy is closed so that the collector sees the
	 * parent's end-of-stream when the parent is done, whatever the child
	 * does. The writer is left alone (never flushed: its bytes belong to
	 * the parent's stream); its memory is a copy-on-write page or two. */
	if (snd.fd >= 0)
		close(snd.fd);
	snd.fd = -1;
	if (snd.w)
		sender_parents_writers[sender_nparents++ % 8] = snd.w;
	snd.w = NULL;
	snd.kind = SINK_NONE;
	snd.pending = 0;
	atomic_store(&snd.running, 0);
	atomic_store(&snd.finished, 0);
	atomic_store(&snd.stop_req, 0);
	atomic_store(&snd.flush_req, 0);
	atomic_store(&snd.flush_done, 0);
	atomic_store(&snd.wake, 0);
	atomic_store(&snd.progress, 0);
}
