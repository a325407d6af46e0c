#!/bin/bash
# The pruning study (issue 6): every subset of the three prunings, the delta
# and eta trade-off and uniform layers, as one sweep into one archive, then
# the tables (stdout) and the figures (bench/figures/) of bench/README.md.
#   bench/pruning_study.sh [HAPMOE] [ARCHIVE]   (defaults: build/hapmoe, build/pruning_study.h5)
# Resumable: run it again after a kill and it finishes what is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hapmoe=${1:-build/hapmoe}
archive=${2:-build/pruning_study.h5}
"$hapmoe" sweep "$here/pruning_study.json" --out "$archive" --resume --checkpoint-every 60 --threads 1
/usr/bin/python3 "$here/pruning_study.py" "$archive" --figures "$here/figures" \
  --csv "${archive%.h5}.csv"
