# ring_bench: ring push/pop cost and CRC-32C throughput (run by hand; results
# in bench/results/ring.txt).
add_executable(ring_bench ${CMAKE_CURRENT_LIST_DIR}/ring_bench.c)
target_include_directories(ring_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(ring_bench PRIVATE fss_common Threads::Threads)
