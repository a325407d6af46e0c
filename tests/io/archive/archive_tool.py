#!/usr/bin/python3
"""Helpers for the archive tests (docs/archive.md), run with Debian's
/usr/bin/python3 and python3-h5py.

  archive_tool.py dump [--ignore-layout] FILE
                                    canonical text of everything but timings
                                    (and with --ignore-layout, which rank ran what)
  archive_tool.py check FILE        exit 0 if FILE is a readable hapmoe archive
  archive_tool.py best FILE JSON    the archive's best plan equals --plan-json's
  archive_tool.py h5dump-best DUMP JSON
                                    the same, from `h5dump -m %.17g -d /plans/plans`
                                    and `-d /plans/stages` output (no h5py)

Exit 77 (CTest's skip code) when h5py is needed and missing.
"""
import json
import math
import re
import sys

# Fields that measure time or how the run was spread over this machine's
# processes: they differ between two runs of the same inputs.
TIMING_FIELDS = {"seconds", "busy_seconds", "idle_seconds"}
TIMING_ATTRS = {"runs"}
# Which rank ran what (dropped with --ignore-layout).
LAYOUT_ATTRS = {"ran_on_rank"}


def need_h5py():
    try:
        import h5py  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        print("SKIP: python3-h5py is not installed")
        sys.exit(77)


def fmt(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return repr(v)


def dump(path, ignore_layout=False):
    need_h5py()
    import h5py
    import numpy as np

    lines = []

    def attrs(name, obj):
        for k in sorted(obj.attrs):
            if k in TIMING_ATTRS or (ignore_layout and k in LAYOUT_ATTRS):
                continue
            v = obj.attrs[k]
            if isinstance(v, np.generic):
                v = v.item()
            lines.append(f"{name}@{k} = {fmt(v)}")

    def visit(name, obj):
        if "provenance" in name.split("/"):
            return
        if ignore_layout and name.endswith("search/ranks"):
            return
        attrs(name, obj)
        if isinstance(obj, h5py.Dataset):
            data = obj[()]
            if data.dtype.names:
                drop = TIMING_FIELDS | ({"rank"} if ignore_layout and
                                        name.endswith("search/configs") else set())
                keep = [f for f in data.dtype.names if f not in drop]
                lines.append(f"{name}: {len(data)} rows, fields {keep}")
                for row in data:
                    lines.append("  " + ", ".join(fmt(row[f].item() if hasattr(row[f], "item")
                                                      else row[f]) for f in keep))
            else:
                lines.append(f"{name}: {[fmt(x.item()) for x in data]}")

    with h5py.File(path, "r") as f:
        attrs("/", f)
        f.visititems(visit)
    print("\n".join(lines))


def check(path):
    need_h5py()
    import h5py

    with h5py.File(path, "r") as f:
        if f.attrs["format"] != "hapmoe-archive":
            sys.exit(f"{path}: not a hapmoe archive")
        if f.attrs["kind"] == "sweep":
            cases = f["cases"]
            for name in cases:
                c = cases[name]
                c["plans/plans"][()]
                c["search/configs"][()]
            done = int(f["sweep"].attrs["cases_done"])
            if done != len(cases):
                sys.exit(f"{path}: cases_done {done} but {len(cases)} case groups")
        else:
            f["plans/plans"][()]
    print(f"ok {path}")


def compare_best(plan, stages, doc):
    """plan: dict of the best plan's fields; stages: list of dicts."""
    want = doc["plans"][0]
    errors = []

    def same(what, a, b):
        if a != b:
            errors.append(f"{what}: archive {a!r} vs JSON {b!r}")

    for k in ("latency_s", "throughput_tokens_per_s", "tflops_per_device", "mfu"):
        same(k, float(plan[k]), float(want[k]))
    for k in ("pp", "tp", "cp", "ep", "tpe", "dp", "micro_batch", "num_microbatches"):
        same(k, int(plan[k]), int(want["parallel"][k]))
    for k in ("edge_s", "middle_s", "dp_sync_s", "optimizer_s"):
        same(k, float(plan[k]), float(want["breakdown"][k]))
    same("stages", len(stages), len(want["stages"]))
    for i, (s, w) in enumerate(zip(stages, want["stages"])):
        same(f"stage {i} device", s["device"], w["device"])
        same(f"stage {i} recompute", s["recompute"], w["recompute"])
        for k in ("devices", "first_layer", "layers"):
            same(f"stage {i} {k}", int(s[k]), int(w[k]))
        for a, b in (("forward_s", "forward_s"), ("backward_s", "backward_s"),
                     ("memory_bytes", "memory_bytes"), ("capacity_bytes", "capacity_bytes")):
            same(f"stage {i} {a}", float(s[a]), float(w[b]))
    if errors:
        sys.exit("best plan differs:\n  " + "\n  ".join(errors))


def best(path, json_path):
    need_h5py()
    import h5py

    with h5py.File(path, "r") as f:
        plans = f["plans/plans"][()]
        stages = f["plans/stages"][()]
        offsets = f["plans/stage_offsets"][()]
        p = plans[0]
        plan = {k: p[k] for k in plans.dtype.names}
        rows = stages[offsets[0]:offsets[1]]
        st = [{k: (r[k].decode() if isinstance(r[k], bytes) else r[k])
               for k in stages.dtype.names} for r in rows]
    compare_best(plan, st, json.load(open(json_path)))
    print(f"ok: h5py reads the best plan of {path} equal to {json_path}")


def parse_h5dump_records(text):
    """Records of a compound dataset from `h5dump -m %.17g -d X` output."""
    names = re.findall(r'^\s+H5T_\S+(?: \{[^}]*\})?\s+"(\w+)";', text, re.M)
    if not names:  # string members print as a block: H5T_STRING { ... } "name";
        names = re.findall(r'"(\w+)";', text)
    body = text[text.index("DATA {"):]
    records = re.findall(r"\(\d+\): \{(.*?)\}", body, re.S)
    out = []
    for r in records:
        values = [v.strip() for v in r.replace("\n", " ").split(",")]
        out.append(dict(zip(names, [v.strip('"') for v in values])))
    return out


def h5dump_best(plans_dump, stages_dump, json_path):
    plans = parse_h5dump_records(open(plans_dump).read())
    stages = parse_h5dump_records(open(stages_dump).read())
    p = plans[0]
    st = [s for s in stages if int(s["plan"]) == 0]
    compare_best(p, st, json.load(open(json_path)))
    print(f"ok: h5dump shows the best plan equal to {json_path}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "dump":
        if sys.argv[2] == "--ignore-layout":
            dump(sys.argv[3], ignore_layout=True)
        else:
            dump(sys.argv[2])
    elif cmd == "check":
        check(sys.argv[2])
    elif cmd == "best":
        best(sys.argv[2], sys.argv[3])
    elif cmd == "h5dump-best":
        h5dump_best(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
