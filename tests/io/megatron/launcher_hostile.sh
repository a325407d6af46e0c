#!/usr/bin/env bash
# launcher_hostile.sh HAPMOE MODEL_JSON: hostile names through `plan
# --launcher`, and the launcher run (Hardening II, item 6; docs/testing.md,
# "Hostile inputs").
#   (a) Device, model and host names full of shell syntax but no control
#       characters are accepted; the launcher they produce runs under bash
#       with a stand-in torchrun first in PATH, and nothing but torchrun
#       runs: no file PWNED appears, and torchrun receives the names as
#       plain words.
#   (b) A newline or other control character in a device name, a model
#       name or a host name is refused: exit code 2, one error line naming
#       the file and the field, no launcher. (Before the fix a newline in a
#       device name ended the launcher's comment and `touch PWNED` ran.)
set -uo pipefail
hapmoe=$1
model_json=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() {
  echo "launcher_hostile: FAIL: $*"
  exit 1
}
mkdir bin run
cat >bin/torchrun <<'EOF'
#!/bin/bash
printf '%s\n' "$@" >"$RECORD"
EOF
chmod +x bin/torchrun

# A cluster of two custom device types named $1 and $2 (JSON-escaped by
# the caller), H800s under other names, 8 devices each.
cluster() {
  local dev='"base": "H800"'
  printf '{"name": "c", "devices": {"%s": {%s}, "%s": {%s}},\n' "$1" "$dev" "$2" "$dev"
  printf ' "pools": [{"device": "%s", "count": 8}, {"device": "%s", "count": 8}]}\n' "$1" "$2"
}
# The test model renamed to $1 (JSON-escaped).
model() { sed "s|\"name\": \"small-moe\"|\"name\": \"$1\"|" "$model_json"; }

run_launcher() {
  (cd run && env -u SLURM_NODEID NODE_RANK=0 RECORD="$tmp/record" PATH="$tmp/bin:$PATH" \
    bash ./launch.sh >"$tmp/launch.out" 2>&1)
}

# (a) Shell syntax in every name.
d1='$(touch${IFS}PWNED)'
d2="a';touch\${IFS}PWNED;'b"
cluster "$d1" "${d2}" >a_cluster.json
model 'm$(touch PWNED)`touch PWNED`;touch PWNED' >a_model.json
printf '%s %s\n' "h\$(touch\${IFS}PWNED)" "$d1" "h';touch\${IFS}PWNED;'" "$d2" >a_hosts.txt
"$hapmoe" plan --model a_model.json --cluster a_cluster.json --launcher run/launch.sh \
  --launcher-hosts a_hosts.txt >a.out 2>a.err || fail "(a) hapmoe failed: $(head -c 500 a.err)"
[[ -f run/launch.sh ]] || fail "(a) no launcher written"
run_launcher || fail "(a) the launcher failed: $(head -c 500 launch.out)"
[[ -z $(find "$tmp" -name 'PWNED*') ]] || fail "(a) the launcher ran a command from a name"
[[ -f record ]] || fail "(a) torchrun did not run"
grep -qxF -- "--nnodes" record || fail "(a) torchrun got no --nnodes: $(head -c 300 record)"
grep -qF "h\$(touch\${IFS}PWNED)" run/launch.sh || fail "(a) the host name is not in the launcher"

# (b) Control characters: refused with one line, no launcher.
refused() {  # CASE EXPECTED ARGS...
  local name=$1 expected=$2
  shift 2
  rm -rf run/* record PWNED
  "$hapmoe" "$@" >"$name.out" 2>"$name.err" </dev/null
  local code=$?
  if [[ -f run/launch.sh ]]; then
    run_launcher
    [[ -e run/PWNED ]] && fail "($name) the launcher ran 'touch PWNED' from a name"
  fi
  [[ $code == 2 ]] || fail "($name) exit code $code, expected 2 (refused)"
  [[ $(wc -l <"$name.err") == 1 ]] || fail "($name) expected one error line: $(head -c 400 "$name.err")"
  grep -qF -- "$expected" "$name.err" || fail "($name) error does not say '$expected': $(cat "$name.err")"
  grep -qF "control character" "$name.err" || fail "($name) error does not name the control character: $(cat "$name.err")"
  [[ ! -e run/launch.sh ]] || fail "($name) a launcher was written"
}
cluster 'X\ntouch PWNED\n#' 'Y' >b_cluster.json
refused newline_device b_cluster.json plan --model "$model_json" --cluster b_cluster.json \
  --launcher run/launch.sh
model 'm\\ntouch PWNED\\n#' >b_model.json
refused newline_model b_model.json plan --model b_model.json --cluster H800:8 \
  --launcher run/launch.sh
printf 'h\001x H800\n' >b_hosts.txt
refused control_host b_hosts.txt plan --model "$model_json" --cluster H800:8 \
  --launcher run/launch.sh --launcher-hosts b_hosts.txt
echo "launcher_hostile: ok"
