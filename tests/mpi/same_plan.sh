#!/bin/bash
# The same best plan, top K and statistics for R in {1,2,3} ranks x T in
# {1,2} threads (issue 4): text and --plan-json byte-identical once the
# timing and run-layout fields are removed.
#   [WHOLE=yes|no] [SAYS=TEXT] same_plan.sh MPIEXEC HAPMOE -- <hapmoe plan arguments>
set -euo pipefail
# mpiexec forwards its stdin to rank 0. Under load, Hydra 4.0.2 fails
# forwarding even /dev/null ("process reading stdin too slowly; can't keep
# up", exit 141: 5 of 5 runs with both cores busy, 0 of 5 with stdin
# closed). Nothing to read, so stdin is closed.
exec <&-
mpiexec=$1
hapmoe=$2
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
normalize_json() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc.pop("run", None)
doc["search"].pop("seconds", None)
print(json.dumps(doc, indent=1))
PY
}
for ranks in 1 2 3; do
  for threads in 1 2; do
    tag="r${ranks}t${threads}"
    "$mpiexec" -n "$ranks" "$hapmoe" plan "$@" --threads "$threads" \
      --plan-json "$work/$tag.json" > "$work/$tag.txt"
    grep -v "wall time" "$work/$tag.txt" > "$work/$tag.cmp"
    normalize_json "$work/$tag.json" > "$work/$tag.norm"
    grep -q "on $ranks rank.* x $threads thread" "$work/$tag.txt" ||
      { echo "FAIL: $tag does not report $ranks ranks x $threads threads"; exit 1; }
    # WHOLE=yes|no (optional): whether a search over several ranks ran
    # whole on rank 0 (--split-above), as the wall time line says.
    if [[ $ranks -gt 1 && -n ${WHOLE:-} ]]; then
      said=no
      grep -q "rank 0 searching the whole space" "$work/$tag.txt" && said=yes
      [[ $said == "$WHOLE" ]] || { echo "FAIL: $tag: whole on rank 0: $said, expected $WHOLE"; exit 1; }
    fi
    # SAYS=TEXT (optional): a line the output must hold (what the case is
    # there to exercise).
    if [[ -n ${SAYS:-} ]]; then
      grep -qF -- "$SAYS" "$work/$tag.txt" || { echo "FAIL: $tag does not say \"$SAYS\""; exit 1; }
    fi
    if [[ $tag != r1t1 ]]; then
      cmp -s "$work/r1t1.cmp" "$work/$tag.cmp" ||
        { echo "FAIL: text differs for $tag"; diff "$work/r1t1.cmp" "$work/$tag.cmp"; exit 1; }
      cmp -s "$work/r1t1.norm" "$work/$tag.norm" ||
        { echo "FAIL: JSON differs for $tag"; diff "$work/r1t1.norm" "$work/$tag.norm"; exit 1; }
    fi
    echo "ok $tag: $(grep -m1 '^plan ' "$work/$tag.txt")"
  done
done
