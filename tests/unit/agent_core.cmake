# The agent's core (agent/agent.c emit.c strings.c sender*.c nccl_wrap.c ...),
# compiled into the test with the project's flags (sanitizers included) and
# run against the CPU NCCL stand-in: the wrappers interpose it in-process.
get_property(agent_core_sources GLOBAL PROPERTY FSS_AGENT_CORE_SOURCES)
if(agent_core_sources AND TARGET fss_nccl_cpu)
  fss_unit_test(NAME agent_core_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/agent_core_test.c ${CMAKE_CURRENT_LIST_DIR}/agent_core_trace.c
            ${agent_core_sources} ${PROJECT_SOURCE_DIR}/agent/cupti_none.c
    LIBS fss_common fss_nccl_cpu ${CMAKE_DL_LIBS}
    LABELS agent
    TIMEOUT 120)
  if(TARGET agent_core_test)
    target_include_directories(agent_core_test SYSTEM PRIVATE ${FSS_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
    # The test sets the agent's variables itself; none may leak in.
    set_tests_properties(agent_core_test PROPERTIES ENVIRONMENT_MODIFICATION
      "FSDPSCOPE_DISABLE=unset:;FSDPSCOPE_SINK=unset:;FSDPSCOPE_OUT=unset:;FSDPSCOPE_DORMANT=unset:;FSDPSCOPE_RING_SLOTS=unset:;FSDPSCOPE_CUPTI=unset:;FSDPSCOPE_DEBUG=unset:;FSDP_REF_LINK_LATENCY_US=set:0")
  endif()
elseif(NOT agent_core_sources)
  message(STATUS "fsdpscope: the agent is not built: agent_core_test is skipped")
else()
  message(STATUS "fsdpscope: the NCCL stand-in is not built: agent_core_test is skipped")
endif()
