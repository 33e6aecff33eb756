# Unit tests of the live state and the analyzer's snapshot (collector/live.cmake).
if(TARGET fss_live)
  fss_unit_test(NAME live_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/live_test.c ${CMAKE_CURRENT_LIST_DIR}/analysis_synth.c
    LIBS fss_live fss_analysis fss_common TIMEOUT 180)
endif()
