# attach_bench: ns the probes of `fsdpscope attach` add per NCCL call on the
# stand-in (run by hand through bench/attach_bench.sh, as root; results in
# bench/results/attach.txt with the command line).
if(TARGET fss_attach_bpf AND TARGET fss_nccl_cpu)
  add_executable(attach_bench ${CMAKE_CURRENT_LIST_DIR}/attach_bench.c)
  target_include_directories(attach_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_include_directories(attach_bench SYSTEM PRIVATE ${FSS_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(attach_bench PRIVATE fss_attach_bpf ${CMAKE_DL_LIBS})
  add_dependencies(attach_bench fss_nccl_cpu)
else()
  message(STATUS "fsdpscope: attach (libbpf) or the NCCL stand-in is not built: attach_bench is skipped")
endif()
