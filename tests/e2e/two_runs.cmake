# Two `fsdpscope run`s into one --out folder are two jobs: every reader of
# the folder refuses them as one, naming the files; each trace alone still
# reads (tests/e2e/two_runs_test.sh, on the stand-in).
if(TARGET fsdp_ref AND TARGET fsdpscope_agent AND TARGET fsdpscope)
  if(FSS_SANITIZE)
    # the agent preloaded into a sanitized fsdp_ref is run_e2e's to handle (--sanitized)
    add_test(NAME two_runs_e2e COMMAND sh -c "echo 'SKIP: runs in the regular build'; exit 77")
  else()
    add_test(NAME two_runs_e2e
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/two_runs_test.sh $<TARGET_FILE:fsdpscope>
        $<TARGET_FILE:fsdp_ref> $<TARGET_FILE:fsdpscope_agent>)
  endif()
  set_tests_properties(two_runs_e2e PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "e2e;merge")
endif()
