#!/bin/bash
# Two signals in a row leave the documented state (issue 21): exit code 4,
# one line saying the sweep was stopped, how many cases the archive holds
# (or that there is no archive yet) and how to go on, and a valid archive
# with exactly those cases. Before the fix, a second signal outside a
# commit exited 4 with no line (and no archive when no case was committed).
# The points: both signals during the first case (before any commit); both
# inside the first commit, and inside the second of a resumed run
# (HAPMOE_TEST_CRASH=signals@K); SIGTERM then SIGUSR1 as soon as the first
# case is reported (its commit in flight or just done); then --resume
# finishes a sweep stopped twice.
# With MPIEXEC, points 1 and 3 run again over 2 ranks (before the fix, in
# point 3 rank 1 left at once and mpiexec killed rank 0 inside its commit:
# exit 4, no line, no archive). mpiexec (MPICH's Hydra) itself sometimes
# exits 0 after forwarding the signals although the ranks exit 4, as
# sweep_kill.sh also allows, or 9: when rank 0 leaves, Hydra's proxy
# SIGKILLs the ranks still in their grace wait (its auto-cleanup) and
# ORs the statuses it reaped, a killed rank's as 0 or as signal 9
# (0x400 | 9, truncated to 9; CI once, 2026-11-29, and 0 of 20 runs with
# one core busy: 13 exited 4, 7 exited 0). The line and the archive are
# checked all the same.
#   sweep_signals.sh HAPMOE SWEEP [MPIEXEC]
# No timing bounds: each point waits (up to 120 s) for a line of the sweep.
set -uo pipefail
# mpiexec forwards its stdin to rank 0. Under load, Hydra 4.0.2 fails
# forwarding even /dev/null ("process reading stdin too slowly; can't keep
# up", exit 141: 5 of 5 runs with both cores busy, 0 of 5 with stdin
# closed). Nothing to read, so stdin is closed (and again on each command
# run with `&`, whose stdin bash otherwise sets to /dev/null).
exec <&-
hapmoe=$1
sweep=$2
mpiexec=${3:-}
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=background.sh
source "$(dirname "$0")/background.sh"
# check LABEL CODE OUT ERR: the documented state after a stop
check() {
  local label=$1 code=$2 out=$3 err=$4
  [[ $code == 4 || (($code == 0 || $code == 9) && $label == *"ranks"*) ]] ||
    fail "$label: exit $code, expected 4: $(cat "$err")"
  [[ $(grep -c "^hapmoe sweep: stopped" "$err") == 1 ]] ||
    fail "$label: not one line saying the sweep stopped: $(cat "$err")"
  grep "^hapmoe sweep: stopped" "$err" | grep -q -- "--resume" ||
    fail "$label: the line does not say how to go on: $(cat "$err")"
  ls -a "$work" | grep -q '\.tmp\.' && fail "$label: temporary files left: $(ls -a "$work")"
  if grep -q "no case committed yet, no archive written" "$err"; then
    [[ ! -e $out ]] || fail "$label: says no archive, but $out exists"
    echo "ok $label: exit 4, $(grep -o 'no case committed yet' "$err"), no archive"
    return
  fi
  local held
  held=$(grep "^hapmoe sweep: stopped" "$err" | grep -o '[0-9]* of [0-9]* cases committed') ||
    fail "$label: the line says neither how many cases are committed nor that none is"
  h5dump -H "$out" >/dev/null || fail "$label: h5dump cannot read $out"
  "$hapmoe" show "$out" >"$work/show.txt" || fail "$label: hapmoe show fails on $out"
  grep -q "${held% committed} done" "$work/show.txt" ||
    fail "$label: the line says $held, the archive: $(grep 'cases done' "$work/show.txt")"
  echo "ok $label: exit 4, $held, the archive agrees"
}

