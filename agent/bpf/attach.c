/*
 * attach.c - loading the probes of attach.bpf.c and placing them on the
 * processes attached (attach.h), libbpf-tools style: open the skeleton,
 * set what must be set before load (ring size, pid namespace), load, then
 * attach by hand: an entry and a return uprobe per function per process
 * (the pid given to the kernel filters the probe to that process), and
 * one BTF tracepoint on process exit for all of them.
 *
 * libbpf prints its own diagnostics to stderr by default; a command that
 * owns the terminal (the dashboard) cannot have that, so they are kept,
 * the first warning of a call only, and said in err of the call that failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/bpf/attach.h"
#include "attach.skel.h"

/* The probes of one process. */
struct attach_proc {
	pid_t pid;
	struct bpf_link *links[2 * ATTACH_FN_MAX]; /* one per probe: the perf-event way */
	size_t nlinks;
	int multi_fd[2]; /* the uprobe_multi way: the entry and the return link, -1 when none */
};

struct attach {
	struct attach_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link *exit_link; /* the process-exit tracepoint, placed with the first process */
	int multi;		    /* probes are uprobe_multi links (see below), else one perf event each */
	attach_event_fn fn;
	void *ctx;
	struct attach_proc *procs;
	size_t nprocs, capacity;
};

/* ---- libbpf's prints ---- */

static _Thread_local char libbpf_last[512];

/* The first warning since the last reset: libbpf says what failed first,
 * then the generic "failed to load object" lines that follow from it. */
static int libbpf_keep_first(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	size_t n;

	if (level == LIBBPF_DEBUG || libbpf_last[0])
		return 0;
	vsnprintf(libbpf_last, sizeof(libbpf_last), fmt, ap);
	if (strncmp(libbpf_last, "libbpf: ", 8) == 0)
		memmove(libbpf_last, libbpf_last + 8, strlen(libbpf_last + 8) + 1);
	n = strlen(libbpf_last);
	while (n && (libbpf_last[n - 1] == '\n' || libbpf_last[n - 1] == ' '))
		libbpf_last[--n] = '\0';
	return 0;
}

/* FSDPSCOPE_DEBUG set: libbpf's own prints too, every level, on stderr. */
static int libbpf_keep_and_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	va_list copy;

	va_copy(copy, ap);
	vfprintf(stderr, fmt, copy);
	va_end(copy);
	return libbpf_keep_first(level, fmt, ap);
}

static void libbpf_quiet(void)
{
	const char *debug = getenv("FSDPSCOPE_DEBUG");

	libbpf_set_print(debug && debug[0] && strcmp(debug, "0") != 0 ? libbpf_keep_and_print : libbpf_keep_first);
	libbpf_last[0] = '\0';
}

/* " (libbpf: ...)" when libbpf said something, else "". */
static const char *libbpf_said(char *buf, size_t len)
{
	if (!libbpf_last[0])
		return "";
	snprintf(buf, len, " (libbpf: %s)", libbpf_last);
	return buf;
}

/* ---- uprobe_multi ---- */

/*
 * A uprobe_multi link (Linux 6.6) places every probe of one program on one
 * process at once and removes them at once. The perf-event way removes
 * each uprobe under a kernel-wide mutex with an RCU grace period inside
 * (about 0.1 s each here: 4 s to let go of one process); a uprobe_multi
 * link waits once. libbpf 1.1 and the UAPI headers of this distribution
 * predate it, so its attach type and link_create layout are spelled out
 * here, as the kernel's union bpf_attr has them.
 */
#define ATTACH_TRACE_UPROBE_MULTI 48  /* enum bpf_attach_type BPF_TRACE_UPROBE_MULTI */
#define ATTACH_UPROBE_MULTI_RETURN 1u /* BPF_F_UPROBE_MULTI_RETURN */

