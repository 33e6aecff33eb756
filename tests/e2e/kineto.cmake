# The Kineto reader (collector/kineto_file.h) on the real traces of
# ../shared/kineto/ (never copied into the project): what it keeps and
# counts, per file, equals tests/e2e/kineto_counts.py's own count of the same
# file (Python's json module, decimal arithmetic). Skipped (77) where the
# shared folder is absent.
if(TARGET fss_kineto)
  add_executable(kineto_counts ${CMAKE_CURRENT_LIST_DIR}/kineto_counts.c)
  target_include_directories(kineto_counts PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(kineto_counts PRIVATE fss_kineto)
  add_test(NAME kineto_counts_shared
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/kineto_counts_test.sh $<TARGET_FILE:kineto_counts>
            ${CMAKE_CURRENT_LIST_DIR}/kineto_counts.py ${FSS_SHARED_DIR}/kineto)
  set_tests_properties(kineto_counts_shared PROPERTIES TIMEOUT 120 LABELS "e2e;kineto" SKIP_RETURN_CODE 77)
endif()
