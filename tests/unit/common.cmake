# Unit tests of common/: schema, trace files, strings.
fss_unit_test(NAME record_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/record_test.c
  LIBS fss_test_support fss_common)
fss_unit_test(NAME trace_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/trace_test.c
  LIBS fss_test_support fss_common)
fss_unit_test(NAME trace_writer_sync_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/trace_writer_sync_test.c
  LIBS fss_test_support fss_common)
if(TARGET record_test)
  target_compile_definitions(record_test PRIVATE FSS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
fss_unit_test(NAME wire_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/wire_test.c
  LIBS fss_test_support fss_common)
fss_unit_test(NAME json_writer_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/json_writer_test.c LIBS fss_common)
fss_unit_test(NAME text_buffer_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/text_buffer_test.c LIBS fss_common)
fss_unit_test(NAME out_file_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/out_file_test.c LIBS fss_common)
