#!/usr/bin/env bash
# The calibration benchmark (bench/fidelity/README.md). From the project
# root, after the build:  bash bench/fidelity/run.sh
# Prints predicted against measured per published run and ends with one
# summary line. With shared/calibration beside the project, it first checks
# that the cases match the published table row for row.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=build/bench/bench_fidelity
[[ -x $bin ]] || { echo "bench/fidelity/run.sh: $bin is missing: build first" >&2; exit 2; }
tsv=../shared/calibration/published-runs.tsv
args=()
[[ -f $tsv ]] && args=(--tsv "$tsv")
exec "$bin" bench/fidelity/cases.json "${args[@]}"
