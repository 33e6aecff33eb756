# Hung and desynced jobs end to end (tests/e2e/hang_e2e.py): fsdp_ref stops
# one rank before a collective (--stall-at) or shrinks one rank's AllGather
# (--mismatch-at) at a collective its log names, and fsdpscope (collect, run,
# lint) must name the same one, the hang while the job is still hung. A
# missing piece makes a test that says so and is reported as skipped, never
# one that passes.
find_package(Python3 COMPONENTS Interpreter QUIET)

set(FSS_HANG_E2E_MISSING "")
if(NOT Python3_Interpreter_FOUND)
  set(FSS_HANG_E2E_MISSING "python3 not found (apt-get install python3)")
elseif(NOT TARGET fsdp_ref)
  set(FSS_HANG_E2E_MISSING "fsdp_ref is not built (needs nccl.h and the CUDA headers)")
endif()

if(FSS_HANG_E2E_MISSING)
  add_test(NAME hang_e2e COMMAND sh -c "echo 'SKIP: ${FSS_HANG_E2E_MISSING}'; exit 77")
  set_tests_properties(hang_e2e PROPERTIES SKIP_RETURN_CODE 77 LABELS "e2e;hang")
  return()
endif()

# faults needs fsdp_ref only; the others the agent and the CLI (the script
# skips them without the agent).
function(fss_hang_e2e name timeout)
  add_test(NAME hang_e2e_${name}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/hang_e2e.py ${name}
            --fsdp-ref $<TARGET_FILE:fsdp_ref>
            $<$<TARGET_EXISTS:fsdpscope>:--fsdpscope=$<TARGET_FILE:fsdpscope>>
            $<$<TARGET_EXISTS:fsdpscope_agent>:--agent=$<TARGET_FILE:fsdpscope_agent>>
            --work ${CMAKE_CURRENT_BINARY_DIR}/hang_e2e)
  set_tests_properties(hang_e2e_${name} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77 LABELS "e2e;hang")
endfunction()

fss_hang_e2e(faults 300)
fss_hang_e2e(hang_collect 600)
fss_hang_e2e(hang_run 600)
fss_hang_e2e(hang_hsdp 600)
fss_hang_e2e(hang_gave_up 300)
fss_hang_e2e(mismatch 300)
fss_hang_e2e(no_hang 300)
