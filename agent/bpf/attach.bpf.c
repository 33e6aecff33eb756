// SPDX-License-Identifier: GPL-2.0
/*
 * attach.bpf.c - the uprobes of `fsdpscope attach` (attach.h): NCCL calls
 * of the attached processes, and their exits, into one ring buffer.
 *
 * Built with clang -target bpf against the UAPI headers only (no
 * vmlinux.h): the programs read user registers and user memory, never a
 * kernel structure, so they need no CO-RE and the build does not depend on
 * the BTF of the machine that builds it. struct pt_regs is the UAPI one
 * (<linux/ptrace.h>), whose layout is the kernel's on x86-64.
 *
 * One entry and one return program serve every function: the probe's BPF
 * cookie (bpf_get_attach_cookie) is its enum attach_fn, so 44 probes need
 * 2 programs, not 44, and the function is known without a lookup.
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <linux/types.h>

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* attach.h names its fields with <stdint.h> types, which the BPF target
 * has no libc for. */
typedef __u8 uint8_t;
typedef __u16 uint16_t;
typedef __u32 uint32_t;
typedef __s32 int32_t;
typedef __u64 uint64_t;

#include "agent/bpf/attach.h"

char LICENSE[] SEC("license") = "GPL"; /* bpf_probe_read_user needs a GPL program */

/* The attaching side's pid namespace (stat of /proc/self/ns/pid), set
 * before load: event pids are the ones it sees, even when it runs in a
 * container of its own. 0: the kernel's own numbers. */
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;

/* Events that found the ring buffer full. A global (.bss), not a per-CPU
 * array: it is rarely written, and user space reads it through the
 * skeleton's mmap of .bss without a syscall. */
__u64 lost = 0;

/* The ring buffer: one buffer shared by all CPUs keeps every thread's
 * events in the order it made them (per-CPU perf buffers would not, when a
 * thread migrates). max_entries is set from user space before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);
} events SEC(".maps");

/* What a call's exit needs of its entry: the out pointer of the calls that
 * make communicators. Keyed by thread and function, so that a nested
 * probed call (ncclCommInitAll runs ncclGroupStart / End inside) keeps its
 * own. An LRU map: a thread that dies inside the call never deletes its
 * entry, and the map must not fill with those. */
struct pending_key {
	__u64 pid_tgid;
	__u32 fn;
	__u32 pad;
};
struct pending {
	__u64 out_ptr; /* ncclComm_t * written by the call */
	__u32 nout;    /* how many: ndev for CommInitAll, else 1 */
	__u32 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct pending_key);
	__type(value, struct pending);
} pending SEC(".maps");

/* The processes attached (tgid as user space sees it), for the exit
 * probe: a hash lookup is the whole cost of do_exit for every other thread
 * of the machine. attach_pid / attach_drop_pid maintain it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

/* pid and tid of the current task in the attaching side's namespace. */
static __always_inline void current_ids(__u32 *pid, __u32 *tid)
{
	struct bpf_pidns_info ns = {};

	if (pidns_ino && bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)) == 0) {
		*pid = ns.tgid;
		*tid = ns.pid;
		return;
	}
	__u64 id = bpf_get_current_pid_tgid();
	*pid = id >> 32;
	*tid = (__u32)id;
}

/* A ring-buffer record with its head filled (the rest is the caller's to
 * write: a reserved record is not zeroed), or NULL, counted lost, when the
 * ring is full. */
static __always_inline struct attach_event *event_begin(__u32 pid, __u32 tid, __u16 fn, __u16 kind, __s32 ret)
{
	struct attach_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return NULL;
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = pid;
	e->tid = tid;
	e->fn = fn;
	e->kind = kind;
	e->ret = ret;
	e->nout = 0;
	e->uid_ok = 0;
	return e;
}

/* An event with no arguments: its arg[] zeroed (a reserved record is not). */
static __always_inline void event_no_args(struct attach_event *e)
{
#pragma unroll
	for (int i = 0; i < 8; i++)
		e->arg[i] = 0;
}

/*
 * Per function: how many arguments (bits 0-3) and which of them are 32-bit
 * (bits 8-15, bit 8 + i for argument i). The ABI leaves the upper half of
 * a register or stack slot that holds an int undefined, so those are
 * masked: attach.h promises integers zero-extended.
 * The ncclUniqueId of CommInitRank / Config is a 128-byte struct passed in
 * memory: it takes no register, so the arguments after it are in the
 * registers it would have had; its arg[] slot stays 0 (it is in uid[]).
 */
