# fsdp_ref's unit tests (the trainer's multi-process tests are in
# tests/e2e/fsdp_ref.cmake).
if(TARGET fsdp_ref_model)
  fss_unit_test(NAME fsdp_ref_gradcheck_test
    SOURCES unit/fsdp_ref_gradcheck_test.c
    LIBS fsdp_ref_model fsdp_ref_backend_cpu m
    TIMEOUT 60)
endif()
if(TARGET fsdp_ref_model)
  fss_unit_test(NAME fsdp_ref_units_test
    SOURCES unit/fsdp_ref_units_test.c
    LIBS fsdp_ref_model fsdp_ref_counts
    TIMEOUT 30)
endif()
