# collector/live.cmake: the live state of a session (live.h) and the board
# its readers take copies from. Included from collector/CMakeLists.txt.
find_package(Threads REQUIRED)
add_library(fss_live STATIC
  ${CMAKE_CURRENT_LIST_DIR}/live.c
  ${CMAKE_CURRENT_LIST_DIR}/live_board.c
  ${CMAKE_CURRENT_LIST_DIR}/live_fields.c
)
target_include_directories(fss_live PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(fss_live PUBLIC fss_analysis fss_collector fss_common Threads::Threads)
