/*
 * attach_elf_test.c - finding libnccl in a process and resolving its entry
 * points (agent/bpf/attach_elf.c), no root needed.
 *
 * The expectation is computed here independently of the resolver: from
 * `nm -D --defined-only` (the addresses of ncclX and pncclX) and
 * `readelf -lW` (the PT_LOAD segments), read through popen, on the real
 * libnccl of the toolkit (NCCL 2.28, skipped when absent) and on the CPU
 * stand-in. Processes are children of the test that dlopen (or do not) the
 * stand-in and wait on a pipe while they are looked at.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/bpf/attach.h"

#ifndef ATTACH_TEST_REAL_NCCL
#define ATTACH_TEST_REAL_NCCL "/usr/local/cuda/lib/libnccl.so.2"
#endif

/* ---- the independent expectation: nm and readelf ---- */

struct expected {
	int has_nccl[ATTACH_FN_MAX], has_pnccl[ATTACH_FN_MAX];
	uint64_t nccl_addr[ATTACH_FN_MAX], pnccl_addr[ATTACH_FN_MAX];
	uint64_t seg_vaddr[16], seg_offset[16], seg_filesz[16];
	int nseg;
};

static void expect_from_tools(const char *path, struct expected *x)
{
	char cmd[PATH_MAX + 64], line[512];
	FILE *p;

	memset(x, 0, sizeof(*x));
	snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s'", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long addr;
		char type, name[256];

		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3 || (type != 'T' && type != 'W'))
			continue;
		for (unsigned fn = 1; fn < ATTACH_FN_PROCESS_EXIT; fn++) {
			char want[64];

			snprintf(want, sizeof(want), "nccl%s", attach_fn_name(fn));
			if (strcmp(name, want) == 0) {
				x->has_nccl[fn] = 1;
				x->nccl_addr[fn] = addr;
			} else if (name[0] == 'p' && strcmp(name + 1, want) == 0) {
				x->has_pnccl[fn] = 1;
				x->pnccl_addr[fn] = addr;
			}
		}
	}
	assert_int_equal(pclose(p), 0);

	snprintf(cmd, sizeof(cmd), "readelf -lW '%s'", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long off, vaddr, paddr, filesz, memsz;
		char flags[8] = "";

		/* LOAD  0xOFF 0xVADDR 0xPADDR 0xFILESZ 0xMEMSZ R E 0xALIGN */
		if (sscanf(line, " LOAD %llx %llx %llx %llx %llx %7[RWE ]", &off, &vaddr, &paddr, &filesz, &memsz,
			   flags) == 6 &&
		    strchr(flags, 'E') && x->nseg < 16) {
			x->seg_offset[x->nseg] = off;
			x->seg_vaddr[x->nseg] = vaddr;
			x->seg_filesz[x->nseg] = filesz;
			x->nseg++;
		}
	}
	assert_int_equal(pclose(p), 0);
	assert_true(x->nseg >= 1);
}

static uint64_t expected_offset(const struct expected *x, uint64_t addr)
{
	for (int i = 0; i < x->nseg; i++)
		if (addr >= x->seg_vaddr[i] && addr - x->seg_vaddr[i] < x->seg_filesz[i])
			return addr - x->seg_vaddr[i] + x->seg_offset[i];
	fail_msg("address 0x%llx in no executable segment", (unsigned long long)addr);
	return 0;
}

