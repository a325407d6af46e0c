#!/usr/bin/python3
"""The pruning study (issue 6): reads the sweep archive written by
`hapmoe sweep bench/pruning_study.json`, prints the tables of bench/README.md
("Pruning study") and draws the figures next to it.

    /usr/bin/python3 bench/pruning_study.py ARCHIVE.h5 [REPEAT.h5 ...] [--count COUNT.h5]
                                              [--figures DIR] [--csv FILE]

Several archives of the same sweep are repeats: each case's time is the
median over them (its counters are the same in each, which is checked).
--count names the archive of bench/pruning_count.json: the plain DP's states
and transitions at scale, counted without costing (`count_only`).

Uses Debian's python3-h5py, python3-numpy and (for the figures)
python3-matplotlib. Each case's search counters come from /cases/N/search/totals
and its best latency from /cases/N/plans/plans; the gap of a pruning set is
its best latency over the unpruned optimum of the same model and cluster (the
`prune none` case with the same bound setting; branch and bound is exact, so
with the bound on that is the exact optimum of the unpruned space).
"""
import argparse
import collections
import csv
import json
import math
import os
import sys

import h5py
import numpy as np

PRUNE_ORDER = ["none", "lb", "mem", "comm", "lb,mem", "lb,comm", "mem,comm", "all"]
DEFAULTS = {"prune": "all", "delta": 0.2, "eta": 2.0, "uniform": False, "bound": True,
            "global_batch": None}


def canonical_prune(text):
    if text in ("all", "lb,mem,comm"):
        return "all"
    if text in ("none", ""):
        return "none"
    parts = [p for p in ("lb", "mem", "comm") if p in text.split(",")]
    return ",".join(parts) if len(parts) < 3 else "all"


COUNTERS = ("configs", "evaluated", "states", "transitions", "pruned_lb", "pruned_mem",
            "pruned_comm")


def read_repeats(paths):
    """The cases of several runs of one sweep: counters from the first (equal in
    all), latency likewise, seconds the median over the runs."""
    runs = [read_cases(p) for p in paths]
    rows = runs[0]
    for other, path in zip(runs[1:], paths[1:]):
        by_name = {r["name"]: r for r in other}
        for r in rows:
            o = by_name.get(r["name"])
            if o is None:
                sys.exit(f"{path}: case {r['name']!r} missing (not a repeat of {paths[0]})")
            for k in COUNTERS:
                if o[k] != r[k]:
                    sys.exit(f"{path}: case {r['name']!r}: {k} {o[k]} != {r[k]} in {paths[0]}")
            if o["latency"] != r["latency"]:
                sys.exit(f"{path}: case {r['name']!r}: another best latency")
            r.setdefault("all_seconds", [r["seconds"]]).append(o["seconds"])
    for r in rows:
        r["all_seconds"] = r.get("all_seconds", [r["seconds"]])
        r["seconds"] = float(np.median(r["all_seconds"]))
        r["repeats"] = len(r["all_seconds"])
    return rows


def read_cases(path):
    rows = []
    with h5py.File(path, "r") as f:
        if f.attrs.get("kind") != "sweep":
            sys.exit(f"{path}: not a sweep archive")
        for name in sorted(f["cases"]):
            g = f["cases"][name]
            case = json.loads(g.attrs["case"])
            totals = g["search/totals"][()][0]
            plans = g["plans/plans"][()]
            row = {k: case.get(k, v) for k, v in DEFAULTS.items()}
            row["count_only"] = bool(case.get("count_only", False))
            row["prune"] = canonical_prune(str(row["prune"]))
            row.update(
                name=g.attrs["name"],
                model=case["model"],
                cluster=case["cluster"],
                latency=float(plans[0]["latency_s"]) if len(plans) else math.inf,
                seconds=float(totals["seconds"]),
                configs=int(totals["configs"]),
                evaluated=int(totals["configs_evaluated"]),
                states=int(totals["states"]),
                transitions=int(totals["transitions"]),
                pruned_lb=int(totals["pruned_load_balance"]),
                pruned_mem=int(totals["pruned_memory"]),
                pruned_comm=int(totals["pruned_hetero_comm"]),
            )
            rows.append(row)
    return rows


def is_default(row, *except_keys):
    return all(row[k] == v for k, v in DEFAULTS.items()
               if k not in except_keys and k not in ("global_batch",))


