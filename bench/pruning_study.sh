#!/bin/bash
# The pruning study (issues 6 and 22): every subset of the three prunings, the
# delta and eta trade-off and uniform layers, as one sweep into one archive,
# run REPEATS times (default 3) for median timings; the plain DP counted at
# 512, 4,096 and 12,288 devices (bench/pruning_count.json, once: the counts
# are exact); then the tables (stdout) and the figures (bench/figures/) of
# bench/README.md.
#   bench/pruning_study.sh [HAPMOE] [ARCHIVE]   (defaults: build/hapmoe, build/pruning_study.h5)
# Resumable: run it again after a kill and it finishes what is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hapmoe=${1:-build/hapmoe}
archive=${2:-build/pruning_study.h5}
repeats=${REPEATS:-3}
archives=()
for ((r = 1; r <= repeats; ++r)); do
  a=$archive
  ((r > 1)) && a=${archive%.h5}.r$r.h5
  "$hapmoe" sweep "$here/pruning_study.json" --out "$a" --resume --checkpoint-every 60 --threads 1
  archives+=("$a")
done
"$hapmoe" sweep "$here/pruning_count.json" --out "${archive%.h5}.count.h5" --resume --threads 2
/usr/bin/python3 "$here/pruning_study.py" "${archives[@]}" --count "${archive%.h5}.count.h5" \
  --figures "$here/figures" --csv "${archive%.h5}.csv"
