#!/usr/bin/env bash
# generate.sh DIR: the hostile inputs too big to commit (run_case.sh calls
# it for cases that name @GEN@). Sizes are fixed so runs are comparable.
set -euo pipefail
d=$1
mkdir -p "$d"
x10m() { head -c 10485760 /dev/zero | tr '\0' x; }
model_head='"num_layers": 12, "hidden": 1024, "num_heads": 16, "num_kv_heads": 4, "ffn_hidden": 4096, "vocab": 32000'
# A 10 MB string as a model's name, as an unknown key, and as a device name.
{ printf '{"name": "'; x10m; printf '", %s}\n' "$model_head"; } >"$d/string_10mb_model.json"
{ printf '{"'; x10m; printf '": 1, %s}\n' "$model_head"; } >"$d/key_10mb_model.json"
{ printf '{"name": "c", "pools": [{"device": "'; x10m; printf '", "count": 8}]}\n'; } >"$d/string_10mb_cluster.json"
# An unterminated 10 MB string (the parse error quoted all of it).
{ printf '{"name": "'; x10m; } >"$d/unterminated_10mb_model.json"
# A 10 MB single line in a launch script.
{ printf 'torchrun pretrain_gpt.py --num-layers '; x10m; printf '\n'; } >"$d/line_10mb_script.sh"
# Nesting one million deep (arrays, objects).
{ head -c 1000000 /dev/zero | tr '\0' '['; } >"$d/nested_arrays.json"
{ printf '{"name": "m", "moe": '; for _ in $(seq 1 2000); do printf '{"a": '; done; printf '1'; head -c 2000 /dev/zero | tr '\0' '}'; printf '}\n'; } >"$d/nested_objects.json"
# 100 MB of spaces (above the 64 MiB input limit).
head -c 104857600 /dev/zero | tr '\0' ' ' >"$d/spaces_100mb.json"
# Issue 21: 10 MB of small objects in a model (the callback parser was
# quadratic in them), a 20 MB model (above the 16 MiB JSON limit, below the
# 64 MiB file limit).
{ printf '{"name": "m", %s, "layers": [' "$model_head"; head -c 3495000 /dev/zero | sed 's/\x0/{},/g'; printf '{}]}\n'; } >"$d/objects_10mb_model.json"
{ printf '{"name": "m", '; head -c 20971520 /dev/zero | tr '\0' ' '; printf '%s}\n' "$model_head"; } >"$d/spaces_20mb_model.json"
# Arguments too long for manifest.txt (run_case.sh: @ARG:NAME@ is the
# content of NAME.arg): a 70 kB inline cluster, a 5,000-digit option, a
# 5,000-character file name.
{ printf 'H800:8'; for _ in $(seq 1 9999); do printf ',H800:8'; done; } >"$d/cluster_70kb.arg"
head -c 5000 /dev/zero | tr '\0' 9 >"$d/digits_5000.arg"
{ printf '/nonexistent/'; head -c 5000 /dev/zero | tr '\0' a; printf '.json'; } >"$d/path_5000.arg"
# A 70,000-character option (cxxopts' regex overflowed the stack on it).
{ printf -- '--'; head -c 70000 /dev/zero | tr '\0' o; } >"$d/option_70kb.arg"
# A sweep whose product has 10^8 cases (10 values on 8 axes).
python3 - "$d/sweep_1e8_cases.json" <<'PY'
import json, sys
v = list(range(1, 11))
p = {"model": "mixtral-s", "cluster": ["paper:16-1"] * 10, "top_k": v, "max_pp": v, "round": v,
     "delta": [0.1 * i for i in v], "eta": v, "global_batch": [128 * i for i in v], "seq_len": [1024 * i for i in v]}
json.dump({"product": p}, open(sys.argv[1], "w"))
PY
# Special files (Hardening II, item 13): a FIFO nobody writes to.
mkfifo "$d/fifo"
# A host name with an escape sequence (Hardening II, item 6).
printf 'h\033]0;x H800\n' >"$d/control_hosts.txt"
# A profile file one byte over the 64 MiB limit (sparse: refused by its
# size before it is opened; Hardening II, item 9).
truncate -s 67108865 "$d/profile_65mb.h5"
