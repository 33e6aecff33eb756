# collector/viewer.cmake: the viewer endpoint of a live session (viewer.h,
# docs/live.md): snapshots of the board's views as JSON lines on a unix
# socket, and the client `top --connect` reads them with. Included from
# collector/CMakeLists.txt.
find_package(Threads REQUIRED)
add_library(fss_viewer STATIC
  ${CMAKE_CURRENT_LIST_DIR}/viewer_render.c
  ${CMAKE_CURRENT_LIST_DIR}/viewer_server.c
  ${CMAKE_CURRENT_LIST_DIR}/viewer_client.c
)
target_include_directories(fss_viewer PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(fss_viewer PUBLIC fss_live fss_analysis fss_common Threads::Threads)