union attach_link_create_attr {
	struct {
		uint32_t prog_fd;
		uint32_t target_fd;
		uint32_t attach_type;
		uint32_t flags;
		uint64_t path;		  /* const char * */
		uint64_t offsets;	  /* const uint64_t *, file offsets */
		uint64_t ref_ctr_offsets; /* NULL: no semaphores */
		uint64_t cookies;	  /* const uint64_t *: bpf_get_attach_cookie() per probe */
		uint32_t cnt;
		uint32_t multi_flags;
		uint32_t pid;
	} uprobe_multi;
	uint8_t size[sizeof(union bpf_attr) > 128 ? sizeof(union bpf_attr) : 128];
};

/* A link fd, or a negative errno. */
static int uprobe_multi_link(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies,
			     uint32_t cnt, int retprobe, pid_t pid)
{
	union attach_link_create_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.uprobe_multi.prog_fd = (uint32_t)prog_fd;
	attr.uprobe_multi.attach_type = ATTACH_TRACE_UPROBE_MULTI;
	attr.uprobe_multi.path = (uint64_t)(uintptr_t)path;
	attr.uprobe_multi.offsets = (uint64_t)(uintptr_t)offsets;
	attr.uprobe_multi.cookies = (uint64_t)(uintptr_t)cookies;
	attr.uprobe_multi.cnt = cnt;
	attr.uprobe_multi.multi_flags = retprobe ? ATTACH_UPROBE_MULTI_RETURN : 0;
	attr.uprobe_multi.pid = (uint32_t)pid;
	fd = syscall(SYS_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : (int)fd;
}

/* Linux 6.6 or later: uprobe_multi links exist. */
static int kernel_has_uprobe_multi(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return 0;
	return major > 6 || (major == 6 && minor >= 6);
}

/* ---- availability ---- */

static int caps_effective(uint64_t *caps)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) != 0)
		return -errno;
	*caps = (uint64_t)data[0].effective | (uint64_t)data[1].effective << 32;
	return 0;
}

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

int attach_available(char *err, size_t errlen)
{
	if (geteuid() != 0) {
		uint64_t caps = 0;

		if (caps_effective(&caps) != 0 || !(caps & (1ull << CAP_BPF)) || !(caps & (1ull << CAP_PERFMON))) {
			snprintf(err, errlen,
				 "attaching needs root, or CAP_BPF and CAP_PERFMON in the effective set (this process "
				 "has%s%s%s): run it with sudo, or give the binary both capabilities (setcap "
				 "cap_bpf,cap_perfmon+ep)",
				 caps & (1ull << CAP_BPF) ? " CAP_BPF" : "",
				 caps & (1ull << CAP_PERFMON) ? " CAP_PERFMON" : "",
				 caps & ((1ull << CAP_BPF) | (1ull << CAP_PERFMON)) ? " only" : " neither");
			return -EPERM;
		}
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		snprintf(err, errlen,
			 "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): attaching needs a kernel "
			 "built with CONFIG_DEBUG_INFO_BTF=y; run the job under `fsdpscope run` instead");
		return -ENOTSUP;
	}
	if (access("/sys/bus/event_source/devices/uprobe", F_OK) != 0) {
		snprintf(err, errlen,
			 "this kernel has no uprobes (/sys/bus/event_source/devices/uprobe is missing): attaching "
			 "needs CONFIG_UPROBE_EVENTS=y; run the job under `fsdpscope run` instead");
		return -ENOTSUP;
	}
	return 0;
}

/* ---- the object ---- */

static int handle_event(void *ctx, void *data, size_t size)
{
	attach_t *a = ctx;

	if (size < sizeof(struct attach_event))
		return 0; /* not ours: the program writes only whole events */
	return a->fn(a->ctx, data);
}

/* The smallest power of two >= want and >= a page: what a ring buffer map must be. */
static size_t ring_size(size_t want)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size = page;

	while (size < want && size < ((size_t)1 << 30))
		size <<= 1;
	return size;
}

