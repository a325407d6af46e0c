#!/usr/bin/env bash
# Issue 19's speed targets for the job-wide knobs (`plan --space all`,
# docs/search.md), whole processes:
#   - the paper's 24 cases, one after the other on one thread: <= 1 s in all;
#   - DeepSeek-V3 on H800:4096,MI300X:4096,910B:4096 (global batch 12288):
#     <= 10 s on one core, and >= 1.8x on 1 rank x 2 threads and on 2 ranks
#     x 1 thread.
# Each measurement runs RUNS times (default 3), the large case's three
# layouts interleaved (the machine's speed drifts); the medians are printed
# with each run. The large case's output at 1 x 2 and 2 x 1 must be 1 x 1's
# (but for the lines that name the ranks and threads and the wall time).
# Beside them it prints the machine's ceiling for two workers: the work
# two 1 x 1 runs side by side do, over one alone.
#
#   bench/space_all.sh [HAPMOE_BINARY] [RUNS]     (default: build/hapmoe 3)
#
# Run it alone on the machine: two cores, and the targets are about time.
set -euo pipefail

bin=${1:-build/hapmoe}
runs=${2:-3}
if [[ ! -x $bin ]]; then
  echo "space_all.sh: no executable at '$bin' (pass the hapmoe binary as \$1)" >&2
  exit 2
fi
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
  echo "space_all.sh: RUNS must be a positive whole number, got '$runs'" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# The median of the numbers given.
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

models=(mixtral-s mixtral-l)
clusters=(16-1-h 16-2-h 16-3-h 16-1 16-2 16-3 24-1 24-2 24-3 32-1 32-2 32-3)
totals=() cpus=()
# The 24 processes' CPU time (user + sys, bash's `times` of the children)
# beside the wall time: on a shared machine it moves less.
# Into cpu_now (`times` in this shell: a command substitution is a subshell
# of its own, whose children are none).
children_ms() {
  times > "$work/times"
  cpu_now=$(awk 'NR == 2 {for (i = 1; i <= 2; ++i) {split($i, t, /[ms]/); s += 60 * t[1] + t[2]}
    print int(s * 1000)}' "$work/times")
}
for ((r = 1; r <= runs; ++r)); do
  start=$(now_ms)
  children_ms
  cpu0=$cpu_now
  for m in "${models[@]}"; do
    for c in "${clusters[@]}"; do
      "$bin" plan --model "$m" --cluster "paper:$c" --space all --threads 1 > /dev/null
    done
  done
  totals+=($(($(now_ms) - start)))
  children_ms
  cpus+=($((cpu_now - cpu0)))
done
echo "the paper's 24 cases, --space all, one thread, whole processes (ms): ${totals[*]}; CPU (user + sys, ms): ${cpus[*]}"
total=$(median "${totals[@]}")
cpu=$(median "${cpus[@]}")

large=(plan --model deepseek-v3 --cluster H800:4096,MI300X:4096,910B:4096 --global-batch 12288
  --space all)
have_mpi=1
command -v mpiexec > /dev/null || have_mpi=0
t11=() t12=() t21=() tpair=()
for ((r = 1; r <= runs; ++r)); do
  start=$(now_ms)
  "$bin" "${large[@]}" --threads 1 > "$work/1x1"
  t11+=($(($(now_ms) - start)))
  start=$(now_ms)
  "$bin" "${large[@]}" --threads 2 > "$work/1x2"
  t12+=($(($(now_ms) - start)))
  if ((have_mpi)); then
    start=$(now_ms)
    mpiexec -n 2 "$bin" "${large[@]}" --threads 1 > "$work/2x1"
    t21+=($(($(now_ms) - start)))
  fi
  # The machine's own ceiling for two workers: two 1 x 1 runs side by
  # side, sharing nothing but the machine (bench/README.md, "What two
  # workers can reach on this machine"); the later one to finish counts.
  start=$(now_ms)
  "$bin" "${large[@]}" --threads 1 > /dev/null &
  "$bin" "${large[@]}" --threads 1 > /dev/null
  wait
  tpair+=($(($(now_ms) - start)))
done
same=yes
for layout in 1x2 2x1; do
  [[ -f $work/$layout ]] || continue
  if ! diff -q <(grep -v -e 'wall time' -e ' x .* thread' "$work/1x1") \
    <(grep -v -e 'wall time' -e ' x .* thread' "$work/$layout") > /dev/null; then
    same="no ($layout differs from 1 x 1)"
  fi
done
echo "the large case, --space all (ms): 1 x 1: ${t11[*]}; 1 x 2: ${t12[*]}; 2 x 1: ${t21[*]:-not run (no mpiexec)}; two 1 x 1 side by side: ${tpair[*]}"
m11=$(median "${t11[@]}")
mpair=$(median "${tpair[@]}")
m12=$(median "${t12[@]}")
m21=$( ((have_mpi)) && median "${t21[@]}" || echo 0)

echo
row() { # label, value, unit, target text, met (1/0)
  printf '%-44s %10.2f %s %10s  %s\n' "$1" "$2" "$3" "$4" "$( (($5)) && echo yes || echo no)"
}
printf '%-44s %12s %10s  %s\n' "medians of $runs runs" "measured" "target" "met"
row "the paper's 24 cases, total" "$(awk -v v="$total" 'BEGIN {print v / 1000}')" s "<= 1 s" \
  "$(awk -v v="$total" 'BEGIN {print (v <= 1000)}')"
printf '%-44s %10.2f s\n' "the paper's 24 cases, CPU (user + sys)" "$(awk -v v="$cpu" 'BEGIN {print v / 1000}')"
row "large case, 1 rank x 1 thread" "$(awk -v v="$m11" 'BEGIN {print v / 1000}')" s "<= 10 s" \
  "$(awk -v v="$m11" 'BEGIN {print (v <= 10000)}')"
row "large case, 1 rank x 2 threads (speed-up)" "$(awk -v a="$m11" -v b="$m12" 'BEGIN {print a / b}')" \
  x ">= 1.8 x" "$(awk -v a="$m11" -v b="$m12" 'BEGIN {print (a / b >= 1.8)}')"
if ((have_mpi)); then
  row "large case, 2 ranks x 1 thread (speed-up)" "$(awk -v a="$m11" -v b="$m21" 'BEGIN {print a / b}')" \
    x ">= 1.8 x" "$(awk -v a="$m11" -v b="$m21" 'BEGIN {print (a / b >= 1.8)}')"
fi
printf '%-44s %10.2f x\n' "two 1 x 1 runs side by side (the ceiling)" \
  "$(awk -v a="$m11" -v b="$mpair" 'BEGIN {print 2 * a / b}')"
echo "the large case's output the same at every layout: $same"
