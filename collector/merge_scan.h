/*
 * merge_scan.h - the first pass of a merge over each trace: its processes,
 * its clock anchors, the ends of the collectives its ranks share with other
 * nodes (merge.h says what each gives).
 */
#ifndef FSS_COLLECTOR_MERGE_SCAN_H
#define FSS_COLLECTOR_MERGE_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "collector/merge_state.h"

/*
 * merge_scan_trace - read node k's trace (m->nodes[k].path) once: fill the
 * node's sources, ranks, hosts, world size, keep flags and anchors, add its
 * processes to m->procs and its sampled collectives to m->samples. Its
 * median CLOCK_REALTIME - CLOCK_MONOTONIC goes to *realtime_offset, its
 * highest source number to *max_source. 0, or a negative errno / FSS_E_*
 * with the reason (naming the file) in err.
 */
int merge_scan_trace(merge_t *m, uint32_t k, int64_t *realtime_offset, uint32_t *max_source, char *err, size_t errlen);

/* merge_check_duplicates - -EEXIST, said in err, when a process of m->procs
 * is in two traces (the same sink process id, or without one the same pid on
 * the same host); else 0. */
int merge_check_duplicates(merge_t *m, char *err, size_t errlen);

#endif
