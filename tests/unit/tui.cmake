# tui/: the dashboard's screen, drawn into canvases from hand-made views
# (tui_views.c) and read back; no terminal, no timing.
if(TARGET fss_tui)
  fss_unit_test(NAME tui_draw_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/tui_draw_test.c ${CMAKE_CURRENT_LIST_DIR}/tui_views.c
    LIBS fss_tui TIMEOUT 60)
  fss_unit_test(NAME tui_state_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/tui_state_test.c ${CMAKE_CURRENT_LIST_DIR}/tui_views.c
    LIBS fss_tui TIMEOUT 60)
  # top_run_screen on a pseudo-terminal (forkpty): the modes restored after
  # q, ^C, SIGTERM and a crash.
  fss_unit_test(NAME tui_term_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/tui_term_test.c ${CMAKE_CURRENT_LIST_DIR}/tui_views.c
    LIBS fss_tui util TIMEOUT 120)
endif()
