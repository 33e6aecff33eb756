# The agent's CUPTI activity handling and NVTX injection, tested without a
# GPU and without the rest of the agent: agent/cupti.c and agent/nvtx.c are
# built with test doubles of the agent core (agent_emit, agent_intern, ...)
# that live in the test sources.

# CUPTI: buffers of real CUPTI records (toolkit headers) walked by the real
# libcupti (dlopen'd by the code under test; the test skips the walk with
# a message where libcupti cannot be loaded).
if(FSS_CUPTI_INCLUDE)
  fss_unit_test(NAME agent_cupti_test
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/agent_cupti_test.c ${PROJECT_SOURCE_DIR}/agent/cupti.c ${PROJECT_SOURCE_DIR}/agent/cupti_device.c
    LIBS fss_common ${CMAKE_DL_LIBS}
    LABELS agent
    TIMEOUT 60)
  if(TARGET agent_cupti_test)
    target_include_directories(agent_cupti_test PRIVATE ${FSS_CUPTI_INCLUDE})
  endif()
else()
  message(STATUS "fsdpscope: CUPTI headers not found: agent_cupti_test is skipped")
endif()

# NVTX: the test program uses the NVTX3 API as any job does and points
# NVTX_INJECTION64_PATH at agent_nvtx_double (agent/nvtx.c + doubles, built
# from the same test source with AGENT_NVTX_TEST_DOUBLE).
if(FSS_NVTX3_INCLUDE AND CMOCKA_FOUND)
  add_library(agent_nvtx_double SHARED
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/agent_nvtx_test.c ${PROJECT_SOURCE_DIR}/agent/nvtx.c)
  # A pool of 64 thread stacks, so that the test can exhaust it.
  target_compile_definitions(agent_nvtx_double PRIVATE AGENT_NVTX_TEST_DOUBLE=1 NVTX_STACKS=64u)
  target_include_directories(agent_nvtx_double PRIVATE ${PROJECT_SOURCE_DIR} ${FSS_NVTX3_INCLUDE})
  target_link_libraries(agent_nvtx_double PRIVATE fss_common Threads::Threads)
  set_target_properties(agent_nvtx_double PROPERTIES C_VISIBILITY_PRESET hidden)

  fss_unit_test(NAME agent_nvtx_test
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/agent_nvtx_test.c
    LIBS agent_nvtx_double fss_common ${CMAKE_DL_LIBS}
    LABELS agent
    TIMEOUT 60)
  if(TARGET agent_nvtx_test)
    target_include_directories(agent_nvtx_test PRIVATE ${FSS_NVTX3_INCLUDE})
    target_compile_definitions(agent_nvtx_test PRIVATE
      AGENT_NVTX_DOUBLE_PATH="$<TARGET_FILE:agent_nvtx_double>")
    # The real agent, when agent/CMakeLists.txt builds it: it must load
    # with dlopen (as NVTX loads it) and export the entry point.
    if(TARGET fsdpscope_agent)
      add_dependencies(agent_nvtx_test fsdpscope_agent)
      set_tests_properties(agent_nvtx_test PROPERTIES
        ENVIRONMENT "AGENT_NVTX_REAL_AGENT=$<TARGET_FILE:fsdpscope_agent>")
    endif()
  endif()
elseif(NOT FSS_NVTX3_INCLUDE)
  message(STATUS "fsdpscope: NVTX3 headers not found: agent_nvtx_test is skipped")
endif()
