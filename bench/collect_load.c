/*
 * collect_load.c - the collector's load generator: S simulated ranks, each
 * its own connection speaking the agent's wire format, streaming an
 * FSDP-like sequence of collectives at R per second per rank.
 *
 * usage:
 *   collect_load --address ADDR [--ranks S] [--rate R] (--seconds T | --steps N | --records M)
 *                [--layers L] [--threads K] [--ring-slots Q] [--counts FILE]
 *   collect_load --check TRACE --counts FILE
 *
 * Sending: every rank connects first (all connections are open before any
 * record goes out), then K threads (default 2) each drive their share of
 * the ranks from one epoll loop with a 5 ms timer: at each tick a rank
 * writes the collectives its schedule has made due since the last tick
 * (collect_stream.h: 3 L + 1 collectives and one NVTX step range per step),
 * its chunk goes out at least every 100 ms and its drops record every
 * second, as the agent's sender does. --rate 0 sends as fast as the
 * collector reads (the memory runs), one step per rank per turn from one
 * thread, so that the ranks stay within a step of each other as the ranks
 * of a real job do (their collectives wait for one another); a rank
 * running ahead without bound would make the analysis' cross-rank matching
 * hold every collective the others have not reached. Writes block, as the agent's do; while
 * a rank's writes are stuck, its schedule runs on, and when more than Q
 * collectives (default 65536, the agent's ring) are due and not written the
 * excess is dropped as a full ring drops it: the call numbers advance and
 * the drops records count it. At the end every rank sends its drops and
 * process_end, closes its stream (trace_end), shuts its side down and waits
 * until the collector closes the connection (so every byte was read), while
 * reading and discarding what the collector writes back (acks).
 *
 * It prints, per run, what was sent and how far behind its schedule the
 * slowest rank got (a collector that cannot keep up shows as lag first,
 * then as drops), and with --counts writes per rank what it issued and
 * wrote. --check reads the collector's trace and compares, per rank (the
 * hello's rank), the collectives in the trace with those counts: exit 0
 * only when every rank is there once, ended, with every collective it
 * issued, and the trace is whole.
 */
#include "bench/collect_stream.h"

#include "common/clock.h"
#include "common/record.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "common/wire.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define TICK_NS 5000000ull
#define FLUSH_EVERY_NS 100000000ull /* the agent's sender: a busy ring still goes out 10 times a second */
#define DROPS_EVERY_NS 1000000000ull
#define SEND_TIMEOUT_S 30 /* a collector that stops reading for this long fails the rank */
#define DRAIN_TIMEOUT_NS (120ull * 1000000000ull)
#define DEFAULT_RING_SLOTS 65536u
#define CONNECT_TIMEOUT_NS (30ull * 1000000000ull)

enum rank_state {
	RANK_SENDING,
	RANK_DRAINING, /* our side is shut down: waiting for the collector to close */
	RANK_DONE,
	RANK_FAILED,
};

struct rank {
	int fd;
	trace_writer_t *w;
	struct collect_stream s;
	enum rank_state state;
	int error;	/* the write error that failed the rank */
	uint64_t total; /* collectives to issue */
	uint64_t last_flush_ns, last_drops_ns;
	uint64_t max_lag; /* most collectives due and not yet written at a tick */
	uint64_t end_ns;  /* when its last record was written */
};

struct options {
	const char *address;
	int ranks, layers, threads;
	double rate, seconds;
	uint64_t steps, records;
	uint64_t ring_slots;
	const char *counts;
	const char *check;
};

struct worker {
	pthread_t thread;
	int index;
	const struct options *o;
	struct rank *ranks; /* all of them; this worker drives index, index + K, ... */
	uint64_t start_ns, period_ns;
	int error;
};

static void usage(void)
{
	fprintf(stderr,
		"usage: collect_load --address ADDR [--ranks S] [--rate R] (--seconds T | --steps N | --records M)\n"
		"                    [--layers L] [--threads K] [--ring-slots Q] [--counts FILE]\n"
		"       collect_load --check TRACE --counts FILE\n");
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec / 1e6;
}

static int rank_mine(const struct worker *wk, int r)
{
	return r % wk->o->threads == wk->index;
}

