# cli/report_html*.c (report --html): the escaper, the page's charts and
# sections on hand-built results, the file written through a temporary name.
set(FSS_REPORT_HTML_SOURCES ${PROJECT_SOURCE_DIR}/cli/report_html.c ${PROJECT_SOURCE_DIR}/cli/report_html_escape.c
  ${PROJECT_SOURCE_DIR}/cli/report_html_ranks.c ${PROJECT_SOURCE_DIR}/cli/report_html_svg.c ${PROJECT_SOURCE_DIR}/cli/report_html_timeline.c
  ${PROJECT_SOURCE_DIR}/cli/report_html_whatif.c)
fss_unit_test(NAME report_html_test SOURCES unit/report_html_test.c ${FSS_REPORT_HTML_SOURCES}
  ${PROJECT_SOURCE_DIR}/cli/options.c ${PROJECT_SOURCE_DIR}/cli/diagnosis.c ${PROJECT_SOURCE_DIR}/cli/report_json.c
  ${PROJECT_SOURCE_DIR}/cli/report_text.c ${PROJECT_SOURCE_DIR}/cli/report_sources.c ${PROJECT_SOURCE_DIR}/cli/report_nodes.c
  ${PROJECT_SOURCE_DIR}/cli/report_worlds.c ${PROJECT_SOURCE_DIR}/cli/report_mfu.c ${PROJECT_SOURCE_DIR}/cli/output.c
  LIBS fss_export fss_session fss_rules fss_collector fss_common TIMEOUT 60)
