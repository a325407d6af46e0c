#!/usr/bin/python3
"""The paper's evaluation (issue 22): reads the sweep archive written by
`hapmoe sweep bench/paper/paper.json`, prints every table of
bench/paper/README.md with the paper's values beside ours, and draws the
figures.

    /usr/bin/python3 bench/paper/report.py ARCHIVE.h5 [--figures DIR] [--no-plans]

Uses Debian's python3-h5py and python3-numpy; the figures need
python3-matplotlib (without it the tables still print and a line says the
figures were skipped).

Which plan stands for a method on a cluster (rule "best", every table and
figure): the faster of its plan without optimizer offload and its plan with
the whole FP32 optimizer state on the host (optimizer_offload_fraction 1,
the paper's Appendix A; marked `off`), else "no plan". That is what
`plan --space offload` does for hapmoe (docs/search.md, "Job-wide knobs"),
except that it also tries the fractions 0.05 ... 0.95, so it can be a little
faster still. The variant of Table 2 uses rule "fallback": a method
offloads only where it has no plan without it. A geometric mean is taken over the clusters where both the
method and MI have a plan, and says over how many; a method with no plan on
a cluster is listed, never dropped silently.
"""
import argparse
import collections
import json
import math
import os
import sys

import h5py
import numpy as np

HETERO = ["paper:16-1", "paper:16-2", "paper:16-3", "paper:24-1", "paper:24-2", "paper:24-3",
          "paper:32-1", "paper:32-2", "paper:32-3"]
HOMO = ["paper:16-1-h", "paper:16-2-h", "paper:16-3-h"]
MOE_MODELS = ["mixtral-s", "mixtral-l"]
DENSE_MODELS = ["llama2-7b", "llama2-13b"]
DENSE_CLUSTER = "paper:dense"
ALL_METHODS = ["hapmoe", "uniform", "mi", "hetermoe-style", "metis-style", "homogeneous-only"]
T2_METHODS = ["mi", "hetermoe-style", "metis-style", "hapmoe"]
NAME = {"mixtral-s": "Mixtral-S", "mixtral-l": "Mixtral-L", "llama2-7b": "LLaMA-2 7B",
        "llama2-13b": "LLaMA-2 13B"}

# The paper's Table "Geometric mean performance on heterogeneous MoE clusters,
# normalized to MI": (throughput, MFU, latency).
PAPER_T2 = {
    "mixtral-s": {"mi": (1.00, 1.00, 1.00), "hetermoe-style": (1.40, 1.46, 0.72),
                  "metis-style": (1.45, 1.50, 0.69), "hapmoe": (1.67, 1.72, 0.56)},
    "mixtral-l": {"mi": (1.00, 1.00, 1.00), "hetermoe-style": (1.47, 1.50, 0.73),
                  "metis-style": (1.56, 1.53, 0.69), "hapmoe": (1.78, 1.73, 0.58)},
}
# The paper's Table "Performance change ratio by disabling non-uniform PP/DP"
# (the model is not named): cluster -> (latency ratio, throughput ratio).
PAPER_T3 = {"paper:16-1-h": (1.12, 0.95), "paper:16-2-h": (1.18, 0.93),
            "paper:16-3-h": (1.10, 0.96), "paper:16-2": (2.10, 0.69),
            "paper:32-1": (2.30, 0.62), "paper:32-2": (1.35, 0.85),
            "paper:32-3": (2.80, 0.56)}
T3_CLUSTERS = list(PAPER_T3)
SEARCH_LIMIT_S = 60.0  # the paper: "search time remains consistently below 60 s"


class ArchiveError(Exception):
    pass


def short(cluster):
    return cluster.replace("paper:", "")


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def read_archive(path):
    """Every case of the sweep, keyed by (model, cluster, method, offload)."""
    if not os.path.exists(path):
        raise ArchiveError(f"{path}: no such file (run bench/paper/run.sh first)")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ArchiveError(f"{path}: not an HDF5 file ({e})")
    results = {}
    with f:
        if f.attrs.get("kind") != "sweep" or "cases" not in f or "sweep" not in f:
            raise ArchiveError(f"{path}: not a hapmoe sweep archive (no kind=sweep, /sweep, /cases)")
        incomplete = not int(f["sweep"].attrs.get("complete", 0))
        for name in sorted(f["cases"]):
            where = f"{path}: /cases/{name}"
            try:
                results.update([read_case(f["cases"][name])])
            except (KeyError, ValueError, IndexError, TypeError) as e:
                raise ArchiveError(f"{where}: malformed case ({type(e).__name__}: {e})")
    return results, incomplete


