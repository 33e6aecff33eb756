# The per_rank HTA figures (comm_comp_overlap, nccl_kernels, profiler_steps)
# of fsdp_ref jobs run under `fsdpscope run`, recomputed from `dump` of the
# same trace and checked against fsdp_ref's own log (tests/e2e/figures_test.sh).
find_package(Python3 COMPONENTS Interpreter QUIET)
set(FSS_FIGURES_MISSING "")
if(NOT Python3_Interpreter_FOUND)
  set(FSS_FIGURES_MISSING "python3 not found (apt-get install python3)")
elseif(NOT TARGET fsdpscope_agent)
  set(FSS_FIGURES_MISSING "the agent (target fsdpscope_agent) is not built in this configuration")
elseif(NOT TARGET fsdp_ref)
  set(FSS_FIGURES_MISSING "fsdp_ref is not built in this configuration")
endif()
if(FSS_FIGURES_MISSING)
  add_test(NAME figures_e2e COMMAND sh -c "echo 'SKIP: ${FSS_FIGURES_MISSING}'; exit 77")
else()
  add_test(NAME figures_e2e
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/figures_test.sh
      $<TARGET_FILE:fsdpscope> $<TARGET_FILE:fsdpscope_agent> $<TARGET_FILE:fsdp_ref>)
endif()
set_tests_properties(figures_e2e PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "e2e")
