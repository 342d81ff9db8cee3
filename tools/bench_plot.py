#!/usr/bin/env python3
"""Draw the main figures of `emdb-bench --json` output as PNG files.

Usage: tools/bench_plot.py [-o DIR] [--prefix P] FILE.json [FILE.json...]

Each FILE holds emdb-bench's JSON lines (one object per line; "-" reads
stdin), from any mix of runs: in process (`emdb-bench --json`), network
(`--net unix|tcp --json`) and checkpoint (`--workload checkpoint --json`).
docs/benchmarks.md ("JSON fields") describes the fields.  One PNG per kind
of figure found, written to DIR (default .) as P<name>.png:

  engine.png      each in-process line's IDs/s beside its bound and the
                  global-lock baseline (log scale)
  goals.png       each in-process ratio that has a goal, divided by that
                  goal: a bar reaching 1 is a goal met
  net.png         each network operation beside the echo, the echo with the
                  rows' work, and Redis
  latency.png     single-ID Lookup p50/p99 beside the echo and Redis GET
  checkpoint.png  checkpoint and restore against the disk and memory bounds

Needs matplotlib: on Debian `apt-get install python3-matplotlib` (not in
tools/deps.sh: the build and the tests do not need it).

Why a figure is drawn the way it is: the machines these runs come from are
shared, so absolute rates move by 10-30% from run to run while the ratio of
a figure to its anchor, taken in the same run, holds.  The plots therefore
always draw a figure beside its anchors, and the goals plot draws ratios.
"""

import argparse
import json
import os
import sys

try:
    import matplotlib
    matplotlib.use("Agg")  # files only: no display on a build machine
    import matplotlib.pyplot as plt
except ImportError:
    # Debian's package serves Debian's interpreter only: say which one ran,
    # since a python3 of pyenv or a venv first on PATH will not see it.
    sys.exit("bench_plot.py: matplotlib is missing for %s; on Debian install it "
             "with 'apt-get install python3-matplotlib' and run this script "
             "with /usr/bin/python3" % sys.executable)

# In-process anchors: JSON key of the rate, the label, and whether the
# anchor is an upper bound (drawn in engine.png) rather than a peer.
BOUNDS = [
    ("random_access_per_sec", "random-access bound"),
    ("gather_ids_per_sec", "gather bound"),
    ("bare_loop_ids_per_sec", "bare optimizer loop"),
]
BASELINE = ("baseline_ids_per_sec", "global-lock baseline")

# Ratio keys with a goal and how each reads in goals.png.
RATIO_LABELS = {
    "ratio_random_access": "/ random-access bound",
    "ratio_baseline": "/ global-lock baseline",
    "ratio_threads": "/ 1 thread",
    "ratio_gather": "/ gather bound",
    "ratio_bare_loop": "/ bare loop",
    "ratio_zipf_uniform": "/ uniform",
}

COLORS = {"emdb": "#1f77b4", "bound": "#999999", "baseline": "#d62728",
          "echo": "#999999", "rows": "#2ca02c", "redis": "#d62728"}


def die(msg):
    sys.exit("bench_plot.py: " + msg)


def read_records(paths):
    """All JSON objects of the files, in order; a bad line is an error."""
    recs = []
    for path in paths:
        try:
            f = sys.stdin if path == "-" else open(path, encoding="utf-8")
        except OSError as e:
            die("cannot read %s: %s" % (path, e.strerror))
        with f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as e:
                    die("%s:%d: not a JSON line of emdb-bench --json (%s)" % (path, n, e))
                if not isinstance(obj, dict) or "workload" not in obj:
                    die("%s:%d: not an emdb-bench record (no \"workload\")" % (path, n))
                recs.append(obj)
    return recs


def engine_label(r):
    parts = [r["workload"], "%dt" % r["threads"]]
    if "optimizer" in r:
        parts.append(r["optimizer"])
    if r["workload"] in ("push", "push_update") or r.get("distribution") != "zipf":
        parts.append(r.get("distribution", ""))
    return " ".join(p for p in parts if p)


