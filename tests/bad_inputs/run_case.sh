#!/usr/bin/env bash
# run_case.sh HAPMOE NAME EXPECTED -- ARGS...: one hostile-input case
# (tests/bad_inputs/manifest.txt, docs/testing.md "Hostile inputs").
# Runs `hapmoe ARGS...` with @DIR@ replaced by this folder, @GEN@ by the
# folder of generated inputs (generate.sh, run once per case into a temp
# folder), @ARG:NAME@ by the content of the generated NAME.arg (arguments
# too long for the manifest), @OUT@ by an empty temporary folder for
# output files, @COPY:PATH@ by a temporary copy of tests/PATH (an input
# that a case also names as an output) and @COPIES@ by the folder of those
# copies, and checks that it
#   * exits with code 2 (bad input),
#   * prints exactly one line on stderr, of at most 300 characters
#     (issue 21: echoed values are cut, with their length said),
#     containing EXPECTED,
#   * leaves no file in @OUT@ (no plan JSON, archive or launcher) and
#     every @COPY:PATH@ as it was,
#   * finishes within HAPMOE_BAD_INPUT_SECONDS (default 20) and, unless
#     the binary is built with AddressSanitizer (which reserves terabytes
#     of address space), within 4 GiB of address space (ulimit -v).
set -uo pipefail
hapmoe=$1
name=$2
expected=$3
shift 4  # HAPMOE NAME EXPECTED --
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/gen" "$tmp/out" "$tmp/copies"
fail() {
  echo "bad_input.$name: FAIL: $*"
  echo "  command: hapmoe ${args[*]:0:12}" | cut -c1-300
  echo "  stderr (first 5 lines, 300 chars each):"
  head -n 5 "$tmp/stderr" | cut -c1-300 | sed 's/^/    /'
  exit 1
}
args=()
copied=()
for a in "$@"; do
  while [[ $a =~ @COPY:([^@]+)@ ]]; do
    src=${BASH_REMATCH[1]}
    dst=$tmp/copies/$(basename "$src")
    [[ -e $dst ]] || { cp "$here/../$src" "$dst" && copied+=("$src"); } ||
      fail "cannot copy tests/$src"
    a=${a//"@COPY:$src@"/$dst}
  done
  a=${a//@COPIES@/$tmp/copies}
  a=${a//@DIR@/$here}
  a=${a//@GEN@/$tmp/gen}
  a=${a//@OUT@/$tmp/out}
  args+=("$a")
done
if grep -q -e '@GEN@' -e '@ARG:' <<<"$*"; then
  "$here/generate.sh" "$tmp/gen" || fail "generate.sh failed"
fi
for i in "${!args[@]}"; do
  if [[ ${args[$i]} =~ ^@ARG:([a-z0-9_]+)@$ ]]; then
    args[$i]=$(<"$tmp/gen/${BASH_REMATCH[1]}.arg")
  fi
done

limit=${HAPMOE_BAD_INPUT_SECONDS:-20}
# ASan/TSan reserve terabytes of address space: no ulimit -v there
# (tests/CMakeLists.txt sets HAPMOE_BAD_INPUT_VMEM=0 in sanitizer builds;
# the symbol check catches a hand-made sanitizer build).
sanitized=$({ nm -D "$hapmoe"; nm "$hapmoe"; } 2>/dev/null | grep -c -E '__(a|t)san_init' || true)
vmem=""
if [[ ${HAPMOE_BAD_INPUT_VMEM:-1} != 0 && $sanitized == 0 ]]; then
  vmem="ulimit -v $((4 * 1024 * 1024));"
fi
start=$(date +%s%N)
bash -c "$vmem"' exec timeout -s KILL "$0" "$@"' "$limit" "$hapmoe" "${args[@]}" \
  >"$tmp/stdout" 2>"$tmp/stderr" </dev/null
code=$?
ms=$((($(date +%s%N) - start) / 1000000))
[[ $code == 137 ]] && fail "killed after ${limit} s (or out of memory)"
[[ $code == 2 ]] || fail "exit code $code, expected 2"
lines=$(wc -l <"$tmp/stderr")
[[ $lines == 1 ]] || fail "$lines lines on stderr, expected exactly one"
grep -qF -- "$expected" "$tmp/stderr" || fail "stderr does not contain '$expected'"
chars=$(($(wc -c <"$tmp/stderr") - 1))  # without the newline
((chars <= 300)) || fail "the error line has $chars characters, expected at most 300"
left=$(find "$tmp/out" -mindepth 1 | head -3)
[[ -z $left ]] || fail "left output behind: $left"
for src in "${copied[@]}"; do
  cmp -s "$here/../$src" "$tmp/copies/$(basename "$src")" || fail "the input $src was changed"
done
files=$(find "$tmp/copies" -mindepth 1 | wc -l)
((files == ${#copied[@]})) || fail "left output beside the inputs: $(ls -A "$tmp/copies")"
printf 'bad_input.%s: ok in %d ms: %s\n' "$name" "$ms" "$(cut -c1-200 "$tmp/stderr")"
