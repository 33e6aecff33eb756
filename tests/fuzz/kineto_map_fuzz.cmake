# libFuzzer smoke run of a Kineto file made records (tests/fuzz/kineto_map_fuzz.c):
# what the reader keeps of the input, mapped, handed out and fed to a view.
# Built with clang when FSS_FUZZ=ON; its corpus: small traces written by
# tests/e2e/kineto_read.py seeds.
if(FSS_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang" AND TARGET fss_session)
  add_executable(kineto_map_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/kineto_map_fuzz.c)
  target_include_directories(kineto_map_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(kineto_map_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(kineto_map_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(kineto_map_fuzz PRIVATE fss_session)
  fss_fuzz_smoke(TARGET kineto_map_fuzz RUNS 10000 FLAGS -max_len=65536)
endif()