def read_case(g):
    case = json.loads(g.attrs["case"])
    method = case.get("baseline") or "hapmoe"
    if method == "none":
        method = "hapmoe"
    offload = case.get("optimizer_offload_fraction") or 0.0
    cluster = json.loads(g["inputs"].attrs["cluster_json"])
    pools = collections.OrderedDict()
    for p in cluster["pools"]:
        pools[p["device"]] = pools.get(p["device"], 0) + p["nodes"] * p["devices_per_node"]
    totals = g["search/totals"][()][0]
    r = dict(model=case["model"], cluster=case["cluster"], method=method, offload=float(offload),
             status=text(g.attrs["status"]), pools=pools,
             cluster_devices=int(g["inputs"].attrs["devices"]),
             search_s=float(totals["seconds"]), configs=int(totals["configs"]),
             wall_s=float(g["provenance"].attrs["wall_seconds"]),
             threads=int(g["provenance"].attrs["threads"]), plan=None)
    plans = g["plans/plans"][()]
    if len(plans):
        p = plans[0]
        offsets = g["plans/stage_offsets"][()]
        stages = []
        for s in g["plans/stages"][()][offsets[0]:offsets[1]]:
            stages.append(dict(device=text(s["device"]), devices=int(s["devices"]),
                               layers=int(s["layers"]), recompute=text(s["recompute"]),
                               step=float(s["forward_s"] + s["backward_s"]),
                               memory=float(s["memory_bytes"]),
                               capacity=float(s["capacity_bytes"])))
        used = collections.Counter()
        for s in stages:
            used[s["device"]] += s["devices"]
        r["plan"] = dict(
            latency=float(p["latency_s"]), tflops=float(p["tflops_per_device"]),
            mfu=float(p["mfu"]), devices=int(p["devices"]),
            config=(f"PP{p['pp']} TP{p['tp']} CP{p['cp']} EP{p['ep']} TPE{p['tpe']} "
                    f"DP{p['dp']}"),
            bottleneck=int(p["bottleneck_stage"]), middle=float(p["middle_s"]),
            optimizer=float(p["optimizer_s"]), stages=stages, used=dict(used))
    return (r["model"], r["cluster"], method, r["offload"]), r


class Results:
    """rule "best": the faster of a method's plan without offload and its plan
    with offload (what `plan --space offload` does, at fraction 1 only;
    docs/search.md); rule "fallback": its plan without offload when it has
    one, else with offload."""

    def __init__(self, cases, rule="best"):
        self.cases = cases
        self.rule = rule

    def pick(self, model, cluster, method):
        """(the case standing for this method, whether it is absent from the archive)."""
        runs = sorted((k[3], r) for k, r in self.cases.items()
                      if k[:3] == (model, cluster, method))
        if not runs:
            return None, True
        with_plan = [r for _, r in runs if r["plan"] is not None]
        if not with_plan:
            return runs[0][1], False
        if self.rule == "best":
            return min(with_plan, key=lambda r: r["plan"]["latency"]), False
        return with_plan[0], False

    def plan(self, model, cluster, method):
        r, _ = self.pick(model, cluster, method)
        return r["plan"] if r is not None else None

    def offload(self, model, cluster, method):
        r, _ = self.pick(model, cluster, method)
        return r is not None and r["plan"] is not None and r["offload"] > 0

    def forced(self, model, cluster, method):
        """Offloaded because the method has no plan without offload."""
        r = self.exact(model, cluster, method, 0.0)
        return self.offload(model, cluster, method) and (r is None or r["plan"] is None)

    def exact(self, model, cluster, method, offload):
        return self.cases.get((model, cluster, method, offload))


def geomean(values):
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def diff(ours, paper):
    """Relative difference of ours from the paper's value, and the >10 % flag."""
    if not (math.isfinite(ours) and paper):
        return "", False
    d = ours / paper - 1.0
    return f"{100 * d:+.0f} %" + (" **" if abs(d) > 0.10 else ""), abs(d) > 0.10


def cell(res, model, cluster, method, what):
    r, absent = res.pick(model, cluster, method)
    if absent:
        return "not run"
    if r["plan"] is None:
        return "no plan"
    p = r["plan"]
    value = {"latency": f"{p['latency']:.2f}", "tflops": f"{p['tflops']:.1f}",
             "mfu": f"{100 * p['mfu']:.1f} %"}[what]
    return value + (" off" if r["offload"] > 0 else "")


def cluster_tflops(r):
    """Model TFLOP/s per device of the whole cluster (idle devices count)."""
    p = r["plan"]
    return p["tflops"] * p["devices"] / r["cluster_devices"]


def idle_text(r):
    p = r["plan"]
    idle = []
    for dev, n in r["pools"].items():
        u = p["used"].get(dev, 0)
        if u < n:
            idle.append(f"{n - u} {dev}")
    return ", ".join(idle) + " idle" if idle else ""


