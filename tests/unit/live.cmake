# Unit tests of the live state and the analyzer's snapshot (collector/live.cmake).
if(TARGET fss_live)
  fss_unit_test(NAME live_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/live_test.c ${CMAKE_CURRENT_LIST_DIR}/analysis_synth.c
    LIBS fss_live fss_analysis fss_common TIMEOUT 180)
endif()
# The live view's field tables (collector/live_fields.h) against docs/live-schema.json.
if(TARGET fss_live)
  pkg_check_modules(LIVE_FIELDS_JANSSON IMPORTED_TARGET jansson)
  fss_unit_test(NAME live_fields_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/live_fields_test.c
    LIBS fss_live PkgConfig::LIVE_FIELDS_JANSSON)
  if(TARGET live_fields_test)
    target_compile_definitions(live_fields_test PRIVATE FSS_LIVE_SCHEMA="${PROJECT_SOURCE_DIR}/docs/live-schema.json")
  endif()
endif()
