#!/usr/bin/env bash
# Installs every Debian package softmax-audit needs to build, test and report.
# Runs as root (or with sudo available) on Debian 12. Safe to run again: apt-get
# skips what is already installed. Prints each step before it runs it.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libmpfr-dev libgmp-dev          # high-precision reference
  parallel                                     # sharded sweeps in tests and docs/scale-out.md
  librapidcheck-dev libgtest-dev libgmock-dev  # property tests
  libeigen3-dev                                # singular values (theory T3)
  libbenchmark-dev libdnnl-dev                 # benchmarks, oneDNN as the peer
  ocl-icd-opencl-dev opencl-c-headers          # Debian's dnnl-config.cmake requires OpenCL
  libhwy-dev                                   # SIMD kernels
  libcli11-dev libfmt-dev nlohmann-json3-dev libtomlplusplus-dev  # CLI, output, gate specs
  gnuplot-nox                                  # plots in the audit report
  chromium                                     # the report's render test (headless)
  libxml2-utils python3-jsonschema             # CI outputs validated against docs/schema/
  clang libclang-rt-14-dev libomp-dev          # sanitizer build and libFuzzer harnesses (docs/fuzzing.md)
  python3-dev pybind11-dev python3-numpy python3-pytest  # the Python package and pytest plugin (python/)
  python3-torch libtorch-dev                   # PyTorch's CPU operators as peers (python/, tests/calibration/)
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo); else
    echo "install-deps: not root and no sudo; install these by hand: ${packages[*]}" >&2; exit 2; fi
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