# ---------------------------------------------------------------- tables


def table2(res, out, flags, variant=False):
    if variant:
        print("\n### Table 2, variant: each method offloads only where nothing fits without it\n",
              file=out)
        print("The same, but each method's plan on a cluster is its plan without optimizer "
              "offload when it has one, and its plan with the whole FP32 optimizer state on the "
              "host only where it has none (the paper's wording: \"for Mixtral-L on the smallest "
              "clusters, the FP32 optimizer states are offloaded\"), where the table above takes "
              "the faster of the two. Not what `plan --space offload` does since it searches "
              "offload as a dimension; its differences from the paper are not in the list "
              "below.\n", file=out)
        flags = []
    else:
        print("\n## Table 2: geometric means on the 9 heterogeneous clusters, normalised to MI\n",
              file=out)
        print("Each method's plan on a cluster is the faster of its plan without optimizer "
              "offload and its plan with the whole FP32 optimizer state on the host (`plan "
              "--space offload` searches the fractions 0.05 ... 1 too, so it can be a little "
              "faster still).\n", file=out)
    print("Throughput = TFLOP/s per device in use, MFU weighted by each device's peak (both as "
          "the archive's `tflops_per_device` and `mfu`), latency = predicted iteration time. "
          "Geometric mean of the per-cluster ratio to MI over the clusters where both have a "
          "plan (column `cases`). `thpt. per cluster dev.`: the throughput ratio with the FLOPs "
          "spread over every device of the cluster, idle ones included (= 1 / the latency ratio "
          "per cluster; no paper value). `**` marks a difference over 10 % from the paper.\n",
          file=out)
    print("| model | method | thpt. paper | thpt. ours | diff | MFU paper | MFU ours | diff | "
          "lat. paper | lat. ours | diff | thpt. per cluster dev. | cases | no plan on (or not run) |",
          file=out)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|", file=out)
    means = {}
    for model in MOE_MODELS:
        for method in T2_METHODS:
            ratios = {"tflops": [], "mfu": [], "latency": [], "cluster": []}
            missing, n = [], 0
            for c in HETERO:
                p, mi = res.plan(model, c, method), res.plan(model, c, "mi")
                if p is None:
                    absent = res.pick(model, c, method)[1]
                    missing.append(short(c) + (" (not run)" if absent else ""))
                if p is None or mi is None:
                    continue
                n += 1
                for k in ("tflops", "mfu", "latency"):
                    ratios[k].append(p[k] / mi[k])
                ratios["cluster"].append(cluster_tflops(res.pick(model, c, method)[0]) /
                                         cluster_tflops(res.pick(model, c, "mi")[0]))
            g = {k: geomean(v) for k, v in ratios.items()}
            means[(model, method)] = g
            paper = PAPER_T2[model][method]
            cells = []
            for k, pv in zip(("tflops", "mfu", "latency"), paper):
                d, big = diff(g[k], pv)
                if big:
                    flags.append(f"Table 2 {NAME[model]} {method} "
                                 f"{ {'tflops': 'throughput', 'mfu': 'MFU', 'latency': 'latency'}[k] }"
                                 f": ours {g[k]:.2f}x, paper {pv:.2f}x")
                cells += [f"{pv:.2f}x", f"{g[k]:.2f}x" if math.isfinite(g[k]) else "-", d]
            cl = f"{g['cluster']:.2f}x" if math.isfinite(g["cluster"]) else "-"
            print(f"| {NAME[model]} | {method} | " + " | ".join(cells) +
                  f" | {cl} | {n}/{len(HETERO)} | {', '.join(missing) or '-'} |", file=out)
    if variant:
        return means
    mi_missing = {m: [short(c) for c in HETERO if res.plan(m, c, "mi") is None
                      and not res.pick(m, c, "mi")[1]] for m in MOE_MODELS}
    for m, miss in mi_missing.items():
        if miss:
            print(f"\nMI has no plan for {NAME[m]} on {', '.join(miss)}: those clusters are "
                  "outside every mean of that model.", file=out)
    for forced, why in ((True, "no plan without it"), (False, "faster than its plan without it")):
        for m in MOE_MODELS:
            cs = []
            for c in HETERO:
                ks = [k for k in T2_METHODS
                      if res.offload(m, c, k) and res.forced(m, c, k) == forced]
                if ks:
                    cs.append(f"{short(c)} ({', '.join(ks)})")
            if cs:
                print(f"\n{NAME[m]} with the optimizer state offloaded ({why}): "
                      f"{'; '.join(cs)}.", file=out)
    return means


