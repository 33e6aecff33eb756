# Dependency discovery. A component whose dependency is missing is skipped
# with a one-line message naming what to install; nothing is skipped silently.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

# --- CUDA toolkit (CUPTI, NVTX3 headers, cuBLAS, cudart) ------------------
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  message(STATUS "fsdpscope: CUDA toolkit ${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR}/..")
else()
  message(STATUS "fsdpscope: CUDA toolkit not found (set CUDAToolkit_ROOT): CUPTI, NVTX and the CUDA backend are skipped")
endif()

# NVTX3 is header-only and ships with the toolkit.
find_path(FSS_NVTX3_INCLUDE nvtx3/nvToolsExt.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
if(NOT FSS_NVTX3_INCLUDE)
  message(STATUS "fsdpscope: NVTX3 headers not found: NVTX ranges are skipped")
endif()

# CUPTI: headers at build time only; the agent dlopens libcupti at run time.
find_path(FSS_CUPTI_INCLUDE cupti_activity.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/local/cuda/extras/CUPTI/include)
if(FSS_CUPTI_INCLUDE)
  message(STATUS "fsdpscope: CUPTI headers at ${FSS_CUPTI_INCLUDE}")
else()
  message(STATUS "fsdpscope: CUPTI headers not found: the agent builds without GPU kernel activity")
endif()

# --- NCCL: header from the toolkit or the system; NCCL_HOME overrides ---
set(NCCL_HOME "$ENV{NCCL_HOME}" CACHE PATH "NCCL installation prefix (include/nccl.h, lib/libnccl.so.2)")
find_path(FSS_NCCL_INCLUDE nccl.h
  HINTS ${NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
find_library(FSS_NCCL_LIBRARY NAMES nccl libnccl.so.2
  HINTS ${NCCL_HOME}/lib ${NCCL_HOME}/lib64 ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
if(FSS_NCCL_INCLUDE)
  message(STATUS "fsdpscope: nccl.h at ${FSS_NCCL_INCLUDE}")
else()
  message(STATUS "fsdpscope: nccl.h not found: set NCCL_HOME to the NCCL prefix; fsdp_ref and the agent's NCCL wrappers are skipped")
endif()
if(NOT FSS_NCCL_LIBRARY)
  message(STATUS "fsdpscope: libnccl.so.2 not found: set NCCL_HOME; the CUDA backend of fsdp_ref is skipped")
endif()

# --- ncurses (tui) --------------------------------------------------------
pkg_check_modules(NCURSES IMPORTED_TARGET ncursesw)
if(NOT NCURSES_FOUND)
  message(STATUS "fsdpscope: ncursesw not found (apt-get install libncurses-dev): the dashboard is skipped")
endif()

# --- libbpf + bpftool + clang (attach by PID) ------------------------------
pkg_check_modules(LIBBPF IMPORTED_TARGET libbpf)
find_program(FSS_BPFTOOL bpftool PATHS /usr/sbin /usr/local/sbin)
find_program(FSS_CLANG clang)
if(LIBBPF_FOUND AND FSS_BPFTOOL AND FSS_CLANG)
  set(FSS_HAVE_BPF ON)
else()
  set(FSS_HAVE_BPF OFF)
  message(STATUS "fsdpscope: libbpf/bpftool/clang not all found (apt-get install libbpf-dev bpftool clang): attach by PID is skipped")
endif()

# --- cmocka (unit tests) --------------------------------------------------
pkg_check_modules(CMOCKA IMPORTED_TARGET cmocka)
if(NOT CMOCKA_FOUND)
  message(STATUS "fsdpscope: cmocka not found (apt-get install libcmocka-dev): unit tests are skipped")
endif()

# --- CUDA language for fsdp_ref's GPU backend -----------------------------
set(FSS_HAVE_CUDA_LANG OFF)
if(FSS_CUDA AND CUDAToolkit_FOUND AND FSS_NCCL_LIBRARY AND NOT FSS_SANITIZE)
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS ${CUDAToolkit_BIN_DIR}/nvcc)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_BIN_DIR}/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(FSS_HAVE_CUDA_LANG ON)
  else()
    message(STATUS "fsdpscope: nvcc not usable: the CUDA backend of fsdp_ref is skipped")
  endif()
elseif(FSS_SANITIZE)
  message(STATUS "fsdpscope: sanitizer build: the CUDA backend of fsdp_ref is skipped (nvcc objects are not instrumented)")
endif()
