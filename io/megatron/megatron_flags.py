#!/usr/bin/python3
"""Regenerates megatron_flags_core_v0.15.0.txt: the command-line flags of the
pinned Megatron-LM (tag core_v0.15.0), which the launcher checks every flag
it writes against (docs/megatron.md, "Flags of the pinned Megatron-LM").

    /usr/bin/python3 io/megatron/megatron_flags.py GIT_DIR [TAG] > \
        io/megatron/megatron_flags_core_v0.15.0.txt

GIT_DIR is a clone (or bare mirror) of https://github.com/NVIDIA/Megatron-LM
holding TAG (default core_v0.15.0). Nothing is run from Megatron-LM: its
Python files are read with `git show` and parsed with `ast`. The flags are
every option string given to `add_argument` in the files below, plus the
"--no-X" form argparse adds for `action=argparse.BooleanOptionalAction` and
argparse's own -h/--help. Any add_argument call whose option strings are not
plain string literals stops the script, so no flag is silently missed.
"""

import ast
import subprocess
import sys

# The parser pretrain_gpt.py runs: megatron/training/arguments.py builds it
# (parse_args, add_megatron_arguments; the kitchen group only when
# megatron.core.extensions.kitchen imports), and pretrain_gpt.py passes
# add_modelopt_args from megatron/post_training/arguments.py as its
# extra_args_provider when nvidia-modelopt is installed. No other file of
# megatron/training adds arguments.
SOURCES = ["megatron/training/arguments.py", "megatron/post_training/arguments.py"]


def is_boolean_optional(call):
    for kw in call.keywords:
        if kw.arg == "action":
            v = kw.value
            return isinstance(v, ast.Attribute) and v.attr == "BooleanOptionalAction"
    return False


def flags_of(source, path):
    flags = set()
    for node in ast.walk(ast.parse(source, path)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        names = []
        for arg in node.args:
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                sys.exit(f"{path}:{node.lineno}: add_argument with a non-literal argument")
            names.append(arg.value)
        if not names or not all(n.startswith("-") for n in names):
            sys.exit(f"{path}:{node.lineno}: add_argument without option strings: {names}")
        for n in names:
            flags.add(n)
            if is_boolean_optional(node) and n.startswith("--"):
                flags.add("--no-" + n[2:])
    return flags


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    git_dir = sys.argv[1]
    tag = sys.argv[2] if len(sys.argv) == 3 else "core_v0.15.0"
    commit = subprocess.run(["git", "-C", git_dir, "rev-parse", tag + "^{commit}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    flags = {"-h", "--help"}  # argparse's own
    for path in SOURCES:
        source = subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{path}"], check=True,
                                capture_output=True, text=True).stdout
        flags |= flags_of(source, path)
    print(f"# The command-line flags of Megatron-LM {tag}: one flag per line, sorted.")
    print(f"# Source: https://github.com/NVIDIA/Megatron-LM, tag {tag} (commit {commit}),")
    print("# every option string passed to add_argument in")
    for path in SOURCES:
        print(f"#   {path}")
    print("# (the second: pretrain_gpt.py's extra_args_provider when nvidia-modelopt is")
    print("# installed), with the --no-X forms of argparse.BooleanOptionalAction flags and")
    print("# argparse's -h/--help. The parser has allow_abbrev=False: flags match exactly.")
    print("# Regenerate: /usr/bin/python3 io/megatron/megatron_flags.py GIT_DIR " + tag)
    print("# (io/megatron/megatron_flags.py; docs/megatron.md). Lines starting with # are")
    print("# comments. The launcher refuses to write any flag not listed here.")
    for f in sorted(flags):
        print(f)


if __name__ == "__main__":
    main()
