# fsdp_ref --style fsdp2 gathers in place, fsdp1 does not (under `fsdpscope
# run`, the agent records the buffers): tests/e2e/fsdp_ref_inplace_test.sh.
if(TARGET fsdp_ref AND TARGET fsdpscope_agent AND TARGET fsdpscope)
  if(FSS_SANITIZE)
    # the agent preloaded into a sanitized fsdp_ref is run_e2e's to handle (--sanitized)
    add_test(NAME fsdp_ref_inplace_e2e COMMAND sh -c "echo 'SKIP: runs in the regular build'; exit 77")
  else()
    add_test(NAME fsdp_ref_inplace_e2e
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/fsdp_ref_inplace_test.sh $<TARGET_FILE:fsdpscope>
        $<TARGET_FILE:fsdp_ref> $<TARGET_FILE:fsdpscope_agent>)
  endif()
  set_tests_properties(fsdp_ref_inplace_e2e PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "e2e;fsdp_ref")
endif()
