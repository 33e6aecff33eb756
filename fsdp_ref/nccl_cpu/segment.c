/* fsdp_ref/nccl_cpu/segment.c: layout, open, map and unlink the segment. */
#include "fsdp_ref/nccl_cpu/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEGMENT_PAGE 4096u

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

void segment_layout_compute(int nranks, size_t chunk, struct segment_layout *out)
{
	size_t n = (size_t)nranks;
	out->chunk = chunk;
	/* Rings scale with the chunk so that a test with tiny chunks also
	 * exercises wrap-around of the rings. */
	out->ring_bytes = align_up(chunk / 8 < 1024 ? 1024 : chunk / 8, 64);
	out->ring_stride = sizeof(struct segment_ring) + out->ring_bytes;
	out->ranks_off = align_up(sizeof(struct segment_header), 64);
	out->sets_off = align_up(out->ranks_off + n * sizeof(struct segment_rank), SEGMENT_PAGE);
	out->set_stride = (n + 1) * chunk;
	out->rings_off = align_up(out->sets_off + 2 * out->set_stride, SEGMENT_PAGE);
	out->total = align_up(out->rings_off + n * n * out->ring_stride, SEGMENT_PAGE);
}

int segment_attach(const char *name, size_t size, void **base)
{
	int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
	if (fd < 0)
		return -errno;
	int rc = 0;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	/* Every rank grows the object to the size it needs; never shrink it
	 * under a peer's mapping. Growing zero-fills, which is the initial
	 * state. */
	if ((size_t)st.st_size < size && ftruncate(fd, (off_t)size) < 0) {
		rc = -errno;
		goto out;
	}
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	*base = p;
out:
	close(fd);
	return rc;
}

void segment_detach(void *base, size_t size)
{
	if (base)
		munmap(base, size);
}

void segment_unlink(const char *name)
{
	shm_unlink(name);
}
