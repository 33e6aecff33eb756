# Unit tests of the CPU stand-in for the NCCL API (fsdp_ref/nccl_cpu/).
if(TARGET fss_nccl_cpu)
  fss_unit_test(NAME nccl_cpu_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/nccl_cpu_test.c
    LIBS fss_nccl_cpu m TIMEOUT 180 LABELS fsdp_ref)
  # libnccl.so.2 exports the NCCL API and nothing else; ncclX are weak
  # aliases of pncclX.
  add_test(NAME nccl_cpu_exports
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/nccl_cpu_exports.sh $<TARGET_FILE:fss_nccl_cpu>)
  set_tests_properties(nccl_cpu_exports PROPERTIES TIMEOUT 30 LABELS "unit;fsdp_ref")
endif()
