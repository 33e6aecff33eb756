# Calls in flight (collector/flight.c): hangs and mismatches from records,
# through the analyzer and a trace file.
if(TARGET fss_analysis)
  fss_unit_test(NAME flight_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/flight_test.c
    LIBS fss_session fss_analysis fss_common TIMEOUT 120)
endif()

# The GPU case with the agent's own CUPTI code (agent/cupti.c, with doubles
# of the agent core, as agent_cupti_test): real CUPTI activity structs walked
# by the toolkit's libcupti (skipped with a message where it cannot load).
if(TARGET fss_analysis AND FSS_CUPTI_INCLUDE)
  fss_unit_test(NAME flight_cupti_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/flight_cupti_test.c ${PROJECT_SOURCE_DIR}/agent/cupti.c ${PROJECT_SOURCE_DIR}/agent/cupti_device.c
    LIBS fss_analysis fss_common ${CMAKE_DL_LIBS}
    TIMEOUT 60)
  if(TARGET flight_cupti_test)
    target_include_directories(flight_cupti_test PRIVATE ${FSS_CUPTI_INCLUDE})
  endif()
endif()
