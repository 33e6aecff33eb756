# How each process of a trace ended, end to end: lint, report and the JSON
# report of a synthetic trace with a SIGKILLed rank, a rank cut off and a
# rank whose collectives went missing; dump's per-source view of it.
if(TARGET lint_gen_trace AND TARGET lint_summary)
  add_test(NAME sources_test
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/sources_test.sh $<TARGET_FILE:fsdpscope> $<TARGET_FILE:lint_gen_trace>
      ${PROJECT_SOURCE_DIR}/docs/report-schema.json ${CMAKE_CURRENT_SOURCE_DIR}/e2e/lint_schema_check.py
      $<TARGET_FILE:lint_summary>)
  set_tests_properties(sources_test PROPERTIES TIMEOUT 120 LABELS "e2e")
endif()
