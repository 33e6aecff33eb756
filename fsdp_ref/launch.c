/* fsdp_ref/launch.c: starting the ranks (see launch.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsdp_ref/launch.h"

/* Shared between the forked ranks: rank 0 publishes the id here. */
struct id_box {
	atomic_int state; /* 0 waiting, 1 id published, -1 rank 0 failed */
	ncclUniqueId id;
};

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int env_int(const char *name, int *out)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return 0;
	char *end = NULL;
	long v = strtol(s, &end, 10);
	if (*end || v < 0 || v > 1 << 20)
		return -1;
	*out = (int)v;
	return 1;
}

int launch_world_size(int nranks, const char *unique_id_file, int *world_size, char *err, size_t errlen)
{
	int rank = -1, world = -1;
	int has_rank = env_int("RANK", &rank), has_world = env_int("WORLD_SIZE", &world);
	if (has_rank < 0 || has_world < 0 || (has_rank == 1 && has_world == 1 && rank >= world) || world == 0) {
		snprintf(err, errlen, "bad RANK / WORLD_SIZE in the environment");
		return -EINVAL;
	}
	if (has_rank && has_world) {
		if (!unique_id_file) {
			snprintf(err, errlen,
				 "RANK and WORLD_SIZE are set: pass --unique-id-file PATH (a path all ranks see)");
			return -EINVAL;
		}
		*world_size = world;
		return 0;
	}
	if (unique_id_file) {
		snprintf(err, errlen, "--unique-id-file needs RANK and WORLD_SIZE in the environment");
		return -EINVAL;
	}
	*world_size = nranks;
	return 0;
}

static int write_id_file(const char *path, const ncclUniqueId *id)
{
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, id, sizeof *id);
	int rc = n == (ssize_t)sizeof *id ? 0 : -EIO;
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

static int read_id_file(const char *path, ncclUniqueId *id)
{
	for (int waited_ms = 0; waited_ms < LAUNCH_ID_TIMEOUT_S * 1000; waited_ms += 10) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t n = read(fd, id, sizeof *id);
			close(fd);
			if (n == (ssize_t)sizeof *id)
				return 0;
			return -EIO; /* renamed into place whole: a short file is not ours */
		}
		sleep_ms(10);
	}
	return -ETIMEDOUT;
}

static int launch_external(const char *path, struct launch_info *info, char *err, size_t errlen)
{
	env_int("RANK", &info->rank);
	env_int("WORLD_SIZE", &info->world_size);
	info->local_rank = info->rank;
	env_int("LOCAL_RANK", &info->local_rank);
	info->external = 1;
	int rc;
	if (info->rank == 0) {
		if (ncclGetUniqueId(&info->id) != ncclSuccess) {
			snprintf(err, errlen, "ncclGetUniqueId failed");
			return -EIO;
		}
		rc = write_id_file(path, &info->id);
		if (rc < 0)
			snprintf(err, errlen, "cannot write the unique id to %s: %s", path, strerror(-rc));
	} else {
		rc = read_id_file(path, &info->id);
		if (rc < 0)
			snprintf(err, errlen, "no unique id in %s after %d s (is rank 0 running?)", path,
				 LAUNCH_ID_TIMEOUT_S);
	}
	return rc;
}

/* The rank side of a fork: get the id from rank 0's box. */
static int child_rank(int rank, struct id_box *box, struct launch_info *info, char *err, size_t errlen)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* the job dies with its supervisor */
	info->local_rank = rank;
	info->rank = rank;
	if (rank == 0) {
		if (ncclGetUniqueId(&box->id) != ncclSuccess) {
			atomic_store(&box->state, -1);
			snprintf(err, errlen, "ncclGetUniqueId failed");
			return -EIO;
		}
		atomic_store(&box->state, 1);
	}
	for (int waited_ms = 0; atomic_load(&box->state) == 0; waited_ms++) {
		if (waited_ms > LAUNCH_ID_TIMEOUT_S * 1000) {
			snprintf(err, errlen, "rank %d: no unique id from rank 0", rank);
			return -ETIMEDOUT;
		}
		sleep_ms(1);
	}
	if (atomic_load(&box->state) < 0) {
		snprintf(err, errlen, "rank %d: rank 0 could not create the unique id", rank);
		return -EIO;
	}
	info->id = box->id;
	return 0;
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/* How long the others may take to end by themselves after the first
 * failure, before they are told to: a rank whose collective failed (every
 * rank of a mismatched collective, the peers of a dead rank) exits on its
 * own, and the fsdpscope agent in it flushes its last records on the way;
 * a SIGTERM in the middle would lose them. */
