# collector/analysis.cmake: the analysis library (steps, units, reshard,
# exposure, ledger, breakdown, ranks, calls in flight) that rules/, cli/ and tui/ read
# through collector/analysis.h. Included from collector/CMakeLists.txt.
add_library(fss_analysis STATIC
  ${CMAKE_CURRENT_LIST_DIR}/analysis_names.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_advice.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_callback.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_comms.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_exposure.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_finish.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_groups.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_note.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_figures.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_service.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_steady.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_structure.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_summary.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_trust.c
  ${CMAKE_CURRENT_LIST_DIR}/analyze_worlds.c
  ${CMAKE_CURRENT_LIST_DIR}/breakdown.c
  ${CMAKE_CURRENT_LIST_DIR}/device_peak.c
  ${CMAKE_CURRENT_LIST_DIR}/comm_roles.c
  ${CMAKE_CURRENT_LIST_DIR}/comm_roles_fsdp.c
  ${CMAKE_CURRENT_LIST_DIR}/flight.c
  ${CMAKE_CURRENT_LIST_DIR}/flight_calls.c
  ${CMAKE_CURRENT_LIST_DIR}/flight_gpu.c
  ${CMAKE_CURRENT_LIST_DIR}/flight_hang.c
  ${CMAKE_CURRENT_LIST_DIR}/flight_mismatch.c
  ${CMAKE_CURRENT_LIST_DIR}/ledger.c
  ${CMAKE_CURRENT_LIST_DIR}/median.c
  ${CMAKE_CURRENT_LIST_DIR}/mfu.c
  ${CMAKE_CURRENT_LIST_DIR}/overlap.c
  ${CMAKE_CURRENT_LIST_DIR}/phases.c
  ${CMAKE_CURRENT_LIST_DIR}/phases_reductions.c
  ${CMAKE_CURRENT_LIST_DIR}/rank_state.c
  ${CMAKE_CURRENT_LIST_DIR}/ranks.c
  ${CMAKE_CURRENT_LIST_DIR}/reshard.c
  ${CMAKE_CURRENT_LIST_DIR}/steps.c
  ${CMAKE_CURRENT_LIST_DIR}/steps_split.c
  ${CMAKE_CURRENT_LIST_DIR}/timeline.c
  ${CMAKE_CURRENT_LIST_DIR}/units.c
  ${CMAKE_CURRENT_LIST_DIR}/whatif.c
  ${CMAKE_CURRENT_LIST_DIR}/whatif_print.c
  ${CMAKE_CURRENT_LIST_DIR}/worlds.c
)
target_include_directories(fss_analysis PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(fss_analysis PUBLIC fss_collector fss_common m)
