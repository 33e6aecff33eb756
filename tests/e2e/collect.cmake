# `fsdpscope collect` end to end (tests/e2e/collect_e2e.py): ranks started
# the way torchrun starts them against a collect give run's diagnosis, and
# the streamed analysis equals lint on the trace written; a collector killed
# and restarted mid-job loses no collective; the default socket's access
# rules and the tcp key; and (collect_net_e2e.py) that a tcp peer without
# the key can neither hold the collector nor end it. A missing piece makes
# a test that says so and is reported as skipped, never one that passes.
find_package(Python3 COMPONENTS Interpreter QUIET)

set(FSS_COLLECT_E2E_MISSING "")
if(NOT Python3_Interpreter_FOUND)
  set(FSS_COLLECT_E2E_MISSING "python3 not found (apt-get install python3)")
elseif(NOT TARGET fsdpscope_agent)
  set(FSS_COLLECT_E2E_MISSING "the agent (target fsdpscope_agent) is not built in this configuration")
endif()

if(FSS_COLLECT_E2E_MISSING)
  add_test(NAME collect_e2e COMMAND sh -c "echo 'SKIP: ${FSS_COLLECT_E2E_MISSING}'; exit 77")
  set_tests_properties(collect_e2e PROPERTIES SKIP_RETURN_CODE 77 LABELS "e2e;collect")
  return()
endif()

# script: collect_e2e.py, or collect_net_e2e.py (what peers without the key can do).
function(fss_collect_e2e name scenario timeout)
  set(script collect_e2e.py)
  if(ARGC GREATER 3)
    set(script ${ARGV3})
  endif()
  add_test(NAME collect_e2e_${name}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/${script} ${scenario}
            --fsdpscope $<TARGET_FILE:fsdpscope>
            --agent $<TARGET_FILE:fsdpscope_agent>
            $<$<TARGET_EXISTS:fsdp_ref>:--fsdp-ref=$<TARGET_FILE:fsdp_ref>>
            --schema ${PROJECT_SOURCE_DIR}/docs/report-schema.json
            --schema-check ${CMAKE_CURRENT_SOURCE_DIR}/e2e/lint_schema_check.py
            --work ${CMAKE_CURRENT_BINARY_DIR}/collect_e2e)
  set_tests_properties(collect_e2e_${name} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77 LABELS "e2e;collect")
endfunction()

fss_collect_e2e(security security 600)
# Sanitized fsdp_ref steps take seconds each on a busy machine.
fss_collect_e2e(equal_linear equal:linear 900)
fss_collect_e2e(equal_block equal:block 900)
fss_collect_e2e(keep keep 600)
fss_collect_e2e(restart restart 900)
fss_collect_e2e(options options 300)
fss_collect_e2e(net_key_timeout key_timeout 300 collect_net_e2e.py)
fss_collect_e2e(net_probe probe 600 collect_net_e2e.py)
fss_collect_e2e(net_caps caps 300 collect_net_e2e.py)
fss_collect_e2e(net_viewer_cap viewer_cap 300 collect_net_e2e.py)