/* Open the skeleton, set what is set before load, load. */
static int skeleton_load(attach_t *a, size_t ring_bytes, int multi, char *err, size_t errlen)
{
	char said[600];
	struct stat ns;
	int rc;

	libbpf_last[0] = '\0';
	a->skel = attach_bpf__open();
	if (!a->skel) {
		rc = -errno;
		snprintf(err, errlen, "cannot open the BPF object: %s%s", strerror(-rc),
			 libbpf_said(said, sizeof(said)));
		return rc ? rc : -ENOMEM;
	}
	rc = bpf_map__set_max_entries(a->skel->maps.events, (uint32_t)ring_size(ring_bytes ? ring_bytes : 8u << 20));
	if (rc) {
		snprintf(err, errlen, "cannot size the ring buffer: %s", strerror(-rc));
		return rc;
	}
	/* Pids as this process sees them (attach.bpf.c). */
	if (stat("/proc/self/ns/pid", &ns) == 0) {
		a->skel->rodata->pidns_dev = ns.st_dev;
		a->skel->rodata->pidns_ino = ns.st_ino;
	}
	if (multi) {
		bpf_program__set_expected_attach_type(a->skel->progs.attach_enter, ATTACH_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(a->skel->progs.attach_exit, ATTACH_TRACE_UPROBE_MULTI);
	}
	rc = attach_bpf__load(a->skel);
	if (rc) {
		snprintf(err, errlen,
			 "the kernel refused the BPF program: %s%s; check that this process may load BPF (root, "
			 "or CAP_BPF + CAP_PERFMON) and that the locked-memory limit allows it (ulimit -l)",
			 strerror(-rc), libbpf_said(said, sizeof(said)));
		return rc;
	}
	return 0;
}

int attach_new(attach_t **out, size_t ring_bytes, attach_event_fn fn, void *ctx, char *err, size_t errlen)
{
	char said[600];
	attach_t *a;
	int rc;

	*out = NULL;
	libbpf_quiet();
	a = calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	a->fn = fn;
	a->ctx = ctx;
	/* The uprobe_multi way on Linux >= 6.6, which has it (an older
	 * kernel may load the program and only refuse the link, too late to
	 * change ways); if the load still refuses it, the object is opened
	 * again for the perf-event way. FSDPSCOPE_UPROBE_MULTI=0 asks for the
	 * perf-event way (the tests run both). */
	const char *want_multi = getenv("FSDPSCOPE_UPROBE_MULTI");
	int first = kernel_has_uprobe_multi() && !(want_multi && strcmp(want_multi, "0") == 0);

	for (int multi = first; multi >= 0; multi--) {
		rc = skeleton_load(a, ring_bytes, multi, err, errlen);
		if (rc == 0) {
			a->multi = multi;
			break;
		}
		attach_bpf__destroy(a->skel);
		a->skel = NULL;
		if (rc != -EINVAL || !multi)
			goto fail;
	}
	a->rb = ring_buffer__new(bpf_map__fd(a->skel->maps.events), handle_event, a, NULL);
	if (!a->rb) {
		rc = -errno;
		snprintf(err, errlen, "cannot map the ring buffer: %s%s", strerror(-rc),
			 libbpf_said(said, sizeof(said)));
		goto fail;
	}
	*out = a;
	return 0;
fail:
	attach_free(a);
	return rc ? rc : -EINVAL;
}

static struct attach_proc *proc_find(attach_t *a, pid_t pid)
{
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].pid == pid)
			return &a->procs[i];
	return NULL;
}

