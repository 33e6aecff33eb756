# cli/nodes.cmake: the report's "nodes" section (a job read from several
# traces, one per node). Included from cli/CMakeLists.txt.
target_sources(fsdpscope PRIVATE ${CMAKE_CURRENT_LIST_DIR}/report_nodes.c)
# The report's MFU ("mfu", a source's "device", the text line).
target_sources(fsdpscope PRIVATE ${CMAKE_CURRENT_LIST_DIR}/report_mfu.c)