def per_cluster(res, out, clusters, models, methods, title, note=""):
    print(f"\n## {title}\n", file=out)
    if note:
        print(note + "\n", file=out)
    print("`off`: with the FP32 optimizer state on the host (faster than that method's plan "
          "without it, or it has none without it: the list of plans shows both). TFLOP/s/dev: "
          "per device in use (the archive's, as in Table 2); `/cluster dev`: the same FLOPs over "
          "every device of the cluster, idle ones included; `in use` counts the devices the plan "
          "puts to work.\n", file=out)
    print("| model | cluster | method | latency s | TFLOP/s/dev | /cluster dev | MFU | in use | "
          "plan |", file=out)
    print("|---|---|---|---:|---:|---:|---:|---|---|", file=out)
    for model in models:
        for c in clusters:
            for method in methods:
                r, absent = res.pick(model, c, method)
                if absent:
                    print(f"| {NAME[model]} | {short(c)} | {method} | not run | | | | | |",
                          file=out)
                    continue
                if r["plan"] is None:
                    print(f"| {NAME[model]} | {short(c)} | {method} | no plan | - | - | - | - | |",
                          file=out)
                    continue
                p = r["plan"]
                idle = idle_text(r)
                print(f"| {NAME[model]} | {short(c)} | {method} | "
                      f"{cell(res, model, c, method, 'latency')} | {p['tflops']:.1f} | "
                      f"{cluster_tflops(r):.1f} | {100 * p['mfu']:.1f} % | {p['devices']}/{r['cluster_devices']}"
                      f"{' (' + idle + ')' if idle else ''} | {p['config']} |", file=out)


def table3(res, out, flags):
    print("\n## Table 3: disabling non-uniform PP/DP (uniform relative to hapmoe)\n", file=out)
    print("The paper does not say which model its table is for: both are shown. `uniform` is "
          "hapmoe's search on the devices of hapmoe's best plan with N/PP layers on every stage "
          "(docs/baselines.md). Each side at the faster of no optimizer offload and the whole "
          "FP32 optimizer state on the host, as in Table 2 (`off` marks a side that offloads), "
          "so the ratio is that of two searches over no offload and offload, one of them "
          "restricted to even layers. Throughput ratio = TFLOP/s per device in use (1 / the "
          "latency ratio when both use the same devices). `**`: over 10 % from the paper.\n",
          file=out)
    print("| model | cluster | hapmoe s | uniform s | lat. paper | lat. ours | diff | "
          "thpt. paper | thpt. ours | diff |", file=out)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|", file=out)
    ratios = {}
    for model in MOE_MODELS:
        for c in T3_CLUSTERS:
            (a, a_absent), (b, b_absent) = (res.pick(model, c, "hapmoe"),
                                            res.pick(model, c, "uniform"))
            lp, tp = PAPER_T3[c]
            if a_absent or b_absent or a["plan"] is None or b["plan"] is None:
                if a_absent or b_absent:
                    what = "not run"
                elif a["plan"] is None:
                    what = "no plan"
                else:
                    what = "uniform: no fit"
                print(f"| {NAME[model]} | {short(c)} | | | {lp:.2f}x | {what} | | {tp:.2f}x | | |",
                      file=out)
                ratios[(model, c)] = what
                continue
            lr = b["plan"]["latency"] / a["plan"]["latency"]
            tr = b["plan"]["tflops"] / a["plan"]["tflops"]
            ratios[(model, c)] = (lr, tr, a["offload"] > 0, b["offload"] > 0)
            dl, bl = diff(lr, lp)
            dt, bt = diff(tr, tp)
            for big, what, ours, paper in ((bl, "latency", lr, lp), (bt, "throughput", tr, tp)):
                if big:
                    flags.append(f"Table 3 {NAME[model]} {short(c)} {what}: ours {ours:.2f}x, "
                                 f"paper {paper:.2f}x")
            ao = " off" if a["offload"] > 0 else ""
            bo = " off" if b["offload"] > 0 else ""
            print(f"| {NAME[model]} | {short(c)} | {a['plan']['latency']:.2f}{ao} | "
                  f"{b['plan']['latency']:.2f}{bo} | {lp:.2f}x | {lr:.2f}x | {dl} | {tp:.2f}x | "
                  f"{tr:.2f}x | {dt} |", file=out)
    return ratios


