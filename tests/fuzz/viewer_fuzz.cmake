# libFuzzer smoke run of the viewer protocol's decoder (tests/fuzz/viewer_fuzz.c):
# lines as top --connect reads them, each that decodes rendered and decoded
# again. Built with clang when FSS_FUZZ=ON, like trace_fuzz; its corpus: the
# golden snapshots (tests/fuzz/corpus_update.sh).
if(FSS_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang" AND TARGET fss_top_feeds AND TARGET fss_viewer)
  add_executable(viewer_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/viewer_fuzz.c)
  target_include_directories(viewer_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(viewer_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(viewer_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(viewer_fuzz PRIVATE fss_top_feeds fss_viewer)
  fss_fuzz_smoke(TARGET viewer_fuzz RUNS 4000 FLAGS -max_len=262144)
endif()
