"""client/python/bench/bench_step.py runs its four sides and the paired
measurement on a small batch and reports what docs/python.md shows."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import List, Tuple

import pytest

from conftest import BUILD, REPO

pytest.importorskip("torch", reason="python3-torch is not installed")


def run(argv: List[str], env: dict) -> Tuple[int, str, str]:
    """argv in a process group of its own (the script starts
    emdb-step-bench), all of it killed if it outlasts the timeout."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return p.returncode, out, err


def test_bench_step_small() -> None:
    exe = BUILD / "client" / "python" / "emdb-step-bench"
    if not exe.exists():
        pytest.skip(f"{exe} is not built (CMake target emdb-step-bench)")
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    argv = [sys.executable, str(REPO / "client" / "python" / "bench" / "bench_step.py"),
            "--uri", "mem://", "--steps", "6", "--batch", "64", "--bag", "8", "--vocab", "500",
            "--rounds", "2", "--step-bench", str(exe), "--json"]
    rc, stdout, stderr = run(argv, env)
    assert rc == 0, stderr[-2000:]
    out = json.loads(stdout.strip().splitlines()[-1])
    assert out["batch"] == 64 and out["rounds"] == 2
    for side in ("c", "emdb.numpy", "emdb.torch", "torch"):
        assert out["step_us"][side] > 0 and out["cpu_us"][side] > 0
        assert len(out["runs_us"][side]) == 2
    p = out["paired"]
    assert p["c_calls_us"] > 0 and p["emdb.torch_us"] > 0 and p["c_calls_cpu_us"] > 0
    assert p["layer_us"] == pytest.approx(p["emdb.torch_us"] - p["c_calls_us"])
    assert p["trainer_us"] > 0 and p["model_us"] > 0 and p["trainer_cpu_us"] > 0
    assert p["layer_model_us"] == pytest.approx(p["model_us"] - p["trainer_us"])
    assert p["layer_model_cpu_us"] == pytest.approx(p["model_cpu_us"] - p["trainer_cpu_us"])
    assert "layer_cpu_step_us" in p and "layer_model_cpu_step_us" in p
    assert len(out["loadavg"]) == 2
    rc, _, stderr = run(argv[:-1] + ["--bag", "7"], env)
    assert rc == 2 and "--bag must divide --batch" in stderr
