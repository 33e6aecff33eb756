# collector/kineto.cmake: the Kineto (PyTorch profiler) trace reader
# (kineto_file.h): kineto_scan.c the tokenizer (chunked reads, gzip through
# zlib), kineto_read.c the top level and metadata, kineto_parse.c the events,
# kineto_file.c the storage.
find_package(ZLIB REQUIRED)
add_library(fss_kineto STATIC
  ${CMAKE_CURRENT_LIST_DIR}/kineto_file.c
  ${CMAKE_CURRENT_LIST_DIR}/kineto_parse.c
  ${CMAKE_CURRENT_LIST_DIR}/kineto_read.c
  ${CMAKE_CURRENT_LIST_DIR}/kineto_scan.c
)
target_include_directories(fss_kineto PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(fss_kineto PUBLIC ZLIB::ZLIB)
