# collector/: the ingest (agent connections and fallback files merged into one trace).
fss_unit_test(NAME ingest_test SOURCES unit/ingest_test.c LIBS fss_collector fss_test_support TIMEOUT 60)
# collector/source: the per-source layer (rank, strings, NVTX names, drops, sequence gaps, ends).
fss_unit_test(NAME source_test SOURCES unit/source_test.c LIBS fss_analysis fss_collector TIMEOUT 60)
# collector/ingest as a live session uses it: the record callback, acks, one source per process
# across sinks (tests/unit/ingest_live_test.c), rotation, TCP keys.
if(TARGET fss_analysis)
  fss_unit_test(NAME ingest_live_test SOURCES unit/ingest_live_test.c LIBS fss_session fss_analysis fss_collector fss_common
    TIMEOUT 60)
endif()
# collector/ingest_net: a tcp peer without the key (the key timeout, the caps on those waiting).
fss_unit_test(NAME ingest_net_test SOURCES unit/ingest_net_test.c LIBS fss_collector fss_common TIMEOUT 60)
