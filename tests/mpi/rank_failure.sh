#!/bin/bash
# One rank fails alone (issue 4): the job ends, with one message naming it and the
# documented exit code, and writes no output file. The CTest timeout bounds
# the time; a hang fails the test.
#   rank_failure.sh MPIEXEC HAPMOE FAULT EXPECTED_EXIT -- <hapmoe plan arguments>
set -uo pipefail
# mpiexec forwards its stdin to rank 0. Under load, Hydra 4.0.2 fails
# forwarding even /dev/null ("process reading stdin too slowly; can't keep
# up", exit 141: 5 of 5 runs with both cores busy, 0 of 5 with stdin
# closed). Nothing to read, so stdin is closed.
exec <&-
mpiexec=$1
hapmoe=$2
fault=$3
expected=$4
shift 5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
HAPMOE_TEST_FAIL=$fault "$mpiexec" -n 2 "$hapmoe" plan "$@" --threads 1 \
  --plan-json "$work/plan.json" > "$work/out.txt" 2> "$work/err.txt"
code=$?
echo "exit $code after $(($(date +%s) - start)) s; stderr:"
cat "$work/err.txt"
[[ $code == "$expected" ]] || { echo "FAIL: expected exit $expected"; exit 1; }
lines=$(grep -c "hapmoe plan" "$work/err.txt")
[[ $lines == 1 ]] || { echo "FAIL: $lines messages, expected one"; exit 1; }
failing=${fault##*@}  # the rank the fault is injected on
grep -q "rank $failing" "$work/err.txt" ||
  { echo "FAIL: the message does not name rank $failing"; exit 1; }
[[ ! -e $work/plan.json ]] || { echo "FAIL: an output file was written"; exit 1; }
echo ok
