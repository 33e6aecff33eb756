# collector/metrics: the /metrics exposition parsed back and checked with
# promtool, and the server scraped with curl (both required: scripts/setup.sh
# installs them; the test fails, never skips, without them).
if(TARGET fss_metrics)
  find_program(FSS_PROMTOOL_PROGRAM promtool)
  find_program(FSS_CURL_PROGRAM curl)
  fss_unit_test(NAME metrics_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_test.c
    LIBS fss_metrics TIMEOUT 120)
  if(TARGET metrics_test)
    set(_promtool promtool)
    if(FSS_PROMTOOL_PROGRAM)
      set(_promtool ${FSS_PROMTOOL_PROGRAM})
    endif()
    set(_curl curl)
    if(FSS_CURL_PROGRAM)
      set(_curl ${FSS_CURL_PROGRAM})
    endif()
    target_compile_definitions(metrics_test PRIVATE FSS_PROMTOOL="${_promtool}" FSS_CURL="${_curl}"
      FSS_VERSION="${PROJECT_VERSION}" FSS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  endif()
endif()