/* Write what is due for rank r at now; end its stream when all is issued. */
static void rank_turn(struct worker *wk, struct rank *k, uint64_t now)
{
	const struct options *o = wk->o;
	uint64_t due;
	int rc = 0;

	if (k->state != RANK_SENDING)
		return;
	if (o->rate > 0) {
		due = (uint64_t)((double)(now - wk->start_ns) * o->rate / 1e9);
		if (due > k->total)
			due = k->total;
		if (due > k->s.issued && due - k->s.issued > k->max_lag)
			k->max_lag = due - k->s.issued;
		if (due > k->s.issued + o->ring_slots)
			collect_stream_drop(&k->s, due - k->s.issued - o->ring_slots);
	} else {
		due = k->s.issued + collect_stream_per_step(&k->s.c);
		if (due > k->total)
			due = k->total;
	}
	while (rc == 0 && k->s.issued < due)
		rc = collect_stream_next(&k->s, k->w, wk->start_ns + k->s.issued * wk->period_ns);
	now = clock_mono_ns();
	if (rc == 0 && now - k->last_drops_ns >= DROPS_EVERY_NS) {
		rc = collect_stream_drops(&k->s, k->w, now);
		k->last_drops_ns = now;
	}
	if (rc == 0 && now - k->last_flush_ns >= FLUSH_EVERY_NS) {
		rc = trace_writer_flush(k->w);
		k->last_flush_ns = now;
	}
	if (rc == 0 && k->s.issued == k->total) {
		rc = collect_stream_end(&k->s, k->w, now);
		int crc = trace_writer_close(k->w);

		k->w = NULL;
		if (rc == 0)
			rc = crc;
		if (rc == 0) {
			k->end_ns = clock_mono_ns();
			shutdown(k->fd, SHUT_WR);
			k->state = RANK_DRAINING;
		}
	}
	if (rc != 0) {
		k->state = RANK_FAILED;
		k->error = rc;
	}
}

/* Read and drop what the collector wrote back; close on its end of file. */
static void rank_read(struct rank *k)
{
	char buf[4096];

	for (;;) {
		ssize_t n = recv(k->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			if (k->state == RANK_DRAINING)
				k->state = RANK_DONE;
			else if (k->state == RANK_SENDING) {
				k->state = RANK_FAILED;
				k->error = n == 0 ? -ECONNRESET : -errno;
			}
		}
		return;
	}
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	const struct options *o = wk->o;
	struct epoll_event ev, evs[64];
	struct itimerspec its = {{0, (long)TICK_NS}, {0, (long)TICK_NS}};
	int ep = epoll_create1(EPOLL_CLOEXEC), tfd = -1, left = 0;
	uint64_t drain_since = 0;

	if (ep < 0) {
		wk->error = -errno;
		return NULL;
	}
	if (o->rate > 0) {
		tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		ev.events = EPOLLIN;
		ev.data.u64 = UINT64_MAX;
		if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL) != 0 ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) != 0) {
			wk->error = -errno;
			goto out;
		}
	}
	for (int r = 0; r < o->ranks; r++) {
		if (!rank_mine(wk, r))
			continue;
		ev.events = EPOLLIN | EPOLLRDHUP;
		ev.data.u64 = (uint64_t)r;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, wk->ranks[r].fd, &ev) != 0) {
			wk->error = -errno;
			goto out;
		}
		left++;
	}
	while (left > 0) {
		int sending = 0, ticked = o->rate <= 0;
		int n = epoll_wait(ep, evs, 64, o->rate > 0 ? -1 : 0);

		if (n < 0 && errno != EINTR) {
			wk->error = -errno;
			break;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == UINT64_MAX) {
				uint64_t ticks;

				if (read(tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
					wk->error = -errno;
				ticked = 1;
				continue;
			}
			rank_read(&wk->ranks[evs[i].data.u64]);
		}
		uint64_t now = clock_mono_ns();

		left = 0;
		for (int r = 0; r < o->ranks; r++) {
			struct rank *k = &wk->ranks[r];

			if (!rank_mine(wk, r))
				continue;
			if (ticked)
				rank_turn(wk, k, now);
			if (k->state == RANK_SENDING)
				sending++;
			if (k->state == RANK_SENDING || k->state == RANK_DRAINING)
				left++;
		}
		if (sending == 0 && left > 0) {
			/* Only waiting for the collector to close: block on the sockets. */
			if (!drain_since)
				drain_since = now;
			if (now - drain_since > DRAIN_TIMEOUT_NS)
				break;
			n = epoll_wait(ep, evs, 64, 1000);
			for (int i = 0; i < n; i++)
				if (evs[i].data.u64 != UINT64_MAX)
					rank_read(&wk->ranks[evs[i].data.u64]);
		}
	}
out:
	if (tfd >= 0)
		close(tfd);
	close(ep);
	return NULL;
}

