# Unit tests of the analysis (collector/analysis.cmake): steps, units,
# exposure, ledger, reshard, and whole synthetic traces.
if(TARGET fss_analysis)
  foreach(t steps units overlap ledger reshard trace phases roles trust whatif)
    fss_unit_test(NAME analysis_${t}_test
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/analysis_${t}_test.c
      LIBS fss_session fss_analysis fss_common TIMEOUT 180)
  endforeach()
  foreach(t trace trust whatif)
    if(TARGET analysis_${t}_test)
      target_sources(analysis_${t}_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/analysis_synth.c)
    endif()
  endforeach()
endif()
