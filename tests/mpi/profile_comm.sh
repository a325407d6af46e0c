#!/bin/bash
# profile comm under mpiexec -n 2 (docs/profile.md): the table it writes
# reads back, holds all five primitives with positive times, and time never
# falls as the message grows within one (primitive, link, types, world).
# usage: profile_comm.sh MPIEXEC HAPMOE MODE   (MODE: same-type | cross-type)
set -euo pipefail
# mpiexec forwards its stdin to rank 0. Under load, Hydra 4.0.2 fails
# forwarding even /dev/null ("process reading stdin too slowly; can't keep
# up", exit 141: 5 of 5 runs with both cores busy, 0 of 5 with stdin
# closed). Nothing to read, so stdin is closed.
exec <&-
mpiexec=$1
hapmoe=$2
mode=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(profile comm --out "$tmp/prof.h5" --min-bytes 1K --max-bytes 256K --reps 5 --warmup 2)
if [ "$mode" = cross-type ]; then
  # Two "nodes" with one device type each: the cross-type group.
  HAPMOE_RANKS_PER_NODE=1 "$mpiexec" -n 1 -env HAPMOE_DEVICE_TYPE H800 "$hapmoe" "${common[@]}" : \
    -n 1 -env HAPMOE_DEVICE_TYPE MI300X "$hapmoe" "${common[@]}" > "$tmp/out.txt"
  want_link="cross-type H800/MI300X"
else
  "$mpiexec" -n 2 "$hapmoe" "${common[@]}" --device-type H800 > "$tmp/out.txt"
  want_link="intra-node H800"
fi
cat "$tmp/out.txt"
"$hapmoe" profile show "$tmp/prof.h5" > "$tmp/show.txt"
awk -v link="$want_link" '
  /^  (all-reduce|all-gather|reduce-scatter|all-to-all|p2p) / {
    key = $1 " " $2 " " $3 " " $4
    if ($2 " " $3 != link) { print "unexpected link: " $0; bad = 1 }
    if ($6 <= 0) { print "non-positive time: " $0; bad = 1 }
    if (key in last && $5 > lastb[key] && $6 < last[key]) { print "time falls with size: " $0; bad = 1 }
    last[key] = $6; lastb[key] = $5; prims[$1] = 1; n++
  }
  END {
    np = 0; for (p in prims) np++
    if (np != 5) { print "expected 5 primitives, found " np; bad = 1 }
    if (n != 5 * 5) { print "expected 25 points (5 primitives x 5 sizes), found " n; bad = 1 }
    exit bad
  }' "$tmp/show.txt"
echo "profile comm $mode: ok"
