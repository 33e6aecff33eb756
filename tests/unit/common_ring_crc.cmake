# common/: the lock-free ring and CRC-32C.
fss_unit_test(NAME ring_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/ring_test.c
  LIBS fss_common
  LABELS common
  TIMEOUT 30)
fss_unit_test(NAME crc32c_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/crc32c_test.c
  LIBS fss_common
  LABELS common
  TIMEOUT 60)
