# libFuzzer smoke run of the per-source layer and the timeline over it
# (tests/fuzz/sources_fuzz.c): records straight from the fuzzer's bytes. Built
# with clang when FSS_FUZZ=ON, like trace_fuzz; its corpus from a run of its
# own (tests/fuzz/corpus_update.sh).
if(FSS_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang" AND TARGET fss_analysis)
  add_executable(sources_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/sources_fuzz.c)
  target_include_directories(sources_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(sources_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(sources_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(sources_fuzz PRIVATE fss_analysis fss_collector fss_common)
  fss_fuzz_smoke(TARGET sources_fuzz RUNS 100000)
endif()
