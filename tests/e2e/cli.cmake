# The fsdpscope executable end to end: help, errors, dump.
add_test(NAME cli_test
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/cli_test.sh $<TARGET_FILE:fsdpscope> $<TARGET_FILE:fss_gen_sample_trace>)
set_tests_properties(cli_test PROPERTIES TIMEOUT 120 LABELS "e2e")
