/*
 * attach_procs.h - what `fsdpscope attach` reads of processes in /proc:
 * who a process is (parent, command, the rank its launcher put in its
 * environment), its descendants (a launcher's ranks), every process of the
 * machine (--all). No libbpf: the CLI and its tests use it everywhere.
 *
 * /proc/PID/environ is the environment the process was exec'd with: a rank
 * that its parent forked without exec, or that set RANK itself later, shows
 * none (the hints are then -1, and the rank is inferred from the calls).
 */
#ifndef FSS_CLI_ATTACH_PROCS_H
#define FSS_CLI_ATTACH_PROCS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct attach_proc_info {
	pid_t pid, ppid;
	uid_t uid;             /* real user id (/proc/PID/status) */
	int is_thread;         /* pid names a thread of process tgid, not a process */
	pid_t tgid;
	int32_t rank, local_rank, world_size, slurm_procid, ompi_rank; /* the environment's, -1 absent */
	int environ_read;      /* /proc/PID/environ could be read */
	char command[256];     /* argv[0], else the kernel's comm */
	char cmdline[512];     /* the command line, words joined by spaces, cut to fit */
};

/*
 * attach_proc_read - what /proc says of pid. 0; -ESRCH no such process (or
 * a zombie); -EACCES not readable. A missing environ leaves the hints -1.
 */
int attach_proc_read(pid_t pid, struct attach_proc_info *out);

/*
 * attach_proc_descendants - every process below root in the parent tree
 * now (children, their children, ...), malloc'd, sorted by pid. 0 or
 * -errno (-ENOMEM, or of reading /proc).
 */
int attach_proc_descendants(pid_t root, pid_t **out, size_t *n);

/* attach_proc_all - every process of /proc now (not threads), sorted. 0 or -errno. */
int attach_proc_all(pid_t **out, size_t *n);

/* attach_proc_alive - pid is a process that has not ended (a zombie has). */
int attach_proc_alive(pid_t pid);

#endif
