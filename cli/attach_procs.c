/*
 * attach_procs.c - /proc for `fsdpscope attach` (cli/attach_procs.h).
 */
#include "cli/attach_procs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Read a whole /proc file (they are small, and st_size says 0). Returns the
 * bytes read, or -errno; the buffer is NUL-terminated. */
static ssize_t read_proc(pid_t pid, const char *name, char **buf)
{
	char path[64];
	size_t cap = 4096, len = 0;
	char *b;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	b = malloc(cap);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n;

		if (len + 1 >= cap) {
			char *nb = cap < (1u << 24) ? realloc(b, cap * 2) : NULL;

			if (!nb) {
				free(b);
				close(fd);
				return -ENOMEM;
			}
			b = nb;
			cap *= 2;
		}
		n = read(fd, b + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno == ESRCH ? -ESRCH : -errno;

			free(b);
			close(fd);
			return e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	b[len] = '\0';
	*buf = b;
	return (ssize_t)len;
}

static int32_t env_int(const char *v)
{
	char *end;
	long x;

	if (!*v)
		return -1;
	errno = 0;
	x = strtol(v, &end, 10);
	if (*end || errno || x < 0 || x > INT32_MAX)
		return -1;
	return (int32_t)x;
}

static void read_environ(pid_t pid, struct attach_proc_info *p)
{
	static const struct {
		const char *name;
		size_t off;
	} keys[] = {
		{"RANK=", offsetof(struct attach_proc_info, rank)},
		{"LOCAL_RANK=", offsetof(struct attach_proc_info, local_rank)},
		{"WORLD_SIZE=", offsetof(struct attach_proc_info, world_size)},
		{"SLURM_PROCID=", offsetof(struct attach_proc_info, slurm_procid)},
		{"OMPI_COMM_WORLD_RANK=", offsetof(struct attach_proc_info, ompi_rank)},
	};
	char *buf;
	ssize_t n = read_proc(pid, "environ", &buf);

	if (n < 0)
		return;
	p->environ_read = 1;
	for (char *s = buf; s < buf + n; s += strlen(s) + 1)
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (strncmp(s, keys[k].name, strlen(keys[k].name)) == 0)
				*(int32_t *)((char *)p + keys[k].off) = env_int(s + strlen(keys[k].name));
	free(buf);
}

/* ppid and state from /proc/PID/stat: "pid (comm) S ppid ..."; comm may hold ')' */
static int read_stat(pid_t pid, pid_t *ppid, char *state, char *comm, size_t commlen)
{
	char *buf, *open_paren, *close_paren;
	ssize_t n = read_proc(pid, "stat", &buf);
	int pp;

	if (n < 0)
		return (int)n;
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren ||
	    sscanf(close_paren + 1, " %c %d", state, &pp) != 2) {
		free(buf);
		return -EIO;
	}
	if (comm)
		snprintf(comm, commlen, "%.*s", (int)(close_paren - open_paren - 1), open_paren + 1);
	*ppid = pp;
	free(buf);
	return 0;
}

int attach_proc_read(pid_t pid, struct attach_proc_info *p)
{
	char state, comm[64] = "", *buf;
	ssize_t n;
	int err;

	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->tgid = pid;
	p->rank = p->local_rank = p->world_size = p->slurm_procid = p->ompi_rank = -1;
	if (pid <= 0)
		return -ESRCH;
	err = read_stat(pid, &p->ppid, &state, comm, sizeof(comm));
	if (err)
		return err;
	if (state == 'Z' || state == 'X')
		return -ESRCH;
	n = read_proc(pid, "status", &buf);
	if (n >= 0) {
		for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
			unsigned v;

			if (sscanf(line, "Tgid: %u", &v) == 1)
				p->tgid = (pid_t)v;
			else if (sscanf(line, "Uid: %u", &v) == 1)
				p->uid = (uid_t)v;
		}
		free(buf);
	}
	p->is_thread = p->tgid != pid;
	n = read_proc(pid, "cmdline", &buf);
	if (n >= 0) {
		size_t off = 0;

		snprintf(p->command, sizeof(p->command), "%s", buf);
		for (char *s = buf; s < buf + n && off + 1 < sizeof(p->cmdline); s += strlen(s) + 1)
			off += (size_t)snprintf(p->cmdline + off, sizeof(p->cmdline) - off, "%s%s", off ? " " : "", s);
		free(buf);
	}
	if (!p->command[0])
		snprintf(p->command, sizeof(p->command), "%s", comm);
	if (!p->cmdline[0])
		snprintf(p->cmdline, sizeof(p->cmdline), "[%s]", comm);
	read_environ(pid, p);
	return 0;
}

int attach_proc_alive(pid_t pid)
{
	pid_t ppid;
	char state;

	return pid > 0 && read_stat(pid, &ppid, &state, NULL, 0) == 0 && state != 'Z' && state != 'X';
}

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

/* Every process of /proc with its parent. */
static int scan(pid_t **pids, pid_t **ppids, size_t *n)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t cap = 0;

	*pids = *ppids = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		pid_t pid, ppid;
		char state;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = (pid_t)atoi(e->d_name);
		if (read_stat(pid, &ppid, &state, NULL, 0))
			continue; /* gone meanwhile */
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			pid_t *a = realloc(*pids, nc * sizeof(pid_t)), *b;

			if (a)
				*pids = a;
			b = a ? realloc(*ppids, nc * sizeof(pid_t)) : NULL;
			if (!b) {
				closedir(d);
				free(*pids);
				free(*ppids);
				*pids = *ppids = NULL;
				*n = 0;
				return -ENOMEM;
			}
			*ppids = b;
			cap = nc;
		}
		(*pids)[*n] = pid;
		(*ppids)[*n] = ppid;
		(*n)++;
	}
	closedir(d);
	return 0;
}

int attach_proc_all(pid_t **out, size_t *n)
{
	pid_t *ppids;
	int err = scan(out, &ppids, n);

	if (err)
		return err;
	free(ppids);
	qsort(*out, *n, sizeof(pid_t), pid_cmp);
	return 0;
}

int attach_proc_descendants(pid_t root, pid_t **out, size_t *nout)
{
	pid_t *pids, *ppids, *res;
	size_t n, nres = 0;
	int err = scan(&pids, &ppids, &n);

	*out = NULL;
	*nout = 0;
	if (err)
		return err;
	res = malloc((n ? n : 1) * sizeof(pid_t));
	if (!res) {
		free(pids);
		free(ppids);
		return -ENOMEM;
	}
	/* Breadth first: res grows with the children of what it holds. */
	for (size_t i = 0; i < n; i++)
		if (ppids[i] == root && pids[i] != root)
			res[nres++] = pids[i];
	for (size_t k = 0; k < nres; k++)
		for (size_t i = 0; i < n; i++)
			if (ppids[i] == res[k] && pids[i] != root) {
				size_t j;

				for (j = 0; j < nres && res[j] != pids[i]; j++)
					;
				if (j == nres)
					res[nres++] = pids[i];
			}
	free(pids);
	free(ppids);
	qsort(res, nres, sizeof(pid_t), pid_cmp);
	*out = res;
	*nout = nres;
	return 0;
}
