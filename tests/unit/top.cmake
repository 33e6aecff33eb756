# `fsdpscope top`'s feeds (tui/feeds.h) and run mode (cli/top_run.c) on real
# jobs: a replay stepped key by key against lint --json of the same trace,
# the viewer socket's snapshots decoded back into the board's view, bad
# lines, connect errors, the job's log and closed stdin, quit stop / leave.
if(TARGET fss_top_feeds AND TARGET fsdp_ref AND TARGET fsdpscope_agent)
  pkg_check_modules(TOP_TEST_JANSSON IMPORTED_TARGET jansson)
  fss_unit_test(NAME top_feed_test
    SOURCES unit/top_feed_test.c
      ${PROJECT_SOURCE_DIR}/cli/top_run.c ${PROJECT_SOURCE_DIR}/cli/session.c ${PROJECT_SOURCE_DIR}/cli/agent_fallback.c ${PROJECT_SOURCE_DIR}/cli/session_options.c ${PROJECT_SOURCE_DIR}/cli/job.c
      ${PROJECT_SOURCE_DIR}/cli/run_folder.c
      ${PROJECT_SOURCE_DIR}/cli/diagnosis.c ${PROJECT_SOURCE_DIR}/cli/hang_lines.c ${PROJECT_SOURCE_DIR}/cli/cmd_lint.c ${PROJECT_SOURCE_DIR}/cli/lint_notes.c ${PROJECT_SOURCE_DIR}/cli/options.c
      ${PROJECT_SOURCE_DIR}/cli/report_text.c ${PROJECT_SOURCE_DIR}/cli/report_json.c ${PROJECT_SOURCE_DIR}/cli/output.c
      ${PROJECT_SOURCE_DIR}/cli/report_sources.c ${PROJECT_SOURCE_DIR}/cli/report_nodes.c ${PROJECT_SOURCE_DIR}/cli/report_mfu.c
      ${PROJECT_SOURCE_DIR}/cli/report_worlds.c
    LIBS fss_top_feeds fss_rules fss_keep fss_live fss_viewer fss_metrics fss_collector fss_common
      PkgConfig::TOP_TEST_JANSSON
    TIMEOUT 300)
  if(TARGET top_feed_test)
    target_compile_definitions(top_feed_test PRIVATE
      FSS_FSDPSCOPE="$<TARGET_FILE:fsdpscope>" FSS_FSDP_REF="$<TARGET_FILE:fsdp_ref>"
      FSS_AGENT="$<TARGET_FILE:fsdpscope_agent>")
    add_dependencies(top_feed_test fsdpscope fsdp_ref fsdpscope_agent)
  endif()
endif()
