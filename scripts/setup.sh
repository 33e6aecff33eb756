#!/usr/bin/env bash
# setup.sh - install what fsdpscope needs to build and test on Debian 12.
#
# Idempotent: installs only the Debian packages that are missing (apt-get
# update once, then one install), then checks for the CUDA toolkit and says
# exactly what is missing. Run as root, or with sudo available.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git       # compilers and the build
  clang libclang-rt-14-dev llvm                # sanitizer and libFuzzer builds, BPF objects
  libcmocka-dev                                # unit tests
  libncurses-dev                               # the ncurses dashboard
  tmux                                         # tests: fsdpscope top in a real terminal (tests/e2e/top_e2e.py)
  libbpf-dev bpftool                           # attach by PID (eBPF uprobes)
  jq python3-jsonschema                        # end-to-end tests read and validate JSON output
  python3                                      # end-to-end test drivers
  libmicrohttpd-dev                            # the /metrics endpoint of live sessions
  libjansson-dev                               # top --connect: the viewer socket's JSON read back strictly
  prometheus curl                              # tests: promtool check metrics, a real HTTP client
  time                                         # bench/collect_bench.sh: /usr/bin/time for the collector's CPU and memory
  zlib1g-dev                                   # the Kineto reader: gzip-compressed PyTorch profiler traces (.json.gz)
  chromium                                     # tests: report --html opened headless (--dump-dom, --screenshot)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The prometheus package is here for its promtool; on a machine run by
  # systemd it also enables a Prometheus server on :9090. One this script
  # installed is switched off again; one that was there before is left alone.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    echo "setup: installed prometheus for promtool; its server (prometheus.service) is disabled"
  fi
else
  echo "setup: Debian packages present"
fi

# The CUDA toolkit is not a Debian package here: it is expected at
# /usr/local/cuda (or CUDA_HOME). Say exactly what is missing; the build
# skips the parts that need it.
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
report=()
[ -x "$CUDA_HOME/bin/nvcc" ] || report+=("nvcc ($CUDA_HOME/bin/nvcc): the CUDA backend of fsdp_ref is skipped")
[ -f "$CUDA_HOME/include/cupti_activity.h" ] || [ -f "$CUDA_HOME/extras/CUPTI/include/cupti_activity.h" ] ||
  report+=("CUPTI headers: the agent builds without GPU kernel activity")
[ -f "$CUDA_HOME/include/nvtx3/nvToolsExt.h" ] || report+=("NVTX3 headers ($CUDA_HOME/include/nvtx3): NVTX ranges are skipped")
NCCL_INC="${NCCL_HOME:+$NCCL_HOME/include}"
[ -f "${NCCL_INC:-$CUDA_HOME/include}/nccl.h" ] || [ -f /usr/include/nccl.h ] ||
  report+=("nccl.h: set NCCL_HOME to the NCCL prefix; fsdp_ref and the agent's NCCL wrappers are skipped")
if ((${#report[@]})); then
  echo "setup: CUDA toolkit at $CUDA_HOME is incomplete:"
  for r in "${report[@]}"; do echo "  missing $r"; done
else
  echo "setup: CUDA toolkit at $CUDA_HOME: nvcc, CUPTI, NVTX3, nccl.h present"
fi
