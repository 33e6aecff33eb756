# stream_job: issues, over NCCL, the collective streams of real training
# setups (FSDP2, torchtitan 2-D and pipeline, FSDP1 HYBRID_SHARD, DeepSpeed
# ZeRO-3) and writes the truth a correct diagnosis must match
# (tests/e2e/stream_job.md). Linked to the NCCL stand-in as fsdp_ref is:
# RUNPATH to libnccl.so.2, so that LD_PRELOAD of the agent still interposes
# and LD_LIBRARY_PATH can swap in a real NCCL.
if(TARGET fss_nccl_cpu)
  add_executable(stream_job e2e/stream_job.c e2e/stream_job_core.c e2e/stream_job_fsdp2.c
    e2e/stream_job_pp.c e2e/stream_job_fsdp1.c e2e/stream_job_zero3.c
    e2e/stream_job_models.c e2e/stream_job_ddp.c
    e2e/stream_job_fsdp2_variants.c)
  # context and sequence parallelism; MoE with expert parallelism
  target_sources(stream_job PRIVATE e2e/stream_job_cp.c e2e/stream_job_moe.c)
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
      "pp_n4:--setup;pp;--nranks;4"
      "dpo_n2:--setup;dpo;--nranks;2"
      "dpo_ref_model_n4:--setup;dpo;--nranks;4;--ref-wrap;model"
      "distill_n2:--setup;distill;--nranks;2"
      "distill_n4:--setup;distill;--nranks;4"
      "rl_n2:--setup;rl;--nranks;2;--sync-every;2;--log-probs"
      "rl_n4:--setup;rl;--nranks;4;--sync-every;1"
      "ddp_fsdp_n2:--setup;ddp-fsdp;--nranks;2"
      "ddp_fsdp_reshard_n4:--setup;ddp-fsdp;--nranks;4;--block-reshard"
      "tp_seq_n2:--setup;tp;--nranks;2;--seq-lens;256,192,256,128"
      "tp_seq_n4:--setup;tp;--nranks;4;--seq-lens;256,192,256,128;--no-loss-parallel"
      "pp_interleaved_n2:--setup;pp;--nranks;2;--virtual-stages;2;--layers;8"
      "pp_interleaved_n4:--setup;pp;--nranks;4;--virtual-stages;2;--layers;8;--clip"
      "zero3_qwz_n2:--setup;zero3;--nranks;2;--qwz"
      "zero3_hpz_world_qgz_n2:--setup;zero3;--nranks;2;--hpz;2;--qgz"
      "zero3_zeropp_n4:--setup;zero3;--nranks;4;--qwz;--hpz;2"
      "zero3_zeropp_qgz_n4:--setup;zero3;--nranks;4;--qwz;--hpz;2;--qgz"
      "cp_flex_n2:--setup;cp;--nranks;2"
      "cp_flex_n4:--setup;cp;--nranks;4"
      "cp_sdpa_n2:--setup;cp;--nranks;2;--attention;sdpa"
      "cp_sdpa_n4:--setup;cp;--nranks;4;--attention;sdpa"
      "cp_sdpa_alltoall_n2:--setup;cp;--nranks;2;--attention;sdpa;--rotate;alltoall"
      "cp_sdpa_alltoall_n4:--setup;cp;--nranks;4;--attention;sdpa;--rotate;alltoall"
      "ulysses_n2:--setup;ulysses;--nranks;2"
      "ulysses_n4:--setup;ulysses;--nranks;4"
      "moe_n2:--setup;moe;--nranks;2"
      "moe_n4:--setup;moe;--nranks;4"
      "float8_n2:--setup;float8;--nranks;2;--clip"
      "float8_linear_fp8_dynamic_n4:--setup;float8;--nranks;4;--wrap;linear;--nccl-fp8;--float8-dynamic"
      "lora_n2:--setup;lora;--nranks;2"
      "lora_accum_n4:--setup;lora;--nranks;4;--accum;2;--clip"
      "frozen_n2:--setup;frozen;--nranks;2;--frozen;2"
      "frozen_embeddings_root_n4:--setup;frozen;--nranks;4;--frozen;1;--frozen-root"
      "deferred_n2:--setup;deferred;--nranks;2;--accum;3"
      "deferred_keep_schedule_n4:--setup;deferred;--nranks;4;--accum-schedule;2,3;--reshard-after-forward;false"
      "simplefsdp_n2:--setup;simplefsdp;--nranks;2"
      "simplefsdp_block_n4:--setup;simplefsdp;--nranks;4;--bucket-blocks;1;--clip")
    string(REPLACE ":" ";" parts "${spec}")
    list(GET parts 0 name)
    list(REMOVE_AT parts 0)
    add_test(NAME stream_job_${name}
      COMMAND stream_job ${parts} --steps 3 --compute-us 20
              --truth ${CMAKE_CURRENT_BINARY_DIR}/stream_job_${name}.json)
    set_tests_properties(stream_job_${name} PROPERTIES TIMEOUT 120 LABELS "e2e;stream_job"
      FIXTURES_SETUP stream_job_truths)
    list(APPEND stream_job_truths ${CMAKE_CURRENT_BINARY_DIR}/stream_job_${name}.json)
  endforeach()
  # ... and each truth parses strictly, with its keys well formed.
  if(Python3_EXECUTABLE)
    add_test(NAME stream_job_truths_parse
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/stream_truth_check.py ${stream_job_truths})
    set_tests_properties(stream_job_truths_parse PROPERTIES TIMEOUT 60 LABELS "e2e;stream_job"
      FIXTURES_REQUIRED stream_job_truths)
  endif()
endif()
