#!/bin/bash
# Checkpoint and resume of one exhaustive search (issue 23, item 2;
# docs/archive.md, "Checkpoints of one search"): an uninterrupted
# `plan --no-bound` of over a minute, then the same search killed from
# outside with SIGTERM at 30 % of that wall time, resumed, killed again
# when 70 % of the uninterrupted wall time has been spent in all, resumed
# to its end; the plans and statistics must equal the uninterrupted run's
# (--plan-json without "run" and the wall time; the archive's plans, rows
# without rank and seconds, totals without seconds). Unlike the test
# (tests/io/archive/plan_resume.sh, a hook at a known unit) the kills come
# at wall-clock instants, as a scheduler's would.
#   bench/plan_resume.sh HAPMOE [REPEATS] [-- PLAN ARGS...]
# Default search: DeepSeek-V3 on H800:96,MI300X:96 (192 devices), no
# pruning, no bound, one thread (99 s on this project's machine; Mixtral-S
# on H800:80,910B:80, the default before the plain DP got faster, now
# takes 8 s). Prints one line per repeat and the medians.
set -uo pipefail
exec <&-
hapmoe=$1
repeats=${2:-3}
shift $(($# >= 2 ? 2 : 1))
[[ ${1:-} == -- ]] && shift
args=("$@")
((${#args[@]})) || args=(--model deepseek-v3 --cluster H800:96,MI300X:96 --prune none --no-bound --threads 1)
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
# plan_doc, records, archive_text.
source "$(dirname "$0")/../tests/io/archive/search_compare.sh"
# run_for SECONDS OUT [--resume]: the search in the background, SIGTERM after
# SECONDS (unless it ends first); sets code, took (its wall time) and
# stop_s (signal to exit).
run_for() {
  local seconds=$1 out=$2
  shift 2
  local t0
  t0=$(now)
  "$hapmoe" plan "${args[@]}" --out "$out" --plan-json "$work/k.json" "$@" >/dev/null \
    2>"$work/k.err" <&- &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && (($(echo "$(now) - $t0 < $seconds" | bc))); do sleep 0.05; done
  local t1
  t1=$(now)
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  code=$?
  pid=
  local t2
  t2=$(now)
  took=$(echo "$t2 - $t0" | bc)
  stop_s=$(echo "$t2 - $t1" | bc)
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

echo "search: hapmoe plan ${args[*]}"
for ((i = 1; i <= repeats; ++i)); do
  t0=$(now)
  "$hapmoe" plan "${args[@]}" --out "$work/full.h5" --plan-json "$work/full.json" >/dev/null \
    2>"$work/full.err" || fail "uninterrupted run: $(cat "$work/full.err")"
  full=$(echo "$(now) - $t0" | bc)
  rm -f "$work/k.h5"
  at30=$(echo "0.3 * $full" | bc)
  run_for "$at30" "$work/k.h5"
  [[ $code == 4 ]] || fail "SIGTERM at 30 %: exit $code: $(cat "$work/k.err")"
  first=$took first_stop=$stop_s
  held1=$(grep -o "[0-9]* of [0-9]* configurations committed" "$work/k.err" | tail -1)
  at70=$(echo "0.7 * $full - $first" | bc)
  run_for "$at70" "$work/k.h5" --resume
  [[ $code == 4 ]] || fail "SIGTERM at 70 %: exit $code: $(cat "$work/k.err")"
  second=$took second_stop=$stop_s
  held2=$(grep "^hapmoe plan: stopped" "$work/k.err" | grep -o "[0-9]* of [0-9]* configurations committed")
  t0=$(now)
  "$hapmoe" plan "${args[@]}" --out "$work/k.h5" --plan-json "$work/k.json" --resume >/dev/null \
    2>"$work/k.err" || fail "the last --resume: $(cat "$work/k.err")"
  third=$(echo "$(now) - $t0" | bc)
  diff <(plan_doc "$work/full.json") <(plan_doc "$work/k.json") >/dev/null || fail "--plan-json differs"
  diff <(archive_text "$work/full.h5") <(archive_text "$work/k.h5") >/dev/null ||
    fail "the archive differs"
  total=$(echo "$first + $second + $third" | bc)
  printf "repeat %d: uninterrupted %.1f s; killed at %.1f s (%s, exit after %.2f s), resumed and killed at %.1f s (%s, exit after %.2f s), resumed to the end in %.1f s; %.1f s in all (%+.1f %%); identical\n" \
    "$i" "$full" "$first" "$held1" "$first_stop" "$second" "$held2" "$second_stop" "$third" \
    "$total" "$(echo "100 * ($total / $full - 1)" | bc -l)"
  echo "$full" >>"$work/full.txt"
  echo "$total" >>"$work/total.txt"
  echo "$first_stop" >>"$work/stop.txt"
  echo "$second_stop" >>"$work/stop.txt"
done
size=$(stat -c %s "$work/k.h5")
t0=$(now)
"$hapmoe" plan "${args[@]}" --out "$work/k.h5" --resume >/dev/null 2>&1 || fail "resume of a finished archive"
rewrite=$(echo "$(now) - $t0" | bc)
printf "median of %d: uninterrupted %.1f s, killed twice and resumed %.1f s in all; signal to exit %.2f s (median of %d); archive %d bytes, --resume of the finished archive (all restored, one commit) %.2f s\n" \
  "$repeats" "$(median <"$work/full.txt")" "$(median <"$work/total.txt")" "$(median <"$work/stop.txt")" \
  "$((2 * repeats))" "$size" "$rewrite"
