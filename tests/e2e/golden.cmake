# The golden traces (tests/fixtures/golden/): fixed recordings of fsdp_ref
# jobs whose report --json, lint --json, top --once, dump, viewer snapshot
# and /metrics text must stay byte for byte what tests/fixtures/golden/
# expected/ holds, so that a move of code is checked to be only a move.
# Re-bless after an intended change of output:
#   tests/golden/golden_test.sh --bless build/cli/fsdpscope build/tests/golden_live
if(TARGET fss_top_feeds AND TARGET fss_metrics)
  add_executable(golden_live ${PROJECT_SOURCE_DIR}/tests/golden/golden_live.c)
  target_include_directories(golden_live PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(golden_live PRIVATE fss_top_feeds fss_rules fss_live fss_viewer fss_metrics fss_collector
    fss_common Threads::Threads)
  add_test(NAME golden_outputs
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/golden/golden_test.sh $<TARGET_FILE:fsdpscope> $<TARGET_FILE:golden_live>)
  set_tests_properties(golden_outputs PROPERTIES TIMEOUT 300 LABELS "e2e;golden")
endif()