#define LAUNCH_GRACE_MS 2000
#define LAUNCH_KILL_MS 5000 /* then SIGKILL, this long after the SIGTERM */

/* The parent of a fork: wait for all ranks; on the first failure, let the
 * others end by themselves for LAUNCH_GRACE_MS, then terminate them
 * (SIGTERM, then SIGKILL after LAUNCH_KILL_MS). */
static int supervise(pid_t *pids, int n)
{
	int remaining = n, first_failure = 0, termed = 0;
	int64_t elapsed_ms = 0; /* since the first failure */
	while (remaining > 0) {
		int status;
		pid_t pid = waitpid(-1, &status, first_failure ? WNOHANG : 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pid == 0) { /* stopping the job: poll through the grace and the deadline */
			sleep_ms(10);
			elapsed_ms += 10;
			int sig = !termed && elapsed_ms >= LAUNCH_GRACE_MS			  ? SIGTERM
				  : termed == 1 && elapsed_ms >= LAUNCH_GRACE_MS + LAUNCH_KILL_MS ? SIGKILL
												  : 0;
			if (sig) {
				for (int i = 0; i < n; i++)
					if (pids[i] > 0)
						kill(pids[i], sig);
				termed++;
			}
			continue;
		}
		int r = -1;
		for (int i = 0; i < n; i++)
			if (pids[i] == pid)
				r = i;
		if (r < 0)
			continue;
		pids[r] = -1;
		remaining--;
		int code = exit_code_of(status);
		if (code != 0 && !first_failure) {
			first_failure = code;
			if (WIFSIGNALED(status))
				fprintf(stderr, "fsdp_ref: rank %d killed by signal %d; stopping the other ranks\n", r,
					WTERMSIG(status));
			else
				fprintf(stderr, "fsdp_ref: rank %d exited with status %d; stopping the other ranks\n",
					r, code);
			elapsed_ms = 0;
		}
	}
	return first_failure;
}

int launch_ranks(int nranks, const char *unique_id_file, struct launch_info *info, int *exit_status, char *err,
		 size_t errlen)
{
	memset(info, 0, sizeof *info);
	int world;
	int rc = launch_world_size(nranks, unique_id_file, &world, err, errlen);
	if (rc < 0)
		return rc;
	if (unique_id_file)
		return launch_external(unique_id_file, info, err, errlen);
	info->world_size = nranks;
	if (nranks == 1) {
		if (ncclGetUniqueId(&info->id) != ncclSuccess) {
			snprintf(err, errlen, "ncclGetUniqueId failed");
			return -EIO;
		}
		return 0;
	}
	struct id_box *box = mmap(NULL, sizeof *box, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t *pids = calloc((size_t)nranks, sizeof *pids);
	if (box == MAP_FAILED || !pids) {
		free(pids);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	atomic_store(&box->state, 0);
	fflush(NULL); /* children must not inherit unflushed output */
	for (int r = 0; r < nranks; r++) {
		pid_t pid = fork();
		if (pid == 0) {
			free(pids);
			rc = child_rank(r, box, info, err, errlen);
			munmap(box, sizeof *box);
			return rc;
		}
		if (pid < 0) {
			rc = -errno;
			snprintf(err, errlen, "fork: %s", strerror(errno));
			for (int i = 0; i < r; i++)
				kill(pids[i], SIGKILL);
			for (int i = 0; i < r; i++)
				waitpid(pids[i], NULL, 0);
			free(pids);
			munmap(box, sizeof *box);
			return rc;
		}
		pids[r] = pid;
	}
	*exit_status = supervise(pids, nranks);
	free(pids);
	munmap(box, sizeof *box);
	return 1;
}
