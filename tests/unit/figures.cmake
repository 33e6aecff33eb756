# The per_rank HTA figures (collector/analyze_figures.c) on hand-placed
# records, and how report --json prints them (cli/report_json.c).
if(TARGET fss_analysis AND TARGET fss_rules)
  fss_unit_test(NAME analysis_figures_test SOURCES unit/analysis_figures_test.c unit/analysis_synth.c
    ${PROJECT_SOURCE_DIR}/cli/diagnosis.c ${PROJECT_SOURCE_DIR}/cli/report_json.c
    ${PROJECT_SOURCE_DIR}/cli/report_text.c ${PROJECT_SOURCE_DIR}/cli/report_sources.c
    ${PROJECT_SOURCE_DIR}/cli/report_nodes.c ${PROJECT_SOURCE_DIR}/cli/report_mfu.c ${PROJECT_SOURCE_DIR}/cli/report_worlds.c
    ${PROJECT_SOURCE_DIR}/cli/output.c
    LIBS fss_session fss_rules fss_collector fss_common TIMEOUT 60)
endif()
