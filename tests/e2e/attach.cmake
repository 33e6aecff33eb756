# `fsdpscope attach` end to end (tests/e2e/attach_e2e.py): fsdp_ref started
# without fsdpscope, stopped, attached, let go; its own log is the ground
# truth. The scenarios need root (eBPF): without it, and in a build without
# libbpf, each is reported as skipped with the reason, never passed.
find_package(Python3 COMPONENTS Interpreter QUIET)

set(FSS_ATTACH_E2E_MISSING "")
if(NOT Python3_Interpreter_FOUND)
  set(FSS_ATTACH_E2E_MISSING "python3 not found (apt-get install python3)")
elseif(NOT TARGET fsdp_ref)
  set(FSS_ATTACH_E2E_MISSING "fsdp_ref is not built (needs nccl.h and the CUDA headers)")
endif()

if(FSS_ATTACH_E2E_MISSING)
  add_test(NAME attach_e2e COMMAND sh -c "echo 'SKIP: ${FSS_ATTACH_E2E_MISSING}'; exit 77")
  set_tests_properties(attach_e2e PROPERTIES SKIP_RETURN_CODE 77 LABELS "e2e;attach")
  return()
endif()

# A process that calls the toolkit's real libnccl.so.2 without a GPU (its calls fail).
set(FSS_ATTACH_REAL_NCCL /usr/local/cuda/lib/libnccl.so.2)
if(FSS_NCCL_LIBRARY)
  get_filename_component(fss_attach_nccl_dir ${FSS_NCCL_LIBRARY} DIRECTORY)
  if(EXISTS ${fss_attach_nccl_dir}/libnccl.so.2)
    set(FSS_ATTACH_REAL_NCCL ${fss_attach_nccl_dir}/libnccl.so.2)
  endif()
endif()
add_executable(attach_nccl_job ${CMAKE_CURRENT_SOURCE_DIR}/e2e/attach_nccl_job.c)
target_include_directories(attach_nccl_job SYSTEM PRIVATE ${FSS_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(attach_nccl_job PRIVATE ${CMAKE_DL_LIBS})

# A sanitizer build's ranks are slow: fewer steps (attach_e2e.py --sanitized).
set(FSS_ATTACH_E2E_SANITIZED "")
if(FSS_SANITIZE)
  set(FSS_ATTACH_E2E_SANITIZED --sanitized)
endif()

function(fss_attach_e2e name timeout)
  add_test(NAME attach_e2e_${name}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/attach_e2e.py ${name}
            --fsdpscope $<TARGET_FILE:fsdpscope> --fsdp-ref $<TARGET_FILE:fsdp_ref>
            $<$<TARGET_EXISTS:fsdpscope_agent>:--agent=$<TARGET_FILE:fsdpscope_agent>>
            --probe-job $<TARGET_FILE:attach_nccl_job> --real-nccl ${FSS_ATTACH_REAL_NCCL}
            --work ${CMAKE_CURRENT_BINARY_DIR}/attach_e2e ${FSS_ATTACH_E2E_SANITIZED})
  set_tests_properties(attach_e2e_${name} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77 LABELS "e2e;attach")
endfunction()

fss_attach_e2e(fsdp_3_linear 600)
fss_attach_e2e(fsdp_4_block 600)
fss_attach_e2e(fsdp_3_block 600)
fss_attach_e2e(fsdp_4_linear 600)
fss_attach_e2e(detach 600)
fss_attach_e2e(detach_cut 600)
fss_attach_e2e(in_flight 300)
fss_attach_e2e(launcher 600)
fss_attach_e2e(twice 600)
fss_attach_e2e(all 600)
fss_attach_e2e(env_rank 600)
fss_attach_e2e(duration 300)
fss_attach_e2e(killed 300)
fss_attach_e2e(errors 300)
fss_attach_e2e(no_nccl 300)
fss_attach_e2e(real_nccl 300)
fss_attach_e2e(top 600)
