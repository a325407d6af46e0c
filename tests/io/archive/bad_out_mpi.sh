#!/bin/bash
# A bad --out over 2 MPI ranks (issue 5): rank 0 finds it before the search,
# every rank exits with code 2, one message names --out and the path, and
# nothing is searched.
#   bad_out_mpi.sh MPIEXEC HAPMOE SWEEP
set -uo pipefail
# mpiexec forwards its stdin to rank 0. Under load, Hydra 4.0.2 fails
# forwarding even /dev/null ("process reading stdin too slowly; can't keep
# up", exit 141: 5 of 5 runs with both cores busy, 0 of 5 with stdin
# closed). Nothing to read, so stdin is closed.
exec <&-
mpiexec=$1
hapmoe=$2
sweep=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
echo "not an archive" >"$work/notes.h5"
for out in "$work/missing/run.h5" "$work/notes.h5" /proc/run.h5; do
  for cmd in plan sweep; do
    if [[ $cmd == plan ]]; then
      args=(plan --model mixtral-s --cluster paper:32-2 --threads 1 --out "$out")
    else
      args=(sweep "$sweep" --threads 1 --out "$out")
    fi
    "$mpiexec" -n 2 "$hapmoe" "${args[@]}" >"$work/out.txt" 2>"$work/err.txt"
    code=$?
    [[ $code == 2 ]] || fail "$cmd --out $out: exit $code, expected 2: $(cat "$work/err.txt")"
    [[ $(grep -c "hapmoe $cmd" "$work/err.txt") == 1 ]] || fail "not one message: $(cat "$work/err.txt")"
    grep -qF -- "--out $out" "$work/err.txt" || fail "the message does not name --out $out"
    [[ ! -s $work/out.txt ]] || fail "$cmd searched: $(head -3 "$work/out.txt")"
    grep -q "cases," "$work/err.txt" && fail "$cmd ran a case"
    echo "ok $cmd --out $out: $(cat "$work/err.txt")"
  done
done
[[ $(cat "$work/notes.h5") == "not an archive" ]] || fail "the non-HDF5 file was changed"