#define ARGS(n, mask) ((n) | ((mask) << 8))
#define I(i) (1u << (i))
static __always_inline __u32 fn_args(__u32 fn)
{
	switch (fn) {
	case ATTACH_FN_ALLGATHER:
		return ARGS(6, I(3));
	case ATTACH_FN_REDUCESCATTER:
	case ATTACH_FN_ALLREDUCE:
	case ATTACH_FN_BROADCAST:
	case ATTACH_FN_GATHER:
	case ATTACH_FN_SCATTER:
		return ARGS(7, I(3) | I(4));
	case ATTACH_FN_BCAST:
	case ATTACH_FN_SEND:
	case ATTACH_FN_RECV:
		return ARGS(6, I(2) | I(3));
	case ATTACH_FN_REDUCE:
		return ARGS(8, I(3) | I(4) | I(5));
	case ATTACH_FN_ALLTOALL:
		return ARGS(6, I(3));
	case ATTACH_FN_COMM_INIT_RANK:
		return ARGS(4, I(1) | I(3));
	case ATTACH_FN_COMM_INIT_RANK_CONFIG:
		return ARGS(5, I(1) | I(3));
	case ATTACH_FN_COMM_INIT_ALL:
		return ARGS(3, I(1));
	case ATTACH_FN_COMM_INIT_RANK_SCALABLE:
		return ARGS(6, I(1) | I(2) | I(3));
	case ATTACH_FN_COMM_SPLIT:
		return ARGS(5, I(1) | I(2));
	case ATTACH_FN_COMM_SHRINK:
		return ARGS(6, I(2) | I(5));
	case ATTACH_FN_COMM_DESTROY:
	case ATTACH_FN_COMM_ABORT:
	case ATTACH_FN_COMM_FINALIZE:
		return ARGS(1, 0);
	default: /* GroupStart / End */
		return 0;
	}
}

SEC("uprobe")
int attach_enter(struct pt_regs *ctx)
{
	__u32 fn = (__u32)bpf_get_attach_cookie(ctx);
	__u32 desc = fn_args(fn), nargs = desc & 0xf, ints = desc >> 8;
	__u64 regs[6], sp = PT_REGS_SP(ctx);
	struct attach_event *e;
	__u32 pid, tid;
	struct pending_key key = {.pid_tgid = bpf_get_current_pid_tgid(), .fn = fn};
	struct pending p = {};

	regs[0] = PT_REGS_PARM1(ctx);
	regs[1] = PT_REGS_PARM2(ctx);
	regs[2] = PT_REGS_PARM3(ctx);
	regs[3] = PT_REGS_PARM4(ctx);
	regs[4] = PT_REGS_PARM5(ctx);
	regs[5] = ctx->r9; /* libbpf 1.1 has no PT_REGS_PARM6; the UAPI pt_regs names it r9 */

	/* Register order: the uid by value takes no register (fn_args). */
	if (fn == ATTACH_FN_COMM_INIT_RANK || fn == ATTACH_FN_COMM_INIT_RANK_CONFIG) {
		regs[4] = regs[3];
		regs[3] = regs[2];
		regs[2] = 0;
	}

	/* Saved before the ring buffer is tried: a lost enter event must not
	 * also lose the communicator its exit reports. */
	switch (fn) {
	case ATTACH_FN_COMM_INIT_RANK:
	case ATTACH_FN_COMM_INIT_RANK_CONFIG:
	case ATTACH_FN_COMM_INIT_RANK_SCALABLE:
		p.out_ptr = regs[0];
		p.nout = 1;
		break;
	case ATTACH_FN_COMM_INIT_ALL:
		p.out_ptr = regs[0];
		p.nout = (__u32)regs[1];
		if ((int)p.nout < 0)
			p.nout = 0;
		if (p.nout > ATTACH_OUT_MAX)
			p.nout = ATTACH_OUT_MAX;
		break;
	case ATTACH_FN_COMM_SPLIT:
	case ATTACH_FN_COMM_SHRINK:
		p.out_ptr = regs[3];
		p.nout = 1;
		break;
	default:
		break;
	}
	if (p.nout)
		bpf_map_update_elem(&pending, &key, &p, BPF_ANY);

	current_ids(&pid, &tid);
	e = event_begin(pid, tid, (__u16)fn, ATTACH_EV_ENTER, 0);
	if (!e)
		return 0;
		/* every field past the head is written below */
#pragma unroll
	for (int i = 0; i < ATTACH_OUT_MAX; i++)
		e->out[i] = 0;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		__u64 v = 0;

		if (i < 6)
			v = regs[i];
		else if ((__u32)i < nargs && bpf_probe_read_user(&v, sizeof(v), (void *)(sp + 8 * (i - 5))) != 0)
			v = 0;
		if ((__u32)i >= nargs)
			v = 0;
		else if (ints & (1u << i))
			v &= 0xffffffffull;
		e->arg[i] = v;
	}
	if (fn == ATTACH_FN_COMM_INIT_RANK || fn == ATTACH_FN_COMM_INIT_RANK_CONFIG) {
		/* By value, in memory: the first stack slot after the return address. */
		e->uid_ok = bpf_probe_read_user(e->uid, sizeof(e->uid), (void *)(sp + 8)) == 0;
	} else if (fn == ATTACH_FN_COMM_INIT_RANK_SCALABLE) {
		e->uid_ok = bpf_probe_read_user(e->uid, sizeof(e->uid), (void *)regs[4]) == 0;
	}
	if (!e->uid_ok)
		__builtin_memset(e->uid, 0, sizeof(e->uid));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("uretprobe")
