# The device table of peak FLOP/s and MFU's inputs (collector/device_peak.c,
# collector/mfu.c) on hand-built results.
if(TARGET fss_analysis)
  fss_unit_test(NAME mfu_test_unit
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/mfu_test.c
    LIBS fss_session fss_analysis fss_common)
endif()
