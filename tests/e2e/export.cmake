# fsdpscope export --perfetto | --kineto end to end: fsdp_ref runs under
# `fsdpscope run`, a trace with hostile names (export_gen_trace.c) and
# synthetic ones with CUPTI intervals (export_synth_trace.c),
# exported and checked against dump (tests/e2e/export_test.py).
if(TARGET fss_export)
  add_executable(export_gen_trace ${CMAKE_CURRENT_SOURCE_DIR}/e2e/export_gen_trace.c)
  target_include_directories(export_gen_trace PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(export_gen_trace PRIVATE fss_common)
  add_executable(export_synth_trace ${CMAKE_CURRENT_SOURCE_DIR}/e2e/export_synth_trace.c
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/analysis_synth.c)
  target_include_directories(export_synth_trace PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(export_synth_trace PRIVATE fss_common m)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(NOT Python3_Interpreter_FOUND OR NOT TARGET fsdp_ref OR NOT TARGET fsdpscope_agent)
    # the sanitizer build: the generated traces only (the exporters' paths; fsdp_ref's runs
    # there would take minutes for code the regular build runs)
    if(FSS_SANITIZE)
      list(APPEND FSS_EXPORT_CHECKS --quick)
    endif()
    add_test(NAME export_test COMMAND sh -c "echo 'SKIP: export_test needs python3, fsdp_ref and the agent'; exit 77")
  else()
    # the round trip needs the Kineto reader, the overlap checks the report's per_rank figures
    set(FSS_EXPORT_CHECKS "")
    if(EXISTS ${PROJECT_SOURCE_DIR}/collector/kineto_input.c)
      list(APPEND FSS_EXPORT_CHECKS --round-trip)
    endif()
    file(READ ${PROJECT_SOURCE_DIR}/docs/report-schema.json FSS_REPORT_SCHEMA)
    if(FSS_REPORT_SCHEMA MATCHES "comm_comp_overlap")
      list(APPEND FSS_EXPORT_CHECKS --figures)
    endif()
    # the sanitizer build: the generated traces only (the exporters' paths; fsdp_ref's runs
    # there would take minutes for code the regular build runs)
    if(FSS_SANITIZE)
      list(APPEND FSS_EXPORT_CHECKS --quick)
    endif()
    add_test(NAME export_test
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/export_test.py
        --fsdpscope $<TARGET_FILE:fsdpscope> --fsdp-ref $<TARGET_FILE:fsdp_ref> --gen $<TARGET_FILE:export_gen_trace>
        --synth $<TARGET_FILE:export_synth_trace> --fixtures ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/golden
        ${FSS_EXPORT_CHECKS})
  endif()
  set_tests_properties(export_test PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "e2e")
endif()