int attach_exit(struct pt_regs *ctx)
{
	__u32 fn = (__u32)bpf_get_attach_cookie(ctx);
	struct pending_key key = {.pid_tgid = bpf_get_current_pid_tgid(), .fn = fn};
	struct pending *p = NULL, saved = {};
	struct attach_event *e;
	__u32 pid, tid;

	if (fn >= ATTACH_FN_COMM_INIT_RANK && fn <= ATTACH_FN_COMM_SHRINK) {
		p = bpf_map_lookup_elem(&pending, &key);
		if (p) {
			saved = *p;
			bpf_map_delete_elem(&pending, &key);
		}
	}

	current_ids(&pid, &tid);
	e = event_begin(pid, tid, (__u16)fn, ATTACH_EV_EXIT, (__s32)PT_REGS_RC(ctx));
	if (!e)
		return 0;
	event_no_args(e);
#pragma unroll
	for (int i = 0; i < ATTACH_OUT_MAX; i++) {
		__u64 v = 0;

		/* Read in order and stop at the first that fails: nout counts
		 * a prefix of the array the call wrote. */
		if ((__u32)i < saved.nout && saved.out_ptr && (__u32)i == e->nout &&
		    bpf_probe_read_user(&v, sizeof(v), (void *)(saved.out_ptr + 8 * i)) == 0)
			e->nout++;
		e->out[i] = v;
	}
	__builtin_memset(e->uid, 0, sizeof(e->uid));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/*
 * A process's end: the sched_process_exit tracepoint of its thread-group
 * leader, ret = its task's exit_code (set by do_exit before the
 * tracepoint, in the waitpid() format). The leader's code is the group's:
 * in an exit_group from another thread the leader is killed with the
 * group's exit code. Filtered by the tgids map, so the exits of every
 * other thread of the machine cost a lookup.
 *
 * Not a kprobe on do_exit (reading its code argument): kernels built
 * without CONFIG_KPROBES (the VMs this project is tested on) have none,
 * and they refuse fentry programs too; a BTF tracepoint needs only the
 * kernel's BTF, which attach requires anyway. exit_code is read through a
 * one-field task_struct that libbpf relocates against that BTF at load
 * (CO-RE), so nothing of this kernel's layout is compiled in.
 */
struct task_struct {
	int exit_code;
} __attribute__((preserve_access_index));

SEC("tp_btf/sched_process_exit")
int BPF_PROG(attach_process_exit, struct task_struct *task)
{
	struct attach_event *e;
	__u32 pid, tid;

	current_ids(&pid, &tid);
	if (pid != tid || !bpf_map_lookup_elem(&tgids, &pid))
		return 0;
	e = event_begin(pid, tid, ATTACH_FN_PROCESS_EXIT, ATTACH_EV_EXIT, task->exit_code);
	if (!e)
		return 0;
	event_no_args(e);
#pragma unroll
	for (int i = 0; i < ATTACH_OUT_MAX; i++)
		e->out[i] = 0;
	__builtin_memset(e->uid, 0, sizeof(e->uid));
	bpf_ringbuf_submit(e, 0);
	return 0;
}
