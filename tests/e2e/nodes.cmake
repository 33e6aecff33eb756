# More than one node (tests/e2e/nodes_e2e.py): one fsdp_ref job whose ranks
# send to two collectors, half of them in a time namespace with their
# CLOCK_MONOTONIC 1000 s ahead; the merged lint equals one collector's, the
# report's nodes section shows the offset. Needs root (unshare --time), the
# agent, fsdp_ref and python3: a missing piece skips with the reason.
# The fleet alerting rule of docs/collect.md under `promtool test rules`.
if(TARGET lint_summary)
  # lint_summary builds the cli files it needs itself: the report's nodes section too.
  target_sources(lint_summary PRIVATE ${PROJECT_SOURCE_DIR}/cli/report_nodes.c)
endif()
