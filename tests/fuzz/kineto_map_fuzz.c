/*
 * kineto_map_fuzz.c - libFuzzer target for a Kineto file made records
 * (collector/kineto_map.h): whatever the reader keeps of the input (a
 * control byte, ignored, then JSON text through kineto_file_read_fd on a
 * memfd) is mapped, its records handed out to their end and fed to a
 * per-source view (collector/source.h), as a session does.
 *
 * What the records say is checked against themselves: each has its known
 * size and its source, the hello comes first and the source_figures
 * record last, collectives are numbered 1, 2, ... in the order they come,
 * every gpu_interval of a collective comes after it, a group record follows
 * all its calls (two or more, the latest collectives), and the figures count
 * every collective once. A contradiction traps.
 *
 * Seeds (tests/fuzz/corpus/kineto_map_fuzz/): small traces written by
 * tests/e2e/kineto_read.py seeds DIR, never the shared traces.
 */
#include "collector/kineto_file.h"
#include "collector/kineto_map.h"
#include "collector/source.h"
#include "common/record.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int memfd_with(const uint8_t *data, size_t len)
{
	int fd = memfd_create("kineto_map_fuzz", MFD_CLOEXEC);
	size_t done = 0;

	if (fd < 0)
		return -1;
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);

		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void check_records(kineto_map_t *m)
{
	const struct fss_record_head *rec;
	sources_t *view = sources_new(NULL, NULL);
	uint64_t seq = 0, colls = 0, n = 0;
	uint32_t group = 0, group_calls = 0; /* the latest collectives' group and how many of them */
	int figures = 0;

	if (!view)
		return;
	while (kineto_map_next(m, &rec) == 1) {
		if (rec->size != record_known_size(rec->type) || rec->source != 0 || figures)
			__builtin_trap();
		if (n++ == 0 && rec->type != FSS_REC_PROCESS_HELLO)
			__builtin_trap();
		if (rec->type == FSS_REC_COLLECTIVE) {
			const struct fss_rec_collective *c = (const void *)rec;

			if (c->seq != ++seq)
				__builtin_trap();
			colls++;
			group_calls = c->group_id && c->group_id == group ? group_calls + 1 : 1;
			group = c->group_id;
		} else if (rec->type == FSS_REC_GROUP) {
			/* right after its calls, all of them */
			const struct fss_rec_group *g = (const void *)rec;

			if (!g->group_id || g->group_id != group || g->calls != group_calls || g->calls < 2)
				__builtin_trap();
			group = 0;
		} else if (rec->type == FSS_REC_GPU_INTERVAL) {
			if (((const struct fss_rec_gpu_interval *)rec)->collective_seq > seq)
				__builtin_trap();
		} else if (rec->type == FSS_REC_SOURCE_FIGURES) {
			const struct fss_rec_source_figures *f = (const void *)rec;

			if (f->allgather_kernels + f->reduce_scatter_kernels + f->allreduce_kernels + f->other_kernels !=
			    colls)
				__builtin_trap();
			figures = 1;
		}
		if (sources_feed(view, rec) < 0)
			break;
	}
	if (n && !figures)
		__builtin_trap();
	sources_finish(view);
	sources_free(view);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kineto_read_info info;
	kineto_file_t *f = NULL;
	kineto_map_t *m = NULL;
	int fd;

	if (size < 1)
		return 0;
	fd = memfd_with(data + 1, size - 1);
	if (fd < 0)
		return 0;
	if (kineto_file_read_fd(fd, "fuzz", &f, &info) == 0 && f) {
		if (kineto_map_new(f, "fuzz.json", 0, &m) == 0) {
			check_records(m);
			kineto_map_rewind(m);
			check_records(m);
			kineto_map_free(m);
		}
	}
	close(fd);
	return 0;
}
