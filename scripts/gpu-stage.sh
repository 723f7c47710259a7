#!/usr/bin/env bash
# Makes a CUDA build runnable on another x86-64 Linux machine that has the GPU
# driver but not this project's dependencies (a lent GPU machine, a CI runner
# image): copies every shared library the programs of scripts/gpu-check.sh
# load, except the C and C++ runtimes the other machine has anyway, into
# BUILD_DIR/sa-libs, which gpu-check.sh puts on LD_LIBRARY_PATH.
#   scripts/gpu-stage.sh [BUILD_DIR [SLIM_DIR]]      (default build-gpu)
# With SLIM_DIR, the programs (stripped) and sa-libs are also copied there in
# the build folder's layout, about 40 MB instead of the build's 90 MB or more:
# what a machine that only runs scripts/gpu-check.sh SLIM_DIR needs.
# The other machine needs a glibc and libstdc++ at least as new as this one's
# (the programs are linked against them) and a driver for the CUDA version the
# build used (the CUDA runtime itself is linked statically).
set -eu
B=${1:-build-gpu}
S=${2:-}
progs=("$B/cli/softmax-audit" "$B/bench/cuda/sa_bench_cuda")
for t in cuda_host_test cuda_device_test cuda_attention_v2_test cuda_backward_test \
         cuda_device_long_test; do
  progs+=("$B/tests/cuda/$t")
done
for p in "${progs[@]}"; do
  [ -x "$p" ] || { echo "gpu-stage: $p is missing; build it first (scripts/gpu-check.sh says how)" >&2; exit 2; }
done
mkdir -p "$B/sa-libs"
ldd "${progs[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$B/sa-libs/"; done
ls "$B/sa-libs"
du -sh "$B/sa-libs"
if [ -n "$S" ]; then
  for p in "${progs[@]}"; do
    rel=${p#"$B"/}
    mkdir -p "$S/$(dirname "$rel")"
    cp "$p" "$S/$rel"
    strip "$S/$rel" 2> /dev/null || true
  done
  mkdir -p "$S/sa-libs"
  cp "$B"/sa-libs/* "$S/sa-libs/"
  du -sh "$S"
fi
