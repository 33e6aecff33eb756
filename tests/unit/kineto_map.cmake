# collector/kineto_map.h: one Kineto file as one source's records, on files
# made with kineto_file.h's builder (each mapping rule; HTA's overlap on a
# case computed by hand).
if(TARGET fss_session)
  fss_unit_test(NAME kineto_map_test SOURCES unit/kineto_map_test.c LIBS fss_session TIMEOUT 60)
endif()