/* Resolve path and check every function against nm / readelf; returns how many were found. */
static size_t check_resolve(const char *path)
{
	struct attach_symbol syms[ATTACH_FN_MAX];
	int seen[ATTACH_FN_MAX] = {0};
	struct expected x;
	size_t n = 99;

	expect_from_tools(path, &x);
	assert_int_equal(attach_resolve(path, syms, &n), 0);
	for (size_t i = 0; i < n; i++) {
		unsigned fn = syms[i].fn;
		char want[64];

		assert_true(fn >= 1 && fn < ATTACH_FN_PROCESS_EXIT);
		assert_false(seen[fn]);
		seen[fn] = 1;
		/* ncclX is preferred; it is the same code as pncclX where both exist. */
		snprintf(want, sizeof(want), "%snccl%s", x.has_nccl[fn] ? "" : "p", attach_fn_name(fn));
		assert_string_equal(syms[i].name, want);
		assert_int_equal(syms[i].address, x.has_nccl[fn] ? x.nccl_addr[fn] : x.pnccl_addr[fn]);
		if (x.has_nccl[fn] && x.has_pnccl[fn])
			assert_int_equal(x.nccl_addr[fn], x.pnccl_addr[fn]);
		assert_int_equal(syms[i].file_offset, expected_offset(&x, syms[i].address));
	}
	/* Every function the library exports is found, and no other. */
	for (unsigned fn = 1; fn < ATTACH_FN_PROCESS_EXIT; fn++)
		assert_int_equal(seen[fn], x.has_nccl[fn] || x.has_pnccl[fn]);
	return n;
}

static void test_real_nccl(void **state)
{
	(void)state;
	if (access(ATTACH_TEST_REAL_NCCL, R_OK) != 0) {
		print_message("skipped: no real libnccl at %s\n", ATTACH_TEST_REAL_NCCL);
		skip();
	}
	/* NCCL 2.28 has every function probed. */
	assert_int_equal(check_resolve(ATTACH_TEST_REAL_NCCL), ATTACH_FN_PROCESS_EXIT - 1);
}

static void test_standin(void **state)
{
	static const unsigned absent[] = {ATTACH_FN_ALLTOALL, ATTACH_FN_GATHER, ATTACH_FN_SCATTER,
					  ATTACH_FN_COMM_SHRINK, ATTACH_FN_COMM_INIT_RANK_SCALABLE};
	struct attach_symbol syms[ATTACH_FN_MAX];
	size_t n;

	(void)state;
	/* docs/nccl_cpu.md: these five are not implemented. */
	assert_int_equal(check_resolve(ATTACH_TEST_STANDIN), ATTACH_FN_PROCESS_EXIT - 1 - 5);
	assert_int_equal(attach_resolve(ATTACH_TEST_STANDIN, syms, &n), 0);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < sizeof(absent) / sizeof(absent[0]); k++)
			assert_int_not_equal(syms[i].fn, absent[k]);
}

