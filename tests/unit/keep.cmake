# collector/keep: the --keep policy (full, summary, last:N) with a fake
# ingest and synthetic traces, and with the real ingest.
fss_unit_test(NAME keep_test SOURCES unit/keep_test.c unit/analysis_synth.c
  LIBS fss_session fss_keep fss_rules fss_analysis fss_collector TIMEOUT 180)
