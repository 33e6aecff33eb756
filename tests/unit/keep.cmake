# collector/keep: the --keep policy (full, summary, last:N) with a fake
# ingest and synthetic traces; the real ingest's part when it has one.
set(_keep_sources unit/keep_test.c unit/analysis_synth.c)
file(READ ${PROJECT_SOURCE_DIR}/collector/ingest.c _keep_ingest_c)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/collector/ingest.c)
set(_keep_real OFF)
if(_keep_ingest_c MATCHES "int ingest_rotate\\(")
  set(_keep_real ON)
else()
  # the ingest's rotation is not there yet: the test builds against stubs
  list(APPEND _keep_sources unit/keep_ingest_stub.c)
endif()
fss_unit_test(NAME keep_test SOURCES ${_keep_sources} LIBS fss_keep fss_rules fss_analysis fss_collector TIMEOUT 60)
if(TARGET keep_test AND _keep_real)
  target_compile_definitions(keep_test PRIVATE KEEP_TEST_REAL_INGEST)
endif()
