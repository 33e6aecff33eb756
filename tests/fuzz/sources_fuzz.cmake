# libFuzzer smoke run of the per-source layer and the timeline over it
# (tests/fuzz/sources_fuzz.c): records straight from the fuzzer's bytes. Built
# with clang when FSS_FUZZ=ON, like trace_fuzz.
if(FSS_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang" AND TARGET fss_analysis)
  add_executable(sources_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/sources_fuzz.c)
  target_include_directories(sources_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(sources_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(sources_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(sources_fuzz PRIVATE fss_analysis fss_collector fss_common)
  set(sources_corpus ${CMAKE_CURRENT_BINARY_DIR}/sources_fuzz_corpus)
  add_test(NAME sources_fuzz_smoke
    COMMAND sh -c "set -e; mkdir -p '${sources_corpus}'; \
'$<TARGET_FILE:sources_fuzz>' -max_total_time=${FSS_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 '${sources_corpus}'")
  set_tests_properties(sources_fuzz_smoke PROPERTIES TIMEOUT 300 LABELS "fuzz" RUN_SERIAL TRUE)
endif()
