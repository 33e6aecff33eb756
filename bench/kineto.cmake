# The Kineto reader's benchmark (bench/kineto_bench.sh, results in
# bench/results/kineto.txt): kineto_gen writes the 1 M-event FSDP-like
# trace, kineto_parse_bench times the reader alone on it.
if(TARGET fss_kineto)
  add_executable(kineto_gen ${CMAKE_CURRENT_LIST_DIR}/kineto_gen.c)
  add_executable(kineto_parse_bench ${CMAKE_CURRENT_LIST_DIR}/kineto_parse_bench.c)
  target_include_directories(kineto_parse_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(kineto_parse_bench PRIVATE fss_kineto)
endif()
