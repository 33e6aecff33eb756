# cli/options.c (the option tables every command declares): parsing in any
# order or up to CMD, the one wording of its errors, the OPTIONS section.
fss_unit_test(NAME options_test SOURCES unit/options_test.c ${PROJECT_SOURCE_DIR}/cli/options.c
  ${PROJECT_SOURCE_DIR}/cli/diagnosis.c ${PROJECT_SOURCE_DIR}/cli/report_json.c
  ${PROJECT_SOURCE_DIR}/cli/report_text.c ${PROJECT_SOURCE_DIR}/cli/report_sources.c ${PROJECT_SOURCE_DIR}/cli/report_nodes.c ${PROJECT_SOURCE_DIR}/cli/report_mfu.c
      ${PROJECT_SOURCE_DIR}/cli/report_worlds.c
  ${PROJECT_SOURCE_DIR}/cli/output.c
  LIBS fss_session fss_rules fss_collector fss_common TIMEOUT 60)
