# Calls in flight (collector/flight.c): hangs and mismatches from records,
# through the analyzer and a trace file.
if(TARGET fss_analysis)
  fss_unit_test(NAME flight_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/flight_test.c
    LIBS fss_analysis fss_common TIMEOUT 120)
endif()
