#!/bin/bash
# A rank that stops answering (Hardening II, item 2; docs/parallel.md, "A
# rank that stops answering"). HAPMOE_TEST_FAIL=stop@R stops rank R with
# SIGSTOP just before its search, as a stuck node would. With --time-limit,
# the watchdog ends the job after the limit and its grace: exit 6, one line
# naming the rank, no archive; the progress lines name the rank meanwhile.
#   silent_rank.sh MPIEXEC HAPMOE CASE
#   CASE: plan-rank2 (3 ranks, rank 2 stopped: rank 0 names it),
#         plan-rank0 (2 ranks, rank 0 stopped: rank 1 names it),
#         sweep-rank1 (2 ranks, a sweep, rank 1 stopped)
set -uo pipefail
mpiexec=$1
hapmoe=$2
case=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
inputs=(--model mixtral-s --cluster paper:16-1 --threads 1 --time-limit 1)
case $case in
  plan-rank2)
    ranks=3 stop=2 expected="hapmoe plan: error: rank 2 did not answer"
    args=(plan "${inputs[@]}" --progress-every 2 --out "$work/run.h5")
    ;;
  plan-rank0)
    ranks=2 stop=0 expected="hapmoe plan: error: rank 1: rank 0 did not answer"
    args=(plan "${inputs[@]}" --out "$work/run.h5")
    ;;
  sweep-rank1)
    ranks=2 stop=1 expected="hapmoe sweep: error: rank 1 did not answer"
    printf '{"cases": [{"model": "mixtral-s", "cluster": "paper:16-1"}]}\n' >"$work/sweep.json"
    args=(sweep "$work/sweep.json" --threads 1 --time-limit 1 --progress-every 2
          --out "$work/run.h5")
    ;;
  *) fail "unknown case $case" ;;
esac
# The watchdog gives up 15 s after the limit (rank 0) or up to 30 s after
# (the others); a job still running at 90 s hangs.
HAPMOE_TEST_FAIL=stop@$stop timeout -s KILL 90 "$mpiexec" -n "$ranks" "$hapmoe" "${args[@]}" \
  >"$work/stdout" 2>"$work/stderr" <&-
code=$?
[[ $code != 137 ]] || fail "$case: still running after 90 s: $(tail -3 "$work/stderr")"
[[ $code == 6 ]] || fail "$case: exit $code, expected 6: $(cat "$work/stderr")"
[[ $(grep -c "did not answer" "$work/stderr") == 1 ]] ||
  fail "$case: not one watchdog line: $(cat "$work/stderr")"
grep -qF -- "$expected" "$work/stderr" || fail "$case: the message lacks '$expected'"
grep -qF -- "after --time-limit ran out" "$work/stderr" || fail "$case: the message lacks the limit"
if [[ $stop != 0 ]]; then
  # Rank 0 prints progress; after 10 s of waiting it names the silent rank.
  grep -qE -- "rank $stop has not answered for [0-9.]+ s" "$work/stderr" ||
    fail "$case: no progress line names rank $stop: $(cat "$work/stderr")"
fi
[[ ! -e $work/run.h5 ]] || fail "$case: wrote an archive"
echo "ok $case: $(grep "did not answer" "$work/stderr")"
