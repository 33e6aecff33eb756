# The docs against the code (tests/e2e/docs_agree_test.py): every documented
# signal, interval, default and limit that has an entry in its table (docs/*.md,
# the commands' --help as the built binary prints it, the lines the code prints)
# equals the constant in the C sources; a failure names the doc, the code
# location and both values.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND AND TARGET fsdpscope)
  add_test(NAME docs_agree_test
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/docs_agree_test.py $<TARGET_FILE:fsdpscope>
            ${PROJECT_SOURCE_DIR})
  set_tests_properties(docs_agree_test PROPERTIES TIMEOUT 60 LABELS "e2e;docs")
endif()
