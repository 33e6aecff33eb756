# The agent's sinks as a chain (sink records, acks and retention, failover
# with repeat, reconnect, TCP keys): the agent's core compiled into the test
# as in agent_core.cmake, against a fake collector in the test.
get_property(agent_core_sources GLOBAL PROPERTY FSS_AGENT_CORE_SOURCES)
if(agent_core_sources AND TARGET fss_nccl_cpu)
  fss_unit_test(NAME agent_sink_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/agent_sink_test.c ${CMAKE_CURRENT_LIST_DIR}/agent_core_trace.c
            ${agent_core_sources} ${PROJECT_SOURCE_DIR}/agent/cupti_none.c
    LIBS fss_common fss_nccl_cpu ${CMAKE_DL_LIBS}
    LABELS agent
    TIMEOUT 120)
  if(TARGET agent_sink_test)
    target_include_directories(agent_sink_test SYSTEM PRIVATE ${FSS_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
    set_tests_properties(agent_sink_test PROPERTIES ENVIRONMENT_MODIFICATION
      "FSDPSCOPE_DISABLE=unset:;FSDPSCOPE_SINK=unset:;FSDPSCOPE_OUT=unset:;FSDPSCOPE_DORMANT=unset:;FSDPSCOPE_RING_SLOTS=unset:;FSDPSCOPE_CUPTI=unset:;FSDPSCOPE_DEBUG=unset:;FSDPSCOPE_RETRY_MS=unset:;FSDPSCOPE_RETAIN_BYTES=unset:;FSDPSCOPE_SINK_TIMEOUT_MS=unset:")
  endif()
endif()
