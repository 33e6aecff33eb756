# Unit tests of export/: the kernels every exporter draws, the Chrome-trace writer.
if(TARGET fss_export)
  fss_unit_test(NAME export_events_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/export_events_test.c
    LIBS fss_export)
endif()
