# The agent preloaded into real processes (tests/e2e/agent_fault_test.c):
#   agent_interpose  a known NCCL sequence over 4 ranks, every call in the
#                    trace with its fields, over a socket and in files
#   agent_fault      the fault matrix: sink killed, sink that never reads,
#                    fork, 8 threads, no NCCL (true, sh, python3), exit paths,
#                    NCCL only in a module dlopen'd RTLD_LOCAL, _exit,
#                    vfork, Python's os._exit (python3 driving the stand-in
#                    through ctypes), where files go and symlinks planted
#                    by nobody (as root)
# In the sanitizer build the agent library itself is not instrumented (see
# agent/CMakeLists.txt) while the jobs are: these tests run there too.
if(TARGET fsdpscope_agent AND TARGET fss_nccl_cpu AND CMOCKA_FOUND)
  add_executable(agent_fault_job ${CMAKE_CURRENT_LIST_DIR}/agent_fault_job.c)
  target_include_directories(agent_fault_job SYSTEM PRIVATE ${FSS_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(agent_fault_job PRIVATE fss_nccl_cpu Threads::Threads)

  # NCCL reached through a module dlopen'd with RTLD_LOCAL (Python-like).
  add_library(agent_fault_module MODULE ${CMAKE_CURRENT_LIST_DIR}/agent_fault_module.c)
  target_include_directories(agent_fault_module SYSTEM PRIVATE ${FSS_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(agent_fault_module PRIVATE fss_nccl_cpu)
  add_executable(agent_fault_dlopen ${CMAKE_CURRENT_LIST_DIR}/agent_fault_dlopen.c)
  target_link_libraries(agent_fault_dlopen PRIVATE ${CMAKE_DL_LIBS})

  add_executable(agent_fault_test ${CMAKE_CURRENT_LIST_DIR}/agent_fault_test.c
    ${CMAKE_CURRENT_LIST_DIR}/../unit/agent_core_trace.c)
  target_include_directories(agent_fault_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(agent_fault_test PRIVATE fss_common PkgConfig::CMOCKA Threads::Threads)
  # The test needs the library built, not only the job.
  add_dependencies(agent_fault_test fsdpscope_agent agent_fault_job agent_fault_dlopen agent_fault_module)

  foreach(group interpose faults)
    if(group STREQUAL "interpose")
      set(name agent_interpose)
    else()
      set(name agent_fault)
    endif()
    add_test(NAME ${name}
      COMMAND agent_fault_test $<TARGET_FILE:fsdpscope_agent> $<TARGET_FILE:agent_fault_job> ${group}
              $<TARGET_FILE:agent_fault_dlopen> $<TARGET_FILE:agent_fault_module> $<TARGET_FILE:fss_nccl_cpu>)
    set_tests_properties(${name} PROPERTIES TIMEOUT 120 LABELS "e2e;agent")
    if(FSS_SANITIZE)
      # The stand-in is instrumented there: an uninstrumented python3 cannot load it.
      set_tests_properties(${name} PROPERTIES ENVIRONMENT "AGENT_FAULT_SANITIZED=1")
    endif()
  endforeach()
elseif(NOT TARGET fsdpscope_agent)
  message(STATUS "fsdpscope: the agent is not built: agent_interpose and agent_fault are skipped")
else()
  message(STATUS "fsdpscope: the NCCL stand-in or cmocka is missing: agent_interpose and agent_fault are skipped")
endif()
