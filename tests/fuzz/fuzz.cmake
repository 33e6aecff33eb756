# libFuzzer smoke run of the trace decoder: built with clang when
# FSS_FUZZ=ON (the sanitizer build of `make test`), run for a bounded time
# from a seed corpus of sample traces.
set(FSS_FUZZ_SECONDS 30 CACHE STRING "Seconds the fuzz smoke test runs")

if(FSS_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(STATUS "fsdpscope: FSS_FUZZ needs clang (CC=clang): fuzz targets are skipped")
  else()
    add_executable(trace_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/trace_fuzz.c)
    target_compile_options(trace_fuzz PRIVATE -fsanitize=fuzzer)
    target_link_options(trace_fuzz PRIVATE -fsanitize=fuzzer)
    target_link_libraries(trace_fuzz PRIVATE fss_common)
    set(seed ${CMAKE_CURRENT_BINARY_DIR}/fuzz_seed)
    set(corpus ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus)
    # Seeds: sample traces behind the target's control byte (bit 0: fix
    # checksums; the rest: feed piece size).
    add_test(NAME trace_fuzz_smoke
      COMMAND sh -c "set -e; mkdir -p '${seed}' '${corpus}'; \
'$<TARGET_FILE:fss_gen_sample_trace>' '${seed}/a.raw' 1 1 256 >/dev/null; \
'$<TARGET_FILE:fss_gen_sample_trace>' '${seed}/b.raw' 3 2 1024 >/dev/null; \
for f in a b; do printf '\\000' >'${seed}/'$f; cat '${seed}/'$f.raw >>'${seed}/'$f; \
  printf '\\377' >'${seed}/'$f.x; cat '${seed}/'$f.raw >>'${seed}/'$f.x; rm '${seed}/'$f.raw; done; \
'$<TARGET_FILE:trace_fuzz>' -max_total_time=${FSS_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 '${corpus}' '${seed}'")
    set_tests_properties(trace_fuzz_smoke PROPERTIES
      TIMEOUT 300 LABELS "fuzz" RUN_SERIAL TRUE)
  endif()
endif()
