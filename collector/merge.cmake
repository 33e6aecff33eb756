# collector/merge.cmake: several traces (one per node) read as one job
# (merge*.c, in the collector library; analyze_traces.c, in the session
# library, analyses them together). Included from collector/CMakeLists.txt
# after the analysis. trace_jobs.c decides whether the traces are one job's
# (merge_open asks it, and so does the PyTorch profiler input).
target_sources(fss_collector PRIVATE ${CMAKE_CURRENT_LIST_DIR}/merge.c ${CMAKE_CURRENT_LIST_DIR}/merge_align.c
  ${CMAKE_CURRENT_LIST_DIR}/merge_read.c ${CMAKE_CURRENT_LIST_DIR}/merge_scan.c
  ${CMAKE_CURRENT_LIST_DIR}/trace_jobs.c)
