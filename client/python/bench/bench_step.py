#!/usr/bin/python3
"""bench_step.py - one training step of an embedding table, side by side:

  c            the C client alone (emdb-step-bench): pooled Pull, pooled
               Push, Update;
  emdb.numpy   the same calls through emdb.Client (numpy arrays);
  emdb.torch   the same step through emdb.torch.EmbeddingBag: forward,
               backward of a given gradient, emdb.torch.Step.step();
  torch        torch.nn.EmbeddingBag(sparse=True) + torch.optim.SparseAdam
               on the CPU, the whole table in this process.

    PYTHONPATH=build/release/python client/python/bench/bench_step.py \\
        --uri unix:///tmp/emdb.sock --steps 2000

Batch 4096 IDs in bags of 16, dim 64, a vocabulary of 100k IDs inserted
before the clock starts, the optimizer Adam (docs/python.md, "Benchmark",
has the figures).  The goal: emdb.torch costs at most 10% more than c.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Tuple

import numpy as np
import torch

import emdb
import emdb.torch


#: Steps run before the clock starts, as emdb-step-bench's WARMUP: the first
#: Pushes map the table's gradient accumulators.  Step s < 0 takes batch
#: s % steps (the last ones), there as here.
WARMUP = 20


def batches(steps: int, batch: int, vocab: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, (steps, batch), dtype=np.int64)


def step_inputs(args):
    """The offsets (bags of args.bag, with the end) and the gradient of the
    bags that every side uses, as torch tensors (numpy views of them too)."""
    bags = args.batch // args.bag
    off = torch.arange(0, args.batch + 1, args.bag)
    g = (1e-3 * (torch.arange(bags * args.dim) % 7)).float().reshape(bags, args.dim)
    return off, g


def insert_all(t: emdb.Table, vocab: int) -> None:
    for lo in range(0, vocab, 65536):
        t.pull(np.arange(lo, min(vocab, lo + 65536), dtype=np.uint64))


def side_c(args, exe: str) -> Tuple[float, float]:
    out = subprocess.run([exe, args.uri, str(args.steps), str(args.batch), str(args.dim),
                          str(args.bag), str(args.vocab), args.optimizer],
                         check=True, capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    return res["step_us"], res["cpu_us"]


def side_numpy(args, db: emdb.Client, ids: np.ndarray) -> Tuple[float, float]:
    t = db.create_table("bench_np", args.dim, args.optimizer, init=("uniform", -0.05, 0.05))
    insert_all(t, args.vocab)
    toff, tg = step_inputs(args)
    off, g = toff.numpy(), tg.numpy()
    out = np.empty(g.shape, np.float32)
    for s in range(-WARMUP, args.steps):
        if s == 0:
            t0, c0 = time.perf_counter(), time.thread_time()
        t.pull(ids[s % args.steps], out, offsets=off)
        t.push(ids[s % args.steps], g, offsets=off)
        t.update()
    dt, dc = time.perf_counter() - t0, time.thread_time() - c0
    t.drop()
    return dt / args.steps * 1e6, dc / args.steps * 1e6


def side_torch_module(args, db: emdb.Client, ids: np.ndarray) -> Tuple[float, float]:
    t = db.create_table("bench_torch", args.dim, args.optimizer, init=("uniform", -0.05, 0.05))
    insert_all(t, args.vocab)
    emb = emdb.torch.EmbeddingBag(db, t, mode="sum", include_last_offset=True)
    step = emdb.torch.Step(emb)
    off, g = step_inputs(args)
    tids = list(torch.from_numpy(ids))       # one tensor per batch, as a data loader gives
    for s in range(-WARMUP, args.steps):
        if s == 0:
            t0, c0 = time.perf_counter(), time.thread_time()
        out = emb(tids[s % args.steps], off)
        out.backward(g)
        step.step()
    dt, dc = time.perf_counter() - t0, time.thread_time() - c0
    t.drop()
    return dt / args.steps * 1e6, dc / args.steps * 1e6


def paired(args, db: emdb.Client, ids: np.ndarray) -> dict:
    """The layer's cost measured step against step, robust to a busy
    machine: four kinds of step alternate on one table, each with its own
    batch (so that none finds another's rows in the cache), the one going
    first rotating from step to step; the figures are the medians of the
    per-step times, in wall time and in this thread's CPU time (what a busy
    machine moves less: time the thread waits for a core is not in it),
    and the medians of the per-step differences of CPU time (two kinds
    that ran within the same few milliseconds, so that a drift of the
    machine's speed cancels).

      bare     the three C calls made bare through cffi (pointers made
               beforehand): the C client's cost plus well under a
               microsecond per call;
      module   emdb.torch: emb(ids, offsets).backward(g), Step.step();
      trainer  what a torch trainer calling the C client by hand does for
               the same step: the bare Pull into a tensor that requires
               grad, the model's loss and backward (a stand-in model:
               loss = sum(out * g), whose gradient at out is g), the bare
               Push of out.grad, the bare Update;
      model    emdb.torch under the same model: (emb(ids, offsets) *
               g).sum().backward(), Step.step().

    Every kind pushes the same gradient g into the same table.  bare
    against module is the layer with torch's backward() machinery counted
    as its cost (the C side runs no autograd); trainer against model
    counts that machinery as the model's, which any torch trainer runs
    once per step anyway: what is left is the layer's own."""
    ffi, lib = db._native
    t = db.create_table("bench_pair", args.dim, args.optimizer, init=("uniform", -0.05, 0.05))
    insert_all(t, args.vocab)
    emb = emdb.torch.EmbeddingBag(db, t, mode="sum", include_last_offset=True)
    step = emdb.torch.Step(emb)
    off, g = step_inputs(args)
    bags = g.shape[0]
    out = np.empty(g.shape, np.float32)
    out_t = torch.from_numpy(out).requires_grad_()
    c, pool = db._h(), lib.EMDB_POOL_SUM
    off_p, g_p, out_p = (ffi.from_buffer("uint64_t[]", off.numpy()), ffi.from_buffer("float[]", g.numpy()),
                         ffi.from_buffer("float[]", out))
    u = np.ascontiguousarray(ids).view(np.uint64)
    tids = list(torch.from_numpy(ids))
    clock, cpu = time.perf_counter, time.thread_time

    def bare(s: int) -> Tuple[float, float]:
        ids_p = ffi.from_buffer("uint64_t[]", u[s])
        t0, c0 = clock(), cpu()
        lib.emdb_client_pull_bags(c, t.id, ids_p, args.batch, off_p, bags, pool, args.dim, out_p)
        lib.emdb_client_push_bags(c, t.id, ids_p, args.batch, off_p, bags, pool, args.dim, g_p)
        lib.emdb_client_update(c, t.id, ffi.NULL)
        return clock() - t0, cpu() - c0

    def trainer(s: int) -> Tuple[float, float]:
        ids_p = ffi.from_buffer("uint64_t[]", u[s])
        t0, c0 = clock(), cpu()
        lib.emdb_client_pull_bags(c, t.id, ids_p, args.batch, off_p, bags, pool, args.dim, out_p)
        (out_t * g).sum().backward()
        grad, out_t.grad = out_t.grad, None
        lib.emdb_client_push_bags(c, t.id, ids_p, args.batch, off_p, bags, pool, args.dim,
                                  ffi.cast("float *", grad.data_ptr()))
        lib.emdb_client_update(c, t.id, ffi.NULL)
        return clock() - t0, cpu() - c0

    def module(s: int) -> Tuple[float, float]:
        x = tids[s]
        t0, c0 = clock(), cpu()
        emb(x, off).backward(g)
        step.step()
        return clock() - t0, cpu() - c0

    def model(s: int) -> Tuple[float, float]:
        x = tids[s]
        t0, c0 = clock(), cpu()
        (emb(x, off) * g).sum().backward()
        step.step()
        return clock() - t0, cpu() - c0

    kinds = [("bare", bare), ("module", module), ("trainer", trainer), ("model", model)]
    times: dict = {k: ([], []) for k, _ in kinds}
    for s in range(-WARMUP, args.steps):
        r = s % len(kinds)
        for i, (k, fn) in enumerate(kinds[r:] + kinds[:r]):
            w, cp = fn((s + (i + r) % len(kinds) * args.steps // len(kinds)) % args.steps)
            if s >= 0:
                times[k][0].append(w)
                times[k][1].append(cp)
    t.drop()
    med = {k: (float(np.median(w)) * 1e6, float(np.median(cp)) * 1e6) for k, (w, cp) in times.items()}
    (r, rc), (m, mc) = med["bare"], med["module"]
    (tr, trc), (mm, mmc) = med["trainer"], med["model"]
    def diff(a: str, b: str) -> float:
        """The median over steps of a's CPU time less b's in the same step
        (a drift of the machine's speed cancels within a step)."""
        return float(np.median(np.subtract(times[a][1], times[b][1]))) * 1e6

    return {"c_calls_us": r, "emdb.torch_us": m, "layer_us": m - r, "layer_pct": (m / r - 1) * 100,
            "layer_cpu_step_us": diff("module", "bare"),
            "layer_model_cpu_step_us": diff("model", "trainer"),
            "c_calls_cpu_us": rc, "emdb.torch_cpu_us": mc, "layer_cpu_us": mc - rc,
            "layer_cpu_pct": (mc / rc - 1) * 100,
            "trainer_us": tr, "model_us": mm, "layer_model_us": mm - tr,
            "layer_model_pct": (mm / tr - 1) * 100, "trainer_cpu_us": trc, "model_cpu_us": mmc,
            "layer_model_cpu_us": mmc - trc, "layer_model_cpu_pct": (mmc / trc - 1) * 100}


def side_torch(args, ids: np.ndarray) -> Tuple[float, float]:
    emb = torch.nn.EmbeddingBag(args.vocab, args.dim, mode="sum", sparse=True,
                                include_last_offset=True)
    opt = torch.optim.SparseAdam(emb.parameters())
    off, g = step_inputs(args)
    tids = list(torch.from_numpy(ids))
    for s in range(-WARMUP, args.steps):
        if s == 0:
            t0, c0 = time.perf_counter(), time.thread_time()
        opt.zero_grad()
        emb(tids[s % args.steps], off).backward(g)
        opt.step()
    dt, dc = time.perf_counter() - t0, time.thread_time() - c0
    return dt / args.steps * 1e6, dc / args.steps * 1e6


def main() -> int:
    default_exe = os.environ.get("EMDB_STEP_BENCH", "")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uri", default="mem://")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--bag", type=int, default=16)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=100_000)
    ap.add_argument("--optimizer", default="adam")
    ap.add_argument("--step-bench", default=default_exe,
                    help="emdb-step-bench (default: next to the emdb package's build tree)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of all sides (median)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--paired-only", action="store_true",
                    help="only the paired measurement (no rounds of the four sides)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.batch % args.bag:
        ap.error("--bag must divide --batch")
    exe = args.step_bench or str(Path(emdb.__file__).resolve().parents[2] / "client" / "python" /
                                 "emdb-step-bench")
    torch.set_num_threads(args.threads)
    ids = batches(args.steps, args.batch, args.vocab)
    # Rounds alternate the sides, each round starting with the next side,
    # so that neither a busy moment of the machine nor the order favours
    # one; each side's figure is its median round (and its best).
    with emdb.connect(args.uri) as db:
        sides = [("c", lambda: side_c(args, exe)),
                 ("emdb.numpy", lambda: side_numpy(args, db, ids)),
                 ("emdb.torch", lambda: side_torch_module(args, db, ids)),
                 ("torch", lambda: side_torch(args, ids))]
        runs: dict = {name: [] for name, _ in sides}
        load = [os.getloadavg()[0]]
        for r in range(args.rounds if not args.paired_only else 0):
            for name, fn in sides[r % len(sides):] + sides[:r % len(sides)]:
                runs[name].append(fn())
        pair = paired(args, db, ids)
        load.append(os.getloadavg()[0])
    res = {k: float(np.median([w for w, _ in v])) for k, v in runs.items() if v}
    best = {k: float(np.min([w for w, _ in v])) for k, v in runs.items() if v}
    cpu = {k: float(np.median([c for _, c in v])) for k, v in runs.items() if v}
    # Where emdb.torch's forward and backward run (docs/python.md).
    step_in = "C++" if getattr(emdb.torch, "_torch_bags", None) is not None else "Python"
    if args.json:
        print(json.dumps({"uri": args.uri, "steps": args.steps, "batch": args.batch,
                          "bag": args.bag, "dim": args.dim, "vocab": args.vocab,
                          "optimizer": args.optimizer, "rounds": args.rounds, "step_us": res,
                          "best_us": best, "cpu_us": cpu, "runs_us": runs, "paired": pair,
                          "loadavg": load, "torch_step": step_in}))
        return 0
    print(f"{args.uri}: {args.steps} steps of {args.batch} IDs (bags of {args.bag}), dim {args.dim}, "
          f"{args.optimizer}, vocabulary {args.vocab}; median of {args.rounds} rounds; "
          f"emdb.torch's step in {step_in}; "
          f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the end")
    if res:
        print(f"{'side':<12} {'median us':>10} {'vs c':>8} {'best us':>10} {'vs c':>8} "
              f"{'cpu us':>10} {'vs c':>8}")
        for k, v in res.items():
            print(f"{k:<12} {v:10.1f} {v / res['c'] - 1:+8.1%} {best[k]:10.1f} "
                  f"{best[k] / best['c'] - 1:+8.1%} {cpu[k]:10.1f} {cpu[k] / cpu['c'] - 1:+8.1%}")
    print(f"paired, step against step (medians of {args.steps}), wall us (CPU us):")
    print(f"  bare C calls {pair['c_calls_us']:.1f} ({pair['c_calls_cpu_us']:.1f}), emdb.torch "
          f"{pair['emdb.torch_us']:.1f} ({pair['emdb.torch_cpu_us']:.1f}): the layer with torch's "
          f"backward() costs {pair['layer_us']:.1f} us ({pair['layer_pct']:+.1f}%), CPU "
          f"{pair['layer_cpu_us']:.1f} us ({pair['layer_cpu_pct']:+.1f}%), step by step "
          f"{pair['layer_cpu_step_us']:.1f} us")
    print(f"  under one model: C calls by hand {pair['trainer_us']:.1f} ({pair['trainer_cpu_us']:.1f}), "
          f"emdb.torch {pair['model_us']:.1f} ({pair['model_cpu_us']:.1f}): the layer costs "
          f"{pair['layer_model_us']:.1f} us ({pair['layer_model_pct']:+.1f}%), CPU "
          f"{pair['layer_model_cpu_us']:.1f} us ({pair['layer_model_cpu_pct']:+.1f}%), step by step "
          f"{pair['layer_model_cpu_step_us']:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
