# fsdpscope lint | report --json | top --once | dump on PyTorch profiler
# (Kineto) traces (collector/kineto_input.h), driven by kineto_read.py:
#   kineto_read_shared     the real traces of ../shared/kineto/ (read from
#                          there, never copied; skipped, 77, without them):
#                          exit codes, the verdict undecided (not sharded
#                          training), the figures equal to the script's own
#                          HTA computation and to HTA's (tests/fixtures/kineto/
#                          hta_figures.json) to 0.1 point
#   kineto_read_generated  traces the script writes: two ranks of one job,
#                          a partial 128-rank world, worlds that disagree, a
#                          list with a .fss, no NCCL kernel, a cut file and a
#                          bad gzip
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND AND TARGET fsdpscope)
  add_test(NAME kineto_read_shared
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/kineto_read.py shared $<TARGET_FILE:fsdpscope>
            ${FSS_SHARED_DIR}/kineto ${PROJECT_SOURCE_DIR}/tests/fixtures/kineto/hta_figures.json)
  set_tests_properties(kineto_read_shared PROPERTIES TIMEOUT 180 LABELS "e2e;kineto" SKIP_RETURN_CODE 77)
  add_test(NAME kineto_read_generated
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/kineto_read.py generated $<TARGET_FILE:fsdpscope>
            ${PROJECT_SOURCE_DIR}/tests/fixtures/golden/block.fss ${CMAKE_CURRENT_BINARY_DIR}/kineto_read)
  set_tests_properties(kineto_read_generated PROPERTIES TIMEOUT 120 LABELS "e2e;kineto")
endif()
# The sanitizer build: the generated traces take the reader's paths; the
# real ones (ten seconds) are the regular build's.
if(FSS_SANITIZE AND TEST kineto_read_shared)
  set_property(TEST kineto_read_shared APPEND PROPERTY LABELS regular_only)
endif()
