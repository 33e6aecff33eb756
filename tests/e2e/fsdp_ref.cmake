# fsdp_ref end to end: real multi-process jobs of the reference trainer over
# the NCCL stand-in, checked from their logs (tests/e2e/fsdp_ref_e2e.c).
if(TARGET fsdp_ref)
  add_executable(fsdp_ref_e2e e2e/fsdp_ref_e2e.c)
  target_link_libraries(fsdp_ref_e2e PRIVATE fsdp_ref_counts fss_test_support m)
  foreach(scenario bitwise counts memory prefetch launcher failure loop tp zero3)
    add_test(NAME fsdp_ref_e2e_${scenario}
      COMMAND fsdp_ref_e2e ${scenario} $<TARGET_FILE:fsdp_ref>
              ${CMAKE_CURRENT_BINARY_DIR}/fsdp_ref_e2e_${scenario})
    set_tests_properties(fsdp_ref_e2e_${scenario} PROPERTIES TIMEOUT 180 LABELS "e2e;fsdp_ref")
  endforeach()

  # NVTX names, recorded through NVTX injection.
  if(FSS_NVTX3_INCLUDE)
    add_library(fsdp_ref_nvtx_inject MODULE e2e/fsdp_ref_nvtx_inject.c)
    target_include_directories(fsdp_ref_nvtx_inject SYSTEM PRIVATE ${FSS_NVTX3_INCLUDE})
    add_test(NAME fsdp_ref_e2e_nvtx
      COMMAND fsdp_ref_e2e nvtx $<TARGET_FILE:fsdp_ref>
              ${CMAKE_CURRENT_BINARY_DIR}/fsdp_ref_e2e_nvtx $<TARGET_FILE:fsdp_ref_nvtx_inject>)
    set_tests_properties(fsdp_ref_e2e_nvtx PROPERTIES TIMEOUT 60 LABELS "e2e;fsdp_ref")
    add_test(NAME fsdp_ref_e2e_tp_nvtx
      COMMAND fsdp_ref_e2e tp_nvtx $<TARGET_FILE:fsdp_ref>
              ${CMAKE_CURRENT_BINARY_DIR}/fsdp_ref_e2e_tp_nvtx $<TARGET_FILE:fsdp_ref_nvtx_inject>)
    set_tests_properties(fsdp_ref_e2e_tp_nvtx PROPERTIES TIMEOUT 60 LABELS "e2e;fsdp_ref")
  endif()
endif()
