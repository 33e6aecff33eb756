# cli/worlds.cmake: the report's and lint's "worlds" (a restarted job's trace
# holds several, each diagnosed apart). Included from cli/CMakeLists.txt.
target_sources(fsdpscope PRIVATE ${CMAKE_CURRENT_LIST_DIR}/report_worlds.c)