def gap(latency, reference):
    if math.isinf(reference):
        return math.nan if math.isinf(latency) else -math.inf  # (never: pruning only removes)
    if math.isinf(latency):
        return math.inf  # the pruning lost every plan
    return latency / reference - 1.0


def geomean(values):
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def subset_table(rows, bound, title, out):
    """Per pruning set: search size, time and gap against `prune none`, over the cases."""
    groups = collections.defaultdict(dict)
    for r in rows:
        if r["bound"] == bound and is_default(r, "prune", "bound"):
            groups[(r["model"], r["cluster"], r["global_batch"])][r["prune"]] = r
    groups = {k: v for k, v in groups.items() if "none" in v}
    if not groups:
        return None
    print(f"\n### {title}\n", file=out)
    print(f"{len(groups)} model x cluster cases; per pruning set: totals over the cases, "
          "the geometric mean of the per-case ratio to `none`, and the optimality gap.\n", file=out)
    print("| prune | searched configs | DP states | transitions | search s | "
          "time vs none (geo. mean) | transitions vs none (geo. mean) | cases with gap > 0 | "
          "max gap | lost every plan |", file=out)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|", file=out)
    summary = {}
    for p in PRUNE_ORDER:
        present = [g for g in groups.values() if p in g]
        if not present:
            continue
        t = sum(g[p]["seconds"] for g in present)
        tr = sum(g[p]["transitions"] for g in present)
        st = sum(g[p]["states"] for g in present)
        ev = sum(g[p]["evaluated"] for g in present)
        time_ratio = geomean([g[p]["seconds"] / g["none"]["seconds"] for g in present])
        tr_ratio = geomean([max(g[p]["transitions"], 1) / max(g["none"]["transitions"], 1)
                            for g in present])
        gaps = [gap(g[p]["latency"], g["none"]["latency"]) for g in present]
        finite = [x for x in gaps if math.isfinite(x)]
        lost = sum(1 for x in gaps if math.isinf(x) and x > 0)
        positive = sum(1 for x in finite if x > 1e-12)
        worst = max(finite) if finite else math.nan
        summary[p] = dict(seconds=t, time_ratio=time_ratio, tr_ratio=tr_ratio, max_gap=worst,
                          lost=lost)
        print(f"| {p} | {ev:,} | {st:,} | {tr:,} | {t:.2f} | {time_ratio:.3f} | {tr_ratio:.3g} | "
              f"{positive} | {100 * worst:.2f} % | {lost} |", file=out)
    return summary


def tradeoff_table(rows, key, out):
    """delta or eta against time and gap, prune all, bound on."""
    base = {}
    for r in rows:
        if r["bound"] and is_default(r, "prune") and r["prune"] == "none":
            base[(r["model"], r["cluster"])] = r
    values = collections.defaultdict(list)
    for r in rows:
        if r["prune"] != "all" or not r["bound"] or r["uniform"]:
            continue
        others = [k for k in ("delta", "eta") if k != key]
        if any(r[k] != DEFAULTS[k] for k in others) or r["global_batch"] is not None:
            continue
        if (r["model"], r["cluster"]) in base and r["cluster"].startswith("paper:"):
            values[float(r[key])].append(r)
    if not values:
        return []
    print(f"\n### {key}: time saved against the optimality gap (prune all, bound on)\n", file=out)
    rule = {"delta": "pruned_lb", "eta": "pruned_comm"}[key]
    print(f"| {key} | cases | search s (sum) | unpruned s (sum) | time vs none (geo. mean) | "
          f"moves cut by {'load balance' if key == 'delta' else 'hetero comm'} | "
          "cases with gap > 0 | mean gap | max gap | lost every plan |", file=out)
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", file=out)
    curve = []
    for v in sorted(values):
        rs = values[v]
        t = sum(r["seconds"] for r in rs)
        t0 = sum(base[(r["model"], r["cluster"])]["seconds"] for r in rs)
        ratio = geomean([r["seconds"] / base[(r["model"], r["cluster"])]["seconds"] for r in rs])
        gaps = [gap(r["latency"], base[(r["model"], r["cluster"])]["latency"]) for r in rs]
        finite = [x for x in gaps if math.isfinite(x)]
        lost = sum(1 for x in gaps if math.isinf(x) and x > 0)
        mean = float(np.mean(finite)) if finite else math.nan
        worst = max(finite) if finite else math.nan
        cut = sum(r[rule] for r in rs)
        print(f"| {v:g} | {len(rs)} | {t:.2f} | {t0:.2f} | {ratio:.3f} | {cut:,} | "
              f"{sum(1 for x in finite if x > 1e-12)} | {100 * mean:.2f} % | {100 * worst:.2f} % | "
              f"{lost} |", file=out)
        curve.append((v, ratio, mean, worst))
    return curve


