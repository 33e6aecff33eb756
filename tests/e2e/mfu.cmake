# MFU end to end (tests/e2e/mfu_test.py): the device record (format 1.5)
# through dump and report, MFU from every input path and null with the
# missing input named, a format 1.4 trace, a Kineto trace's deviceProperties.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND AND TARGET fsdpscope AND TARGET lint_gen_trace)
  add_test(NAME mfu_test
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/mfu_test.py $<TARGET_FILE:fsdpscope>
            $<TARGET_FILE:lint_gen_trace> ${PROJECT_SOURCE_DIR}/docs/report-schema.json
            ${CMAKE_CURRENT_LIST_DIR}/lint_schema_check.py ${CMAKE_CURRENT_BINARY_DIR}/mfu)
  set_tests_properties(mfu_test PROPERTIES TIMEOUT 60 LABELS "e2e")
endif()
