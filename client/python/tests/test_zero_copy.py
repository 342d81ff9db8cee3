"""Arrays cross to C without copies: outputs are written in place, inputs
of the C type are passed as they are."""
from __future__ import annotations

import numpy as np

import emdb
from emdb import arrays


def test_pull_writes_into_out(db: emdb.Client) -> None:
    t = db.create_table("z", 8, init=("uniform", -1, 1))
    out = np.full((3, 8), np.nan, np.float32)
    got = t.pull([1, 2, 3], out)
    assert got is out
    assert not np.isnan(out).any()
    pooled = np.empty((1, 8), np.float32)
    assert t.pull([1, 2, 3], pooled, offsets=[0, 3]) is pooled
    np.testing.assert_allclose(pooled[0], out.sum(0), rtol=1e-6)
    look = np.empty((3, 8), np.float32)
    assert t.lookup([1, 2, 3], look) is look
    np.testing.assert_array_equal(look, out)


def test_new_outputs_own_their_memory(db: emdb.Client) -> None:
    t = db.create_table("o", 4)
    a = t.pull([1])
    assert a.flags.owndata and a.flags.c_contiguous and a.dtype == np.float32


def test_inputs_are_views() -> None:
    u = np.arange(10, dtype=np.uint64)
    assert arrays.ids(u) is u
    i = np.array([1, -1], dtype=np.int64)
    v = arrays.ids(i)
    assert np.shares_memory(v, i) and v[1] == 2**64 - 1       # the same 64 bits
    g = np.ones((2, 4), np.float32)
    assert np.shares_memory(arrays.floats(g, 2, 4), g)
    d = np.ones((2, 4), np.float64)
    assert arrays.floats(d, 2, 4).dtype == np.float32          # converted once
    strided = np.arange(20, dtype=np.uint64)[::2]
    assert arrays.ids(strided).flags.c_contiguous


def test_torch_tensors_pass_as_views() -> None:
    torch = __import__("pytest").importorskip("torch", reason="python3-torch is not installed")
    ids = torch.tensor([5, 6], dtype=torch.int64)
    assert np.shares_memory(arrays.ids(ids.numpy()), ids.numpy())
