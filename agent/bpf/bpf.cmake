# agent/bpf/bpf.cmake: the BPF half of attach, included by agent/bpf/CMakeLists.txt.
#
#   attach.bpf.c --clang -target bpf--> attach.bpf.o --bpftool gen skeleton--> attach.skel.h
#   attach.c + attach.skel.h --> fss_attach_bpf (static, links libbpf)
#
# The BPF compile is a custom command, not a target, so none of the
# project's compile options reach it (sanitizer or fuzzer flags would make
# clang emit code the BPF target cannot have). fss_attach_bpf exists iff
# it was built: the CLI links it under if(TARGET fss_attach_bpf).
if(NOT FSS_HAVE_BPF)
  message(STATUS "fsdpscope: attach is built without libbpf (libbpf-dev, bpftool or clang missing): `fsdpscope attach` will say so")
  # The probes' API, every call saying it cannot attach (attach_none.c). Only
  # here: with fss_attach_bpf built, a second definition in fss_attach_core,
  # linked first, would win.
  target_sources(fss_attach_core PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/attach_none.c)
else()
  # The UAPI headers include <asm/...>, which Debian keeps under the multiarch folder.
  find_path(FSS_BPF_ASM_INCLUDE asm/types.h
    PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE} /usr/include/x86_64-linux-gnu NO_DEFAULT_PATH)
  if(NOT FSS_BPF_ASM_INCLUDE)
    set(FSS_BPF_ASM_INCLUDE /usr/include)
  endif()
  set(attach_bpf_object ${CMAKE_CURRENT_BINARY_DIR}/attach.bpf.o)
  set(attach_bpf_skeleton ${CMAKE_CURRENT_BINARY_DIR}/attach.skel.h)
  add_custom_command(OUTPUT ${attach_bpf_object}
    COMMAND ${FSS_CLANG} -target bpf -O2 -g -Wall -Werror -D__TARGET_ARCH_x86
            -I${PROJECT_SOURCE_DIR} -I${LIBBPF_INCLUDEDIR} -idirafter ${FSS_BPF_ASM_INCLUDE}
            -c ${CMAKE_CURRENT_SOURCE_DIR}/attach.bpf.c -o ${attach_bpf_object}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/attach.bpf.c ${CMAKE_CURRENT_SOURCE_DIR}/attach.h
    COMMENT "BPF attach.bpf.o"
    VERBATIM)
  # Written to a temporary name and renamed: a failed bpftool leaves no
  # half skeleton that a later build would take as up to date.
  add_custom_command(OUTPUT ${attach_bpf_skeleton}
    COMMAND sh -c "\"$0\" gen skeleton \"$1\" name attach_bpf > \"$2.tmp\" && mv \"$2.tmp\" \"$2\""
            ${FSS_BPFTOOL} ${attach_bpf_object} ${attach_bpf_skeleton}
    DEPENDS ${attach_bpf_object}
    COMMENT "BPF skeleton attach.skel.h"
    VERBATIM)
  add_custom_target(fss_attach_skeleton DEPENDS ${attach_bpf_skeleton})

  add_library(fss_attach_bpf STATIC ${CMAKE_CURRENT_SOURCE_DIR}/attach.c ${attach_bpf_skeleton})
  add_dependencies(fss_attach_bpf fss_attach_skeleton)
  # SYSTEM: the generated skeleton is not ours to keep warning-clean.
  target_include_directories(fss_attach_bpf SYSTEM PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
  target_include_directories(fss_attach_bpf PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(fss_attach_bpf PUBLIC fss_attach_core PkgConfig::LIBBPF)
  message(STATUS "fsdpscope: attach built with libbpf ${LIBBPF_VERSION}")
endif()
