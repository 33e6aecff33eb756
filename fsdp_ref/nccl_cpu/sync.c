/* fsdp_ref/nccl_cpu/sync.c: futex waits with timeout, abort and liveness. */
#include "fsdp_ref/nccl_cpu/sync.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fsdp_ref/nccl_cpu/comm.h"

/* Spins before sleeping: a barrier among ranks that are all running
 * completes within a few microseconds; more spinning only steals the CPU
 * from the compute thread. */
#define SYNC_SPINS 32
/* Longest single futex sleep; also how often peers are checked for life. */
#define SYNC_SLICE_NS 100000000ull

uint64_t sync_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sync_shared_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

void sync_wake_all(_Atomic uint32_t *word)
{
	/* Shared (not FUTEX_PRIVATE) because waiters live in other processes. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait(_Atomic uint32_t *word, uint32_t old, uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
	/* EAGAIN (value changed), EINTR, ETIMEDOUT: the caller re-checks. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, old, &ts, NULL, 0);
}

/* A pid is dead when it is gone or a zombie nobody reaped yet. */
static int pid_alive(pid_t pid)
{
	if (pid <= 0 || pid == getpid())
		return 1;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 0;
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	const char *paren = strrchr(buf, ')');
	if (paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'))
		return 0;
	return 1;
}

/* The first dead peer among peers (npeers < 0: all ranks), or -1. */
static int find_dead_peer(struct ncclComm *c, const int *peers, int npeers)
{
	int count = npeers < 0 ? c->nranks : npeers;
	for (int i = 0; i < count; i++) {
		int r = npeers < 0 ? i : peers[i];
		if (r == c->rank)
			continue;
		pid_t pid = (pid_t)atomic_load(&c->ranks[r].pid);
		if (!pid_alive(pid))
			return r;
	}
	return -1;
}

int sync_wait(struct ncclComm *c, _Atomic uint32_t *word, uint32_t old, uint64_t since_ns, const int *peers, int npeers)
{
	for (int i = 0; i < SYNC_SPINS; i++) {
		if (atomic_load_explicit(word, memory_order_acquire) != old)
			return 0;
		cpu_relax();
	}
	uint64_t next_check = sync_now_ns() + SYNC_SLICE_NS;
	for (;;) {
		if (atomic_load_explicit(word, memory_order_acquire) != old)
			return 0;
		if (atomic_load(&c->header->aborted))
			return -ECONNABORTED;
		uint64_t now = sync_now_ns();
		if (now - since_ns >= c->timeout_ns)
			return -ETIMEDOUT;
		if (now >= next_check) {
			int dead = find_dead_peer(c, peers, npeers);
			if (dead >= 0) {
				/* It may have delivered what we wait for just before dying. */
				if (atomic_load_explicit(word, memory_order_acquire) != old)
					return 0;
				c->dead_rank = dead;
				return -EPIPE;
			}
			next_check = now + SYNC_SLICE_NS;
		}
		uint64_t left = c->timeout_ns - (now - since_ns);
		futex_wait(word, old, left < SYNC_SLICE_NS ? left : SYNC_SLICE_NS);
	}
}

int sync_barrier(struct ncclComm *c, uint64_t *t_last_ns)
{
	struct segment_header *h = c->header;
	uint64_t now = sync_now_ns();
	/* Read the generation before arriving: it cannot advance without us. */
	uint32_t gen = atomic_load(&h->barrier_gen);
	if (atomic_fetch_add(&h->barrier_count, 1) == (uint32_t)c->nranks - 1) {
		atomic_store(&h->barrier_count, 0);
		atomic_store(&h->barrier_time_ns, sync_shared_now_ns());
		atomic_store(&h->barrier_gen, gen + 1);
		if (c->nranks > 1)
			sync_wake_all(&h->barrier_gen);
	} else {
		int rc = sync_wait(c, &h->barrier_gen, gen, now, NULL, -1);
		if (rc)
			return rc;
	}
	/* The next barrier's last arriver cannot overwrite this before we
	 * arrive there, so the value read is this barrier's. */
	if (t_last_ns)
		*t_last_ns = atomic_load(&h->barrier_time_ns);
	c->barriers++;
	return 0;
}
