# What fsdpscope writes, against another local user's links and full
# devices (tests/e2e/out_files_test.sh): runs as root, with the user nobody.
if(TARGET fsdpscope_agent AND TARGET fsdp_ref)
  add_test(NAME out_files_e2e
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/out_files_test.sh
      $<TARGET_FILE:fsdpscope> $<TARGET_FILE:fsdpscope_agent> $<TARGET_FILE:fsdp_ref>)
else()
  add_test(NAME out_files_e2e COMMAND sh -c "echo 'SKIP: the agent or fsdp_ref is not built'; exit 77")
endif()
set_tests_properties(out_files_e2e PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "e2e")

# Options outside their range: refused with the range named (tests/e2e/option_ranges_test.sh).
if(TARGET fsdpscope_agent AND TARGET fsdp_ref)
  add_test(NAME option_ranges_e2e
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/option_ranges_test.sh
      $<TARGET_FILE:fsdpscope> $<TARGET_FILE:fsdpscope_agent> $<TARGET_FILE:fsdp_ref>)
  set_tests_properties(option_ranges_e2e PROPERTIES TIMEOUT 120 LABELS "e2e")
endif()
