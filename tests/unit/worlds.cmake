# collector/worlds: processes grouped into worlds (a restart is two), a rank claimed twice.
fss_unit_test(NAME worlds_test SOURCES unit/worlds_test.c LIBS fss_analysis fss_collector TIMEOUT 60)
# rules/restart.c and rules/duplicate_rank.c on hand-built results.
if(TARGET fss_rules)
  fss_unit_test(NAME rules_worlds_test
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/rules_worlds_test.c ${CMAKE_CURRENT_SOURCE_DIR}/unit/rules_fixture.c
    LIBS fss_rules fss_common TIMEOUT 60)
endif()
# A restarted job through the analyzer: two worlds apart, a wait the restart ended not a hang.
fss_unit_test(NAME worlds_analysis_test SOURCES unit/worlds_analysis_test.c LIBS fss_analysis fss_collector fss_common
  TIMEOUT 60)
