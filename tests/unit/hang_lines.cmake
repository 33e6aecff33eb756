# cli/hang_lines.c: the live session's stderr lines about hangs and
# mismatches, over sequences of hand-built diagnoses.
if(TARGET fss_rules)
  fss_unit_test(NAME hang_lines_test SOURCES unit/hang_lines_test.c ${PROJECT_SOURCE_DIR}/cli/hang_lines.c
    LIBS fss_rules fss_common TIMEOUT 60)
endif()
