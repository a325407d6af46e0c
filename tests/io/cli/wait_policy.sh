#!/bin/bash
# hapmoe runs its OpenMP threads with OMP_WAIT_POLICY=passive and
# GOMP_SPINCOUNT=3000 unless the user set a policy (io/cli/main.cpp,
# docs/parallel.md "Threads"): the plan file's run.omp_wait_policy and
# run.gomp_spincount say which the search ran with.
# To set it, hapmoe starts again; a run of one thread does not (libgomp
# prints its settings once per start with OMP_DISPLAY_ENV).
#   wait_policy.sh HAPMOE
set -euo pipefail
hapmoe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
policy() {  # ENV... : the policy and spin count the search ran with
  env "$@" "$hapmoe" plan --model mixtral-s --cluster paper:16-1 --threads 2 \
    --plan-json "$work/p.json" >/dev/null
  /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["run"]; print(r["omp_wait_policy"], r["gomp_spincount"] or "-")' \
    "$work/p.json"
}
# Unset: passive after 3,000 spins (the threads wait a little for the next
# parallel region, then sleep).
got=$(policy -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)
[[ $got == "passive 3000" ]] || { echo "FAIL: unset gave '$got', expected 'passive 3000'"; exit 1; }
got=$(policy -u OMP_WAIT_POLICY GOMP_SPINCOUNT=10)
[[ $got == "passive 10" ]] || { echo "FAIL: a spin count alone gave '$got'"; exit 1; }
got=$(policy -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active)
[[ $got == "active -" ]] || { echo "FAIL: active gave '$got'"; exit 1; }
# libgomp runs with the spin count set (its own report of its settings).
spins=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose "$hapmoe" plan \
  --model mixtral-s --cluster paper:16-1 --threads 2 2>&1 >/dev/null | grep -c "GOMP_SPINCOUNT = '3000'" || true)
[[ $spins == 1 ]] || { echo "FAIL: libgomp reported GOMP_SPINCOUNT 3000 $spins times, expected once"; exit 1; }
starts() {  # ARGS... : how many times hapmoe started, OMP_WAIT_POLICY unset
  env -u OMP_WAIT_POLICY -u OMP_NUM_THREADS OMP_DISPLAY_ENV=true "$hapmoe" "$@" 2>&1 >/dev/null |
    grep -c 'OPENMP DISPLAY ENVIRONMENT BEGIN' || true
}
for one in "--threads 1" "--threads=1"; do
  # shellcheck disable=SC2086
  got=$(starts plan --model mixtral-s --cluster paper:16-1 $one)
  [[ $got == 1 ]] || { echo "FAIL: $one started $got times, expected once"; exit 1; }
done
got=$(starts plan --model mixtral-s --cluster paper:16-1 --threads 2)
[[ $got == 2 ]] || { echo "FAIL: --threads 2 started $got times, expected twice"; exit 1; }
echo ok
