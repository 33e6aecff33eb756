# `fsdpscope report --html` in headless Chromium: hostile names recorded by
# real fsdp_ref runs stay text, the charts have a bar per gather and a lane
# per rank (a heat strip at 256 ranks), the page is not blank and makes no
# request (tests/e2e/report_html_test.sh). Four browser runs, about 1 s each.
find_package(Python3 COMPONENTS Interpreter QUIET)
set(FSS_REPORT_HTML_MISSING "")
if(NOT Python3_Interpreter_FOUND)
  set(FSS_REPORT_HTML_MISSING "python3 not found (apt-get install python3)")
elseif(NOT TARGET fsdpscope_agent)
  set(FSS_REPORT_HTML_MISSING "the agent (target fsdpscope_agent) is not built in this configuration")
elseif(NOT TARGET fsdp_ref OR NOT TARGET lint_gen_trace)
  set(FSS_REPORT_HTML_MISSING "fsdp_ref or lint_gen_trace is not built in this configuration")
endif()
if(FSS_REPORT_HTML_MISSING)
  add_test(NAME report_html_e2e COMMAND sh -c "echo 'SKIP: ${FSS_REPORT_HTML_MISSING}'; exit 77")
else()
  add_test(NAME report_html_e2e
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/report_html_test.sh
      $<TARGET_FILE:fsdpscope> $<TARGET_FILE:fsdpscope_agent> $<TARGET_FILE:fsdp_ref> $<TARGET_FILE:lint_gen_trace>)
endif()
set_tests_properties(report_html_e2e PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "e2e")
