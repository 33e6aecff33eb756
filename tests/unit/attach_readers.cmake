# The readers of an attached job's trace (sources of path uprobe, observed
# communicators): ranks and their origins, exposure not measured, the attach
# section, detached and killed ends (tests/unit/attach_readers_test.c); and
# what report, lint and dump print of it (tests/e2e/attach_readers_test.sh,
# the trace written by the same program). Registered here, after the unit
# program exists (the e2e fragments are read first).
if(TARGET fss_rules AND TARGET fss_metrics)
  fss_unit_test(NAME attach_readers_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/attach_readers_test.c
    LIBS fss_session fss_rules fss_metrics fss_live fss_analysis fss_common TIMEOUT 60)
endif()
if(TARGET attach_readers_test AND TARGET fsdpscope)
  add_test(NAME attach_readers_e2e
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/e2e/attach_readers_test.sh $<TARGET_FILE:fsdpscope>
      $<TARGET_FILE:attach_readers_test> ${PROJECT_SOURCE_DIR}/docs/report-schema.json
      ${PROJECT_SOURCE_DIR}/tests/e2e/lint_schema_check.py)
  set_tests_properties(attach_readers_e2e PROPERTIES TIMEOUT 60 LABELS "e2e")
endif()
