#!/bin/bash
# A sweep killed at seeded points, then resumed, ends with the same archive
# as an uninterrupted run (timings and provenance aside), and the archive is
# valid after every kill (issue 5):
#   1. SIGKILL inside a commit (after the temporary file, before the rename);
#   2. SIGTERM: the case in flight is finished and committed, exit code 4;
#   3. SIGKILL after seeded random delays, --resume each time, until done.
#   sweep_kill.sh HAPMOE SWEEP SEED [MPIEXEC [SPREAD]]
# With MPIEXEC, step 2 runs over 2 ranks (with --spread SPREAD if given) and
# the comparison ignores which rank searched what.
set -uo pipefail
# mpiexec forwards its stdin to rank 0. Under load, Hydra 4.0.2 fails
# forwarding even /dev/null ("process reading stdin too slowly; can't keep
# up", exit 141: 5 of 5 runs with both cores busy, 0 of 5 with stdin
# closed). Nothing to read, so stdin is closed (and again on each command
# run with `&`, whose stdin bash otherwise sets to /dev/null).
exec <&-
hapmoe=$1
sweep=$2
seed=$3
mpiexec=${4:-}
spread=()
[[ -n ${5:-} ]] && spread=(--spread "$5")
tool="$(dirname "$0")/archive_tool.py"
/usr/bin/python3 -c 'import h5py' 2>/dev/null || { echo "SKIP: no python3-h5py"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
valid() {  # the archive, if there is one yet, is a whole hapmoe archive
  [[ ! -e $work/run.h5 ]] && return 0
  h5dump -H "$work/run.h5" >/dev/null || fail "h5dump cannot read the archive after $1"
  "$hapmoe" show "$work/run.h5" >"$work/show.txt" || fail "hapmoe show fails after $1"
}
committed() { grep -o '[0-9]* of [0-9]* cases done' "$work/show.txt" || echo "no archive yet"; }
layout=()
[[ -n $mpiexec ]] && layout=(--ignore-layout)

"$hapmoe" sweep "$sweep" --out "$work/ref.h5" --threads 1 >/dev/null 2>"$work/ref.err" ||
  fail "uninterrupted run: $(cat "$work/ref.err")"

# 1. Killed inside its second commit.
HAPMOE_TEST_CRASH=commit@2 "$hapmoe" sweep "$sweep" --out "$work/run.h5" --resume --threads 1 \
  >/dev/null 2>&1
code=$?
[[ $code == 137 ]] || fail "commit crash: exit $code, expected 137 (SIGKILL)"
valid "a kill inside a commit"
/usr/bin/python3 "$tool" check "$work/run.h5" >/dev/null || fail "h5py: invalid after the crash"
[[ $(committed) == "1 of "* ]] || fail "after a kill in the second commit: $(committed), expected 1"
echo "ok: SIGKILL inside the second commit leaves the first commit: $(committed)"

# 2. SIGTERM: finishes the case in flight, exit 4.
if [[ -n $mpiexec ]]; then
  "$mpiexec" -n 2 "$hapmoe" sweep "$sweep" --out "$work/run.h5" --resume --threads 1 \
    "${spread[@]}" >/dev/null 2>"$work/term.err" <&- &
else
  "$hapmoe" sweep "$sweep" --out "$work/run.h5" --resume --threads 1 >/dev/null \
    2>"$work/term.err" <&- &
fi
pid=$!
for _ in $(seq 100); do  # until a case is done in this run
  grep -q "cases," "$work/term.err" 2>/dev/null && break
  sleep 0.02
done
kill -TERM $pid
wait $pid
code=$?
[[ $code == 4 || $code == 0 ]] || fail "SIGTERM: exit $code, expected 4: $(cat "$work/term.err")"
valid "SIGTERM"
echo "ok: SIGTERM -> exit $code, $(grep -o '[0-9]* of [0-9]* cases committed' "$work/term.err")"

# 3. SIGKILL at five seeded points (each resumed run killed after a random
# delay), then one resumed run to the end.
RANDOM=$seed
for attempt in 1 2 3 4 5; do
  delay=$(printf "0.%03d" $((RANDOM % 300 + 50)))
  "$hapmoe" sweep "$sweep" --out "$work/run.h5" --resume --threads 1 >/dev/null 2>&1 <&- &
  pid=$!
  sleep "$delay"
  kill -KILL $pid 2>/dev/null
  wait $pid
  code=$?
  valid "SIGKILL after $delay s"
  [[ $code == 137 || $code == 0 ]] || fail "attempt $attempt: exit $code"
  echo "exit $code after $delay s: $(committed)"
done
"$hapmoe" sweep "$sweep" --out "$work/run.h5" --resume --threads 1 >/dev/null 2>"$work/last.err" ||
  fail "the last resumed run: $(cat "$work/last.err")"
valid "the last run"
echo "ok: finished: $(committed)"

/usr/bin/python3 "$tool" check "$work/run.h5" >/dev/null || fail "h5py: invalid at the end"
/usr/bin/python3 "$tool" dump "${layout[@]}" "$work/ref.h5" >"$work/ref.txt" || fail "dump ref"
/usr/bin/python3 "$tool" dump "${layout[@]}" "$work/run.h5" >"$work/run.txt" || fail "dump run"
if ! cmp -s "$work/ref.txt" "$work/run.txt"; then
  diff "$work/ref.txt" "$work/run.txt" | head -20
  fail "the resumed archive differs from the uninterrupted run"
fi
ls -a "$work" | grep -q '\.tmp\.' && fail "temporary files left: $(ls -a "$work")"
echo "ok: identical to the uninterrupted run ($(wc -l <"$work/ref.txt") lines compared)"
