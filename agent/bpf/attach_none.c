/*
 * attach_none.c - the probes' API (attach.h) in a build without libbpf,
 * bpftool or clang: nothing can be attached, and every entry point says
 * so and what to do, so that `fsdpscope attach` builds everywhere and
 * fails with that message (bpf.cmake compiles this file into
 * fss_attach_core only when fss_attach_bpf is not built).
 */
#include <errno.h>
#include <stdio.h>

#include "agent/bpf/attach.h"

static void attach_none_say(char *err, size_t errlen)
{
	snprintf(err, errlen,
		 "this fsdpscope was built without libbpf (libbpf-dev, bpftool and clang were not all found "
		 "at build time), so it cannot attach: rebuild it with them installed, or run the job under "
		 "`fsdpscope run`");
}

int attach_available(char *err, size_t errlen)
{
	attach_none_say(err, errlen);
	return -ENOTSUP;
}

int attach_new(attach_t **out, size_t ring_bytes, attach_event_fn fn, void *ctx, char *err, size_t errlen)
{
	(void)ring_bytes;
	(void)fn;
	(void)ctx;
	*out = NULL;
	attach_none_say(err, errlen);
	return -ENOTSUP;
}

int attach_pid(attach_t *a, pid_t pid, struct attach_target *t, char *err, size_t errlen)
{
	(void)a;
	(void)pid;
	(void)t;
	attach_none_say(err, errlen);
	return -ENOTSUP;
}

int attach_drop_pid(attach_t *a, pid_t pid)
{
	(void)a;
	(void)pid;
	return -ENOENT;
}

int attach_fd(const attach_t *a)
{
	(void)a;
	return -1;
}

int attach_poll(attach_t *a, int timeout_ms)
{
	(void)a;
	(void)timeout_ms;
	return -ENOTSUP;
}

uint64_t attach_lost(const attach_t *a)
{
	(void)a;
	return 0;
}

void attach_free(attach_t *a)
{
	(void)a;
}
