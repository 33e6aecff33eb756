# fsdp_ref's CUDA backend: the GPU self-test (every op against the CPU
# backend). It needs a GPU: where none is usable it prints
# "no CUDA device: skipped" and exits 77, which ctest reports as skipped,
# never as passed. Built only when nvcc works (fsdp_ref/cuda/CMakeLists.txt).
if(TARGET fsdp_ref_cuda_selftest)
  add_test(NAME fsdp_ref_cuda_selftest COMMAND fsdp_ref_cuda_selftest)
  set_tests_properties(fsdp_ref_cuda_selftest PROPERTIES
    SKIP_RETURN_CODE 77
    TIMEOUT 120
    LABELS "unit;gpu")
endif()
