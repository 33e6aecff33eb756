# collector/session: the one place a trace is processed (files and a live
# ingest as inputs, the tool's callbacks, the job steps), checked against
# lint's analysis of the golden traces.
if(TARGET fss_session)
  fss_unit_test(NAME session_test SOURCES unit/session_test.c LIBS fss_session fss_analysis fss_collector fss_common
    TIMEOUT 60)
  if(TARGET session_test)
    target_compile_definitions(session_test PRIVATE FSS_GOLDEN_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures/golden")
  endif()
endif()
