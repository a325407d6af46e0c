#!/bin/bash
# Checkpoints and --resume inside one `plan` search (issue 23, item 2;
# docs/archive.md, "Checkpoints of one search"). An exhaustive search
# (--no-bound, pruning none: 1,248 configurations, about 0.3 s on one core)
# is stopped by SIGTERM at ~30 %, resumed and stopped again at ~70 %, then
# resumed to its end: the plans and statistics (--plan-json without the
# "run" object and the wall time; the archive's plans, per-configuration
# rows without rank and seconds, totals without seconds, resume data)
# equal an uninterrupted run's. The SIGTERMs come from the test hook
# HAPMOE_TEST_SIGNAL=K[@R] (rank R signals itself before its K-th unit),
# so nothing here depends on timing. Also: a SIGKILL inside a commit
# (HAPMOE_TEST_CRASH=commit@K) leaves the previous checkpoint, which
# resumes; two signals inside a commit; the bounded search stopped and
# resumed; over 2 MPI ranks with the signal reaching one rank only; and
# the refusals (exit 2, one line naming what differs).
#   plan_resume.sh HAPMOE [MPIEXEC]
set -uo pipefail
# mpiexec forwards its stdin to rank 0 (sweep_signals.sh says why it is closed).
exec <&-
hapmoe=$1
mpiexec=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
space=(--model mixtral-s --cluster paper:32-2 --prune none)
exhaustive=("${space[@]}" --no-bound)

# plan_doc, records, archive_text.
source "$(dirname "$0")/search_compare.sh"
same() {  # LABEL REFERENCE.h5 REFERENCE.json RESUMED.h5 RESUMED.json
  diff <(plan_doc "$3") <(plan_doc "$5") >"$work/diff" || fail "$1: --plan-json differs: $(head -20 "$work/diff")"
  diff <(archive_text "$2") <(archive_text "$4") >"$work/diff" ||
    fail "$1: the archive differs: $(head -20 "$work/diff")"
  echo "ok $1: the same plans and statistics as the uninterrupted run"
}
stopped() {  # LABEL CODE ERR: exit 4 and the line saying how much is committed
  [[ $2 == 4 ]] || fail "$1: exit $2, expected 4: $(cat "$3")"
  grep -q "^hapmoe plan: stopped by SIGTERM/SIGUSR1: [0-9]* of 1248 configurations committed to .*--resume" "$3" ||
    fail "$1: no line saying what is committed: $(cat "$3")"
  grep "^hapmoe plan: stopped" "$3" | grep -o "[0-9]* of 1248 configurations committed"
}

# The uninterrupted run.
"$hapmoe" plan "${exhaustive[@]}" --threads 1 --out "$work/full.h5" --plan-json "$work/full.json" \
  >/dev/null 2>"$work/full.err" || fail "uninterrupted run: $(cat "$work/full.err")"

# 1. SIGTERM at ~30 %, --resume, SIGTERM at ~70 %, --resume (on 2 threads).
HAPMOE_TEST_SIGNAL=375 "$hapmoe" plan "${exhaustive[@]}" --threads 1 --out "$work/a.h5" \
  --plan-json "$work/a.json" >/dev/null 2>"$work/a.err"
held=$(stopped "SIGTERM at 30 %" $? "$work/a.err") || fail "$held"
[[ $held == "37"[0-9]" of 1248"* ]] || fail "SIGTERM at 30 %: committed $held, expected about 375"
[[ ! -e $work/a.json ]] || fail "a stopped run wrote --plan-json"
"$hapmoe" show "$work/a.h5" >"$work/show.txt" || fail "show of the checkpoint: $(cat "$work/show.txt")"
grep -q "not proven optimal\|NOT PROVEN OPTIMAL" "$work/show.txt" ||
  fail "show does not say the checkpoint is not the end: $(cat "$work/show.txt")"
echo "ok SIGTERM at 30 %: exit 4, $held"
HAPMOE_TEST_SIGNAL=500 "$hapmoe" plan "${exhaustive[@]}" --threads 1 --out "$work/a.h5" \
  --plan-json "$work/a.json" --resume >/dev/null 2>"$work/a.err"
held=$(stopped "SIGTERM at 70 % of a resumed run" $? "$work/a.err") || fail "$held"
grep -q "resuming .*a.h5: 37[0-9] of 1248 configurations committed" "$work/a.err" ||
  fail "the resumed run does not say what it resumes: $(cat "$work/a.err")"
