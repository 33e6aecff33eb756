# collector/merge: several traces (one per node) as one job, clocks aligned
# (synthetic nodes with known offsets and collectives, wrong anchors, GPU
# kernel ends, a node with no shared communicator, duplicate processes).
fss_unit_test(NAME merge_test SOURCES unit/merge_test.c LIBS fss_collector fss_common TIMEOUT 60)
# collector/trace_jobs: whether several traces are one job (shared
# communicators, distinct ranks, one time; followed across files; worlds for
# files without a communicator id), on synthetic files.
fss_unit_test(NAME trace_jobs_test SOURCES unit/trace_jobs_test.c LIBS fss_collector fss_common TIMEOUT 60)
