/*
 * kineto_counts.c - what the Kineto reader (collector/kineto_file.h) read
 * from each file given, as "key value" lines, for kineto_counts.py to
 * compare with its own count of the same files (tests/e2e/kineto.cmake).
 *
 * usage: kineto_counts [-c CHUNK] FILE...   (-c: reads of CHUNK bytes, to
 * cross every token boundary of a real trace)
 */
#include "collector/kineto_file.h"
#include "collector/kineto_scan.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *cat_names[] = {
	[KINETO_CAT_KERNEL] = "kernel",
	[KINETO_CAT_GPU_MEMCPY] = "gpu_memcpy",
	[KINETO_CAT_GPU_MEMSET] = "gpu_memset",
	[KINETO_CAT_CUDA_RUNTIME] = "cuda_runtime",
	[KINETO_CAT_CUDA_DRIVER] = "cuda_driver",
	[KINETO_CAT_CPU_OP] = "cpu_op",
	[KINETO_CAT_USER_ANNOTATION] = "user_annotation",
	[KINETO_CAT_GPU_USER_ANNOTATION] = "gpu_user_annotation",
	[KINETO_CAT_GPU_OTHER] = "gpu_other",
};
#define NCATS (sizeof(cat_names) / sizeof(cat_names[0]))

static void print_file(const char *path, const kineto_file_t *f, const struct kineto_read_info *info)
{
	const struct kineto_counts *c = kineto_file_counts(f);
	const struct kineto_meta *m = kineto_file_meta(f);
	printf("file %s\nstatus %d\n", path, (int)info->status);
	printf("events %llu\nkept %llu\ncomplete %llu\nflows %llu\ninstants %llu\nmetadata %llu\nother %llu\n"
	       "cpu_ops %llu\nskipped %llu\n",
	       (unsigned long long)c->events, (unsigned long long)c->kept, (unsigned long long)c->complete,
	       (unsigned long long)c->flows, (unsigned long long)c->instants, (unsigned long long)c->metadata,
	       (unsigned long long)c->other, (unsigned long long)c->cpu_ops, (unsigned long long)c->skipped);
	unsigned long long per_cat[NCATS] = {0}, fractional = 0, with_comm = 0, with_stream = 0, with_corr = 0;
	long long ts_sum = 0, dur_sum = 0, corr_sum = 0;
	const struct kineto_event *ev = kineto_file_events(f);
	size_t n = kineto_file_nevents(f);
	for (size_t i = 0; i < n; i++) {
		if (ev[i].cat < NCATS)
			per_cat[ev[i].cat]++;
		fractional += (ev[i].flags & KINETO_EV_FRACTIONAL) != 0;
		with_stream += (ev[i].flags & KINETO_EV_HAS_STREAM) != 0;
		with_corr += (ev[i].flags & KINETO_EV_HAS_CORRELATION) != 0;
		with_comm += ev[i].comm_args != 0;
		/* wrapping sums: a check of every value, in any order */
		ts_sum = (long long)((unsigned long long)ts_sum + (unsigned long long)ev[i].ts_ns);
		dur_sum = (long long)((unsigned long long)dur_sum + (unsigned long long)ev[i].dur_ns);
		if (ev[i].flags & KINETO_EV_HAS_CORRELATION)
			corr_sum += ev[i].correlation;
	}
	for (size_t k = 1; k < NCATS; k++)
		printf("kept.%s %llu\n", cat_names[k], per_cat[k]);
	printf("fractional %llu\nwith_stream %llu\nwith_correlation %llu\nwith_comm_args %llu\n", fractional, with_stream,
	       with_corr, with_comm);
	printf("ts_sum %lld\ndur_sum %lld\ncorrelation_sum %lld\n", ts_sum, dur_sum, corr_sum);
	unsigned long long collectives = 0;
	for (size_t i = 0; i < n; i++) {
		const struct kineto_comm_args *a = kineto_file_comm_args(f, ev[i].comm_args);
		if (a && a->collective_name)
			collectives++;
	}
	printf("with_collective_name %llu\n", collectives);
	printf("rank %d\nworld_size %d\nbackend %s\npgs %zu\n", m->rank, m->world_size, kineto_file_string(f, m->backend),
	       kineto_file_npgs(f));
	for (size_t i = 0; i < kineto_file_npgs(f); i++) {
		const struct kineto_pg *pg = &kineto_file_pgs(f)[i];
		printf("pg %s %s %d %s\n", kineto_file_string(f, pg->name), kineto_file_string(f, pg->desc), pg->size,
		       kineto_file_string(f, pg->ranks));
	}
	if (m->have_base_time)
		printf("base_time_ns %lld\n", (long long)m->base_time_ns);
	printf("device %s\nsms %d\nmemory %lld\nschema %lld\ntrace_name %s\n", kineto_file_string(f, m->device_name),
	       m->device_sms, (long long)m->device_memory, (long long)m->schema_version, kineto_file_string(f, m->trace_name));
}

static int read_chunked(const char *path, size_t chunk, kineto_file_t **f, struct kineto_read_info *info)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = kineto_file_read_fd_chunk(fd, chunk, f, info);
	close(fd);
	return r;
}

int main(int argc, char **argv)
{
	int rc = 0, first = 1;
	size_t chunk = 0;
	if (argc > 2 && strcmp(argv[1], "-c") == 0) {
		chunk = strtoul(argv[2], NULL, 10);
		first = 3;
	}
	for (int i = first; i < argc; i++) {
		kineto_file_t *f;
		struct kineto_read_info info;
		int r = chunk ? read_chunked(argv[i], chunk, &f, &info) : kineto_file_read(argv[i], &f, &info);
		if (r < 0) {
			fprintf(stderr, "kineto_counts: %s: %s\n", argv[i], strerror(-r));
			rc = 1;
			continue;
		}
		if (info.status != KINETO_READ_OK) {
			fprintf(stderr, "kineto_counts: %s: %s at byte %llu\n", argv[i], info.message,
				(unsigned long long)info.offset);
			rc = 1;
		}
		print_file(argv[i], f, &info);
		kineto_file_free(f);
	}
	return rc;
}
