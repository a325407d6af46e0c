#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine, run as root (see README.md).
#   bash .ci/setup.sh main   install what is missing, build (Release), run the main job
#   bash .ci/setup.sh test   install what is missing, build, run the whole test suite,
#                            then the sanitizer step .ci/sanitize.sh (ASan+UBSan:
#                            the whole suite again; TSan: the OpenMP tests).
#                            HAPMOE_SANITIZE=0 skips that step.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-main}
case "$mode" in main | test) ;; *)
  echo "usage: bash .ci/setup.sh main|test" >&2
  exit 2
  ;;
esac

# Debian 12 packages the build and tests need; only the missing ones are
# installed.
# clang, libomp-dev (with Archer) and libclang-rt-14-dev (TSan, libFuzzer)
# are for the sanitizer step and fuzz/run.sh (docs/testing.md).
packages=(build-essential cmake git mpich libmpich-dev libhdf5-dev hdf5-tools libcxxopts-dev
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev python3-h5py python3-numpy)
if [[ $mode == test ]]; then packages+=(clang libomp-dev libclang-rt-14-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"

if [[ $mode == main ]]; then
  # The main job on a built-in default: the fastest plan for the paper's
  # Mixtral-S on 16 H800 + 16 MI300X (paper:32-2), searched by 2 MPI ranks
  # (each with the node's cores over its ranks as OpenMP threads), then
  # that plan scored again through `evaluate` from the JSON it wrote.
  mpiexec -n 2 build/hapmoe plan --model mixtral-s --cluster paper:32-2 --plan-json build/plan.json
  build/hapmoe evaluate --model mixtral-s --cluster paper:32-2 --plan build/plan.json >/dev/null
else
  ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600 --no-tests=error
  if [[ ${HAPMOE_SANITIZE:-1} != 0 ]]; then bash .ci/sanitize.sh; fi
fi
