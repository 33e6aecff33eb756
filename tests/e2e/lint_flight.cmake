# The report of calls in flight (hangs, mismatches) and --hang-timeout, end
# to end: hand-built results through the report's writers (flight_report.c),
# and lint of lint_gen_trace's hung and desynced traces against the schema.
if(TARGET fss_rules AND TARGET lint_gen_trace)
  add_executable(flight_report ${CMAKE_CURRENT_SOURCE_DIR}/e2e/flight_report.c
    ${PROJECT_SOURCE_DIR}/cli/diagnosis.c ${PROJECT_SOURCE_DIR}/cli/report_text.c
    ${PROJECT_SOURCE_DIR}/cli/report_json.c ${PROJECT_SOURCE_DIR}/cli/report_sources.c
    ${PROJECT_SOURCE_DIR}/cli/report_nodes.c ${PROJECT_SOURCE_DIR}/cli/report_mfu.c ${PROJECT_SOURCE_DIR}/cli/report_worlds.c)
  target_include_directories(flight_report PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(flight_report PRIVATE fss_session fss_rules fss_collector fss_common)
  add_test(NAME flight_report_test
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/flight_report_test.sh $<TARGET_FILE:fsdpscope>
      $<TARGET_FILE:lint_gen_trace> $<TARGET_FILE:flight_report>
      ${PROJECT_SOURCE_DIR}/docs/report-schema.json ${CMAKE_CURRENT_SOURCE_DIR}/e2e/lint_schema_check.py)
  set_tests_properties(flight_report_test PROPERTIES TIMEOUT 120 LABELS "e2e")
endif()
