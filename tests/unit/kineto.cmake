# collector/kineto_*: the Kineto trace reader on small documents written by
# the test (exact ns, every kept kind and arg, metadata before and after the
# events, gzip, damaged inputs with their offsets, 1- and 7-byte reads).
if(TARGET fss_kineto)
  fss_unit_test(NAME kineto_parse_test SOURCES unit/kineto_parse_test.c LIBS fss_kineto TIMEOUT 60)
endif()
