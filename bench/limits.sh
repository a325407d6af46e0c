#!/usr/bin/env bash
# bench/limits.sh [HAPMOE] [RUNS]: how closely `hapmoe plan` holds
# --time-limit and --max-memory on a 1,000-layer model (issue 21, item 5;
# bench/README.md, "Limits"). The model is tests/data/models/small-moe.json
# with num_layers 1000, on paper:16-1 (412 configurations, PP up to 16, two
# device types): a DP level of it takes seconds. Prints, per case, the
# median of RUNS runs (default 3) of the wall time (`/usr/bin/time %e`)
# against the time limit and of the peak resident set (%M) against the
# memory limit, and the exit codes.
set -euo pipefail
hapmoe=${1:-build/hapmoe}
runs=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed 's/"num_layers": 12/"num_layers": 1000/' "$here/../tests/data/models/small-moe.json" >"$tmp/m.json"
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf '%-24s %10s %10s %12s %12s %s\n' case limit wall_s limit_MiB peak_MiB exits
run_case() {  # NAME TIME_LIMIT MEMORY_MiB
  local name=$1 t=$2 mem=$3 walls=() peaks=() codes=()
  local args=(plan --model "$tmp/m.json" --cluster paper:16-1 --time-limit "$t")
  [[ $mem != - ]] && args+=(--max-memory "${mem}M")
  for _ in $(seq 1 "$runs"); do
    local code=0
    /usr/bin/time -f '%e %M' -o "$tmp/t" "$hapmoe" "${args[@]}" >/dev/null 2>&1 || code=$?
    read -r w m < <(tail -n 1 "$tmp/t")
    walls+=("$w")
    peaks+=("$((m / 1024))")
    codes+=("$code")
  done
  printf '%-24s %10s %10s %12s %12s %s\n' "$name" "$t" \
    "$(printf '%s\n' "${walls[@]}" | median)" "$mem" \
    "$(printf '%s\n' "${peaks[@]}" | median)" "${codes[*]}"
}
run_case time_10s 10 -
run_case memory_200MiB 60 200
run_case memory_400MiB 60 400
