# collector/merge.cmake: several traces (one per node) read as one job
# (merge*.c, in the collector library; analyze_traces.c, in the analysis
# library, analyses them together). Included from collector/CMakeLists.txt
# after the analysis.
target_sources(fss_collector PRIVATE ${CMAKE_CURRENT_LIST_DIR}/merge.c ${CMAKE_CURRENT_LIST_DIR}/merge_align.c
  ${CMAKE_CURRENT_LIST_DIR}/merge_read.c ${CMAKE_CURRENT_LIST_DIR}/merge_scan.c)
