#!/bin/bash
# What 3 ranks cost the paper's 24 cases over 1 rank (issue 23, item 4):
# whole `mpiexec -n R hapmoe plan` processes, one thread each, the two
# interleaved, R runs of each (medians). The MPI start-up is the same
# difference for a plan whose search takes under a millisecond (Mixtral-S
# on paper:16-3-h, the default space). Every case's output must be the
# same on 1 and 3 ranks (wall times aside).
#
#   bench/ranks_overhead.sh [HAPMOE] [RUNS] [SPACE]
#   (defaults: build/hapmoe, 3, all; SPACE "none" for the default space)
set -euo pipefail
bin=${1:-build/hapmoe}
runs=${2:-3}
space=${3:-all}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Seconds of one whole run: mpiexec -n $1, then the plan's arguments.
seconds() {
  local n=$1
  shift
  local s e
  s=$(date +%s%N)
  mpiexec -n "$n" "$bin" plan --threads 1 "$@" >"$tmp/out.$n"
  e=$(date +%s%N)
  echo "scale=4; ($e - $s) / 1000000000" | bc
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# "one three": the medians of 1 and 3 ranks, interleaved.
pair() {
  local ones="" threes=""
  for ((k = 0; k < runs; ++k)); do
    ones="$ones $(seconds 1 "$@")"
    threes="$threes $(seconds 3 "$@")"
  done
  echo "$(echo "$ones" | median) $(echo "$threes" | median)"
}

read -r a b <<<"$(pair --model mixtral-s --cluster paper:16-3-h)"
start=$(echo "scale=4; $b - $a" | bc)
echo "MPI start-up (3 ranks - 1 rank, mixtral-s paper:16-3-h default space): $start s"
echo "space: $space, $runs runs each, medians"
printf "%-10s %-7s %8s %8s %8s %13s  %s\n" model cluster 1_rank 3_ranks over over-start output
worst=-1
for m in mixtral-s mixtral-l; do
  for c in 16-1-h 16-2-h 16-3-h 16-1 16-2 16-3 24-1 24-2 24-3 32-1 32-2 32-3; do
    args=(--model "$m" --cluster "paper:$c")
    [ "$space" != none ] && args+=(--space "$space")
    read -r a b <<<"$(pair "${args[@]}")"
    same=same
    diff <(grep -v "wall time" "$tmp/out.1") <(grep -v "wall time" "$tmp/out.3") >/dev/null ||
      same=DIFFERS
    over=$(echo "scale=4; $b - $a" | bc)
    beyond=$(echo "scale=4; $over - $start" | bc)
    worst=$(echo "if ($beyond > $worst) $beyond else $worst" | bc)
    printf "%-10s %-7s %8.3f %8.3f %8.3f %13.3f  %s\n" "$m" "$c" "$a" "$b" "$over" "$beyond" "$same"
  done
done
echo "largest overhead beyond the MPI start-up: $worst s"
