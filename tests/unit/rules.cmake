# Unit tests of rules/: each rule on hand-built analysis results
# (rules_fixture.c), the registry and the thresholds, and the findings as
# text (rules_text_test).
if(TARGET fss_rules)
  foreach(t registry wrap overlap sizes bucketed flight text advice)
    fss_unit_test(NAME rules_${t}_test
      SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/rules_${t}_test.c ${CMAKE_CURRENT_SOURCE_DIR}/unit/rules_fixture.c
      LIBS fss_rules fss_common TIMEOUT 60)
  endforeach()
endif()
