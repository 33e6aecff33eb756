/*
 * merge.c - several traces as one job's record stream (merge.h): opening
 * them (the first pass, merge_scan.c, then the alignment, merge_align.c);
 * the merged read is merge_read.c.
 */
#include "collector/merge.h"

#include "collector/merge_scan.h"
#include "collector/merge_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *merge_basis_name(enum merge_basis basis)
{
	switch (basis) {
	case MERGE_BASIS_REFERENCE:
		return "reference";
	case MERGE_BASIS_ANCHORS:
		return "anchors";
	case MERGE_BASIS_HOST_EXIT:
		return "host-exit";
	case MERGE_BASIS_GPU_END:
		return "gpu-end";
	}
	return "unknown";
}

/* ---- open ----------------------------------------------------------------- */

static int merge_check_one_job(merge_t *m, char *err, size_t errlen);

int merge_open(merge_t **out, const char *const *paths, size_t n, char *err, size_t errlen)
{
	return merge_open_flags(out, paths, n, 0, err, errlen);
}

int merge_open_flags(merge_t **out, const char *const *paths, size_t n, unsigned read_flags, char *err, size_t errlen)
{
	merge_t *m;
	int64_t *offsets = NULL;
	uint64_t base = 0;
	int rc = 0;

	*out = NULL;
	if (errlen)
		err[0] = 0;
	if (!n)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m || !(m->nodes = calloc(n, sizeof(*m->nodes))) || !(m->jobs = calloc(n, sizeof(*m->jobs))) ||
	    !(offsets = calloc(n, sizeof(*offsets)))) {
		rc = -ENOMEM;
		goto fail;
	}
	m->nnodes = n;
	m->read_flags = read_flags;
	for (size_t k = 0; k < n; k++) {
		uint32_t max_source = 0;

		m->nodes[k].path = paths[k];
		rc = merge_scan_trace(m, (uint32_t)k, &offsets[k], &max_source, err, errlen);
		if (rc)
			goto fail;
		if (base + max_source >= FSS_SOURCE_NONE) {
			snprintf(err, errlen, "%s: too many sources in the traces together", paths[k]);
			rc = -E2BIG;
			goto fail;
		}
		m->nodes[k].source_base = (uint32_t)base;
		base += (uint64_t)max_source + 1;
		/* On node k, t_realtime = t_mono + offsets[k]: its t_mono + offsets[k] - offsets[0]
		 * is the first node's CLOCK_MONOTONIC of the same instant. */
		m->nodes[k].anchor_offset_ns = offsets[k] - offsets[0];
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			struct stat a, b;

			if (stat(paths[i], &a) == 0 && stat(paths[j], &b) == 0 && a.st_dev == b.st_dev &&
			    a.st_ino == b.st_ino) {
				snprintf(err, errlen, "%s and %s are the same file: give each node's trace once",
					 paths[i], paths[j]);
				rc = -EEXIST;
				goto fail;
			}
		}
	if ((rc = merge_check_duplicates(m, err, errlen)))
		goto fail;
	if ((rc = merge_check_one_job(m, err, errlen)))
		goto fail;
	if ((rc = merge_align(m->nodes, m->nnodes, m->samples, m->nsamples)))
		goto fail;
	free(offsets);
	/* The samples have done their work. */
	free(m->samples);
	m->samples = NULL;
	m->nsamples = m->samples_cap = 0;
	*out = m;
	return 0;
fail:
	if (rc == -ENOMEM && errlen && !err[0])
		snprintf(err, errlen, "out of memory");
	free(offsets);
	merge_free(m);
	return rc;
}

/* The traces are one job's (trace_jobs.h), else FSS_E_USAGE said in err. */
static int merge_check_one_job(merge_t *m, char *err, size_t errlen)
{
	struct trace_jobs_file *files = calloc(m->nnodes, sizeof(*files));
	int rc;

	if (!files)
		return -ENOMEM;
	for (size_t k = 0; k < m->nnodes; k++)
		files[k] = (struct trace_jobs_file){
		    .path = m->nodes[k].path,
		    .ranks = m->jobs[k].ranks,
		    .nranks = m->jobs[k].nranks,
		    .first_ns = m->jobs[k].first_ns,
		    .last_ns = m->jobs[k].last_ns,
		};
	rc = trace_jobs_check(files, m->nnodes, err, errlen);
	free(files);
	return rc;
}

const struct merge_node *merge_nodes(const merge_t *m, size_t *n)
{
	*n = m->nnodes;
	return m->nodes;
}

size_t merge_current(const merge_t *m)
{
	return m->current;
}

void merge_free(merge_t *m)
{
	if (!m)
		return;
	for (size_t k = 0; m->jobs && k < m->nnodes; k++)
		free(m->jobs[k].ranks);
	free(m->jobs);
	free(m->nodes);
	free(m->samples);
	free(m->procs);
	free(m);
}
