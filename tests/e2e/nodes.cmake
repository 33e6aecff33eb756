# More than one node (tests/e2e/nodes_e2e.py): one fsdp_ref job whose ranks
# send to two collectors, half of them in a time namespace with their
# CLOCK_MONOTONIC 1000 s ahead; the merged lint equals one collector's, the
# report's nodes section shows the offset. Needs root (unshare --time), the
# agent, fsdp_ref and python3: a missing piece skips with the reason.
# The fleet alerting rule of docs/collect.md under `promtool test rules`.
if(TARGET lint_summary)
  # lint_summary builds the cli files it needs itself: the report's nodes section too.
  target_sources(lint_summary PRIVATE ${PROJECT_SOURCE_DIR}/cli/report_nodes.c ${PROJECT_SOURCE_DIR}/cli/report_mfu.c ${PROJECT_SOURCE_DIR}/cli/report_worlds.c)
endif()

find_package(Python3 COMPONENTS Interpreter QUIET)
set(FSS_NODES_E2E_MISSING "")
if(NOT Python3_Interpreter_FOUND)
  set(FSS_NODES_E2E_MISSING "python3 not found (apt-get install python3)")
elseif(NOT TARGET fsdpscope_agent)
  set(FSS_NODES_E2E_MISSING "the agent (target fsdpscope_agent) is not built in this configuration")
elseif(NOT TARGET fsdp_ref)
  set(FSS_NODES_E2E_MISSING "fsdp_ref is not built in this configuration")
endif()
if(FSS_NODES_E2E_MISSING)
  add_test(NAME nodes_e2e COMMAND sh -c "echo 'SKIP: ${FSS_NODES_E2E_MISSING}'; exit 77")
else()
  add_test(NAME nodes_e2e
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/nodes_e2e.py
            --fsdpscope $<TARGET_FILE:fsdpscope>
            --agent $<TARGET_FILE:fsdpscope_agent>
            --fsdp-ref $<TARGET_FILE:fsdp_ref>
            --schema ${PROJECT_SOURCE_DIR}/docs/report-schema.json
            --schema-check ${CMAKE_CURRENT_SOURCE_DIR}/e2e/lint_schema_check.py
            --work ${CMAKE_CURRENT_BINARY_DIR}/nodes_e2e)
endif()
set_tests_properties(nodes_e2e PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS "e2e;nodes")

# The fleet's alerting rule (docs/fsdpscope-rules.yml): fires on a hang
# across nodes, not on a job that runs or pauses (promtool test rules;
# prometheus comes with scripts/setup.sh).
find_program(FSS_PROMTOOL promtool)
if(FSS_PROMTOOL)
  add_test(NAME promtool_rules
    COMMAND ${FSS_PROMTOOL} test rules fsdpscope_rules_test.yml
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/e2e/promtool_rules)
else()
  add_test(NAME promtool_rules COMMAND sh -c "echo 'SKIP: promtool not found (scripts/setup.sh installs prometheus)'; exit 77")
endif()
set_tests_properties(promtool_rules PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77 LABELS "e2e;nodes")