def run_conditions(recs):
    """The load and vCPU placement the figures were taken under: a reader
    of the plot needs them to judge it (docs/benchmarks.md, "How it measures")."""
    loads = [r["load_before"] for r in recs if "load_before" in r]
    rtts = [ns for r in recs for ns in r.get("core_rtt_ns", []) if ns > 0]
    parts = []
    if loads:
        parts.append("load %.1f before the run" % max(loads))
    if rtts:
        parts.append("core-to-core round trip %.0f-%.0f ns" % (min(rtts), max(rtts)))
    return ", ".join(parts)


def save(fig, out, name):
    path = os.path.join(out.dir, out.prefix + name + ".png")
    fig.tight_layout()
    fig.savefig(path, dpi=out.dpi)
    plt.close(fig)
    print(path)


def hbars(ax, labels, series, log=False):
    """Grouped horizontal bars: series is [(name, color, [value or None])]."""
    n = len(series)
    h = 0.8 / n
    for k, (name, color, vals) in enumerate(series):
        ys = [i + (k - (n - 1) / 2) * h for i in range(len(labels))]
        xs = [v if v is not None else 0 for v in vals]
        ax.barh(ys, xs, height=h, color=color, label=name)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # outside: no bar hidden


def plot_engine(recs, out):
    if not recs:
        return
    labels, emdb, bound, base = [], [], [], []
    for r in recs:
        labels.append(engine_label(r))
        emdb.append(r["ids_per_sec"] / 1e6)
        b = next((r[k] for k, _ in BOUNDS if k in r), None)
        bound.append(b / 1e6 if b else None)
        base.append(r[BASELINE[0]] / 1e6 if BASELINE[0] in r else None)
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(labels) + 1.4))
    hbars(ax, labels, [("emdb", COLORS["emdb"], emdb),
                       ("its bound", COLORS["bound"], bound),
                       (BASELINE[1], COLORS["baseline"], base)], log=True)
    ax.set_xlabel("M IDs/s (log scale)")
    ax.set_title("emdb-bench in process: each line against its anchors\n" + run_conditions(recs),
                 fontsize=10)
    save(fig, out, "engine")


def plot_goals(recs, out):
    rows = []
    for r in recs:
        for key, val in r.items():
            if key.startswith("goal_ratio_"):
                ratio = key[len("goal_"):]
                if ratio in r and val > 0:
                    rows.append(("%s %s" % (engine_label(r), RATIO_LABELS.get(ratio, ratio)),
                                 r[ratio], val))
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.4))
    ys = range(len(rows))
    norm = [got / goal for _, got, goal in rows]
    colors = ["#2ca02c" if v >= 1 else "#d62728" for v in norm]
    ax.barh(ys, norm, color=colors)
    for y, (_, got, goal) in zip(ys, rows):
        ax.text(max(got / goal, 0) + 0.02, y, "%.2f (goal %.2f)" % (got, goal),
                va="center", fontsize=7)
    ax.axvline(1, color="black", lw=1)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([l for l, _, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(max(norm) * 1.35, 1.5))
    ax.set_xlabel("ratio / goal (1 = goal met; green met, red missed)")
    ax.set_title("emdb-bench in process: goals of this run\n" + run_conditions(recs), fontsize=10)
    save(fig, out, "goals")


def plot_net(recs, out):
    rows = [r for r in recs if "ids_per_sec" in r and "echo_ids_per_sec" in r]
    if not rows:
        return
    labels = ["%s %s %s" % (r["transport"] + ("+tls" if r.get("tls") else ""),
                            r["io_backend"], r["workload"]) for r in rows]

    def col(key):
        return [r[key] / 1e6 if key in r else None for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1.4))
    hbars(ax, labels, [("emdb-server", COLORS["emdb"], col("ids_per_sec")),
                       ("echo", COLORS["echo"], col("echo_ids_per_sec")),
                       ("echo + rows' work", COLORS["rows"], col("rows_echo_ids_per_sec")),
                       ("Redis", COLORS["redis"], col("redis_ids_per_sec"))],
          log=True)
    for y, r in enumerate(rows):
        ax.text(r["ids_per_sec"] / 1e6, y - 0.3, " %.2f of echo" % r["ratio_echo"],
                va="center", fontsize=7)
    ax.set_xlabel("M IDs/s (log scale), batch %d, depth %d" % (rows[0]["batch"], rows[0]["depth"]))
    ax.set_title("emdb-bench --net: one connection against its anchors\n" + run_conditions(rows),
                 fontsize=10)
    save(fig, out, "net")