def dense_table(res, out):
    print("\n## Dense models on 2x8 A100 + 2x8 910B (paper:dense)\n", file=out)
    print("The paper gives a figure only (no numbers). Its baselines map to ours as: MI -> `mi`, "
          "Alpa (assumes homogeneous devices, so an even split over stages) -> `uniform`, "
          "Metis (heterogeneous PP/DP/TP placement) -> `metis-style` (for a dense model EP = TPE "
          "= 1, so it is hapmoe's own space); `homogeneous-only` (one device type alone) is "
          "shown too. `hetermoe-style` is an MoE baseline (on a dense model it is MI's "
          "configuration with the layers split by speed).\n", file=out)
    methods = ["mi", "uniform", "metis-style", "homogeneous-only", "hetermoe-style", "hapmoe"]
    print("TFLOP/s/dev is per device in use, `/cluster dev` over all 32 devices (idle ones "
          "included).\n", file=out)
    print("| model | method (paper's) | latency s | TFLOP/s/dev | /cluster dev | MFU | "
          "vs MI thpt. | in use | plan |", file=out)
    print("|---|---|---:|---:|---:|---:|---:|---|---|", file=out)
    paper_name = {"mi": "mi (MI)", "uniform": "uniform (Alpa)", "metis-style": "metis-style (Metis)",
                  "hapmoe": "hapmoe (HAPMoE)"}
    for model in DENSE_MODELS:
        mi = res.plan(model, DENSE_CLUSTER, "mi")
        for method in methods:
            r, absent = res.pick(model, DENSE_CLUSTER, method)
            label = paper_name.get(method, method)
            if absent or r["plan"] is None:
                print(f"| {NAME[model]} | {label} | {'not run' if absent else 'no plan'} "
                      "| | | | | | |", file=out)
                continue
            p = r["plan"]
            rel = f"{p['tflops'] / mi['tflops']:.2f}x" if mi else "-"
            idle = idle_text(r)
            print(f"| {NAME[model]} | {label} | {p['latency']:.2f} | {p['tflops']:.1f} | "
                  f"{cluster_tflops(r):.1f} | {100 * p['mfu']:.1f} % | {rel} | {p['devices']}/{r['cluster_devices']}"
                  f"{' (' + idle + ')' if idle else ''} | {p['config']} |", file=out)


def search_table(res, out):
    print("\n## Search time per case (hapmoe)\n", file=out)
    print("`search s` = the search's wall time (`/search/totals` seconds), `case s` = the whole "
          f"case (`provenance` wall_seconds), on {threads(res)} thread(s). The paper gives a "
          "figure only, and says every case searches in under 60 s.\n", file=out)
    print("| model | cluster | offload | configs | search s | case s |", file=out)
    print("|---|---|---|---:|---:|---:|", file=out)
    rows = [r for k, r in sorted(res.cases.items()) if r["method"] == "hapmoe"]
    order = {c: i for i, c in enumerate(HOMO + HETERO + [DENSE_CLUSTER])}
    model_order = {m: i for i, m in enumerate(MOE_MODELS + DENSE_MODELS)}
    rows.sort(key=lambda r: (model_order.get(r["model"], 9), order.get(r["cluster"], 99),
                             r["offload"]))
    for r in rows:
        print(f"| {NAME.get(r['model'], r['model'])} | {short(r['cluster'])} | "
              f"{'f=1' if r['offload'] else '-'} | {r['configs']:,} | {r['search_s']:.3f} | "
              f"{r['wall_s']:.3f} |", file=out)
    if rows:
        worst = max(rows, key=lambda r: r["wall_s"])
        every = [r for r in res.cases.values()]
        print(f"\nhapmoe: {len(rows)} cases, {sum(r['wall_s'] for r in rows):.2f} s in all, "
              f"the longest {worst['wall_s']:.3f} s ({NAME.get(worst['model'])} "
              f"{short(worst['cluster'])}); under {SEARCH_LIMIT_S:.0f} s: "
              f"{'PASS' if worst['wall_s'] < SEARCH_LIMIT_S else 'FAIL'}. Every method's "
              f"{len(every)} cases: {sum(r['wall_s'] for r in every):.2f} s.", file=out)
    return rows


def threads(res):
    t = sorted({r["threads"] for r in res.cases.values()})
    return "/".join(str(x) for x in t)


def plans_section(res, out):
    print("\n## The plans (what the explanations in the README read)\n", file=out)
    print("Per case and method: latency, configuration, each stage as DEVICExN:LAYERS "
          "[recompute], `*` on the bottleneck stage (largest forward + backward), its step, "
          "and the devices left idle.\n", file=out)
    print("```", file=out)
    for model in MOE_MODELS + DENSE_MODELS:
        clusters = (HOMO + HETERO) if model in MOE_MODELS else [DENSE_CLUSTER]
        for c in clusters:
            for method in ALL_METHODS:
                for off in (0.0, 1.0):
                    r = res.exact(model, c, method, off)
                    if r is None:
                        continue
                    head = f"{model:<10} {short(c):<7} {method:<16} {'off' if off else '   '}"
                    if r["plan"] is None:
                        print(f"{head} no plan", file=out)
                        continue
                    p = r["plan"]
                    parts = []
                    for i, s in enumerate(p["stages"]):
                        rc = "" if s["recompute"] == "none" else f"[{s['recompute']}]"
                        parts.append(f"{'*' if i == p['bottleneck'] else ''}{s['device']}x"
                                     f"{s['devices']}:{s['layers']}{rc}")
                    b = p["stages"][p["bottleneck"]]
                    idle = idle_text(r)
                    print(f"{head} {p['latency']:8.2f} s  {p['config']:<28} "
                          f"{' | '.join(parts)}  (step {1000 * b['step']:.0f} ms, opt "
                          f"{p['optimizer']:.2f} s{'; ' + idle if idle else ''})", file=out)
    print("```", file=out)


