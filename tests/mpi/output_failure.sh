#!/bin/bash
# Outputs that cannot be written, over 1 and 2 MPI ranks (Hardening II,
# items 1, 4 and 8; docs/testing.md). Each run is bounded by `timeout`, so
# a hang (rank 0 left for MPI_Finalize while rank 1 waited in a collective)
# fails with a message rather than only the CTest timeout.
#   A. An output refused before the search (a missing directory, --plan-json
#      over --model, --launcher over --plan-json, --launcher-hosts without
#      --launcher, a sweep's --out over its sweep file) together with --out:
#      exit 2, one error line, nothing written.
#   B. A write that fails after the search (HAPMOE_TEST_FAIL=write@0: rank
#      0's writes fail as on a full disk) with --plan-json and --out: exit 2,
#      one error line, no archive.
#   output_failure.sh MPIEXEC HAPMOE
set -uo pipefail
# mpiexec forwards its stdin to rank 0. Under load, Hydra 4.0.2 fails
# forwarding even /dev/null ("process reading stdin too slowly; can't keep
# up", exit 141: 5 of 5 runs with both cores busy, 0 of 5 with stdin
# closed). Nothing to read, so stdin is closed.
exec <&-
mpiexec=$1
hapmoe=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$work/out"
plan=$work/plan_copy.json  # a plan for evaluate, and what it must stay
"$hapmoe" plan --model mixtral-s --cluster paper:16-1 --threads 1 --plan-json "$plan" >/dev/null ||
  fail "the plan for evaluate"
cp "$plan" "$work/plan.json"
printf '{"cases": [{"model": "mixtral-s", "cluster": "paper:16-1"}]}\n' >"$work/sweep.json"
inputs=(--model mixtral-s --cluster paper:16-1)

# run RANKS EXPECTED_TEXT [ENV=VALUE] -- ARGS...: the command over RANKS ranks
# ends within 40 s with exit 2, one error line holding EXPECTED_TEXT, and
# writes nothing in $work/out.
run() {
  local ranks=$1 expected=$2
  shift 2
  local env=()
  while [[ $1 != -- ]]; do
    env+=("$1")
    shift
  done
  shift
  local cmd=$1
  env "${env[@]}" timeout -s KILL 40 "$mpiexec" -n "$ranks" "$hapmoe" "$@" \
    >"$work/stdout" 2>"$work/stderr" </dev/null
  local code=$?
  local what="$ranks rank(s): ${env[*]} hapmoe $*"
  [[ $code != 137 ]] || fail "$what: still running after 40 s (a hang)"
  [[ $code == 2 ]] || fail "$what: exit $code, expected 2: $(cat "$work/stderr")"
  [[ $(grep -c "hapmoe $cmd" "$work/stderr") == 1 ]] ||
    fail "$what: not one error line: $(cat "$work/stderr")"
  grep -qF -- "$expected" "$work/stderr" || fail "$what: the message lacks '$expected'"
  [[ -z $(ls -A "$work/out") ]] || fail "$what: wrote $(ls -A "$work/out")"
  cmp -s "$plan" "$work/plan.json" || fail "$what: the input plan file changed"
  echo "ok $what: $(cat "$work/stderr")"
}

for n in 1 2; do
  for cmd in plan evaluate compare; do
    args=("$cmd" "${inputs[@]}" --threads 1)
    [[ $cmd == evaluate ]] && args=("$cmd" "${inputs[@]}" --plan "$work/plan.json")
    # A.
    run $n "--plan-json $work/missing/p.json" -- "${args[@]}" \
      --plan-json "$work/missing/p.json" --out "$work/out/run.h5"
    run $n "--plan-json $work/out/run.h5: is also the file of --out" -- "${args[@]}" \
      --plan-json "$work/out/run.h5" --out "$work/out/run.h5"
    # B.
    run $n "--plan-json $work/out/p.json: write failed" HAPMOE_TEST_FAIL=write@0 -- "${args[@]}" \
      --plan-json "$work/out/p.json" --out "$work/out/run.h5"
  done
  run $n "--plan-json $work/plan.json: is the file of --plan" -- evaluate "${inputs[@]}" \
    --plan "$work/plan.json" --plan-json "$work/plan.json" --out "$work/out/run.h5"
  run $n "--launcher $work/out/x: is also the file of --plan-json" -- plan "${inputs[@]}" \
    --threads 1 --plan-json "$work/out/x" --launcher "$work/out/x" --out "$work/out/run.h5"
  for cmd in plan evaluate; do
    args=("$cmd" "${inputs[@]}" --threads 1)
    [[ $cmd == evaluate ]] && args=("$cmd" "${inputs[@]}" --plan "$work/plan.json")
    run $n "--launcher-hosts: is only read with --launcher" -- "${args[@]}" \
      --launcher-hosts "$work/plan.json" --plan-json "$work/out/p.json" --out "$work/out/run.h5"
    run $n "--launcher $work/missing/l.sh" -- "${args[@]}" \
      --launcher "$work/missing/l.sh" --plan-json "$work/out/p.json" --out "$work/out/run.h5"
  done
  run $n "--out $work/sweep.json: is the file of --sweep" -- sweep "$work/sweep.json" \
    --threads 1 --out "$work/sweep.json"
done
echo ok