/* The thread group of pid from /proc/PID/status: pid itself for a process, another for a thread. */
static int proc_tgid(pid_t pid, pid_t *tgid)
{
	char path[64], line[256];
	FILE *f;
	int rc = -ESRCH;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Tgid:", 5) == 0) {
			*tgid = (pid_t)strtol(line + 5, NULL, 10);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* One thread's share of the links to destroy. */
struct unplace_share {
	struct bpf_link **links;
	size_t n;
};

static void *unplace_thread(void *arg)
{
	struct unplace_share *s = arg;

	for (size_t i = 0; i < s->n; i++)
		bpf_link__destroy(s->links[i]);
	return NULL;
}

/*
 * Remove a process's probes. Each uprobe's removal waits for an RCU grace
 * period in the kernel (about 0.1 s here), one after another when done
 * from one thread: 44 probes took 4 s. Removed from UNPLACE_THREADS
 * threads at once, the waits overlap. Where a thread cannot be made, this
 * thread does that share itself: slower, never wrong.
 */
#define UNPLACE_THREADS 16
static void proc_unplace(struct attach_proc *p)
{
	struct unplace_share shares[UNPLACE_THREADS];
	pthread_t threads[UNPLACE_THREADS];
	int started[UNPLACE_THREADS] = {0};
	size_t per = (p->nlinks + UNPLACE_THREADS - 1) / UNPLACE_THREADS, at = 0;

	for (int k = 0; k < UNPLACE_THREADS && at < p->nlinks; k++) {
		shares[k].links = &p->links[at];
		shares[k].n = p->nlinks - at < per ? p->nlinks - at : per;
		at += shares[k].n;
		started[k] = pthread_create(&threads[k], NULL, unplace_thread, &shares[k]) == 0;
		if (!started[k])
			unplace_thread(&shares[k]);
	}
	for (int k = 0; k < UNPLACE_THREADS; k++)
		if (started[k])
			pthread_join(threads[k], NULL);
	p->nlinks = 0;
	for (int k = 0; k < 2; k++) {
		if (p->multi_fd[k] >= 0)
			close(p->multi_fd[k]);
		p->multi_fd[k] = -1;
	}
}

/* pid is a process (not a thread of one) that is not attached yet. */
static int pid_check(attach_t *a, pid_t pid, char *err, size_t errlen)
{
	pid_t tgid = 0;
	int rc;

	if (proc_find(a, pid)) {
		snprintf(err, errlen, "process %d is already attached", (int)pid);
		return -EEXIST;
	}
	rc = proc_tgid(pid, &tgid);
	if (rc) {
		snprintf(err, errlen, "no process %d: %s (check the PID with ps)", (int)pid, strerror(-rc));
		return rc == -EACCES ? rc : -ESRCH;
	}
	if (tgid != pid) {
		/* A uprobe for a thread id sees that thread only: the process is what is meant. */
		snprintf(err, errlen, "%d is a thread of process %d, not a process: attach %d", (int)pid, (int)tgid,
			 (int)tgid);
		return -ESRCH;
	}
	return 0;
}

/* The libnccl pid maps and the NCCL functions it defines (syms, *nsyms);
 * t->mapped, t->opened and t->missing filled in. */
static int pid_symbols(pid_t pid, struct attach_target *t, struct attach_symbol *syms, size_t *nsyms, char *err,
		       size_t errlen)
{
	char what[1024];
	int rc;

	rc = attach_find_nccl(pid, t->mapped, sizeof(t->mapped), t->opened, sizeof(t->opened), what, sizeof(what));
	if (rc == -ENOENT && strncmp(what, "libnccl (deleted", 16) == 0) {
		snprintf(err, errlen,
			 "process %d runs a libnccl that was deleted or replaced on disk since it was loaded (an "
			 "upgrade under a running job?): a probe is placed by path, so it cannot be attached; run the "
			 "job under `fsdpscope run` when it restarts",
			 (int)pid);
		return rc;
	}
	if (rc == -ENOENT) {
		snprintf(err, errlen,
			 "process %d has no libnccl mapped (it maps %s): a job that has not loaded NCCL yet can be "
			 "attached once it has; a statically linked NCCL cannot be attached by symbol: run the job "
			 "under `fsdpscope run`",
			 (int)pid, what);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "cannot read /proc/%d/maps: %s%s", (int)pid, strerror(-rc),
			 rc == -EACCES ? " (attach as root, or as the job's user with CAP_SYS_PTRACE)" : "");
		return rc;
	}
	rc = attach_resolve(t->opened, syms, nsyms);
	if (rc) {
		snprintf(err, errlen, "cannot read %s (process %d's %s): %s", t->opened, (int)pid, t->mapped,
			 rc == -ENOEXEC ? "not an x86-64 ELF64 shared object, which is all attach can probe; run the "
					  "job under `fsdpscope run`"
					: strerror(-rc));
		return rc;
	}
	if (*nsyms == 0) {
		snprintf(err, errlen,
			 "%s (process %d) defines none of the NCCL functions attach probes (ncclAllGather, ...): it "
			 "is not libnccl, or a stripped one; run the job under `fsdpscope run`",
			 t->mapped, (int)pid);
		return -ENOEXEC;
	}
	/* What is missing: older NCCL releases lack the newer calls. */
	for (unsigned fn = 1; fn < ATTACH_FN_PROCESS_EXIT; fn++) {
		int have = 0;

		for (size_t i = 0; i < *nsyms; i++)
			have |= syms[i].fn == fn;
		if (!have) {
			size_t used = strlen(t->missing);

			snprintf(t->missing + used, sizeof(t->missing) - used, "%s%s", used ? "," : "",
				 attach_fn_name(fn));
		}
	}
	return 0;
}

