# cli/top.cmake: `fsdpscope top` (cli/cmd_top.c, docs/top.md) and the feeds
# that give its screen views (tui/feed_*.c, tui/feeds.h): a board of this
# process (run mode), a session's viewer socket (connect: JSON decoded with
# jansson), a trace replayed (replay). The screen itself (top_run_screen,
# top_print_once) is the tui library's; until it is built, a stand-in that
# says so keeps the command linkable. Included from cli/CMakeLists.txt.
pkg_check_modules(JANSSON IMPORTED_TARGET jansson)
if(NOT JANSSON_FOUND)
  message(FATAL_ERROR "fsdpscope: jansson not found (pkg-config jansson): "
    "run scripts/setup.sh, or apt-get install libjansson-dev")
endif()
add_library(fss_top_feeds STATIC
  ${PROJECT_SOURCE_DIR}/tui/feed_board.c
  ${PROJECT_SOURCE_DIR}/tui/feed_thread.c
  ${PROJECT_SOURCE_DIR}/tui/feed_replay.c
  ${PROJECT_SOURCE_DIR}/tui/feed_viewer.c
)
target_include_directories(fss_top_feeds PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(fss_top_feeds PUBLIC fss_session fss_viewer fss_live fss_rules fss_analysis fss_collector fss_common
  Threads::Threads PRIVATE PkgConfig::JANSSON)

target_sources(fsdpscope PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cmd_top.c ${CMAKE_CURRENT_LIST_DIR}/top_run.c)
target_link_libraries(fsdpscope PRIVATE fss_top_feeds)
if(TARGET fss_tui)
  target_link_libraries(fsdpscope PRIVATE fss_tui)
else()
  target_sources(fsdpscope PRIVATE ${CMAKE_CURRENT_LIST_DIR}/top_screen_missing.c)
endif()
