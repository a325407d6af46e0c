# Sourced by sweep_lock.sh and sweep_signals.sh: a command runs in the
# background as $pid, and the scripts wait for the lines it prints.
fail() { echo "FAIL: $*"; exit 1; }
wait_for() {  # FILE PATTERN: until a line of FILE matches, or 120 s
  for _ in $(seq 2400); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  fail "no line '$2' in $1: $(cat "$1")"
}