echo "ok SIGTERM at 70 % of a resumed run: exit 4, $held"
"$hapmoe" plan "${exhaustive[@]}" --threads 2 --out "$work/a.h5" --plan-json "$work/a.json" \
  --resume >/dev/null 2>"$work/a.err" || fail "the last --resume: $(cat "$work/a.err")"
same "killed at 30 % and 70 %, resumed (1, 1, 2 threads)" "$work/full.h5" "$work/full.json" \
  "$work/a.h5" "$work/a.json"

# 2. SIGKILL inside the third commit (one every segment): the archive is
# the second checkpoint, and it resumes.
{ HAPMOE_TEST_CRASH=commit@3 "$hapmoe" plan "${exhaustive[@]}" --threads 1 --checkpoint-every 0 \
  --out "$work/k.h5" >/dev/null 2>&1; } 2>/dev/null  # (bash's "Killed" line)
code=$?
[[ $code == 137 ]] || fail "SIGKILL in a commit: exit $code, expected 137"
ls -a "$work" | grep -q '\.tmp\.' || fail "SIGKILL in a commit: no temporary file left (was it inside?)"
"$hapmoe" show "$work/k.h5" >"$work/show.txt" || fail "show after the SIGKILL: $(cat "$work/show.txt")"
grep -q "checkpoint" "$work/show.txt" || fail "show does not call it a checkpoint: $(cat "$work/show.txt")"
"$hapmoe" plan "${exhaustive[@]}" --threads 1 --out "$work/k.h5" --plan-json "$work/k.json" \
  --resume >/dev/null 2>"$work/k.err" || fail "--resume after SIGKILL: $(cat "$work/k.err")"
ls -a "$work" | grep -q '\.tmp\.' && fail "temporary files left after the resumed run: $(ls -a "$work")"
same "SIGKILL inside a commit, resumed" "$work/full.h5" "$work/full.json" "$work/k.h5" "$work/k.json"

# 3. Two SIGTERMs inside the second commit: it completes, exit 4 with a line.
HAPMOE_TEST_CRASH=signals@2 "$hapmoe" plan "${exhaustive[@]}" --threads 1 --checkpoint-every 0 \
  --out "$work/s.h5" >/dev/null 2>"$work/s.err"
code=$?
[[ $code == 4 ]] || fail "two signals in a commit: exit $code: $(cat "$work/s.err")"
grep -q "^hapmoe plan: stopped by a second SIGTERM/SIGUSR1, the units in flight abandoned: [0-9]* of 1248 configurations committed to .*--resume" \
  "$work/s.err" || fail "two signals in a commit: no line: $(cat "$work/s.err")"
"$hapmoe" plan "${exhaustive[@]}" --threads 1 --out "$work/s.h5" --plan-json "$work/s.json" \
  --resume >/dev/null 2>"$work/s.err" || fail "--resume after two signals: $(cat "$work/s.err")"
same "two SIGTERMs inside a commit, resumed" "$work/full.h5" "$work/full.json" "$work/s.h5" "$work/s.json"

# 4. The bounded search (rounds of 2): stopped in rounds 1 and 5 (the
# unfinished round is dropped), resumed.
bounded=(--model mixtral-l --cluster paper:24-3 --round 2)
"$hapmoe" plan "${bounded[@]}" --threads 1 --out "$work/bf.h5" --plan-json "$work/bf.json" \
  >/dev/null 2>"$work/b.err" || fail "bounded, uninterrupted: $(cat "$work/b.err")"
HAPMOE_TEST_SIGNAL=2 "$hapmoe" plan "${bounded[@]}" --threads 1 --out "$work/b.h5" \
  --plan-json "$work/b.json" >/dev/null 2>"$work/b.err"
[[ $? == 4 ]] || fail "bounded, SIGTERM in round 1: $(cat "$work/b.err")"
HAPMOE_TEST_SIGNAL=9 "$hapmoe" plan "${bounded[@]}" --threads 1 --out "$work/b.h5" \
  --plan-json "$work/b.json" --resume >/dev/null 2>"$work/b.err"
[[ $? == 4 ]] || fail "bounded, SIGTERM in a resumed run: $(cat "$work/b.err")"
"$hapmoe" plan "${bounded[@]}" --threads 2 --out "$work/b.h5" --plan-json "$work/b.json" \
  --resume >/dev/null 2>"$work/b.err" || fail "bounded, --resume: $(cat "$work/b.err")"
same "bounded search stopped twice, resumed" "$work/bf.h5" "$work/bf.json" "$work/b.h5" "$work/b.json"

