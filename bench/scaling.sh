#!/usr/bin/env bash
# Whole-process wall time and peak memory of `hapmoe plan --model mixtral-s`
# as the cluster grows (16, 32, 1,024 and 4,096 devices), against the
# reference figures of the fastest public heterogeneous planner measured on
# this machine class.
#
#   bench/scaling.sh [HAPMOE_BINARY]     (default: build/hapmoe)
#
# Each size runs once, one after the other, through /usr/bin/time -f "%e %M"
# (elapsed seconds, peak RSS in KiB); wall_ms is the same run timed with
# date +%s%N around /usr/bin/time, for a finer resolution than %e's 10 ms.
# The search is single-threaded.
set -euo pipefail

bin=${1:-build/hapmoe}
if [[ ! -x $bin ]]; then
  echo "scaling.sh: no executable at '$bin' (pass the hapmoe binary as \$1)" >&2
  exit 2
fi
if [[ ! -x /usr/bin/time ]]; then
  echo "scaling.sh: /usr/bin/time is needed (apt-get install time)" >&2
  exit 2
fi

# devices | cluster | reference time (s) | reference note
cases=(
  "16|H800:8,MI300X:8|0.76|ref. is for 32 devices"
  "32|H800:16,MI300X:16|0.76|"
  "1024|H800:512,MI300X:512|1.0|ref. out of 24 GiB on a 50-layer model"
  "4096|H800:2048,MI300X:2048|3.8|"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '# %s plan --model mixtral-s --cluster C  (whole process, one thread)\n' "$bin"
printf '# %s, %s cores\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
  "$(nproc)"
printf '%-8s %-24s %7s %8s %9s %12s %6s %-6s %s\n' devices cluster wall_s wall_ms peak_MiB \
  best_latency ref_s vs_ref note
for c in "${cases[@]}"; do
  IFS='|' read -r devices cluster ref note <<<"$c"
  status=0
  t0=$(date +%s%N)
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" plan --model mixtral-s --cluster "$cluster" \
    --top-k 1 --plan-json "$tmp/plan.json" >"$tmp/out" 2>"$tmp/err" || status=$?
  t1=$(date +%s%N)
  ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) / 1e6 }')
  read -r wall kib <"$tmp/time" || true
  # /usr/bin/time writes "Command exited with non-zero status N" first on failure.
  if [[ $status -ne 0 ]]; then
    wall=$(tail -n1 "$tmp/time" | cut -d' ' -f1)
    kib=$(tail -n1 "$tmp/time" | cut -d' ' -f2)
  fi
  mib=$(awk -v k="$kib" 'BEGIN { printf "%.1f", k / 1024 }')
  latency=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["plans"]; print("%.4f s" % p[0]["latency_s"] if p else "none")' \
    "$tmp/plan.json" 2>/dev/null || echo "exit $status")
  verdict=$(awk -v w="$wall" -v r="$ref" 'BEGIN { print (w < r) ? "PASS" : "MISS" }')
  printf '%-8s %-24s %7s %8s %9s %12s %6s %-6s %s\n' "$devices" "$cluster" "$wall" "$ms" "$mib" \
    "$latency" "$ref" "$verdict" "$note"
done
echo "# PASS: hapmoe's whole-process wall time is below the reference planner's;"
echo "# the reference planner ran out of 24 GiB at 1,024 devices (50-layer model)."
