#!/usr/bin/python3
"""The job-wide knobs (plan --space all, docs/search.md) on the hardware of
the calibration rows (bench/fidelity/cases.json, issue 19): for each distinct
(model, cluster, sequence length, global batch) of the rows, one
`plan --space all` on one thread, and from its table the best latency with
each dimension alone free against the default space (bf16, micro-batch 1,
the model's dispatcher, ZeRO-1, no offload, no VPP), and with all of them.

Usage: bench/job_space_calibration.py [HAPMOE] [--time-limit S]
(default build/hapmoe, 600 s per search). Prints a markdown table.
"""
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIMS = ["micro-batch", "vpp", "sharding", "offload", "dispatcher", "fp8"]


def seconds(text):
    m = re.match(r"([0-9.]+) (ms|s)\b", text)
    return None if m is None else float(m.group(1)) * (1e-3 if m.group(2) == "ms" else 1.0)


def main():
    args = sys.argv[1:]
    limit = "600"
    if "--time-limit" in args:
        k = args.index("--time-limit")
        limit = args[k + 1]
        del args[k : k + 2]
    hapmoe = args[0] if args else str(ROOT / "build" / "hapmoe")
    cases = json.load(open(ROOT / "bench" / "fidelity" / "cases.json"))
    setups = []
    for c in cases:
        key = (c["model"], c["cluster"], c["seq_len"], c["global_batch"])
        if key not in setups:
            setups.append(key)
    print("| model | cluster | seq | batch | default space | " + " | ".join(DIMS) +
          " | --space all | knobs chosen | wall s |")
    print("|---|---|---:|---:|---:|" + "---:|" * len(DIMS) + "---:|---|---:|")
    for model, cluster, seq, batch in setups:
        cmd = [hapmoe, "plan", "--model", model, "--cluster", cluster, "--seq-len", str(seq),
               "--global-batch", str(batch), "--threads", "1", "--space", "all",
               "--time-limit", limit]
        start = time.monotonic()
        run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - start
        out = run.stdout
        best = re.search(r"^iteration latency\s+(\S+ \S+)", out, re.M)
        knobs = re.search(r"^  best: (.*)$", out, re.M)
        base = None
        alone = {}
        for line in out.splitlines():
            m = re.match(r"^  (\S+)\s+\d+\s+\d+\s+(no plan|\S+ \S+)\s+(.*)$", line)
            if m and m.group(1) in DIMS:
                alone[m.group(1)] = (m.group(2), m.group(3).strip())
                t = seconds(m.group(2))
                g = re.match(r"([+-][0-9.]+) %", m.group(3).strip())
                if t is not None and g is not None:
                    base = t / (1 + float(g.group(1)) / 100)
        cells = []
        for d in DIMS:
            v = alone.get(d)
            cells.append("-" if v is None else v[1] if v[1].endswith("%") else v[0])
        best_s = seconds(best.group(1)) if best else None
        gain = (f" ({100 * (best_s / base - 1):+.1f} %)" if best_s and base else "")
        stopped = "" if run.returncode == 0 else f" (exit {run.returncode})"
        print(f"| {Path(model).stem} | {cluster} | {seq} | {batch} | "
              f"{'%.3f s' % base if base else 'no plan'} | " + " | ".join(cells) +
              f" | {best.group(1) if best else 'no plan'}{gain}{stopped} | "
              f"{knobs.group(1) if knobs else ''} | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
