# libFuzzer smoke run of the collector's ingest (tests/fuzz/ingest_fuzz.c): up
# to four streams through socketpairs, interleaved, acked, rotated. Built with
# clang when FSS_FUZZ=ON, like trace_fuzz; its corpus from ingest_fuzz_seed.c
# (tests/fuzz/corpus_update.sh).
if(FSS_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang" AND TARGET fss_collector)
  add_executable(ingest_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/ingest_fuzz.c)
  target_include_directories(ingest_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(ingest_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(ingest_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(ingest_fuzz PRIVATE fss_collector fss_common)
  add_executable(fss_ingest_fuzz_seed ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/ingest_fuzz_seed.c)
  target_include_directories(fss_ingest_fuzz_seed PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(fss_ingest_fuzz_seed PRIVATE fss_common)
  fss_fuzz_smoke(TARGET ingest_fuzz RUNS 4000 FLAGS -max_len=65536)
endif()
