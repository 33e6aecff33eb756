# cli/attach.cmake: `fsdpscope attach PID...` (cli/cmd_attach.c, docs/attach.md):
# the targets and connections (attach_capture.c), /proc (attach_procs.c), on
# the probes of agent/bpf/. Without libbpf the probes' side is agent/bpf's
# stand-in that says so (the command then exits 2 with that message).
target_sources(fsdpscope PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cmd_attach.c
  ${CMAKE_CURRENT_LIST_DIR}/attach_capture.c
  ${CMAKE_CURRENT_LIST_DIR}/attach_cut.c
  ${CMAKE_CURRENT_LIST_DIR}/attach_procs.c)
target_link_libraries(fsdpscope PRIVATE fss_attach_core)
if(TARGET fss_attach_bpf)
  target_link_libraries(fsdpscope PRIVATE fss_attach_bpf)
endif()
