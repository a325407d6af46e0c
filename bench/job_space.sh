#!/bin/bash
# The job-wide knobs (plan --space all, docs/search.md) on the paper's 24
# cases: per case the best latency without and with them, the knobs chosen
# and the wall time of the whole process on one thread; then, per
# dimension, the geometric-mean gain of the best latency with that
# dimension alone free. Usage: bench/job_space.sh [HAPMOE] (default
# build/hapmoe).
set -euo pipefail
hapmoe=${1:-build/hapmoe}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for m in mixtral-s mixtral-l; do
  for c in 16-1-h 16-2-h 16-3-h 16-1 16-2 16-3 24-1 24-2 24-3 32-1 32-2 32-3; do
    base=$({ "$hapmoe" plan --model $m --cluster paper:$c --threads 1 2>/dev/null || true; } |
      awk '/^iteration latency/ {print $3 $4; exit}')
    start=$(date +%s.%N)
    "$hapmoe" plan --model $m --cluster paper:$c --space all --threads 1 > "$work/out" 2>&1 || true
    end=$(date +%s.%N)
    echo "$m paper:$c base=${base:-none} $(awk -v s="$start" -v e="$end" 'BEGIN {printf "%.2f", e - s}')" >> "$work/cases"
    sed -n '/^job-wide knobs/,$p' "$work/out" | sed "s/^/$m paper:$c | /" >> "$work/jobs"
    awk '/^iteration latency/ {print $3 $4; exit}' "$work/out" >> "$work/best"
  done
done
/usr/bin/python3 - "$work" <<'PY'
import math, re, sys
work = sys.argv[1]
cases = [l.split() for l in open(f"{work}/cases")]
best = [l.strip() for l in open(f"{work}/best")]
jobs = open(f"{work}/jobs").read().splitlines()
def secs(t):
    m = re.match(r"([0-9.]+)(ms|s)", t)
    return None if not m else float(m.group(1)) * (1e-3 if m.group(2) == "ms" else 1.0)
print("| case | given values | --space all | gain | knobs chosen | wall s |")
print("|---|---:|---:|---:|---|---:|")
total = 0.0
for (m, c, base, wall), b in zip(cases, best):
    knobs = next((l.split("best: ")[1] for l in jobs if l.startswith(f"{m} {c} |") and "best:" in l), "")
    base_s = secs(base.split("=")[1])
    best_s = secs(b)
    gain = f"{100 * (best_s / base_s - 1):+.1f} %" if base_s and best_s else "fits only with it"
    print(f"| {m} {c} | {base.split('=')[1]} | {b} | {gain} | {knobs} | {wall} |")
    total += float(wall)
print(f"\ntotal wall time {total:.2f} s (24 processes, one thread each)\n")
dims = {}
for l in jobs:
    parts = l.split("|", 1)[1].split()
    if len(parts) >= 5 and parts[0] in ("micro-batch", "vpp", "sharding", "offload", "dispatcher", "fp8"):
        m = re.search(r"([+-][0-9.]+) %", l)
        if m:
            dims.setdefault(parts[0], []).append(1 + float(m.group(1)) / 100)
print("| dimension alone | cases with a plan both ways | geometric-mean latency vs the given values |")
print("|---|---:|---:|")
for d, r in dims.items():
    g = math.exp(sum(math.log(x) for x in r) / len(r))
    print(f"| {d} | {len(r)} | {100 * (g - 1):+.1f} % |")
PY
