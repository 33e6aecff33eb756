/*
 * kineto_parse_bench.c - the Kineto reader alone (kineto_file_read) on one
 * file: its wall time, MB/s of JSON text and what it kept, one line, for
 * bench/kineto_bench.sh (which takes peak RSS from /usr/bin/time).
 *
 * usage: kineto_parse_bench FILE.json[.gz]
 */
#include "collector/kineto_file.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: kineto_parse_bench FILE.json[.gz]\n");
		return 2;
	}
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	kineto_file_t *f;
	struct kineto_read_info info;
	int rc = kineto_file_read(argv[1], &f, &info);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (rc < 0) {
		fprintf(stderr, "kineto_parse_bench: %s: %s\n", argv[1], strerror(-rc));
		return 1;
	}
	double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	const struct kineto_counts *c = kineto_file_counts(f);
	printf("parse %.3f s %.0f MB/s text %llu B events %llu kept %llu status %d\n", s, (double)info.offset / 1e6 / s,
	       (unsigned long long)info.offset, (unsigned long long)c->events, (unsigned long long)c->kept, (int)info.status);
	kineto_file_free(f);
	return info.status == KINETO_READ_OK ? 0 : 1;
}