# 5. Over 2 ranks (split: --split-above 0): the signal reaches rank 0
# only, then rank 1 only; the ranks agree, and the result is the
# uninterrupted one-rank run's.
if [[ -n $mpiexec ]]; then
  HAPMOE_TEST_SIGNAL=120@0 "$mpiexec" -n 2 "$hapmoe" plan "${exhaustive[@]}" --threads 1 \
    --checkpoint-every 0 --split-above 0 --out "$work/m.h5" --plan-json "$work/m.json" >/dev/null 2>"$work/m.err" <&-
  held=$(stopped "2 ranks, SIGTERM to rank 0" $? "$work/m.err") || fail "$held"
  echo "ok 2 ranks, SIGTERM to rank 0 only: exit 4, $held"
  HAPMOE_TEST_SIGNAL=40@1 "$mpiexec" -n 2 "$hapmoe" plan "${exhaustive[@]}" --threads 1 \
    --checkpoint-every 0 --split-above 0 --out "$work/m.h5" --plan-json "$work/m.json" --resume >/dev/null \
    2>"$work/m.err" <&-
  held=$(stopped "2 ranks, SIGTERM to rank 1" $? "$work/m.err") || fail "$held"
  echo "ok 2 ranks, SIGTERM to rank 1 only: exit 4, $held"
  "$mpiexec" -n 2 "$hapmoe" plan "${exhaustive[@]}" --threads 1 --split-above 0 \
    --out "$work/m.h5" --plan-json "$work/m.json" --resume >/dev/null 2>"$work/m.err" <&- ||
    fail "2 ranks, --resume: $(cat "$work/m.err")"
  same "2 ranks, stopped twice, resumed" "$work/full.h5" "$work/full.json" "$work/m.h5" "$work/m.json"
fi

# 6. Refusals: exit 2 and one line naming what is wrong.
refused() {  # LABEL PATTERN ARGS...
  local label=$1 pattern=$2
  shift 2
  "$hapmoe" plan "$@" >/dev/null 2>"$work/r.err"
  local code=$?
  [[ $code == 2 ]] || fail "$label: exit $code, expected 2: $(cat "$work/r.err")"
  [[ $(wc -l <"$work/r.err") == 1 ]] || fail "$label: not one line: $(cat "$work/r.err")"
  grep -q -- "$pattern" "$work/r.err" || fail "$label: the line does not say '$pattern': $(cat "$work/r.err")"
  echo "ok refused, $label: $(cat "$work/r.err")"
}
cp "$work/full.h5" "$work/other.h5"
refused "--resume without --out" "--resume: needs --out" "${exhaustive[@]}" --resume
refused "another cluster" "another cluster" --model mixtral-s --cluster paper:32-1 --prune none \
  --no-bound --out "$work/other.h5" --resume
refused "another model" "another model" --model mixtral-l --cluster paper:32-2 --prune none \
  --no-bound --out "$work/other.h5" --resume
refused "another option" "another prune" --model mixtral-s --cluster paper:32-2 --no-bound \
  --out "$work/other.h5" --resume
refused "the bound on" "another bound" "${space[@]}" --out "$work/other.h5" --resume
"$hapmoe" sweep data/sweeps/small.json --out "$work/sweep.h5" --threads 1 >/dev/null 2>&1 ||
  fail "the sweep for the refusal did not run"
refused "a sweep archive" "is a \`sweep\` archive" "${exhaustive[@]}" --out "$work/sweep.h5" --resume
"$hapmoe" plan "${exhaustive[@]}" --time-limit 0.1 --out "$work/tl.h5" >/dev/null 2>&1
refused "an archive a time limit stopped" "stopped by the time limit" "${exhaustive[@]}" \
  --out "$work/tl.h5" --resume
refused "with --bruteforce" "hapmoe's own search only" "${exhaustive[@]}" --bruteforce \
  --out "$work/other.h5" --resume
echo "not HDF5" >"$work/text.h5"
refused "not an archive" "not an HDF5 file" "${exhaustive[@]}" --out "$work/text.h5" --resume

# 7. --resume without the archive starts afresh (a batch script may always pass it).
"$hapmoe" plan "${exhaustive[@]}" --threads 1 --out "$work/new.h5" --plan-json "$work/new.json" \
  --resume >/dev/null 2>"$work/new.err" || fail "--resume without an archive: $(cat "$work/new.err")"
grep -q "does not exist: starting afresh" "$work/new.err" || fail "no line: $(cat "$work/new.err")"
same "--resume without an archive" "$work/full.h5" "$work/full.json" "$work/new.h5" "$work/new.json"
echo "PASS"
