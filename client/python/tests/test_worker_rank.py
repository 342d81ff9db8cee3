"""worker_rank from Python: two ranked workers of one synchronous step
leave bit-identical rows whichever pushed first, as unranked ones do not."""
from __future__ import annotations

import threading
import uuid
from typing import List, Optional

import numpy as np
import pytest

import emdb

IDS = np.array([5, 9, 5], dtype=np.uint64)
# Worker 0 pushes ID 5 twice: 1e8 then -1e8; worker 1 pushes 1.0.  In
# float32 1e8 + 1 is 1e8, so the sum depends on the order of the terms.
G0 = np.array([[1e8] * 4, [0.5] * 4, [-1e8] * 4], dtype=np.float32)
G1 = np.array([[1.0] * 4, [0.25] * 4, [0.0] * 4], dtype=np.float32)


def run(order: List[int], ranked: bool) -> np.ndarray:
    """One step of two workers on a fresh mem:// database; pushes in the
    given interleaving of (worker, row) calls, then update_sync(2)."""
    name = "mem://rank-" + uuid.uuid4().hex
    ranks: List[Optional[int]] = [0, 1] if ranked else [None, None]
    w = [emdb.connect(name, worker_rank=r) for r in ranks]
    try:
        assert [c.worker_rank for c in w] == ranks
        t = [w[0].create_table("e", 4, "sgd", lr=1.0), None]
        t[1] = w[1].table("e")
        grads = (G0, G1)
        pos = [0, 0]
        for k in order:                      # worker k pushes its next row
            r = pos[k]
            pos[k] += 1
            t[k].push(IDS[r:r + 1], grads[k][r:r + 1])
        rows: List[int] = [0, 0]
        errs: List[BaseException] = []

        def step(k: int) -> None:
            try:
                rows[k] = t[k].update_sync(2)
            except BaseException as e:       # reported below
                errs.append(e)

        th = [threading.Thread(target=step, args=(k,)) for k in (0, 1)]
        for x in th:
            x.start()
        for x in th:
            x.join(60)
        assert not errs, errs
        assert rows[0] == rows[1] == 2
        assert t[0].describe().stats["step"] == 1
        return t[0].pull(np.array([5, 9], dtype=np.uint64))
    finally:
        for c in w:
            c.close()


ORDERS = ([0, 1, 0, 1, 0, 1], [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1], [1, 0, 1, 0, 1, 0])


def test_ranked_workers_give_the_same_bits_in_any_order() -> None:
    first = run(ORDERS[0], ranked=True)
    for o in ORDERS[1:]:
        got = run(o, ranked=True)
        assert got.tobytes() == first.tobytes(), (o, got, first)
    # Rank order: worker 0's terms (1e8, -1e8) first, then worker 1's 1.0.
    assert first[0][0] == np.float32(-1.0)


def test_unranked_workers_depend_on_the_order() -> None:
    # The control: the same pushes without ranks differ by arrival order,
    # so the ranked test above can tell the two apart.
    a = run([0, 1, 0, 1, 0, 1], ranked=False)
    b = run([0, 0, 0, 1, 1, 1], ranked=False)
    assert a.tobytes() != b.tobytes()


def test_step_refuses_a_rank_not_below_workers() -> None:
    torch = pytest.importorskip("torch")
    import emdb.torch as et
    with emdb.connect("mem://", worker_rank=2) as c:
        assert torch is not None
        t = c.create_table("s", 4)
        with pytest.raises(ValueError):
            et.Step(t, workers=2)
        et.Step(t, workers=3)
