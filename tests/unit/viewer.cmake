# collector/viewer: the viewer endpoint (snapshot JSON and its schema, the
# stream, a slow viewer, peers of another user, the socket's folder, the
# client). Its JSON is checked by tests/e2e/live_snapshot_check.py.
if(TARGET fss_viewer)
  fss_unit_test(NAME viewer_test SOURCES unit/viewer_test.c LIBS fss_viewer TIMEOUT 120)
  if(TARGET viewer_test)
    target_compile_definitions(viewer_test PRIVATE
      FSS_LIVE_CHECK="${CMAKE_CURRENT_SOURCE_DIR}/e2e/live_snapshot_check.py"
      FSS_LIVE_SCHEMA="${PROJECT_SOURCE_DIR}/docs/live-schema.json")
  endif()
endif()
# The live field table end to end: render, decode as top --connect does, render again.
if(TARGET fss_viewer AND TARGET fss_metrics AND TARGET fss_top_feeds)
  fss_unit_test(NAME viewer_roundtrip_test SOURCES unit/viewer_roundtrip_test.c
    LIBS fss_top_feeds fss_viewer fss_metrics)
endif()