# ---------------------------------------------------------------- figures


COLORS = ["tab:grey", "tab:orange", "tab:green", "tab:blue", "tab:purple", "tab:brown"]
NOT_RUN = "not run"


def grouped_bars(ax, labels, series, ylabel):
    """series: [(name, [value, None (no plan) or NOT_RUN], [mark text])]. No plan
    is an empty hatched slot with the words, never a bar of some height; a case
    missing from the archive is the words "not run" alone."""
    n = len(series)
    width = 0.8 / n
    finite = [v for _, vals, _ in series for v in vals if isinstance(v, float)]
    top = max(finite) if finite else 1.0
    for k, (name, values, marks) in enumerate(series):
        x = np.arange(len(labels)) - 0.4 + width * (k + 0.5)
        for xi, v, m in zip(x, values, marks):
            if v is None or v == NOT_RUN:
                y = top * 0.02
                if v is None:
                    ax.bar(xi, top * 0.25, width, fill=False, hatch="///", edgecolor="red", lw=0.6)
                    y = top * 0.27
                ax.text(xi, y, "no plan" if v is None else NOT_RUN, rotation=90,
                        ha="center", va="bottom", fontsize=7,
                        color="red" if v is None else "dimgrey")
                continue
            ax.bar(xi, v, width, color=COLORS[k % len(COLORS)])
            if m:
                ax.text(xi, v, m, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(np.arange(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_ylim(0, top * 1.15)
    ax.tick_params(axis="y", labelsize=8)


def method_legend(fig, names):
    from matplotlib.patches import Patch
    handles = [Patch(color=COLORS[k % len(COLORS)]) for k in range(len(names))]
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=8, frameon=False)


def mark(res, model, cluster, method):
    """'o': optimizer offloaded; 'i': the plan leaves devices of the cluster idle."""
    r, _ = res.pick(model, cluster, method)
    if r is None or r["plan"] is None:
        return ""
    return ("o" if r["offload"] > 0 else "") + ("i" if idle_text(r) else "")


def series_for(res, model, clusters, methods, key, scale=1.0, dense=False):
    """Per method, per cluster (or, dense=True, per dense model on paper:dense)."""
    out = []
    pairs = ([(d, DENSE_CLUSTER) for d in DENSE_MODELS] if dense
             else [(model, c) for c in clusters])
    for m in methods:
        vals, marks = [], []
        for model, c in pairs:
            p = res.plan(model, c, m)
            if res.pick(model, c, m)[1]:
                vals.append(NOT_RUN)
            else:
                vals.append(None if p is None else float(p[key] * scale))
            marks.append(mark(res, model, c, m))
        out.append((m, vals, marks))
    return out


def figures(directory, res, means, ratios, search_rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(figures skipped: matplotlib is missing; install Debian's python3-matplotlib)")
        return []
    os.makedirs(directory, exist_ok=True)
    written = []
    foot = ("o = optimizer state offloaded to the host (faster, or no plan without it); i = the "
            "plan leaves devices idle (TFLOP/s and MFU are per device in use); hatched 'no plan' "
            "= no plan fits (no value)")

    def save(fig, name):
        path = os.path.join(directory, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    # MoE on the heterogeneous clusters: throughput, MFU, latency per cluster.
    fig, axes = plt.subplots(2, 3, figsize=(15, 7.5))
    labels = [short(c) for c in HETERO]
    for row, model in enumerate(MOE_MODELS):
        for col, (key, scale, ylabel) in enumerate([("tflops", 1, "TFLOP/s per device"),
                                                     ("mfu", 100, "MFU (%)"),
                                                     ("latency", 1, "iteration latency (s)")]):
            ax = axes[row][col]
            grouped_bars(ax, labels, series_for(res, model, HETERO, T2_METHODS, key, scale), ylabel)
            ax.set_title(f"{NAME[model]}: {ylabel}", fontsize=10)
    method_legend(fig, T2_METHODS)
    fig.suptitle("MoE models on the heterogeneous clusters (predicted by hapmoe's cost model)",
                 fontsize=11)
    fig.text(0.5, 0.045, foot, ha="center", fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    save(fig, "moe_hetero.png")

    # Table 2 as bars: the paper's and ours.
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5))
    for row, model in enumerate(MOE_MODELS):
        for col, (k, title) in enumerate([(0, "throughput / MI"), (1, "MFU / MI"),
                                          (2, "latency / MI")]):
            ax = axes[row][col]
            key = ("tflops", "mfu", "latency")[k]
            x = np.arange(len(T2_METHODS))
            paper = [PAPER_T2[model][m][k] for m in T2_METHODS]
            ours = [means[(model, m)][key] for m in T2_METHODS]
            ax.bar(x - 0.2, paper, 0.4, color="tab:grey")
            ax.bar(x + 0.2, [v if math.isfinite(v) else 0 for v in ours], 0.4, color="tab:blue")
            for xi, v in zip(x, ours):
                ax.text(xi + 0.2, v if math.isfinite(v) else 0,
                        f"{v:.2f}" if math.isfinite(v) else "no case", ha="center",
                        va="bottom", fontsize=7)
            for xi, v in zip(x, paper):
                ax.text(xi - 0.2, v, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
            ax.axhline(1.0, color="black", lw=0.6)
            ax.set_xticks(x)
            ax.set_xticklabels(T2_METHODS, fontsize=8)
            ax.set_title(f"{NAME[model]}: {title} (geo. mean)", fontsize=10)
            top = max([v for v in ours + paper if math.isfinite(v)])
            ax.set_ylim(0, top * 1.15)
    from matplotlib.patches import Patch
    fig.legend([Patch(color="tab:grey"), Patch(color="tab:blue")],
               ["paper (measured)", "hapmoe's cost model (predicted)"], loc="lower center",
               ncol=2, fontsize=8, frameon=False)
    fig.suptitle("Table 2: geometric means over the 9 heterogeneous clusters, normalised to MI "
                 "(each method at the faster of no optimizer offload and offload)", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    save(fig, "table2.png")

    # MoE on the homogeneous clusters.
    homo_methods = ["mi", "hetermoe-style", "metis-style", "hapmoe"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    labels = [short(c) for c in HOMO]
    for row, model in enumerate(MOE_MODELS):
        for col, (key, scale, ylabel) in enumerate([("tflops", 1, "TFLOP/s per device"),
                                                     ("mfu", 100, "MFU (%)")]):
            ax = axes[row][col]
            grouped_bars(ax, labels, series_for(res, model, HOMO, homo_methods, key, scale), ylabel)
            ax.set_title(f"{NAME[model]}: {ylabel}", fontsize=10)
    method_legend(fig, homo_methods)
    fig.suptitle("MoE models on the homogeneous clusters", fontsize=11)
    fig.text(0.5, 0.05, foot, ha="center", fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    save(fig, "moe_homo.png")

    # Dense models on paper:dense.
    dense_methods = ["mi", "uniform", "metis-style", "homogeneous-only", "hapmoe"]
    dense_names = {"mi": "mi (MI)", "uniform": "uniform (Alpa)",
                   "metis-style": "metis-style (Metis)", "homogeneous-only": "homogeneous-only",
                   "hapmoe": "hapmoe"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = [NAME[m] for m in DENSE_MODELS]
    for col, (key, scale, ylabel) in enumerate([("tflops", 1, "TFLOP/s per device"),
                                                 ("mfu", 100, "MFU (%)")]):
        ax = axes[col]
        series = []
        for m in dense_methods:
            name = dense_names[m]
            vals = series_for(res, None, None, [m], key, scale, dense=True)[0][1]
            series.append((name, vals, [mark(res, d, DENSE_CLUSTER, m) for d in DENSE_MODELS]))
        grouped_bars(ax, labels, series, ylabel)
        ax.set_title(f"2x8 A100 + 2x8 910B: {ylabel}", fontsize=10)
    method_legend(fig, [dense_names[m] for m in dense_methods])
    fig.text(0.5, 0.065, foot, ha="center", fontsize=8)
    fig.tight_layout(rect=(0, 0.11, 1, 1))
    save(fig, "dense.png")

    # Table 3: latency ratio, paper against ours, both models.
    fig, ax = plt.subplots(figsize=(10, 4.2))
    x = np.arange(len(T3_CLUSTERS))
    ax.bar(x - 0.27, [PAPER_T3[c][0] for c in T3_CLUSTERS], 0.27, color="tab:grey")
    for k, (model, color) in enumerate([("mixtral-s", "tab:blue"), ("mixtral-l", "tab:green")]):
        for xi, c in zip(x, T3_CLUSTERS):
            r = ratios.get((model, c))
            xo = xi + 0.27 * k
            if isinstance(r, str):  # no ratio: "uniform: no fit", "no plan" or "not run"
                y = 0.05
                if r != "not run":
                    ax.bar(xo, 0.5, 0.27, fill=False, hatch="///", edgecolor="red", lw=0.6)
                    y = 0.55
                ax.text(xo, y, r, rotation=90, ha="center", va="bottom", fontsize=7,
                        color="dimgrey" if r == "not run" else "red")
                continue
            ax.bar(xo, r[0], 0.27, color=color)
            m = {(True, True): "o", (True, False): "h", (False, True): "u"}.get((r[2], r[3]))
            if m:
                ax.text(xo, r[0], m, ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", lw=0.6)
    ax.set_xticks(x)
    ax.set_xticklabels([short(c) for c in T3_CLUSTERS], fontsize=8)
    ax.set_ylabel("latency uniform / hapmoe", fontsize=9)
    ax.set_title("Disabling non-uniform PP/DP: latency ratio, each side at its faster offload "
                 "setting\n(o = both offload the optimizer state, u = only uniform, h = only "
                 "hapmoe)", fontsize=10)
    from matplotlib.patches import Patch
    ax.legend([Patch(color=c) for c in ("tab:grey", "tab:blue", "tab:green")],
              ["paper (model not named)", "Mixtral-S (predicted)", "Mixtral-L (predicted)"],
              fontsize=8, loc="upper left")
    fig.tight_layout()
    save(fig, "ablation.png")

    # Search time per hapmoe case.
    if search_rows:
        fig, ax = plt.subplots(figsize=(12, 4.2))
        labels = [f"{NAME.get(r['model'], r['model'])} {short(r['cluster'])}"
                  f"{' off' if r['offload'] else ''}" for r in search_rows]
        colors = {"mixtral-s": "tab:blue", "mixtral-l": "tab:green"}
        ax.bar(range(len(search_rows)), [max(r["wall_s"], 1e-4) for r in search_rows],
               color=[colors.get(r["model"], "tab:orange") for r in search_rows])
        ax.axhline(SEARCH_LIMIT_S, color="red", lw=0.8)
        ax.text(0, SEARCH_LIMIT_S * 1.15, "the paper's bound, 60 s", color="red", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylim(1e-4, 300)
        ax.set_xticks(range(len(search_rows)))
        ax.set_xticklabels(labels, rotation=90, fontsize=7)
        ax.set_ylabel("case wall time (s, log)", fontsize=9)
        ax.set_title(f"hapmoe search time per case ({threads(res)} thread)", fontsize=10)
        fig.tight_layout()
        save(fig, "search_time.png")
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("archive")
    ap.add_argument("--figures", help="directory for the PNG figures")
    ap.add_argument("--no-plans", action="store_true", help="leave out the list of plans")
    args = ap.parse_args()
    try:
        cases, incomplete = read_archive(args.archive)
    except ArchiveError as e:
        sys.exit(f"report.py: {e}")
    if not cases:
        sys.exit(f"report.py: {args.archive}: the archive holds no case")
    res = Results(cases, rule="best")
    out = sys.stdout
    stopped = [f"{r['model']} {short(r['cluster'])} {r['method']}" for r in cases.values()
               if r["status"] == "stopped"]
    if stopped:
        print(f"report.py: {args.archive}: {len(stopped)} case(s) stopped by a time or memory "
              f"limit, their plans are not proven optimal: {', '.join(stopped)}", file=sys.stderr)
    print(f"# The paper's evaluation from {args.archive} ({len(cases)} cases"
          f"{', INCOMPLETE sweep: run bench/paper/run.sh again' if incomplete else ''})", file=out)
    flags = []
    means = table2(res, out, flags)
    table2(Results(cases, rule="fallback"), out, flags, variant=True)
    per_cluster(res, out, HETERO, MOE_MODELS, T2_METHODS,
                "Per cluster: MoE on the heterogeneous clusters",
                "The paper gives a figure only (no numbers).")
    ratios = table3(res, out, flags)
    dense_table(res, out)
    per_cluster(res, out, HOMO, MOE_MODELS, ["mi", "hetermoe-style", "metis-style", "hapmoe"],
                "MoE on the homogeneous clusters",
                "The paper gives a figure only, against MI, DeepSpeed-MoE and Tutel; the last two "
                "do not exist here, so hapmoe is compared with `mi` and the other baselines. On "
                "one device type `metis-style`, `uniform` and `homogeneous-only` search hapmoe's "
                "own space or a part holding its best plan.")
    rows = search_table(res, out)
    print("\n## Differences over 10 % from the paper's numbers\n", file=out)
    for f in flags:
        print(f"- {f}", file=out)
    if not flags:
        print("- none", file=out)
    if not args.no_plans:
        plans_section(res, out)
    if args.figures:
        written = figures(args.figures, res, means, ratios, rows)
        if written:
            print("\nfigures: " + ", ".join(os.path.relpath(w) for w in written), file=out)


if __name__ == "__main__":
    main()