def uniform_table(rows, out):
    pairs = collections.defaultdict(dict)
    for r in rows:
        if r["prune"] == "all" and r["bound"] and is_default(r, "uniform", "prune"):
            pairs[(r["model"], r["cluster"])][r["uniform"]] = r
    pairs = {k: v for k, v in pairs.items() if True in v and False in v}
    if not pairs:
        return []
    print("\n### Uniform against non-uniform layers (prune all, bound on)\n", file=out)
    print("| model | cluster | non-uniform s | uniform s | uniform / non-uniform |", file=out)
    print("|---|---|---:|---:|---:|", file=out)
    ratios = []
    for (model, cluster), v in sorted(pairs.items()):
        a, b = v[False]["latency"], v[True]["latency"]
        # nan: neither fits; inf: only the non-uniform plan fits.
        ratio = b / a if math.isfinite(a) else math.nan
        ratios.append((model, cluster, ratio))
        shown = (f"{ratio:.3f}" if math.isfinite(ratio) else
                 "uniform: no fit" if math.isinf(ratio) else "no plan")
        print(f"| {model} | {cluster} | {a:.3f} | {b:.3f} | {shown} |", file=out)
    return ratios


def scale_key(cluster):
    return sum(int(part.split(":")[1]) for part in cluster.split(","))


def scale_table(rows, counted, out):
    """Per large cluster: the exact unpruned optimum (branch and bound, prune none),
    each pruning set's optimum and gap and its search time (median of the repeats),
    and the plain DP's states and transitions, counted."""
    searched = collections.defaultdict(dict)
    for r in rows:
        if r["bound"] and is_default(r, "prune", "bound") and not r["cluster"].startswith("paper:") \
                and "slow-link" not in r["cluster"]:
            searched[(r["model"], r["cluster"])][r["prune"]] = r
    count = collections.defaultdict(dict)
    for r in counted:
        count[(r["model"], r["cluster"])][r["prune"]] = r
    keys = sorted(set(searched) & set(count), key=lambda k: scale_key(k[1]))
    if not keys:
        return []
    print("\n### Pruning sets at scale: the exact optimum and the plain DP counted\n", file=out)
    shown = []
    for model, cluster in keys:
        s, c = searched[(model, cluster)], count[(model, cluster)]
        if "none" not in s or "none" not in c:
            continue
        best = s["none"]["latency"]
        reps = s["none"]["repeats"]
        print(f"**{model} on {cluster}** ({scale_key(cluster):,} devices, "
              f"{c['none']['configs']:,} configurations). Unpruned optimum (branch and bound, "
              f"prune none, exact): " + (f"{best:.4f} s" if math.isfinite(best) else "no fit") +
              f". Search times: median of {reps} runs, one thread; plain DP: counted "
              "(`count_only`), two threads.\n", file=out)
        print("| prune | best (s) | gap | B&B search s | plain DP states | plain DP transitions | "
              "transitions vs none | cut by lb | cut by mem | cut by comm | count s |", file=out)
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", file=out)
        for p in PRUNE_ORDER:
            if p not in s or p not in c:
                continue
            g = gap(s[p]["latency"], best)
            lat = s[p]["latency"]
            gap_text = ("lost every plan" if math.isinf(g) and g > 0 else
                        "-" if math.isnan(g) else f"{100 * g:.2f} %")
            ratio = c[p]["transitions"] / max(c["none"]["transitions"], 1)
            print(f"| {p} | {lat:.4f} | {gap_text} | {s[p]['seconds']:.2f} | "
                  f"{c[p]['states']:,} | {c[p]['transitions']:,} | {ratio:.3g} | "
                  f"{c[p]['pruned_lb']:,} | {c[p]['pruned_mem']:,} | {c[p]['pruned_comm']:,} | "
                  f"{c[p]['seconds']:.1f} |" if math.isfinite(lat) else
                  f"| {p} | no fit | {gap_text} | {s[p]['seconds']:.2f} | {c[p]['states']:,} | "
                  f"{c[p]['transitions']:,} | {ratio:.3g} | {c[p]['pruned_lb']:,} | "
                  f"{c[p]['pruned_mem']:,} | {c[p]['pruned_comm']:,} | {c[p]['seconds']:.1f} |",
                  file=out)
        print("", file=out)
        shown.append((model, cluster, {p: c[p]["transitions"] for p in PRUNE_ORDER if p in c},
                      {p: c[p]["states"] for p in PRUNE_ORDER if p in c}))
    return shown


