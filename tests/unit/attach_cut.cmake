# cli/attach_cut: the common cut of `fsdpscope attach` at detach, fed records
# (no libbpf, no root).
fss_unit_test(NAME attach_cut_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/attach_cut_test.c ${PROJECT_SOURCE_DIR}/cli/attach_cut.c
  LIBS fss_common)
