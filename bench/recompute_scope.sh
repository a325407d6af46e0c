#!/bin/bash
# Recompute scope (plan --recompute-scope, docs/search.md) on the paper's
# 24 cases. Per case: the per-stage plan's predicted latency, the same
# plan as stock Megatron-LM launches it (one recompute setting: the
# launcher's closest uniform setting), the job-wide search's plan (which
# the launcher runs as predicted), and the wall time of each whole process
# on one thread. Usage: bench/recompute_scope.sh [HAPMOE] (default
# build/hapmoe).
set -euo pipefail
hapmoe=${1:-build/hapmoe}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# "Predicted iteration latency: 26.400 s as launched ..." -> seconds.
launched() { sed -n 's/^# Predicted iteration latency: \([0-9.]*\) \(m\?s\).*/\1 \2/p' "$1" |
  awk '{print ($2 == "ms" ? $1 / 1000 : $1)}'; }
predicted() { awk '/^iteration latency/ {print ($4 == "ms" ? $3 / 1000 : $3); exit}' "$1"; }
wall() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1 || true; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN {printf "%.3f", e - s}'; }
echo "| case | per-stage predicted | per-stage launched | job-wide (launched = predicted) | job-wide vs per-stage launched | setting | wall stage s | wall job s |"
echo "|---|---:|---:|---:|---:|---|---:|---:|"
for m in mixtral-s mixtral-l; do
  for c in 16-1-h 16-2-h 16-3-h 16-1 16-2 16-3 24-1 24-2 24-3 32-1 32-2 32-3; do
    args=(plan --model $m --cluster paper:$c --threads 1 --progress-every 0)
    # Mixtral-L on the smallest clusters fits only with optimizer offload.
    "$hapmoe" "${args[@]}" > "$work/probe" 2>&1 || args+=(--space offload)
    ws=$(wall "$hapmoe" "${args[@]}" --recompute-scope stage)
    wj=$(wall "$hapmoe" "${args[@]}" --recompute-scope job)
    rm -f "$work"/[sj].sh
    "$hapmoe" "${args[@]}" --recompute-scope stage --launcher "$work/s.sh" > "$work/s.txt" 2>&1 || true
    "$hapmoe" "${args[@]}" --recompute-scope job --launcher "$work/j.sh" > "$work/j.txt" 2>&1 || true
    ps=$(predicted "$work/s.txt"); js=$(predicted "$work/j.txt")
    setting=$(sed -n 's/.*one Megatron-LM setting for every stage, best \([^(]*\) (.*/\1/p' "$work/j.txt")
    name="$m $c"
    if [[ ${args[-1]} == offload ]]; then name+=" (offload)"; fi
    if [[ ! -f "$work/s.sh" || ! -f "$work/j.sh" ]]; then
      # The launcher places stages on whole nodes; some plans cannot be.
      echo "| $name | $ps | (no launcher) | $js | | ${setting% } | $ws | $wj |"
      continue
    fi
    ls=$(launched "$work/s.sh"); jl=$(launched "$work/j.sh")
    [[ "$jl" == "$js" ]] || { echo "job-wide plan launched at $jl s, predicted $js s: $name" >&2; exit 1; }
    echo "| $name | $ps | $ls | $js | $(awk -v a="$js" -v b="$ls" 'BEGIN {printf "%+.1f %%", 100 * (a / b - 1)}') | ${setting% } | $ws | $wj |"
  done
done
