# agent/bpf/attach_records: probe events become the agent's records (no
# libbpf, no root: the test feeds the events of a generated job), and the
# analysis reads a trace of them.
if(TARGET fss_attach_core AND TARGET fss_analysis)
  fss_unit_test(NAME attach_records_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/attach_records_test.c
    LIBS fss_attach_core fss_session fss_analysis fss_common TIMEOUT 120)
endif()
