#!/usr/bin/env bash
# fuzz/run.sh [SECONDS] [TARGET...]: builds the libFuzzer targets (the
# `fuzz` preset, clang) and runs each for SECONDS (default 60) from its
# seed corpus, one after the other. New interesting inputs go to
# build-fuzz/corpus/TARGET (not committed: `-merge=1` them into
# fuzz/corpus/TARGET when worth keeping); a crash leaves its reproducer in
# build-fuzz/crashes/TARGET/ -- copy it to fuzz/regressions/TARGET/ once
# fixed, where the replay test (ctest -L fuzz) keeps it from coming back.
# Prints one line per target with its executions; exits 1 if any target
# found a crash. Longer runs: docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
all=(model_json hf_config cluster_json cluster_inline plan_json sweep_json megatron_script
  pipeline_layout nccl_log layer_csv router_csv runs_csv)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

jobs=${HAPMOE_JOBS:-2}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs" --target "${targets[@]/#/fuzz_}" >/dev/null

status=0
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t
  crashes=build-fuzz/crashes/$t
  log=build-fuzz/logs/$t.log
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  # -rss_limit_mb / -timeout: a parser that allocates more than 2 GB or
  # takes more than 10 s on one input is a finding too.
  # Seeds: fuzz/corpus/TARGET and the fixtures fuzz/seed_dirs.txt names.
  seeds=()
  [[ -d fuzz/corpus/$t ]] && seeds+=("fuzz/corpus/$t")
  read -ra extra <<<"$(awk -v t="$t" '$1 == t { $1 = ""; print }' fuzz/seed_dirs.txt)"
  seeds+=("${extra[@]}")
  if ! ASAN_OPTIONS=detect_leaks=1 build-fuzz/fuzz/fuzz_$t "$work" "${seeds[@]}" \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1; then
    status=1
    echo "$t: FOUND A CRASH (see $log and $crashes/)"
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
  echo "$t: $runs executions in ${seconds} s, coverage $cov, corpus $(ls "$work" | wc -l) files"
done
exit $status