def plot_latency(recs, out):
    rows = [r for r in recs if r.get("workload") == "lookup_one"]
    if not rows:
        return
    labels, p50, p99 = [], [], []
    for r in rows:
        poll = ("both poll %sus" % r["busy_poll_us"] if r.get("client_busy_poll_us")
                else "server polls %sus" % r["busy_poll_us"] if r.get("busy_poll_us")
                else "no polling")
        labels.append("%s %s emdb, %s" % (r["transport"], r["io_backend"], poll))
        p50.append(r["p50_us"])
        p99.append(r["p99_us"])
    first = rows[0]
    labels.append("%s echo" % first["transport"])
    p50.append(first["echo_p50_us"])
    p99.append(first["echo_p99_us"])
    if "redis_get_p99_us" in first:
        labels.append("%s Redis GET" % first["transport"])
        p50.append(first["redis_get_p50_us"])
        p99.append(first["redis_get_p99_us"])
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(labels) + 1.4))
    hbars(ax, labels, [("p50", COLORS["emdb"], p50), ("p99", COLORS["baseline"], p99)], log=True)
    ax.set_xlabel("microseconds, log scale (synchronous Lookup of one ID)")
    ax.set_title("emdb-bench --net: single-ID Lookup latency", fontsize=10)
    save(fig, out, "latency")


def plot_checkpoint(recs, out):
    figs = {r["figure"]: r for r in recs}
    groups = [("write", [("disk write bound", "disk_write"), ("SST writer alone", "sst_write"),
                         ("full checkpoint", "full")]),
              ("read", [("disk read bound", "disk_read"), ("making its memory", "restore_memory"),
                        ("restore", "restore")])]
    labels, vals, colors, ratios = [], [], [], []
    for _, items in groups:
        for label, key in items:
            if key in figs:
                f = figs[key]
                labels.append(label)
                vals.append(f["value"])
                ratios.append(" (%.2f of the %s)" % (f["ratio"], f["peer"])
                              if "ratio" in f and key in ("full", "restore") else "")
                colors.append(COLORS["emdb"] if key in ("full", "restore") else COLORS["bound"])
    if not labels:
        return
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(labels) + 1.6))
    ax.barh(range(len(labels)), vals, color=colors)
    for y, (v, note) in enumerate(zip(vals, ratios)):
        ax.text(v, y, " %.0f%s" % (v, note), va="center", fontsize=8)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("MB/s of checkpoint (best of three rounds)")
    notes = []
    if "pull_during" in figs and "ratio" in figs["pull_during"]:
        notes.append("Pull during a full checkpoint %.2f of without" % figs["pull_during"]["ratio"])
    if "pause_full" in figs:
        notes.append("longest Update during it %.1f ms" % figs["pause_full"]["value"])
    title = "emdb-bench --workload checkpoint"
    if "full" in figs and "bytes" in figs["full"]:
        title += " (%.2f GB)" % (figs["full"]["bytes"] / 1e9)
    ax.set_title(title + ("\n" + "; ".join(notes) if notes else ""), fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    save(fig, out, "checkpoint")


def main():
    ap = argparse.ArgumentParser(description="Draw emdb-bench --json output as PNG files.")
    ap.add_argument("files", nargs="+", metavar="FILE.json", help='JSON lines ("-": stdin)')
    ap.add_argument("-o", "--dir", default=".", help="output folder (default .)")
    ap.add_argument("--prefix", default="", help="prefix of the PNG names")
    ap.add_argument("--dpi", type=int, default=80, help="resolution (default 80)")
    out = ap.parse_args()
    if not os.path.isdir(out.dir):
        die("%s is not a folder" % out.dir)
    recs = read_records(out.files)
    ckpt = [r for r in recs if r["workload"] == "checkpoint"]
    net = [r for r in recs if r.get("mode") == "net"]
    engine = [r for r in recs
              if r["workload"] != "checkpoint" and r.get("mode") != "net" and "ids_per_sec" in r]
    plot_engine(engine, out)
    plot_goals(engine, out)
    plot_net(net, out)
    plot_latency(net, out)
    plot_checkpoint(ckpt, out)
    if not (ckpt or net or engine):
        die("no emdb-bench figures in the input")


if __name__ == "__main__":
    main()
