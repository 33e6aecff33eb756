# An elastic restart with a new world (docs/patterns.md "Restarts"): restart_job
# (tests/e2e/restart_job.c) runs stream_job with 4 ranks, kills one with SIGKILL
# mid-run (its supervisor stops the others), then starts a second world of 2
# ranks with new processes and communicators, all under one `fsdpscope run`.
# tests/e2e/restart_e2e.py checks that the report holds both worlds, their
# processes and ranks, each world's own verdict and units, and the rank that
# died, against restart_job's and stream_job's truth.
add_executable(restart_job ${CMAKE_CURRENT_LIST_DIR}/restart_job.c)

find_package(Python3 COMPONENTS Interpreter QUIET)
if(NOT Python3_Interpreter_FOUND OR NOT TARGET fsdpscope_agent OR NOT TARGET fss_nccl_cpu)
  add_test(NAME restart_e2e COMMAND sh -c "echo 'SKIP: needs python3, the agent and stream_job (the NCCL stand-in)'; exit 77")
  set_tests_properties(restart_e2e PROPERTIES SKIP_RETURN_CODE 77 LABELS "e2e;restart")
  return()
endif()
add_test(NAME restart_e2e
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/restart_e2e.py
          --fsdpscope $<TARGET_FILE:fsdpscope>
          --agent $<TARGET_FILE:fsdpscope_agent>
          --stream-job $<TARGET_FILE:stream_job>
          --restart-job $<TARGET_FILE:restart_job>
          --work ${CMAKE_CURRENT_BINARY_DIR}/restart_e2e)
set_tests_properties(restart_e2e PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "e2e;restart")