def figures(directory, subsets, curves, ratios, scales=()):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no figures: install python3-matplotlib)", file=sys.stderr)
        return
    os.makedirs(directory, exist_ok=True)
    if subsets:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        width = 0.8 / len(subsets)
        for k, (label, summary) in enumerate(subsets.items()):
            names = [p for p in PRUNE_ORDER if p in summary]
            x = np.arange(len(names)) + k * width
            axes[0].bar(x, [summary[p]["time_ratio"] for p in names], width, label=label)
            axes[1].bar(x, [summary[p]["tr_ratio"] for p in names], width, label=label)
        for ax in axes:
            ax.set_xticks(np.arange(len(names)) + width * (len(subsets) - 1) / 2)
            ax.set_xticklabels(names, rotation=30)
            ax.set_xlabel("prunings on")
        for ax in axes:
            ax.set_yscale("log")
        # One legend, below the panels, clear of the bars.
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
        axes[0].set_ylabel("search time / unpruned (geo. mean)")
        axes[1].set_ylabel("transitions / unpruned (geo. mean)")
        worst = max(s["max_gap"] for summary in subsets.values() for s in summary.values())
        lost = sum(s["lost"] for summary in subsets.values() for s in summary.values())
        fig.suptitle("Pruning sets: search time and size. Largest optimality gap over every set "
                     f"and case: {100 * worst:.3f} %" + (f", {lost} lost every plan" if lost else ""))
        fig.tight_layout(rect=(0, 0.07, 1, 0.95))
        for ext in ("png", "svg"):
            fig.savefig(os.path.join(directory, f"pruning_sets.{ext}"), dpi=110)
        plt.close(fig)
    if curves:
        # One panel per parameter, its values on the x axis (evenly spaced,
        # labelled), the time ratio and the largest gap on two y axes: no
        # labels at the points to overlap.
        shown = [(k, c) for k, c in curves.items() if c]
        fig, axes = plt.subplots(1, len(shown), figsize=(5.5 * len(shown), 3.8), squeeze=False)
        for ax, (key, curve) in zip(axes[0], shown):
            xs = range(len(curve))
            ax.plot(xs, [c[1] for c in curve], "o-", color="tab:blue", label="search time / unpruned")
            ax.set_ylim(0, max(c[1] for c in curve) * 1.15)
            ax.set_ylabel("search time / unpruned (geo. mean)", color="tab:blue")
            gap = ax.twinx()
            gap.plot(xs, [100 * c[3] for c in curve], "s--", color="tab:red", label="max gap")
            gap.set_ylim(0, max(1.0, max(100 * c[3] for c in curve)) * 1.15)
            gap.set_ylabel("max optimality gap (%)", color="tab:red")
            ax.set_xticks(list(xs))
            ax.set_xticklabels([f"{c[0]:g}" for c in curve])
            ax.set_xlabel(key)
            ax.set_title(f"{key} (prune all, bound on, 24 paper cases)", fontsize=10)
        fig.tight_layout()
        for ext in ("png", "svg"):
            fig.savefig(os.path.join(directory, f"pruning_tradeoff.{ext}"), dpi=110)
        plt.close(fig)
    if scales:
        # The plain DP's transitions and states per pruning set, counted, one
        # group of bars per scale (log axis: they span orders of magnitude).
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
        width = 0.8 / len(scales)
        for k, (model, cluster, trans, states) in enumerate(scales):
            names = [p for p in PRUNE_ORDER if p in trans]
            x = np.arange(len(names)) + k * width
            label = f"{scale_key(cluster):,} devices ({model})"
            axes[0].bar(x, [trans[p] for p in names], width, label=label)
            axes[1].bar(x, [states[p] for p in names], width, label=label)
        for ax, what in zip(axes, ("transitions", "states")):
            ax.set_yscale("log")
            ax.set_xticks(np.arange(len(names)) + width * (len(scales) - 1) / 2)
            ax.set_xticklabels(names, rotation=30)
            ax.set_xlabel("prunings on")
            ax.set_ylabel(f"plain DP {what} (counted)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9)
        fig.suptitle("Plain DP (bound off) at scale, counted exactly without costing")
        fig.tight_layout(rect=(0, 0.08, 1, 0.95))
        for ext in ("png", "svg"):
            fig.savefig(os.path.join(directory, f"pruning_scale.{ext}"), dpi=110)
        plt.close(fig)
    if ratios:
        # Cases where neither fits are left out; where only the non-uniform
        # plan fits there is no ratio: no bar, a red label "uniform: no fit"
        # (never a value on the axis).
        shown = [(m, c, r) for m, c, r in ratios if not math.isnan(r)]
        top = max([r for _, _, r in shown if math.isfinite(r)] + [1.0]) * 1.1
        fig, ax = plt.subplots(figsize=(10, 4))
        labels = [f"{m}\n{c.replace('paper:', '')}" for m, c, _ in shown]
        fits = [k for k, (_, _, r) in enumerate(shown) if math.isfinite(r)]
        ax.bar(fits, [shown[k][2] for k in fits], color="tab:blue")
        for k, (_, _, r) in enumerate(shown):
            if not math.isfinite(r):
                ax.text(k, top * 0.03, "uniform: no fit", rotation=90, ha="center", va="bottom",
                        fontsize=8, color="tab:red")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_ylim(0, top * 1.02)
        ax.set_xticks(range(len(shown)))
        ax.set_xticklabels(labels, rotation=90, fontsize=7)
        ax.set_ylabel("latency uniform / non-uniform")
        ax.set_title("Cost of uniform layer splits (cases where nothing fits left out)")
        fig.tight_layout()
        for ext in ("png", "svg"):
            fig.savefig(os.path.join(directory, f"uniform_ratio.{ext}"), dpi=110)
        plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("archives", nargs="+", help="the sweep's archive, then its repeats")
    ap.add_argument("--count", help="the archive of bench/pruning_count.json (count_only)")
    ap.add_argument("--figures", help="directory for the PNG/SVG figures")
    ap.add_argument("--csv", help="write one row per case to this CSV file")
    args = ap.parse_args()
    rows = read_repeats(args.archives)
    out = sys.stdout
    print(f"{len(rows)} cases from {', '.join(args.archives)} (times: median of "
          f"{len(args.archives)} runs)", file=out)
    subsets = {}
    for label, bound, title, pick in [
            ("paper, bound on", True, "Pruning sets on the paper's 24 cases (branch and bound on)",
             lambda r: r["cluster"].startswith("paper:")),
            ("paper, plain DP", False, "Pruning sets, plain DP (bound off), Mixtral-S",
             lambda r: r["cluster"].startswith("paper:")),
            ("large, bound on", True, "Pruning sets on the large clusters (branch and bound on)",
             lambda r: not r["cluster"].startswith("paper:") and "slow-link" not in r["cluster"]),
            ("slow links, bound on", True,
             "Pruning sets over slow cross-type links (bench/clusters/slow-link-*.json: "
             "paper:32-1's devices, 20, 4 and 1 Gbit/s between the types)",
             lambda r: "slow-link" in r["cluster"])]:
        summary = subset_table([r for r in rows if pick(r)], bound, title, out)
        if summary:
            subsets[label] = summary
    scales = []
    counted = []
    if args.count:
        counted = read_cases(args.count)
        if not all(r["count_only"] for r in counted):
            sys.exit(f"{args.count}: not every case is count_only")
        scales = scale_table(rows, counted, out)
    curves = {k: tradeoff_table(rows, k, out) for k in ("delta", "eta")}
    ratios = uniform_table(rows, out)
    if args.figures:
        figures(args.figures, subsets, curves, ratios, scales)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            fields = list(rows[0].keys())
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            w.writeheader()
            for r in rows + counted:
                w.writerow({k: r.get(k) for k in fields})


if __name__ == "__main__":
    main()
