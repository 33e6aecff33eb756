# `fsdpscope top` in a real terminal (tests/e2e/top_e2e.py): each test runs
# the dashboard in a pane of its own tmux server, drives it with keys and
# asserts on the pane's text: rank rows, findings, the units view, pause,
# sort, the terminal restored after q / SIGTERM / a crash, 80x24, NO_COLOR,
# --once, and run mode (--exit-with-job; q then leave). A missing piece
# makes a test that says so and is reported as skipped, never one that
# passes.
find_package(Python3 COMPONENTS Interpreter QUIET)
find_program(FSS_TMUX tmux)

set(FSS_TOP_E2E_MISSING "")
if(NOT Python3_Interpreter_FOUND)
  set(FSS_TOP_E2E_MISSING "python3 not found (apt-get install python3)")
elseif(NOT TARGET fsdp_ref)
  set(FSS_TOP_E2E_MISSING "fsdp_ref is not built (needs nccl.h and the CUDA headers)")
elseif(NOT TARGET fsdpscope_agent)
  set(FSS_TOP_E2E_MISSING "the agent (target fsdpscope_agent) is not built in this configuration")
elseif(NOT FSS_TMUX)
  set(FSS_TOP_E2E_MISSING "tmux not found (scripts/setup.sh installs it)")
endif()

if(FSS_TOP_E2E_MISSING)
  add_test(NAME top_e2e COMMAND sh -c "echo 'SKIP: ${FSS_TOP_E2E_MISSING}'; exit 77")
  set_tests_properties(top_e2e PROPERTIES SKIP_RETURN_CODE 77 LABELS "e2e;top")
  return()
endif()

set(FSS_TOP_E2E_SANITIZED "")
if(FSS_SANITIZE)
  set(FSS_TOP_E2E_SANITIZED --sanitized)
endif()

function(fss_top_e2e name timeout)
  add_test(NAME top_e2e_${name}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/top_e2e.py ${name}
            --fsdpscope $<TARGET_FILE:fsdpscope>
            --agent $<TARGET_FILE:fsdpscope_agent>
            --fsdp-ref $<TARGET_FILE:fsdp_ref>
            --tmux ${FSS_TMUX}
            --work ${CMAKE_CURRENT_BINARY_DIR}/top_e2e
            ${FSS_TOP_E2E_SANITIZED})
  set_tests_properties(top_e2e_${name} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77 LABELS "e2e;top")
endfunction()

foreach(scenario replay_linear replay_block pause sort restore_quit restore_sigterm restore_crash
                 layout no_color once)
  fss_top_e2e(${scenario} 180)
endforeach()
# run mode: a live job (held before a step, then released) and a second run for comparison
fss_top_e2e(live 400)
fss_top_e2e(leave 400)
