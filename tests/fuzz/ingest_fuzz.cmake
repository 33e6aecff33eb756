# libFuzzer smoke run of the collector's ingest (tests/fuzz/ingest_fuzz.c): up
# to four streams through socketpairs, interleaved, acked, rotated. Built with
# clang when FSS_FUZZ=ON, like trace_fuzz; seeds from ingest_fuzz_seed.c.
if(FSS_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang" AND TARGET fss_collector)
  add_executable(ingest_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/ingest_fuzz.c)
  target_include_directories(ingest_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(ingest_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(ingest_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(ingest_fuzz PRIVATE fss_collector fss_common)
  add_executable(fss_ingest_fuzz_seed ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/ingest_fuzz_seed.c)
  target_include_directories(fss_ingest_fuzz_seed PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(fss_ingest_fuzz_seed PRIVATE fss_common)
  set(ingest_seed ${CMAKE_CURRENT_BINARY_DIR}/ingest_fuzz_seed)
  set(ingest_corpus ${CMAKE_CURRENT_BINARY_DIR}/ingest_fuzz_corpus)
  add_test(NAME ingest_fuzz_smoke
    COMMAND sh -c "set -e; mkdir -p '${ingest_seed}' '${ingest_corpus}'; \
'$<TARGET_FILE:fss_ingest_fuzz_seed>' '${ingest_seed}'; \
'$<TARGET_FILE:ingest_fuzz>' -max_total_time=${FSS_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -print_final_stats=1 '${ingest_corpus}' '${ingest_seed}'")
  set_tests_properties(ingest_fuzz_smoke PROPERTIES TIMEOUT 300 LABELS "fuzz" RUN_SERIAL TRUE)
endif()
