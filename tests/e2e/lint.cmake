# fsdpscope lint | report | ledger end to end on synthetic traces
# (lint_gen_trace.c writes them): exit codes, evidence, bad input, help,
# the JSON schema (docs/report-schema.json), the ledger's worked example.
if(TARGET fss_rules)
  add_executable(lint_gen_trace ${CMAKE_CURRENT_SOURCE_DIR}/e2e/lint_gen_trace.c)
  target_include_directories(lint_gen_trace PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(lint_gen_trace PRIVATE fss_common)
  # lint_print_summary(), the hook `fsdpscope run` calls, in a program of
  # its own (the cli/ files it needs, not the whole executable).
  add_executable(lint_summary ${CMAKE_CURRENT_SOURCE_DIR}/e2e/lint_summary.c
    ${PROJECT_SOURCE_DIR}/cli/cmd_lint.c ${PROJECT_SOURCE_DIR}/cli/lint_notes.c ${PROJECT_SOURCE_DIR}/cli/options.c ${PROJECT_SOURCE_DIR}/cli/diagnosis.c
    ${PROJECT_SOURCE_DIR}/cli/report_text.c ${PROJECT_SOURCE_DIR}/cli/report_json.c
    ${PROJECT_SOURCE_DIR}/cli/output.c ${PROJECT_SOURCE_DIR}/cli/run_folder.c ${PROJECT_SOURCE_DIR}/cli/report_sources.c)
  target_include_directories(lint_summary PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(lint_summary PRIVATE fss_session fss_rules fss_collector fss_common)
  add_test(NAME lint_test
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/lint_test.sh $<TARGET_FILE:fsdpscope> $<TARGET_FILE:lint_gen_trace>
      ${PROJECT_SOURCE_DIR}/docs/report-schema.json ${CMAKE_CURRENT_SOURCE_DIR}/e2e/lint_schema_check.py
      $<TARGET_FILE:lint_summary>)
  set_tests_properties(lint_test PROPERTIES TIMEOUT 120 LABELS "e2e")
  # A flipped bit in a trace's file header: lint, report and dump --salvage.
  add_test(NAME trace_salvage_test
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/trace_salvage_test.sh $<TARGET_FILE:fsdpscope> $<TARGET_FILE:lint_gen_trace>)
  set_tests_properties(trace_salvage_test PROPERTIES TIMEOUT 120 LABELS "e2e")
  # The new user's 4-rank job of issue 23, live: the advice's decisions only.
  if(TARGET fsdp_ref AND TARGET fsdpscope_agent)
    add_test(NAME advice_job_test
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/advice_job_test.sh $<TARGET_FILE:fsdpscope> $<TARGET_FILE:fsdp_ref>)
    set_tests_properties(advice_job_test PROPERTIES TIMEOUT 120 LABELS "e2e")
  endif()
endif()

# The accuracy matrix: fsdp_ref runs under `fsdpscope run` against the
# trainer's own log (tests/e2e/accuracy_test.py): verdicts, counts, units,
# roles, findings. Needs the agent, fsdp_ref and python3; under sanitizers it
# is skipped (31 multi-rank jobs at ten times the cost, for checks the
# regular build makes).
find_package(Python3 COMPONENTS Interpreter QUIET)
set(FSS_ACCURACY_MISSING "")
if(NOT TARGET fss_rules)
  set(FSS_ACCURACY_MISSING "the rules (fss_rules) are not built")
elseif(NOT Python3_Interpreter_FOUND)
  set(FSS_ACCURACY_MISSING "python3 not found (apt-get install python3)")
elseif(NOT TARGET fsdpscope_agent)
  set(FSS_ACCURACY_MISSING "the agent (target fsdpscope_agent) is not built in this configuration")
elseif(NOT TARGET fsdp_ref)
  set(FSS_ACCURACY_MISSING "fsdp_ref is not built in this configuration")
elseif(FSS_SANITIZE)
  set(FSS_ACCURACY_MISSING "the accuracy matrix runs in the regular build (31 jobs; ten times slower under sanitizers)")
endif()
if(FSS_ACCURACY_MISSING)
  add_test(NAME accuracy_test COMMAND sh -c "echo 'SKIP: ${FSS_ACCURACY_MISSING}'; exit 77")
else()
  # stream_job (tests/e2e/stream_job.cmake) is built with the stand-in, as fsdp_ref is
  add_test(NAME accuracy_test
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/accuracy_test.py matrix
      --fsdpscope $<TARGET_FILE:fsdpscope> --fsdp-ref $<TARGET_FILE:fsdp_ref> --agent $<TARGET_FILE:fsdpscope_agent>
      --stream-job $<TARGET_FILE:stream_job> --restart-job $<TARGET_FILE:restart_job>)
endif()
set_tests_properties(accuracy_test PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS "e2e;accuracy")
