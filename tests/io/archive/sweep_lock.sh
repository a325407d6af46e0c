#!/bin/bash
# One run per archive (issue 21): while a sweep writes run.h5, another sweep,
# the same sweep with --resume, `plan --out` and (with MPIEXEC) a sweep over
# 2 ranks given the same --out are refused at once: exit 2, one line naming
# the holder (its pid, host and start), nothing searched; the first sweep
# then ends with all its cases. Before the fix both sweeps ran and exited 0,
# and the file held what the last commit wrote. A lock file left behind
# (by a SIGKILL, or planted with a dead holder's text) does not block the
# next run, nor does another user's (as root, run as nobody), and a FIFO
# at the lock file's name is refused, not waited on.
#   sweep_lock.sh HAPMOE SLOW_SWEEP OTHER_SWEEP [MPIEXEC]
# No timing bounds: the first sweep's lines are waited for (up to 120 s).
set -uo pipefail
# mpiexec forwards its stdin to rank 0. Under load, Hydra 4.0.2 fails
# forwarding even /dev/null ("process reading stdin too slowly; can't keep
# up", exit 141: 5 of 5 runs with both cores busy, 0 of 5 with stdin
# closed). Nothing to read, so stdin is closed (and again on each command
# run with `&`, whose stdin bash otherwise sets to /dev/null).
exec <&-
hapmoe=$1
slow=$2
other=$3
mpiexec=${4:-}
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=background.sh
source "$(dirname "$0")/background.sh"
out=$work/run.h5

# 1. A sweep holds run.h5 while the others try.
"$hapmoe" sweep "$slow" --out "$out" --threads 1 --progress-every 0.5 >"$work/a.out" \
  2>"$work/a.err" <&- &
pid=$!
wait_for "$work/a.err" "running for"
refused() {  # LABEL COMMAND...: exit 2, one line naming the holder, nothing run
  local label=$1
  shift
  "$@" >"$work/b.out" 2>"$work/b.err"
  local code=$?
  kill -0 "$pid" 2>/dev/null || fail "$label: the first sweep ended before the check; is the machine very slow?"
  [[ $code == 2 ]] || fail "$label: exit $code, expected 2 (the first sweep holds $out): $(cat "$work/b.err")"
  [[ $(wc -l <"$work/b.err") == 1 ]] || fail "$label: not one line: $(cat "$work/b.err")"
  grep -qF -- "--out $out: is being written by another run (pid $pid on host $(hostname) since 20" \
    "$work/b.err" || fail "$label: the line does not name the holder: $(cat "$work/b.err")"
  grep -q "cases," "$work/b.err" && fail "$label: ran a case"
  echo "ok $label: $(cat "$work/b.err")"
}
refused "another sweep" "$hapmoe" sweep "$other" --out "$out" --threads 1
refused "the same sweep, --resume" "$hapmoe" sweep "$slow" --out "$out" --resume --threads 1
refused "plan" "$hapmoe" plan --model mixtral-s --cluster paper:16-1 --threads 1 --out "$out"
if [[ -n $mpiexec ]]; then
  refused "a sweep over 2 ranks" "$mpiexec" -n 2 "$hapmoe" sweep "$other" --out "$out" --threads 1
fi
wait "$pid"
code=$?
pid=
[[ $code == 0 ]] || fail "the first sweep: exit $code: $(cat "$work/a.err")"
grep -q "cases done (complete)" "$work/a.out" || fail "the first sweep's archive: $(cat "$work/a.out")"
"$hapmoe" show "$out" | grep -q "sweep $slow: .* cases done (complete)" ||
  fail "the archive is not the first sweep's, complete: $("$hapmoe" show "$out" | head -5)"
[[ -e $out.lock ]] && fail "the lock file is left after a run that ended"
echo "ok: the first sweep ends with all its cases; no lock file left"

# 2. A lock file left behind blocks nobody: one planted with a holder's
# text, one left by a SIGKILL.
echo "pid 1 on host elsewhere since 2026-01-01T00:00:00.000Z" >"$out.lock"
"$hapmoe" plan --model mixtral-s --cluster paper:16-1 --threads 1 --out "$work/p.h5" >/dev/null ||
  fail "plan next to an unrelated lock file"
"$hapmoe" sweep "$slow" --out "$out" --resume --threads 1 >/dev/null 2>"$work/c.err" ||
  fail "a lock file nobody holds blocks the next run: $(cat "$work/c.err")"
"$hapmoe" sweep "$other" --out "$work/k.h5" --threads 1 >/dev/null 2>&1 <&- &
pid=$!
for _ in $(seq 2400); do [[ -s $work/k.h5.lock ]] && break; sleep 0.05; done
[[ -s $work/k.h5.lock ]] || fail "no lock file while a sweep runs"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
pid=
[[ -e $work/k.h5.lock ]] || echo "note: the sweep ended before the SIGKILL"
"$hapmoe" sweep "$other" --out "$work/k.h5" --resume --threads 1 >/dev/null 2>"$work/k.err" ||
  fail "a lock file left by SIGKILL blocks the next run: $(cat "$work/k.err")"
echo "ok: a lock file left behind (planted, or by SIGKILL) blocks no run"

# 3. A FIFO where the lock file goes: refused at once, not opened in a way
# that waits.
mkfifo "$work/f.h5.lock"
"$hapmoe" sweep "$other" --out "$work/f.h5" --threads 1 >/dev/null 2>"$work/f.err"
code=$?
[[ $code == 2 ]] || fail "a FIFO as the lock file: exit $code: $(cat "$work/f.err")"
grep -qF "f.h5.lock is not a regular file" "$work/f.err" || fail "the FIFO: $(cat "$work/f.err")"
[[ ! -e $work/f.h5 ]] || fail "an archive was written beside the FIFO"
echo "ok: $(cat "$work/f.err")"

# 4. Another user's lock file left behind (here root's, mode 0644: this
# user cannot open it for writing) blocks nothing either. Only as root,
# with setpriv to run as nobody.
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
  chmod 0711 "$work"
  mkdir -m 0777 "$work/shared"
  echo "pid 1 on host elsewhere since 2026-01-01T00:00:00.000Z" >"$work/shared/u.h5.lock"
  chmod 0644 "$work/shared/u.h5.lock"
  setpriv --reuid=nobody --regid=nogroup --clear-groups "$hapmoe" plan --model mixtral-s \
    --cluster paper:16-1 --threads 1 --out "$work/shared/u.h5" >/dev/null 2>"$work/u.err" ||
    fail "another user's lock file left behind blocks the run: $(cat "$work/u.err")"
  [[ -e $work/shared/u.h5.lock ]] && fail "the stale lock file of another user is left"
  echo "ok: another user's lock file left behind blocks no run"
fi
