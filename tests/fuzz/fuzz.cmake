# libFuzzer smoke runs, built with clang when FSS_FUZZ=ON (the sanitizer build
# of `make test`). Each replays its committed corpus (tests/fuzz/corpus/<target>/,
# remade by tests/fuzz/corpus_update.sh) and then makes a fixed number of
# mutations of it from a fixed seed: the same work at every run, on any machine.
set(FSS_FUZZ_PERCENT 100 CACHE STRING "The fuzz smoke tests' mutations, in percent of their own counts")

# fss_fuzz_smoke(TARGET target RUNS n [FLAGS flag...])
# The test <target>_smoke: the corpus, then n mutations (scaled by
# FSS_FUZZ_PERCENT); n is five to ten seconds of the target in a sanitizer build.
# New inputs go to a scratch folder in the build tree, emptied first, never
# into the committed corpus.
function(fss_fuzz_smoke)
  cmake_parse_arguments(F "" "TARGET;RUNS" "FLAGS" ${ARGN})
  math(EXPR runs "${F_RUNS} * ${FSS_FUZZ_PERCENT} / 100")
  set(scratch ${CMAKE_CURRENT_BINARY_DIR}/${F_TARGET}_corpus)
  string(JOIN " " flags ${F_FLAGS})
  add_test(NAME ${F_TARGET}_smoke
    COMMAND sh -c "set -e; rm -rf '${scratch}'; mkdir -p '${scratch}'; \
'$<TARGET_FILE:${F_TARGET}>' -seed=1 -runs=${runs} -timeout=10 -rss_limit_mb=2048 ${flags} \
  -print_final_stats=1 '${scratch}' '${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${F_TARGET}'")
  set_tests_properties(${F_TARGET}_smoke PROPERTIES TIMEOUT 300 LABELS "fuzz")
endfunction()

if(FSS_FUZZ AND NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(STATUS "fsdpscope: FSS_FUZZ needs clang (CC=clang): fuzz targets are skipped")
elseif(FSS_FUZZ)
  # The trace decoder: a control byte (bit 0: fix checksums; bit 1: salvage,
  # read past a damaged file header; the rest: feed piece size), then a trace
  # (the corpus: sample traces, fss_gen_sample_trace, some with a damaged header).
  add_executable(trace_fuzz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/trace_fuzz.c)
  target_compile_options(trace_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(trace_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(trace_fuzz PRIVATE fss_common)
  fss_fuzz_smoke(TARGET trace_fuzz RUNS 10000)
endif()
