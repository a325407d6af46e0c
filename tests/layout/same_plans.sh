#!/usr/bin/env bash
# same_plans.sh OLD_BINARY NEW_BINARY [OUT_DIR]
# For a change that must not change behaviour (docs/architecture.md): runs
# the paper's 24 cases (Mixtral-S and Mixtral-L on its twelve clusters)
# through `plan --plan-json` with both binaries and compares the exit codes,
# the JSON with every field whose name holds "seconds" aside, and stdout and
# stderr with the wall-time line aside. Exit 0 when all are the same.
set -euo pipefail
old=$1
new=$2
out=${3:-$(mktemp -d)}
clusters=(16-1-h 16-2-h 16-3-h 16-1 16-2 16-3 24-1 24-2 24-3 32-1 32-2 32-3)
for side in old new; do
  bin=${!side}
  mkdir -p "$out/$side"
  for m in mixtral-s mixtral-l; do
    for c in "${clusters[@]}"; do
      set +e
      "$bin" plan --model "$m" --cluster "paper:$c" --plan-json "$out/$side/$m-$c.json" \
        >"$out/$side/$m-$c.out" 2>"$out/$side/$m-$c.err"
      echo "$m $c $?" >>"$out/$side/rc.txt"
      set -e
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if "seconds" not in k}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
def lines(path):
    with open(path) as f:
        return [l for l in f if "wall time" not in l]
bad = []
if open(f"{out}/old/rc.txt").read() != open(f"{out}/new/rc.txt").read():
    bad.append("exit codes")
files = sorted(os.listdir(f"{out}/old"))
identical = 0
for f in files:
    a, b = f"{out}/old/{f}", f"{out}/new/{f}"
    if not os.path.exists(b):
        bad.append(f + " missing")
    elif f.endswith(".json"):
        ta, tb = open(a).read(), open(b).read()
        identical += ta == tb
        if strip(json.loads(ta)) != strip(json.loads(tb)):
            bad.append(f)
    elif f.endswith((".out", ".err")) and lines(a) != lines(b):
        bad.append(f)
jsons = sum(f.endswith(".json") for f in files)
print(f"{jsons} plan JSONs: {identical} byte-identical, {jsons - len([x for x in bad if x.endswith('.json')])} "
      f"identical with the *seconds* fields aside; {len(bad)} differences" + (": " + ", ".join(bad) if bad else ""))
sys.exit(1 if bad else 0)
PY
