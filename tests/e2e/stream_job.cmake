# stream_job: issues, over NCCL, the collective streams of real training
# setups (FSDP2, torchtitan 2-D and pipeline, FSDP1 HYBRID_SHARD, DeepSpeed
# ZeRO-3) and writes the truth a correct diagnosis must match
# (tests/e2e/stream_job.md). Linked to the NCCL stand-in as fsdp_ref is:
# RUNPATH to libnccl.so.2, so that LD_PRELOAD of the agent still interposes
# and LD_LIBRARY_PATH can swap in a real NCCL.
if(TARGET fss_nccl_cpu)
  add_executable(stream_job e2e/stream_job.c e2e/stream_job_core.c e2e/stream_job_fsdp2.c
    e2e/stream_job_pp.c e2e/stream_job_fsdp1.c e2e/stream_job_zero3.c)
  target_link_libraries(stream_job PRIVATE fss_nccl_cpu ${CMAKE_DL_LIBS})
  target_link_options(stream_job PRIVATE -Wl,--enable-new-dtags)
  set_target_properties(stream_job PROPERTIES BUILD_RPATH "$<TARGET_FILE_DIR:fss_nccl_cpu>")
  # NVTX3 is header-only; without it --nvtx is refused.
  if(FSS_NVTX3_INCLUDE)
    target_include_directories(stream_job SYSTEM PRIVATE ${FSS_NVTX3_INCLUDE})
    target_compile_definitions(stream_job PRIVATE STREAM_JOB_HAVE_NVTX=1)
  endif()

  # Every setup runs to the end on 2 and 4 ranks (no deadlock, a truth
  # written); what fsdpscope says of them is checked against the truth by the
  # accuracy matrix (tests/e2e/accuracy_test.py, its stream runs).
  foreach(spec
      "fsdp2_n2:--setup;fsdp2;--nranks;2"
      "fsdp2_linear_n4:--setup;fsdp2;--nranks;4;--wrap;linear"
      "fsdp2_titan_accum_n4:--setup;fsdp2;--nranks;4;--torchtitan;--accum;2;--no-sync;--clip"
      "tp_n4:--setup;tp;--nranks;4"
      "fsdp1_hsdp_n4:--setup;fsdp1-hsdp;--nranks;4;--sync-module-states;--checkpoint-wrapper"
      "zero3_n4:--setup;zero3;--nranks;4"
      "zero3_coalesced_n2:--setup;zero3;--nranks;2;--gather;coalesced"
      "zero3_qwz_n2:--setup;zero3;--nranks;2;--qwz"
      "zero3_hpz_world_qgz_n2:--setup;zero3;--nranks;2;--hpz;2;--qgz"
      "zero3_zeropp_n4:--setup;zero3;--nranks;4;--qwz;--hpz;2"
      "zero3_zeropp_qgz_n4:--setup;zero3;--nranks;4;--qwz;--hpz;2;--qgz"
      "pp_n4:--setup;pp;--nranks;4")
    string(REPLACE ":" ";" parts "${spec}")
    list(GET parts 0 name)
    list(REMOVE_AT parts 0)
    add_test(NAME stream_job_${name}
      COMMAND stream_job ${parts} --steps 3 --compute-us 20
              --truth ${CMAKE_CURRENT_BINARY_DIR}/stream_job_${name}.json)
    set_tests_properties(stream_job_${name} PROPERTIES TIMEOUT 120 LABELS "e2e;stream_job")
  endforeach()
endif()