static int connect_rank(const struct wire_address *addr, const unsigned char *key, struct rank *k)
{
	struct timeval tv = {SEND_TIMEOUT_S, 0};
	struct sockaddr_storage peer;
	uint64_t deadline = clock_mono_ns() + CONNECT_TIMEOUT_NS;
	int rc;

	/* A unix listener whose backlog is full answers a non-blocking connect
	 * with EAGAIN and leaves the socket unconnected, which wire_connect
	 * takes for connected: check, and retry as an agent retries its sink. */
	for (;;) {
		socklen_t len = sizeof(peer);

		if ((rc = wire_connect(addr, 10000, &k->fd)) != 0)
			return rc;
		if (getpeername(k->fd, (struct sockaddr *)&peer, &len) == 0)
			break;
		close(k->fd);
		k->fd = -1;
		if (errno != ENOTCONN || clock_mono_ns() > deadline)
			return -ENOTCONN;
		usleep(10000);
	}
	if (setsockopt(k->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		return -errno;
	if (key) {
		unsigned char hello[WIRE_KEY_HELLO_BYTES];

		wire_key_hello(key, hello);
		if (send(k->fd, hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hello))
			return -EIO;
	}
	return 0;
}

static int write_counts(const char *path, const struct options *o, const struct rank *ranks)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fprintf(f, "# rank issued written dropped records nvtx\n");
	for (int r = 0; r < o->ranks; r++) {
		const struct collect_stream *s = &ranks[r].s;

		fprintf(f, "%d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", r, s->issued, s->written,
			s->dropped, s->records, s->nvtx);
	}
	return fclose(f) == 0 ? 0 : -EIO;
}

static int send_all(const struct options *o)
{
	struct wire_address addr;
	unsigned char key[WIRE_KEY_BYTES];
	struct collect_stream_config sc;
	struct rank *ranks = calloc((size_t)o->ranks, sizeof(*ranks));
	struct worker *wk = calloc((size_t)o->threads, sizeof(*wk));
	uint64_t per_step, total, now, start, end = 0, max_lag = 0, issued = 0, written = 0, dropped = 0, records = 0;
	int rc, failed = 0;

	if (!ranks || !wk)
		return -ENOMEM;
	if ((rc = wire_address_parse(o->address, &addr)) != 0) {
		fprintf(stderr, "collect_load: bad address %s\n", o->address);
		goto out;
	}
	if (addr.key_path[0] && (rc = wire_key_load(addr.key_path, key)) != 0) {
		fprintf(stderr, "collect_load: cannot load the key %s: %s\n", addr.key_path, strerror(-rc));
		goto out;
	}
	sc.ranks = o->ranks;
	sc.layers = o->layers;
	sc.period_ns = o->rate > 0 ? (uint64_t)(1e9 / o->rate) : 500000;
	sc.pid_base = 100000;
	per_step = collect_stream_per_step(&sc);
	if (o->steps)
		total = o->steps * per_step;
	else if (o->records) /* records per rank, the stream's start and end aside */
		total = (o->records / (uint64_t)o->ranks) * per_step / (per_step + 1);
	else
		total = (uint64_t)(o->seconds * o->rate);
	for (int r = 0; r < o->ranks; r++) {
		ranks[r].fd = -1;
		if ((rc = connect_rank(&addr, addr.key_path[0] ? key : NULL, &ranks[r])) != 0) {
			fprintf(stderr, "collect_load: rank %d cannot connect to %s: %s\n", r, o->address,
				strerror(-rc));
			goto out;
		}
	}
	now = clock_mono_ns();
	for (int r = 0; r < o->ranks; r++) {
		struct rank *k = &ranks[r];

		k->total = total;
		k->last_flush_ns = k->last_drops_ns = now;
		if ((rc = trace_writer_open_fd(&k->w, k->fd, NULL)) != 0 ||
		    (rc = collect_stream_begin(&k->s, k->w, &sc, r, now)) != 0 ||
		    (rc = trace_writer_flush(k->w)) != 0) {
			fprintf(stderr, "collect_load: rank %d cannot start its stream: %s\n", r, strerror(-rc));
			goto out;
		}
	}
	start = clock_mono_ns();
	for (int i = 0; i < o->threads; i++) {
		wk[i] =
		    (struct worker){.index = i, .o = o, .ranks = ranks, .start_ns = start, .period_ns = sc.period_ns};
		if ((rc = -pthread_create(&wk[i].thread, NULL, worker_main, &wk[i])) != 0)
			goto out;
	}
	for (int i = 0; i < o->threads; i++) {
		pthread_join(wk[i].thread, NULL);
		if (wk[i].error)
			fprintf(stderr, "collect_load: thread %d: %s\n", i, strerror(-wk[i].error));
	}
	for (int r = 0; r < o->ranks; r++) {
		const struct rank *k = &ranks[r];

		if (k->state != RANK_DONE) {
			if (failed++ < 8)
				fprintf(stderr, "collect_load: rank %d: %s\n", r,
					k->state == RANK_FAILED ? strerror(-k->error)
								: "the collector did not close its connection");
		}
		issued += k->s.issued;
		written += k->s.written;
		dropped += k->s.dropped;
		records += k->s.records;
		if (k->max_lag > max_lag)
			max_lag = k->max_lag;
		if (k->end_ns > end)
			end = k->end_ns;
	}
	double wall = (double)(end > start ? end - start : 1) / 1e9;

	printf("collect_load: %d ranks, %d layers (%" PRIu64 " collectives a step), rate %s%.0f collectives/s/rank\n",
	       o->ranks, o->layers, per_step, o->rate > 0 ? "" : "unpaced, ", o->rate);
	printf("sent: %" PRIu64 " collectives issued, %" PRIu64 " written, %" PRIu64 " dropped (ring of %" PRIu64
	       " full), %" PRIu64 " records\n",
	       issued, written, dropped, o->ring_slots, records);
	printf("send time: %.3f s, %.0f records/s, %.0f collectives/s/rank", wall, (double)records / wall,
	       (double)written / o->ranks / wall);
	if (o->rate > 0)
		printf(", schedule %.3f s, end lag %.3f s, max lag %" PRIu64 " collectives (%.3f s)",
		       (double)total / o->rate, wall - (double)total / o->rate, max_lag, (double)max_lag / o->rate);
	printf("\ngenerator CPU: %.3f s (%.2f CPU-s per s of wall)\n", cpu_seconds(), cpu_seconds() / wall);
	printf("ranks not ended cleanly: %d\n", failed);
	if (o->counts && (rc = write_counts(o->counts, o, ranks)) != 0)
		fprintf(stderr, "collect_load: cannot write %s: %s\n", o->counts, strerror(-rc));
	if (rc == 0 && failed)
		rc = -EPIPE;
out:
	for (int r = 0; r < o->ranks; r++) {
		if (ranks[r].w)
			trace_writer_close(ranks[r].w);
		if (ranks[r].fd >= 0)
			close(ranks[r].fd);
	}
	free(ranks);
	free(wk);
	return rc;
}

/* ---- --check --------------------------------------------------------------- */

struct seen_source {
	int32_t rank;
	int path;
	int ended;
	uint64_t collectives, max_seq;
};

struct check {
	struct seen_source *src;
	size_t n;
};

static int check_record(void *ctx, const struct fss_record_head *rec)
{
	struct check *c = ctx;

	if (rec->source == FSS_SOURCE_NONE)
		return 0;
	if (rec->source >= c->n) {
		size_t n = (size_t)rec->source + 1;
		struct seen_source *s = realloc(c->src, n * sizeof(*s));

		if (!s)
			return -ENOMEM;
		memset(s + c->n, 0, (n - c->n) * sizeof(*s));
		for (size_t i = c->n; i < n; i++)
			s[i].rank = -1;
		c->src = s;
		c->n = n;
	}
	struct seen_source *s = &c->src[rec->source];

	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO:
		s->rank = ((const struct fss_rec_process_hello *)rec)->rank;
		s->path = ((const struct fss_rec_process_hello *)rec)->path;
		break;
	case FSS_REC_COLLECTIVE:
		s->collectives++;
		if (((const struct fss_rec_collective *)rec)->seq > s->max_seq)
			s->max_seq = ((const struct fss_rec_collective *)rec)->seq;
		break;
	case FSS_REC_PROCESS_END:
		s->ended = 1;
		break;
	default:
		break;
	}
	return 0;
}

