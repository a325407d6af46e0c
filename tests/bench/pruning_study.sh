#!/bin/bash
# bench/pruning_study.py on a small sweep: the tables come out, with the
# gap of every pruning set against `prune none` and the uniform ratio.
#   pruning_study.sh HAPMOE SOURCE_DIR
set -euo pipefail
hapmoe=$1
src=$2
/usr/bin/python3 -c "import h5py, numpy" 2>/dev/null || { echo "h5py missing: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/s.json" <<'JSON'
{"defaults": {"top_k": 1},
 "product": [{"model": "mixtral-s", "cluster": ["paper:16-1", "paper:32-2"],
              "prune": ["none", "lb", "all"]},
             {"model": "mixtral-s", "cluster": ["paper:16-1", "paper:32-2"], "eta": [0.003]},
             {"model": "mixtral-s", "cluster": ["paper:16-1", "paper:32-2"], "uniform": true}]}
JSON
"$hapmoe" sweep "$work/s.json" --out "$work/s.h5" --threads 1 2>/dev/null >/dev/null
/usr/bin/python3 "$src/bench/pruning_study.py" "$work/s.h5" --csv "$work/s.csv" > "$work/out.md"
cat "$work/out.md"
fail() { echo "FAIL: $*"; exit 1; }
grep -q "^| none | .* | 1.000 | 1 | 0 | 0.00 % | 0 |$" "$work/out.md" || fail "no 'none' row"
grep -q "^| all | " "$work/out.md" || fail "no 'all' row"
grep -q "^| 0.003 | 2 | " "$work/out.md" || fail "no eta row"
grep -q "^| mixtral-s | paper:32-2 | 4.563 | 4.867 | 1.067 |$" "$work/out.md" ||
  fail "uniform ratio of paper:32-2"
[[ $(wc -l < "$work/s.csv") == 11 ]] || fail "CSV rows"
echo "ok"
