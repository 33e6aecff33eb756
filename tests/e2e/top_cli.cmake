# `fsdpscope top` from the command line, without a terminal (tests/e2e/top_cli_test.sh):
# every error a clear message and exit 2, --connect to a real collect session,
# -- CMD --once (the job's log, its
# stdin closed, the last view), a replay's --once, help with EXAMPLES and
# OVERHEAD. The dashboard in a real terminal is tests/e2e/top_e2e.py's (tmux).
if(TARGET fsdp_ref AND TARGET fsdpscope_agent)
  add_test(NAME top_cli_test
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/top_cli_test.sh $<TARGET_FILE:fsdpscope> $<TARGET_FILE:fsdp_ref>
      $<TARGET_FILE:fsdpscope_agent>)
  set_tests_properties(top_cli_test PROPERTIES TIMEOUT 180 LABELS "e2e")
endif()
