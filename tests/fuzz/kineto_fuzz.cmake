# libFuzzer smoke run of the Kineto reader (tests/fuzz/kineto_fuzz.c): JSON
# text, plain or gzip, read at the size its control byte says and again at
# the default. Built with clang when FSS_FUZZ=ON, like trace_fuzz; its
# corpus: small generated documents (tests/fuzz/corpus_update.sh).
if(FSS_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang" AND TARGET fss_kineto)
  add_executable(kineto_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/kineto_fuzz.c)
  target_include_directories(kineto_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(kineto_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(kineto_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(kineto_fuzz PRIVATE fss_kineto)
  fss_fuzz_smoke(TARGET kineto_fuzz RUNS 20000 FLAGS -max_len=65536)
endif()
