# prefetch_bench: the gather wait one unit of prefetch hides in fsdp_ref, as
# the ratio of interleaved runs (results in bench/results/prefetch.txt).
add_executable(prefetch_bench ${CMAKE_CURRENT_LIST_DIR}/prefetch_bench.c)
target_link_libraries(prefetch_bench PRIVATE fss_test_support)
