# collector/keep.cmake: the --keep policy (keep*.c) and the analysis' reading
# of what it left out (step_summaries.c). Included from collector/CMakeLists.txt
# after analysis.cmake.
target_sources(fss_analysis PRIVATE ${CMAKE_CURRENT_LIST_DIR}/step_summaries.c)
add_library(fss_keep STATIC ${CMAKE_CURRENT_LIST_DIR}/keep.c ${CMAKE_CURRENT_LIST_DIR}/keep_guard.c
  ${CMAKE_CURRENT_LIST_DIR}/keep_policy.c ${CMAKE_CURRENT_LIST_DIR}/keep_segments.c
  ${CMAKE_CURRENT_LIST_DIR}/keep_summary.c)
target_include_directories(fss_keep PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(fss_keep PUBLIC fss_analysis fss_collector fss_common)
