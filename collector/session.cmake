# collector/session.cmake: the session (session.h), the one place a trace
# is processed: an input (files, a live ingest), one per-source view, the
# analyzer, the live state, the keeper. Included from collector/CMakeLists.txt
# after keep.cmake (it uses them all).
add_library(fss_session STATIC
  ${CMAKE_CURRENT_LIST_DIR}/analyze_traces.c
  ${CMAKE_CURRENT_LIST_DIR}/kineto_emit.c
  ${CMAKE_CURRENT_LIST_DIR}/kineto_figures.c
  ${CMAKE_CURRENT_LIST_DIR}/kineto_input.c
  ${CMAKE_CURRENT_LIST_DIR}/kineto_map.c
  ${CMAKE_CURRENT_LIST_DIR}/kineto_names.c
  ${CMAKE_CURRENT_LIST_DIR}/kineto_result.c
  ${CMAKE_CURRENT_LIST_DIR}/session.c
  ${CMAKE_CURRENT_LIST_DIR}/session_files.c
  ${CMAKE_CURRENT_LIST_DIR}/session_ingest.c
)
target_include_directories(fss_session PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(fss_session PUBLIC fss_keep fss_live fss_analysis fss_kineto fss_collector fss_common)
