# agent_bench: ns the agent adds per wrapped NCCL call, and the fsdp_ref
# step-time ratio with / without it (run by hand; results in
# bench/results/agent.txt with the command line).
if(TARGET fsdpscope_agent AND TARGET fss_nccl_cpu)
  add_executable(agent_bench ${CMAKE_CURRENT_LIST_DIR}/agent_bench.c)
  target_include_directories(agent_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_include_directories(agent_bench SYSTEM PRIVATE ${FSS_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(agent_bench PRIVATE fss_common fss_nccl_cpu)
  add_dependencies(agent_bench fsdpscope_agent)
else()
  message(STATUS "fsdpscope: the agent or the NCCL stand-in is not built: agent_bench is skipped")
endif()
