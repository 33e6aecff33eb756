/*
 * kineto_fuzz.c - libFuzzer target for the Kineto reader
 * (collector/kineto_file.h), through kineto_file_read_fd on a memfd.
 *
 * The first byte is a control byte: bit 0 gzips the rest here (so that
 * mutations of the text also reach the reader through inflate; a raw gzip
 * input, bit 0 clear, reaches the damaged-stream paths); bits 1-7 are the
 * read size (0: the default). A read at another size than the default is
 * done again at the default, and the two must agree (status, offset,
 * counts, events). What the reader says is checked against itself: counts
 * that add up, ids that resolve, dur >= 0. A contradiction traps.
 *
 * Seeds (tests/fuzz/corpus_update.sh): small documents written by the
 * script and a one-step trace of bench/kineto_gen, never the shared traces.
 */
#include "collector/kineto_file.h"
#include "collector/kineto_scan.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

static int memfd_with(const uint8_t *data, size_t len)
{
	int fd = memfd_create("kineto_fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);
		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static uint8_t *gzip_of(const uint8_t *data, size_t len, size_t *out_len)
{
	z_stream z = {0};
	if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	size_t cap = deflateBound(&z, len) + 64;
	uint8_t *out = malloc(cap);
	if (out) {
		z.next_in = (uint8_t *)(uintptr_t)data;
		z.avail_in = (uInt)len;
		z.next_out = out;
		z.avail_out = (uInt)cap;
		if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
			free(out);
			out = NULL;
		}
		*out_len = cap - z.avail_out;
	}
	deflateEnd(&z);
	return out;
}

static kineto_file_t *read_at(const uint8_t *data, size_t len, size_t chunk, struct kineto_read_info *info)
{
	int fd = memfd_with(data, len);
	if (fd < 0)
		return NULL;
	kineto_file_t *f = NULL;
	int rc = kineto_file_read_fd_chunk(fd, chunk, &f, info);
	close(fd);
	if (rc < 0)
		return NULL;
	return f;
}

static void check_self(const kineto_file_t *f, const struct kineto_read_info *info, size_t len, int gzip)
{
	const struct kineto_counts *c = kineto_file_counts(f);
	if (c->kept != kineto_file_nevents(f) || c->kept > c->complete || c->cpu_ops > c->complete)
		__builtin_trap();
	if (c->complete + c->flows + c->instants + c->metadata + c->other + c->skipped != c->events)
		__builtin_trap();
	if (!gzip && info->offset > len)
		__builtin_trap();
	if (info->status == KINETO_READ_OK && info->message[0])
		__builtin_trap();
	if ((c->skipped == 0) != (info->skip_message[0] == 0))
		__builtin_trap();
	const struct kineto_event *ev = kineto_file_events(f);
	size_t sink = 0;
	for (size_t i = 0; i < kineto_file_nevents(f); i++) {
		if (ev[i].dur_ns < 0 || ev[i].cat < KINETO_CAT_KERNEL || ev[i].cat > KINETO_CAT_GPU_OTHER)
			__builtin_trap();
		sink += strlen(kineto_file_string(f, ev[i].name));
		if (ev[i].comm_args) {
			const struct kineto_comm_args *a = kineto_file_comm_args(f, ev[i].comm_args);
			if (!a)
				__builtin_trap();
			sink += strlen(kineto_file_string(f, a->collective_name)) + strlen(kineto_file_string(f, a->pg_ranks));
		}
	}
	for (size_t i = 0; i < kineto_file_npgs(f); i++)
		sink += strlen(kineto_file_string(f, kineto_file_pgs(f)[i].ranks));
	if (sink == 0x123456789abcdefull) /* never, but keeps the reads */
		__builtin_trap();
}

static void same(const kineto_file_t *a, const struct kineto_read_info *ia, const kineto_file_t *b,
		 const struct kineto_read_info *ib)
{
	if (ia->status != ib->status || ia->offset != ib->offset || strcmp(ia->message, ib->message) != 0)
		__builtin_trap();
	if (memcmp(kineto_file_counts(a), kineto_file_counts(b), sizeof(struct kineto_counts)) != 0)
		__builtin_trap();
	for (size_t i = 0; i < kineto_file_nevents(a); i++) {
		const struct kineto_event *x = &kineto_file_events(a)[i], *y = &kineto_file_events(b)[i];
		if (x->ts_ns != y->ts_ns || x->dur_ns != y->dur_ns || x->flags != y->flags ||
		    strcmp(kineto_file_string(a, x->name), kineto_file_string(b, y->name)) != 0)
			__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t control = data[0];
	const uint8_t *text = data + 1;
	size_t len = size - 1, chunk = control >> 1;
	uint8_t *packed = NULL;
	if (control & 1) {
		packed = gzip_of(text, len, &len);
		if (!packed)
			return 0;
		text = packed;
	}
	struct kineto_read_info info, again;
	kineto_file_t *f = read_at(text, len, chunk, &info);
	if (f) {
		check_self(f, &info, len, (control & 1) || (len >= 2 && text[0] == 0x1f && text[1] == 0x8b));
		if (chunk) {
			kineto_file_t *g = read_at(text, len, 0, &again);
			if (g) {
				same(f, &info, g, &again);
				kineto_file_free(g);
			}
		}
		kineto_file_free(f);
	}
	free(packed);
	return 0;
}