# 1. Both signals while the first case runs: no archive, and it says so.
# (LAUNCH... is empty, or mpiexec -n 2; SUFFIX names the files.)
# EVERY: the progress period, shorter than the first case (over 2 ranks it
# takes about 0.3 s).
in_first_case() {
  local suffix=$1 label=$2 every=$3
  shift 3
  "$@" "$hapmoe" sweep "$sweep" --out "$work/p1$suffix.h5" --threads 1 --progress-every "$every" \
    >/dev/null 2>"$work/p1$suffix.err" <&- &
  pid=$!
  wait_for "$work/p1$suffix.err" "running for"
  kill -TERM "$pid"
  sleep 0.1
  kill -TERM "$pid"
  wait "$pid"
  local code=$?
  pid=
  check "two SIGTERMs in the first case$label" $code "$work/p1$suffix.h5" "$work/p1$suffix.err"
}
in_first_case "" "" 0.5

# 2. Both signals inside the first commit, then inside the second commit
# of a resumed run: the commit completes, then exit 4.
HAPMOE_TEST_CRASH=signals@1 "$hapmoe" sweep "$sweep" --out "$work/p2.h5" --threads 1 \
  >/dev/null 2>"$work/p2.err"
check "two SIGTERMs inside the first commit" $? "$work/p2.h5" "$work/p2.err"
grep -q "1 of [0-9]* cases committed" "$work/p2.err" || fail "expected 1 case: $(cat "$work/p2.err")"
HAPMOE_TEST_CRASH=signals@2 "$hapmoe" sweep "$sweep" --out "$work/p2.h5" --resume --threads 1 \
  >/dev/null 2>"$work/p2.err"
check "two SIGTERMs inside the second commit of a resumed run" $? "$work/p2.h5" "$work/p2.err"
grep -q "3 of [0-9]* cases committed" "$work/p2.err" || fail "expected 3 cases: $(cat "$work/p2.err")"

# 3. SIGTERM then SIGUSR1 as soon as the first case is reported.
after_first_case() {
  local suffix=$1 label=$2
  shift 2
  "$@" "$hapmoe" sweep "$sweep" --out "$work/p3$suffix.h5" --threads 1 >/dev/null \
    2>"$work/p3$suffix.err" <&- &
  pid=$!
  wait_for "$work/p3$suffix.err" "cases,"
  kill -TERM "$pid"
  kill -USR1 "$pid"
  wait "$pid"
  local code=$?
  pid=
  check "SIGTERM then SIGUSR1 after the first case$label" $code "$work/p3$suffix.h5" \
    "$work/p3$suffix.err"
}
after_first_case "" ""
if [[ -n $mpiexec ]]; then
  in_first_case "_mpi" ", 2 ranks" 0.05 "$mpiexec" -n 2
  after_first_case "_mpi" ", 2 ranks" "$mpiexec" -n 2
fi

# 3b. The signals sent to the ranks themselves (as scancel does), the
# second reaching rank 1 half a second before rank 0. Before the fix rank 1
# exited at once, Hydra killed rank 0 before its second signal came, and
# the line was lost (CI, once in the order mpiexec forwarded them).
second_signal_to_rank_1_first() {
  "$mpiexec" -n 2 "$hapmoe" sweep "$sweep" --out "$work/p4.h5" --threads 1 >/dev/null \
    2>"$work/p4.err" <&- &
  pid=$!
  wait_for "$work/p4.err" "cases,"
  local p r rank0= rank1=
  for p in $(pgrep -f -- "--out $work/p4.h5"); do
    r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^PMI_RANK=//p')
    [[ $r == 0 ]] && rank0=$p
    [[ $r == 1 ]] && rank1=$p
  done
  [[ -n $rank0 && -n $rank1 ]] || fail "rank processes not found (PMI_RANK): $(pgrep -af hapmoe)"
  kill -TERM "$rank0" "$rank1"
  kill -USR1 "$rank1"
  sleep 0.5
  kill -USR1 "$rank0" 2>/dev/null
  wait "$pid"
  local code=$?
  pid=
  check "second signal at rank 1 first, 2 ranks" $code "$work/p4.h5" "$work/p4.err"
}
[[ -n $mpiexec ]] && second_signal_to_rank_1_first

# 4. --resume finishes the sweep the hook stopped twice.
"$hapmoe" sweep "$sweep" --out "$work/p2.h5" --resume --threads 1 >/dev/null 2>"$work/end.err" ||
  fail "--resume: $(cat "$work/end.err")"
"$hapmoe" show "$work/p2.h5" | grep -q "(complete)" || fail "not complete after --resume"
echo "ok: --resume finishes it"