static void test_not_elf(void **state)
{
	struct attach_symbol syms[ATTACH_FN_MAX];
	char path[] = "/tmp/attach_elf_test.XXXXXX";
	int fd = mkstemp(path);
	size_t n = 99;

	(void)state;
	assert_true(fd >= 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
	close(fd);
	assert_int_equal(attach_resolve(path, syms, &n), -ENOEXEC);
	assert_int_equal(n, 0);
	unlink(path);
	assert_int_equal(attach_resolve(path, syms, &n), -ENOENT);
	/* An ELF, but this test's own is an executable with no NCCL: 0 found. */
	assert_int_equal(attach_resolve("/proc/self/exe", syms, &n), 0);
	assert_int_equal(n, 0);
}

static void test_fn_names(void **state)
{
	(void)state;
	assert_string_equal(attach_fn_name(ATTACH_FN_ALLGATHER), "AllGather");
	assert_string_equal(attach_fn_name(ATTACH_FN_BCAST), "Bcast");
	assert_string_equal(attach_fn_name(ATTACH_FN_COMM_INIT_RANK_SCALABLE), "CommInitRankScalable");
	assert_string_equal(attach_fn_name(ATTACH_FN_PROCESS_EXIT), "ProcessExit");
	assert_string_equal(attach_fn_name(0), "?");
	assert_string_equal(attach_fn_name(ATTACH_FN_MAX), "?");
}

/* ---- processes ---- */

struct child {
	pid_t pid;
	int hold; /* write end: the child waits until it closes */
};

/* A child that dlopens lib (NULL: nothing), says so, and waits. */
static struct child child_start(const char *lib)
{
	int ready[2], hold[2];
	struct child c;
	char b;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(hold), 0);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		close(ready[0]);
		close(hold[1]);
		if (lib && !dlopen(lib, RTLD_NOW | RTLD_LOCAL))
			_exit(3);
		if (write(ready[1], "R", 1) != 1)
			_exit(4);
		while (read(hold[0], &b, 1) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	assert_int_equal(read(ready[0], &b, 1), 1);
	close(ready[0]);
	c.hold = hold[1];
	return c;
}

static void child_end(struct child *c)
{
	int status;

	close(c->hold);
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_find_mapped(void **state)
{
	char mapped[PATH_MAX], opened[PATH_MAX + 64], what[512], want[PATH_MAX + 64], real[PATH_MAX];
	struct child c = child_start(ATTACH_TEST_STANDIN);

	(void)state;
	assert_non_null(realpath(ATTACH_TEST_STANDIN, real));
	assert_int_equal(attach_find_nccl(c.pid, mapped, sizeof(mapped), opened, sizeof(opened), what, sizeof(what)),
			 0);
	assert_string_equal(mapped, real);
	snprintf(want, sizeof(want), "/proc/%d/root%s", (int)c.pid, real);
	assert_string_equal(opened, want);
	/* The file opened through the process's root is the one it maps. */
	{
		struct stat a, b;

		assert_int_equal(stat(opened, &a), 0);
		assert_int_equal(stat(real, &b), 0);
		assert_int_equal(a.st_ino, b.st_ino);
	}
	child_end(&c);
}

static void test_find_none(void **state)
{
	char mapped[PATH_MAX], opened[PATH_MAX + 64], what[512], small[24];
	struct child c = child_start(NULL);

	(void)state;
	assert_int_equal(attach_find_nccl(c.pid, mapped, sizeof(mapped), opened, sizeof(opened), what, sizeof(what)),
			 -ENOENT);
	assert_non_null(strstr(what, "libc.so.6"));
	assert_null(strstr(what, "libnccl"));
	/* A list that does not fit says it was cut. */
	assert_int_equal(attach_find_nccl(c.pid, mapped, sizeof(mapped), opened, sizeof(opened), small, sizeof(small)),
			 -ENOENT);
	assert_true(strlen(small) < sizeof(small));
	assert_non_null(strstr(small, "..."));
	child_end(&c);
}

static void test_find_deleted(void **state)
{
	char dir[] = "/tmp/attach_elf_test.XXXXXX", lib[PATH_MAX], cmd[2 * PATH_MAX];
	char mapped[PATH_MAX], opened[PATH_MAX + 64], what[512];
	struct child c;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(lib, sizeof(lib), "%s/libnccl.so.2", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", ATTACH_TEST_STANDIN, lib);
	assert_int_equal(system(cmd), 0);
	c = child_start(lib);
	assert_int_equal(unlink(lib), 0);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(attach_find_nccl(c.pid, mapped, sizeof(mapped), opened, sizeof(opened), what, sizeof(what)),
			 -ENOENT);
	assert_non_null(strstr(what, "deleted"));
	child_end(&c);
}

static void test_find_dead(void **state)
{
	char mapped[64], opened[64], what[64];
	int status;
	pid_t pid = fork();

	(void)state;
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(attach_find_nccl(pid, mapped, sizeof(mapped), opened, sizeof(opened), what, sizeof(what)),
			 -ESRCH);
	assert_int_equal(attach_find_nccl(0, mapped, sizeof(mapped), opened, sizeof(opened), what, sizeof(what)),
			 -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_real_nccl),	 cmocka_unit_test(test_standin),     cmocka_unit_test(test_not_elf),
	    cmocka_unit_test(test_fn_names),	 cmocka_unit_test(test_find_mapped), cmocka_unit_test(test_find_none),
	    cmocka_unit_test(test_find_deleted), cmocka_unit_test(test_find_dead),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
