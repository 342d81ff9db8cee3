"""client/python/bench/bench_step.py runs its four sides and the paired
measurement on a small batch and reports what docs/python.md shows."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, REPO

pytest.importorskip("torch", reason="python3-torch is not installed")


def test_bench_step_small() -> None:
    exe = BUILD / "client" / "python" / "emdb-step-bench"
    if not exe.exists():
        pytest.skip(f"{exe} is not built (CMake target emdb-step-bench)")
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    argv = [sys.executable, str(REPO / "client" / "python" / "bench" / "bench_step.py"),
            "--uri", "mem://", "--steps", "6", "--batch", "64", "--bag", "8", "--vocab", "500",
            "--rounds", "2", "--step-bench", str(exe), "--json"]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["batch"] == 64 and out["rounds"] == 2
    for side in ("c", "emdb.numpy", "emdb.torch", "torch"):
        assert out["step_us"][side] > 0 and out["cpu_us"][side] > 0
        assert len(out["runs_us"][side]) == 2
    p = out["paired"]
    assert p["c_calls_us"] > 0 and p["emdb.torch_us"] > 0 and p["c_calls_cpu_us"] > 0
    assert p["layer_us"] == pytest.approx(p["emdb.torch_us"] - p["c_calls_us"])
    assert len(out["loadavg"]) == 2
    bad = subprocess.run(argv[:-1] + ["--bag", "7"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and "--bag must divide --batch" in bad.stderr
