# collect_load: the collector's load generator (simulated ranks on sockets);
# collect_harness: an ingest (+ the streaming analysis) as a collect session
# runs them, for the load and memory figures in bench/results/collect.txt.
add_executable(collect_load ${CMAKE_CURRENT_LIST_DIR}/collect_load.c ${CMAKE_CURRENT_LIST_DIR}/collect_stream.c)
target_include_directories(collect_load PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(collect_load PRIVATE fss_common Threads::Threads)

if(TARGET fss_analysis)
  add_executable(collect_harness ${CMAKE_CURRENT_LIST_DIR}/collect_harness.c)
  target_include_directories(collect_harness PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(collect_harness PRIVATE fss_analysis fss_collector fss_common m)

  # A smoke run, no timing: 4 ranks, a fixed number of steps, paced and
  # unpaced; the trace must hold every collective each rank issued.
  add_test(NAME collect_load_smoke
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/collect_smoke.sh $<TARGET_FILE:collect_harness> $<TARGET_FILE:collect_load>)
  set_tests_properties(collect_load_smoke PROPERTIES TIMEOUT 120 LABELS "bench")
endif()
