# analysis_bench: time and records/s of the analysis on a synthetic trace of
# about 10 M records (run by hand; results in bench/results/analysis.txt).
if(TARGET fss_analysis)
  add_executable(analysis_bench ${CMAKE_CURRENT_LIST_DIR}/analysis_bench.c
    ${PROJECT_SOURCE_DIR}/tests/unit/analysis_synth.c)
  target_include_directories(analysis_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(analysis_bench PRIVATE fss_session fss_analysis fss_common m)
endif()
