#!/bin/bash
# The paper's evaluation (issue 22) with one command: the sweep
# bench/paper/paper.json into one archive, then bench/paper/report.py prints
# every table (stdout) and draws the figures into bench/paper/figures/.
#   bench/paper/run.sh [HAPMOE] [ARCHIVE]   (defaults: build/hapmoe, build/paper_eval.h5)
# Resumable: run it again after a kill and it finishes what is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hapmoe=${1:-build/hapmoe}
archive=${2:-build/paper_eval.h5}
if [[ ! -x $hapmoe ]]; then
  echo "bench/paper/run.sh: $hapmoe: no hapmoe binary there (build it, or pass its path)" >&2
  exit 2
fi
if [[ ! -d $(dirname "$archive") ]]; then
  echo "bench/paper/run.sh: $archive: its directory does not exist" >&2
  exit 2
fi
# The sweep's own summary (one line per case) goes to stderr, the tables to stdout.
"$hapmoe" sweep "$here/paper.json" --out "$archive" --resume --checkpoint-every 30 --threads 1 >&2
/usr/bin/python3 "$here/report.py" "$archive" --figures "$here/figures"
