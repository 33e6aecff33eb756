# libFuzzer smoke run of the option parsers (tests/fuzz/options_fuzz.c):
# fsdpscope's parser with every command's table, the thresholds' syntax and
# fsdp_ref's parser, on argv words from the fuzzer's bytes. It links the
# command's sources (all of cli/ but main.c, whose table the target stands
# in for). Built with clang when FSS_FUZZ=ON, like trace_fuzz; its corpus:
# the help's EXAMPLES (tests/fuzz/corpus_update.sh).
if(FSS_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang" AND TARGET fsdpscope AND TARGET fsdp_ref_core)
  get_target_property(fss_cli_sources fsdpscope SOURCES)
  get_target_property(fss_cli_libs fsdpscope LINK_LIBRARIES)
  set(fss_options_fuzz_sources "")
  foreach(s IN LISTS fss_cli_sources)
    if(NOT IS_ABSOLUTE "${s}")
      set(s "${PROJECT_SOURCE_DIR}/cli/${s}")
    endif()
    if(NOT s MATCHES "/cli/main\\.c$")
      list(APPEND fss_options_fuzz_sources "${s}")
    endif()
  endforeach()
  add_executable(options_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/options_fuzz.c
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/options_fuzz_fsdp_ref.c ${fss_options_fuzz_sources})
  target_include_directories(options_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(options_fuzz PRIVATE FSS_VERSION="${PROJECT_VERSION}")
  target_compile_options(options_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(options_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(options_fuzz PRIVATE ${fss_cli_libs} fsdp_ref_model fsdp_ref_counts)
  get_target_property(fss_fsdp_ref_incs fsdp_ref_core INCLUDE_DIRECTORIES)
  target_include_directories(options_fuzz SYSTEM PRIVATE ${fss_fsdp_ref_incs})
  get_target_property(fss_fsdp_ref_defs fsdp_ref_core COMPILE_DEFINITIONS)
  if(fss_fsdp_ref_defs)
    target_compile_definitions(options_fuzz PRIVATE ${fss_fsdp_ref_defs})
  endif()
  fss_fuzz_smoke(TARGET options_fuzz RUNS 20000 FLAGS -detect_leaks=0 -close_fd_mask=3)
endif()
