# metrics_bench: the cost and size of one /metrics exposition for N ranks
# (run by hand; results in bench/results/metrics.txt).
if(TARGET fss_metrics)
  add_executable(metrics_bench ${CMAKE_CURRENT_LIST_DIR}/metrics_bench.c)
  target_include_directories(metrics_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(metrics_bench PRIVATE fss_metrics)
endif()
