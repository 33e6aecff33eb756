# How `make test` fits in ten minutes on two cores (bench/results/suite_time.txt):
# which tests the sanitizer build leaves to the regular build, and which ctest
# starts first. Included after every fragment, so that it sees all their tests.
#
# The sanitizer build runs every unit test and the e2e scenarios that reach
# code the unit tests cannot; an e2e scenario whose code paths another one
# there already takes (the same job at another width or wrap, the same job
# twice) is labelled regular_only in that build, and `make test-san` leaves
# it out (ctest -LE regular_only). Every one of them runs in the regular build.

# fss_suite_regular_only(test...): the tests given, where they exist, labelled
# regular_only in a sanitizer build.
function(fss_suite_regular_only)
  if(NOT FSS_SANITIZE)
    return()
  endif()
  foreach(t IN LISTS ARGN)
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY LABELS regular_only)
    endif()
  endforeach()
endfunction()

# fss_suite_cost(test seconds [test seconds]...): the order ctest -j starts
# tests in when it has no timings of its own yet (a fresh clone): the longest
# first, so that none of them starts last and runs alone. The seconds are a
# sanitizer build's on a busy machine; only their order matters.
function(fss_suite_cost)
  set(args ${ARGN})
  while(args)
    list(POP_FRONT args t seconds)
    if(TEST ${t})
      set_tests_properties(${t} PROPERTIES COST ${seconds})
    endif()
  endwhile()
endfunction()

# The attach scenarios' fsdp job at the other widths and wraps, and attached
# twice: attach_e2e_fsdp_3_block takes their paths through attach, the wrap's
# analysis is the unit tests' and run_e2e's. A detach on SIGINT ends as
# --duration's (attach_e2e_duration) and q's (attach_e2e_top) do; the losses it
# leaves equal are fsdp_ref's own. fsdp_ref_e2e_bitwise reruns the trainer's
# paths of fsdp_ref_e2e_counts to compare their bits.
fss_suite_regular_only(
  attach_e2e_fsdp_3_linear attach_e2e_fsdp_4_block attach_e2e_fsdp_4_linear
  attach_e2e_twice attach_e2e_detach
  fsdp_ref_e2e_bitwise)

# The Kineto reader on the shared real traces (14 s there, most of it the
# Python count): its code paths are kineto_parse_test's and kineto_fuzz's,
# which run in the sanitizer build.
fss_suite_regular_only(kineto_counts_shared)

# What fsdpscope writes against another user's links and full devices: the
# writer's paths are out_file_test's, which runs in the sanitizer build; the
# jobs of the e2e scenario (a full disk among them) take minutes under ASan.
fss_suite_regular_only(out_files_e2e)

# Options refused with their range named: the parsers' paths are
# rules_registry_test's and tui_state_test's; the advice on fsdp_ref jobs
# (advice_job_test): the rules' paths are rules_advice_test's. Both run whole
# fsdp_ref jobs, which take a minute under ASan.
fss_suite_regular_only(option_ranges_e2e advice_job_test)

# The per_rank HTA figures of fsdp_ref jobs: the analysis' paths are
# analysis_figures_test's, the jobs the accuracy matrix's.
fss_suite_regular_only(figures_e2e)

fss_suite_cost(
  top_feed_test 195 live_test 166 attach_e2e_detach 149 nccl_cpu_test 111
  attach_e2e_twice 111 attach_e2e_fsdp_4_linear 89 attach_e2e_fsdp_4_block 64
  attach_e2e_fsdp_3_linear 64 fsdp_ref_e2e_bitwise 51 attach_e2e_fsdp_3_block 51
  keep_test 49 viewer_test 41 lint_test 34 accuracy_test 30 fsdp_ref_e2e_memory 27)

# attach --all attaches to every process that maps libnccl, the other tests'
# fsdp_ref jobs too (which then make its trace's lint say "incomplete"): it
# runs alone.
if(TEST attach_e2e_all)
  set_tests_properties(attach_e2e_all PROPERTIES RUN_SERIAL TRUE)
endif()

# stream_job's runs to the end check the test program's own streams (no
# deadlock, a truth written); the fsdpscope code they reach is the accuracy
# matrix's, which the regular build runs. The sanitizer build keeps one run of
# each family of setups that issues something the others do not (all-to-alls,
# ZeRO++ quantized fetches, an interleaved pipeline, the float8 dtypes); the
# strict parse of every truth needs them all (a fixture): the regular build runs it.
if(FSS_SANITIZE)
  get_property(fss_all_tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS fss_all_tests)
    if(t MATCHES "^stream_job_" AND NOT t MATCHES
       "^stream_job_(moe_n4|cp_sdpa_alltoall_n4|zero3_zeropp_qgz_n4|pp_interleaved_n4|float8_linear_fp8_dynamic_n4|dpo_n2|rl_n4)$")
      fss_suite_regular_only(${t})
    endif()
  endforeach()
endif()