/* The exit watch of pid (its tgids entry, and the tracepoint once), before
 * the probes: an exit while they are placed is still seen, and then
 * placing fails with ESRCH. On failure nothing stays in the map. */
static int pid_watch_exit(attach_t *a, pid_t pid, char *err, size_t errlen)
{
	uint32_t key = (uint32_t)pid;
	uint8_t one = 1;
	char said[600];
	int rc;

	rc = bpf_map__update_elem(a->skel->maps.tgids, &key, sizeof(key), &one, sizeof(one), BPF_ANY);
	if (rc) {
		snprintf(err, errlen, "cannot watch process %d's exit: %s%s", (int)pid, strerror(-rc),
			 rc == -E2BIG ? " (one attach watches at most 4096 processes: attach fewer at once)" : "");
		return rc;
	}
	if (!a->exit_link) {
		a->exit_link = bpf_program__attach(a->skel->progs.attach_process_exit);
		if (!a->exit_link) {
			rc = -errno;
			snprintf(err, errlen,
				 "cannot attach to the sched_process_exit tracepoint (to see processes end): %s%s",
				 strerror(-rc), libbpf_said(said, sizeof(said)));
			bpf_map__delete_elem(a->skel->maps.tgids, &key, sizeof(key), 0);
			return rc;
		}
	}
	return 0;
}

/* The probes of syms as two uprobe_multi links (entries, returns). */
static int pid_place_multi(attach_t *a, struct attach_proc *proc, struct attach_target *t,
			   const struct attach_symbol *syms, size_t nsyms, char *err, size_t errlen)
{
	uint64_t offsets[ATTACH_FN_MAX], cookies[ATTACH_FN_MAX];
	pid_t pid = proc->pid;

	for (size_t i = 0; i < nsyms; i++) {
		offsets[i] = syms[i].file_offset;
		cookies[i] = syms[i].fn;
	}
	for (int ret = 0; ret <= 1; ret++) {
		struct bpf_program *prog = ret ? a->skel->progs.attach_exit : a->skel->progs.attach_enter;
		int fd =
		    uprobe_multi_link(bpf_program__fd(prog), t->opened, offsets, cookies, (uint32_t)nsyms, ret, pid);

		if (fd < 0) {
			if (fd == -ESRCH || kill(pid, 0) != 0)
				snprintf(err, errlen, "process %d exited while its probes were placed", (int)pid);
			else
				snprintf(err, errlen, "cannot place the %s of %s (process %d): %s",
					 ret ? "uretprobes" : "uprobes", t->opened, (int)pid, strerror(-fd));
			return fd;
		}
		proc->multi_fd[ret] = fd;
	}
	t->probes = (uint32_t)(2 * nsyms);
	return 0;
}