static int check_trace(const struct options *o)
{
	struct check c = {0};
	struct trace_parser_ops ops = {.on_record = check_record};
	struct trace_read_info info;
	FILE *f = fopen(o->counts, "r");
	uint64_t *issued = NULL, *in_trace = NULL, sum_issued = 0, sum_written = 0, sum_dropped = 0, sum_trace = 0;
	int *copies = NULL, nranks = 0, cap = 0, bad = 0, rc;
	char line[256];

	if (!f) {
		fprintf(stderr, "collect_load: cannot read %s: %s\n", o->counts, strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		int r;
		uint64_t is, wr, dr;

		if (line[0] == '#' || sscanf(line, "%d %" SCNu64 " %" SCNu64 " %" SCNu64, &r, &is, &wr, &dr) != 4)
			continue;
		if (r != nranks || nranks == INT32_MAX) {
			fclose(f);
			fprintf(stderr, "collect_load: %s: ranks out of order\n", o->counts);
			return -EINVAL;
		}
		if (nranks == cap) {
			cap = cap ? 2 * cap : 64;
			issued = realloc(issued, (size_t)cap * sizeof(*issued));
			if (!issued) {
				fclose(f);
				return -ENOMEM;
			}
		}
		issued[nranks++] = is;
		sum_issued += is;
		sum_written += wr;
		sum_dropped += dr;
	}
	fclose(f);
	rc = trace_read(o->check, &ops, &c, &info);
	in_trace = calloc((size_t)nranks + 1, sizeof(*in_trace));
	copies = calloc((size_t)nranks + 1, sizeof(*copies));
	if (!in_trace || !copies) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.n; i++) {
		const struct seen_source *s = &c.src[i];

		if (s->path != FSS_PATH_SYNTHETIC || s->rank < 0 || s->rank >= nranks)
			continue;
		copies[s->rank]++;
		in_trace[s->rank] += s->collectives;
		if (!s->ended && bad++ < 8)
			printf("rank %d (source %zu): no process_end\n", s->rank, i);
	}
	for (int r = 0; r < nranks; r++) {
		sum_trace += in_trace[r];
		if (copies[r] != 1 || in_trace[r] != issued[r]) {
			if (bad++ < 8)
				printf("rank %d: %d source(s), %" PRIu64 " collectives in the trace, %" PRIu64
				       " issued\n",
				       r, copies[r], in_trace[r], issued[r]);
		}
	}
	printf("check: %d ranks, %" PRIu64 " collectives issued, %" PRIu64 " sent, %" PRIu64
	       " dropped by the senders, %" PRIu64 " in the trace, %" PRIu64 " lost after sending\n",
	       nranks, sum_issued, sum_written, sum_dropped, sum_trace,
	       sum_written > sum_trace ? sum_written - sum_trace : 0);
	printf("trace: %s%s%s\n", rc == 0 ? "whole" : "NOT whole: ", rc == 0 ? "" : info.message,
	       info.damage.gaps ? " (damaged chunks skipped)" : "");
	printf("loss: %s\n", rc == 0 && bad == 0 ? "none" : "YES");
	if (rc == 0 && bad)
		rc = -EPROTO;
out:
	free(c.src);
	free(issued);
	free(in_trace);
	free(copies);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"address", required_argument, NULL, 'a'},
						 {"ranks", required_argument, NULL, 'n'},
						 {"rate", required_argument, NULL, 'r'},
						 {"seconds", required_argument, NULL, 's'},
						 {"steps", required_argument, NULL, 'S'},
						 {"records", required_argument, NULL, 'R'},
						 {"layers", required_argument, NULL, 'l'},
						 {"threads", required_argument, NULL, 't'},
						 {"ring-slots", required_argument, NULL, 'q'},
						 {"counts", required_argument, NULL, 'c'},
						 {"check", required_argument, NULL, 'C'},
						 {"help", no_argument, NULL, 'h'},
						 {NULL, 0, NULL, 0}};
	struct options o = {.ranks = 256, .layers = 16, .threads = 2, .rate = 2000, .ring_slots = DEFAULT_RING_SLOTS};
	int c, rc;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			o.address = optarg;
			break;
		case 'n':
			o.ranks = atoi(optarg);
			break;
		case 'r':
			o.rate = atof(optarg);
			break;
		case 's':
			o.seconds = atof(optarg);
			break;
		case 'S':
			o.steps = strtoull(optarg, NULL, 10);
			break;
		case 'R':
			o.records = (uint64_t)atof(optarg);
			break;
		case 'l':
			o.layers = atoi(optarg);
			break;
		case 't':
			o.threads = atoi(optarg);
			break;
		case 'q':
			o.ring_slots = strtoull(optarg, NULL, 10);
			break;
		case 'c':
			o.counts = optarg;
			break;
		case 'C':
			o.check = optarg;
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	if (o.check) {
		if (!o.counts) {
			usage();
			return 2;
		}
		return check_trace(&o) == 0 ? 0 : 1;
	}
	if (!o.address || o.ranks < 1 || o.layers < 1 || o.threads < 1 || o.rate < 0 || o.ring_slots < 1 ||
	    (!o.steps && !o.records && (o.seconds <= 0 || o.rate <= 0))) {
		usage();
		return 2;
	}
	if (o.threads > o.ranks)
		o.threads = o.ranks;
	if (o.rate == 0)
		o.threads = 1; /* the ranks in lockstep */
	signal(SIGPIPE, SIG_IGN);
	rc = send_all(&o);
	return rc == 0 ? 0 : 1;
}
