# cli/run_folder.c (the run's folder, lock, final name, leftovers) and the
# ingest calls `fsdpscope run` relies on (ingest_note_exit, the peer check).
fss_unit_test(NAME run_folder_test SOURCES unit/run_folder_test.c ${PROJECT_SOURCE_DIR}/cli/run_folder.c
  LIBS fss_collector fss_test_support TIMEOUT 60)
