# cli/run_session.c (the run's folder, lock, final name, leftovers) and the
# ingest calls `fsdpscope run` relies on (ingest_note_exit, the peer check).
fss_unit_test(NAME run_session_test SOURCES unit/run_session_test.c ${PROJECT_SOURCE_DIR}/cli/run_session.c
  LIBS fss_collector fss_test_support TIMEOUT 60)
