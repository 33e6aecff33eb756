# Tests of attach's capture half (agent/bpf/attach_elf.c, attach.c, attach.bpf.c).
#
# attach_elf_test needs no privilege. attach_probe_test loads the BPF
# program and places uprobes: it needs root (or CAP_BPF + CAP_PERFMON) and
# skips with 77 and a message where it has neither. Both run the real
# libnccl of the toolkit where it is (calls fail without a GPU; the probes
# must see them) and the CPU stand-in.
set(attach_real_nccl /usr/local/cuda/lib/libnccl.so.2)
if(FSS_NCCL_LIBRARY)
  get_filename_component(attach_nccl_dir ${FSS_NCCL_LIBRARY} DIRECTORY)
  if(EXISTS ${attach_nccl_dir}/libnccl.so.2)
    set(attach_real_nccl ${attach_nccl_dir}/libnccl.so.2)
  endif()
endif()

if(TARGET fss_attach_core AND TARGET fss_nccl_cpu)
  fss_unit_test(NAME attach_elf_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/attach_elf_test.c
    LIBS fss_attach_core ${CMAKE_DL_LIBS} LABELS attach TIMEOUT 60)
  if(TARGET attach_elf_test)
    target_compile_definitions(attach_elf_test PRIVATE
      ATTACH_TEST_STANDIN="$<TARGET_FILE:fss_nccl_cpu>" ATTACH_TEST_REAL_NCCL="${attach_real_nccl}")
    add_dependencies(attach_elf_test fss_nccl_cpu)
  endif()
endif()

if(TARGET fss_attach_bpf AND TARGET fss_nccl_cpu)
  # The process the test attaches to: it dlopens a libnccl and calls it on command.
  add_executable(attach_probe_target ${CMAKE_CURRENT_LIST_DIR}/attach_probe_target.c)
  target_include_directories(attach_probe_target PRIVATE ${PROJECT_SOURCE_DIR})
  target_include_directories(attach_probe_target SYSTEM PRIVATE ${FSS_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(attach_probe_target PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)

  fss_unit_test(NAME attach_probe_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/attach_probe_test.c
    LIBS fss_attach_bpf ${CMAKE_DL_LIBS} LABELS "attach;root" TIMEOUT 120)
  if(TARGET attach_probe_test)
    target_compile_definitions(attach_probe_test PRIVATE
      ATTACH_TEST_STANDIN="$<TARGET_FILE:fss_nccl_cpu>" ATTACH_TEST_REAL_NCCL="${attach_real_nccl}"
      ATTACH_TEST_TARGET="$<TARGET_FILE:attach_probe_target>")
    add_dependencies(attach_probe_test attach_probe_target fss_nccl_cpu)
    set_tests_properties(attach_probe_test PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endif()