/* The probes of syms one link each (kernels without uprobe_multi). */
static int pid_place_each(attach_t *a, struct attach_proc *proc, struct attach_target *t,
			  const struct attach_symbol *syms, size_t nsyms, char *err, size_t errlen)
{
	pid_t pid = proc->pid;
	char said[600];

	for (size_t i = 0; i < nsyms; i++) {
		for (int ret = 0; ret <= 1; ret++) {
			LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret, .bpf_cookie = syms[i].fn);
			struct bpf_program *prog = ret ? a->skel->progs.attach_exit : a->skel->progs.attach_enter;
			struct bpf_link *link;
			int rc;

			link = bpf_program__attach_uprobe_opts(prog, pid, t->opened, syms[i].file_offset, &opts);
			if (link) {
				proc->links[proc->nlinks++] = link;
				continue;
			}
			rc = -errno;
			if (rc == -ESRCH || kill(pid, 0) != 0)
				snprintf(err, errlen, "process %d exited while its probes were placed", (int)pid);
			else
				snprintf(
				    err, errlen, "cannot place the %s of %s in %s (process %d): %s%s%s",
				    ret ? "uretprobe" : "uprobe", syms[i].name, t->opened, (int)pid, strerror(-rc),
				    libbpf_said(said, sizeof(said)),
				    rc == -EACCES && geteuid() != 0
					? "; uprobes placed as perf events (kernels before 6.6) need CAP_SYS_ADMIN "
					  "besides CAP_BPF + CAP_PERFMON: attach as root"
					: "");
			return rc ? rc : -EIO;
		}
	}
	t->probes = (uint32_t)proc->nlinks;
	return 0;
}

int attach_pid(attach_t *a, pid_t pid, struct attach_target *t, char *err, size_t errlen)
{
	struct attach_symbol syms[ATTACH_FN_MAX];
	struct attach_proc proc = {.pid = pid, .multi_fd = {-1, -1}};
	uint32_t key = (uint32_t)pid;
	size_t nsyms = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	libbpf_last[0] = '\0';
	rc = pid_check(a, pid, err, errlen);
	if (!rc)
		rc = pid_symbols(pid, t, syms, &nsyms, err, errlen);
	if (rc)
		return rc;
	if (a->nprocs == a->capacity) {
		size_t cap = a->capacity ? 2 * a->capacity : 8;
		struct attach_proc *procs = realloc(a->procs, cap * sizeof(*procs));

		if (!procs) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		a->procs = procs;
		a->capacity = cap;
	}
	rc = pid_watch_exit(a, pid, err, errlen);
	if (rc)
		return rc;
	rc = a->multi ? pid_place_multi(a, &proc, t, syms, nsyms, err, errlen)
		      : pid_place_each(a, &proc, t, syms, nsyms, err, errlen);
	if (rc) {
		proc_unplace(&proc);
		bpf_map__delete_elem(a->skel->maps.tgids, &key, sizeof(key), 0);
		t->functions = 0;
		t->probes = 0;
		return rc;
	}
	t->functions = (uint32_t)nsyms;
	a->procs[a->nprocs++] = proc;
	return 0;
}

int attach_drop_pid(attach_t *a, pid_t pid)
{
	struct attach_proc *p = proc_find(a, pid);
	uint32_t key = (uint32_t)pid;

	if (!p)
		return -ENOENT;
	proc_unplace(p);
	bpf_map__delete_elem(a->skel->maps.tgids, &key, sizeof(key), 0);
	*p = a->procs[--a->nprocs];
	return 0;
}

int attach_fd(const attach_t *a)
{
	return ring_buffer__epoll_fd(a->rb);
}

int attach_poll(attach_t *a, int timeout_ms)
{
	int rc = ring_buffer__poll(a->rb, timeout_ms);

	return rc == -EINTR ? 0 : rc;
}

uint64_t attach_lost(const attach_t *a)
{
	/* Written by the probes with atomic adds; a relaxed read is enough for a count. */
	return __atomic_load_n(&a->skel->bss->lost, __ATOMIC_RELAXED);
}

void attach_free(attach_t *a)
{
	if (!a)
		return;
	while (a->nprocs)
		attach_drop_pid(a, a->procs[0].pid);
	free(a->procs);
	bpf_link__destroy(a->exit_link);
	ring_buffer__free(a->rb);
	attach_bpf__destroy(a->skel);
	free(a);
}
