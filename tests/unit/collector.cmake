# collector/: the ingest (agent connections and fallback files merged into one trace).
fss_unit_test(NAME ingest_test SOURCES unit/ingest_test.c LIBS fss_collector fss_test_support TIMEOUT 60)
