"""emdb.torch.EmbeddingBag against torch.nn.EmbeddingBag: forward, backward
and one optimizer step, for every option both have."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import emdb

torch = pytest.importorskip("torch", reason="python3-torch is not installed")
import emdb.torch  # noqa: E402

V, D, LR = 40, 6, 0.5


def pair(db: emdb.Client, mode: str, include_last_offset: bool = False, padding_idx=None):
    """An emdb module and a torch module with the same weights."""
    t = db.create_table(f"e_{mode}_{int(include_last_offset)}_{padding_idx}", D, "sgd", lr=LR,
                        init=("uniform", -1, 1), seed=5, lookup_default="init")
    ours = emdb.torch.EmbeddingBag(db, t, D, mode=mode, include_last_offset=include_last_offset,
                                   padding_idx=padding_idx)
    theirs = torch.nn.EmbeddingBag(V, D, mode=mode, include_last_offset=include_last_offset,
                                   padding_idx=padding_idx)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(t.lookup(np.arange(V))))
    return t, ours, theirs


def batch(include_last_offset: bool):
    ids = torch.tensor([3, 7, 3, 0, 12, 3, 39, 7, 1], dtype=torch.int64)
    offsets = torch.tensor([0, 2, 2, 6], dtype=torch.int64)       # bags of 2, 0, 4, 3
    if include_last_offset:
        offsets = torch.cat([offsets, torch.tensor([ids.numel()])])
    return ids, offsets


CASES = [(m, lo, pad, w) for m, lo, pad, w in itertools.product(
    ["sum", "mean"], [False, True], [None, 3], [False, True]) if not (w and m == "mean")]


@pytest.mark.parametrize("mode,last,pad,weighted", CASES)
def test_matches_torch(db: emdb.Client, mode: str, last: bool, pad, weighted: bool) -> None:
    t, ours, theirs = pair(db, mode, last, pad)
    ids, offsets = batch(last)
    w1 = torch.linspace(0.5, 2.0, ids.numel()).requires_grad_() if weighted else None
    w2 = w1.detach().clone().requires_grad_() if weighted else None
    a = ours(ids, offsets, w1)
    b = theirs(ids, offsets, w2)
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    r = torch.randn(a.shape, generator=torch.Generator().manual_seed(1))
    (a * r).sum().backward()
    (b * r).sum().backward()
    if weighted:
        torch.testing.assert_close(w1.grad, w2.grad, rtol=1e-5, atol=1e-6)
    emdb.torch.Step(ours).step()
    with torch.no_grad():
        theirs.weight -= LR * theirs.weight.grad
    torch.testing.assert_close(torch.from_numpy(t.lookup(np.arange(V))), theirs.weight,
                               rtol=1e-6, atol=1e-6)
    if pad is not None:
        assert not t.lookup([pad], with_found=True)[1][0]           # never pulled nor pushed


def test_two_dimensional_input(db: emdb.Client) -> None:
    t, ours, theirs = pair(db, "mean")
    ids = torch.tensor([[1, 2, 3], [4, 4, 5]])
    torch.testing.assert_close(ours(ids), theirs(ids), rtol=1e-6, atol=1e-6)


def test_no_grad_uses_lookup(db: emdb.Client) -> None:
    t, ours, theirs = pair(db, "sum")
    ids, offsets = batch(False)
    before = t.describe().stats
    with torch.no_grad():
        a = ours(ids, offsets)
        b = theirs(ids, offsets)
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    st = t.describe().stats
    assert st["rows"] == 0 and st["calls_pull"] == 0
    assert st["calls_lookup"] == before["calls_lookup"] + 1
    assert not a.requires_grad


def test_all_padding_and_options(db: emdb.Client) -> None:
    t, ours, _ = pair(db, "mean", padding_idx=2)
    out = ours(torch.tensor([2, 2]), torch.tensor([0, 1]))
    assert torch.equal(out, torch.zeros(2, D))
    out.sum().backward()                                        # nothing to push
    assert t.describe().stats["rows"] == 0
    with pytest.raises(ValueError):
        ours(torch.tensor([1]), torch.tensor([0]), torch.tensor([1.0]))   # weights need sum
    with pytest.raises(ValueError):
        emdb.torch.EmbeddingBag(db, t, D + 1)
    with pytest.raises(ValueError):
        ours(torch.tensor([1, 2]))                                # 1-D without offsets
    assert "mode='mean'" in repr(ours)


def test_step_is_an_optimizer(db: emdb.Client) -> None:
    t, ours, _ = pair(db, "sum")
    step = emdb.torch.Step([ours, ours, t])
    assert len(step.tables) == 1
    step.zero_grad()
    ours(torch.tensor([1, 2]), torch.tensor([0])).sum().backward()
    assert step.step() is None and step.last_rows == 2
    assert step.step(lambda: 7.0) == 7.0 and step.last_rows == 0


def test_data_parallel_step(server) -> None:
    """Two workers, each its own connection, module and Step(workers=2):
    every step's Update is applied once, with both workers' gradients."""
    import threading

    with emdb.connect(server.uri) as admin:
        t = admin.create_table("dp", 2, "sgd", lr=1.0)
    errors = []

    def worker(rank: int) -> None:
        try:
            with emdb.connect(server.uri) as db:
                emb = emdb.torch.EmbeddingBag(db, "dp", mode="sum")
                step = emdb.torch.Step(emb, workers=2)
                for _ in range(3):
                    emb(torch.tensor([7]), torch.tensor([0])).sum().mul(rank + 1).backward()
                    step.step()
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not any(th.is_alive() for th in threads) and not errors, errors
    with emdb.connect(server.uri) as db:
        info = db.describe("dp")
        assert info.stats["step"] == 3
        np.testing.assert_array_equal(db.table("dp").pull([7]), [[-9, -9]])   # 3 x (1 + 2)


def test_lr_schedule(db: emdb.Client) -> None:
    """A torch lr_scheduler drives the table's lr through Step's param
    groups; the new lr applies from the next step on."""
    t, ours, _ = pair(db, "sum")
    step = emdb.torch.Step(ours)
    assert isinstance(step, torch.optim.Optimizer)
    assert step.param_groups[0]["lr"] == pytest.approx(LR)
    sched = torch.optim.lr_scheduler.StepLR(step, step_size=1, gamma=0.5)
    start = t.lookup([1])[0]
    for k in range(3):                       # lr 0.5, then 0.25, then 0.125
        ours(torch.tensor([1]), torch.tensor([0])).sum().backward()
        step.step()
        sched.step()
    assert t.describe().config.optimizer.lr == pytest.approx(0.125)
    np.testing.assert_allclose(t.lookup([1])[0], start - (0.5 + 0.25 + 0.125), rtol=1e-6)
    step.set_hyperparameters(lr=0.01)
    assert step.param_groups[0]["lr"] == pytest.approx(0.01)
    assert t.describe().config.optimizer.lr == pytest.approx(0.01)


def test_state_dict_round_trip(db: emdb.Client) -> None:
    t, ours, _ = pair(db, "sum")
    ours(torch.tensor([1, 9, 2**40]), torch.tensor([0, 1])).sum().backward()
    emdb.torch.Step(ours).step()
    sd = ours.state_dict()
    assert set(sd) == {"ids", "weight"} and sd["weight"].shape == (3, D)
    u = db.create_table("copy", D, "sgd")
    other = emdb.torch.EmbeddingBag(db, u, mode="sum")
    other.load_state_dict(sd)
    ids = sd["ids"].numpy()
    np.testing.assert_array_equal(u.lookup(ids), t.lookup(ids))
    bad = {"ids": sd["ids"], "weight": sd["weight"][:2]}
    with pytest.raises(RuntimeError):
        other.load_state_dict(bad)


def test_layouts_of_inputs_and_gradients(db: emdb.Client) -> None:
    """The same bags given as int64 tensors with the end (the form forward
    passes to the engine as it is), as a strided view, with int32 offsets,
    and with a gradient that arrives strided or as float64: the same
    outputs and the same pushed gradients as torch."""
    t, ours, theirs = pair(db, "sum", include_last_offset=True)
    ids, offsets = batch(True)
    spread = torch.zeros(2 * ids.numel(), dtype=torch.int64)
    spread[::2] = ids
    r = torch.randn(4, D, generator=torch.Generator().manual_seed(2))
    forms = [(ids, offsets), (spread[::2], offsets), (ids, offsets.to(torch.int32))]
    for k, (i, o) in enumerate(forms):
        assert not i.is_contiguous() if k == 1 else i.is_contiguous()
        a = ours(i, o)
        b = theirs(ids, offsets)
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
        if k == 0:
            (a.t() * r.t()).sum().backward()             # a strided gradient
        elif k == 1:
            (a.double() * r.double()).sum().backward()   # float64 on the way back
        else:
            (a * r).sum().backward()
        (b * r).sum().backward()
        emdb.torch.Step(ours).step()
        with torch.no_grad():
            theirs.weight -= LR * theirs.weight.grad
            theirs.weight.grad = None
        torch.testing.assert_close(torch.from_numpy(t.lookup(np.arange(V))), theirs.weight,
                                   rtol=1e-5, atol=1e-6)
    bad = torch.tensor([0, 5, 3, ids.numel()])                 # offsets going down
    with pytest.raises(emdb.Error):
        ours(ids, bad)


def test_step_under_the_profiler(db: emdb.Client) -> None:
    """step() is labelled in torch's profiler as torch.optim's steps are,
    and applies the Update all the same."""
    t, ours, _ = pair(db, "sum")
    step = emdb.torch.Step(ours)
    start = t.lookup([1])[0]
    with torch.autograd.profiler.profile() as prof:
        ours(torch.tensor([1]), torch.tensor([0])).sum().backward()
        step.step()
    assert "Optimizer.step#Step.step" in {e.name for e in prof.function_events}
    assert step.last_rows == 1
    np.testing.assert_allclose(t.lookup([1])[0], start - LR, rtol=1e-6)
    ours(torch.tensor([1]), torch.tensor([0])).sum().backward()
    step.step()                                                 # and without it
    np.testing.assert_allclose(t.lookup([1])[0], start - 2 * LR, rtol=1e-6)


def test_kept_outputs_and_two_forwards_before_backward(db: emdb.Client) -> None:
    """forward's fast path (1-D int64 IDs, offsets with the end) gives each
    forward an output of its own: an output the caller keeps is never
    overwritten by a later forward, and each backward pushes the gradient
    of its own forward's IDs, whatever ran in between."""
    t, ours, theirs = pair(db, "sum", include_last_offset=True)
    ids1, off1 = torch.tensor([1, 2, 3]), torch.tensor([0, 1, 3])
    ids2, off2 = torch.tensor([4, 5, 4, 6]), torch.tensor([0, 2, 4])
    a1, a2 = ours(ids1, off1), ours(ids2, off2)
    b1, b2 = theirs(ids1, off1), theirs(ids2, off2)
    assert a1.data_ptr() != a2.data_ptr()
    torch.testing.assert_close(a1, b1, rtol=1e-6, atol=1e-6)      # a1 kept its values
    torch.testing.assert_close(a2, b2, rtol=1e-6, atol=1e-6)
    kept = a2.detach().clone()
    r1 = torch.randn(a1.shape, generator=torch.Generator().manual_seed(3))
    r2 = torch.randn(a2.shape, generator=torch.Generator().manual_seed(4))
    (a2 * r2).sum().backward()                                     # the later forward first
    a3 = ours(ids1, off1)                                          # a third forward between
    (a1 * r1).sum().backward()
    torch.testing.assert_close(a2.detach(), kept)
    (b2 * r2).sum().backward()
    (b1 * r1).sum().backward()
    emdb.torch.Step(ours).step()
    with torch.no_grad():
        theirs.weight -= LR * theirs.weight.grad
    torch.testing.assert_close(torch.from_numpy(t.lookup(np.arange(V))), theirs.weight,
                               rtol=1e-6, atol=1e-6)
    assert a3.grad_fn is not None and a3.data_ptr() not in (a1.data_ptr(), a2.data_ptr())


# ---- forward's fast path: C++ (emdb._torch_bags) and the Python Function ----

def fast_path(module, path: str):
    """The module with its fast path in C++ (path "cpp", skipped where
    emdb._torch_bags is not built) or in the Python Function ("python")."""
    if path == "cpp" and emdb.torch._torch_bags is None:
        pytest.skip("emdb._torch_bags is not built (libtorch-dev, pybind11-dev missing)")
    if path == "python":
        module._conn = None
    return module


@pytest.fixture(params=["cpp", "python"])
def path(request: pytest.FixtureRequest) -> str:
    return request.param


def test_fast_paths_agree_bit_for_bit(db: emdb.Client) -> None:
    """Six Adam steps through the C++ node and through the Python Function,
    on two tables holding the same rows: the same outputs, rows and
    optimizer state, bit for bit, and each output's grad_fn is its path's."""
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((V, D)).astype(np.float32)
    mods = []
    for path in ("cpp", "python"):
        t = db.create_table(f"fast_{path}", D, "adam", lr=0.01)
        t.load(np.arange(V), rows)
        mods.append((t, fast_path(emdb.torch.EmbeddingBag(db, t, mode="mean",
                                                          include_last_offset=True), path)))
    steps = [emdb.torch.Step(m) for _, m in mods]
    for s in range(6):
        ids = torch.from_numpy(rng.integers(0, V, 30))          # duplicates within and across bags
        offsets = torch.tensor([0, 4, 4, 19, 30])                # an empty bag too
        r = torch.from_numpy(rng.standard_normal((4, D)).astype(np.float32))
        outs = [m(ids, offsets) for _, m in mods]
        assert "PushBags" in outs[0].grad_fn.name() and "PushBags" not in outs[1].grad_fn.name()
        assert torch.equal(outs[0], outs[1])
        for out, step in zip(outs, steps):
            (out * r).sum().backward()
            step.step()
    (t1, _), (t2, _) = mods
    np.testing.assert_array_equal(t1.lookup(np.arange(V)), t2.lookup(np.arange(V)))
    for a, b in zip(t1.read_state(np.arange(V)), t2.read_state(np.arange(V))):
        np.testing.assert_array_equal(a, b)


def test_fast_path_errors(db: emdb.Client, path: str) -> None:
    """A refused Pull raises its emdb.Error from forward, a refused Push
    from backward(), with the C library's message, on either path."""
    t = db.create_table("errs", D, "sgd")
    ours = fast_path(emdb.torch.EmbeddingBag(db, t, mode="sum", include_last_offset=True), path)
    ids = torch.tensor([1, 2, 3])
    with pytest.raises(emdb.InvalidError, match="offsets"):
        ours(ids, torch.tensor([0, 2, 5]))                     # ends past the IDs
    out = ours(ids, torch.tensor([0, 1, 3]))
    t.drop()
    with pytest.raises(emdb.NoTableError):
        out.sum().backward()


def test_backward_after_close_raises(uri: str, path: str) -> None:
    """A graph that outlives its client: backward raises, nothing is pushed
    through a closed handle."""
    db = emdb.connect(uri)
    t = db.create_table("closed2", D, "sgd")
    ours = fast_path(emdb.torch.EmbeddingBag(db, t, mode="sum", include_last_offset=True), path)
    out = ours(torch.tensor([1, 2]), torch.tensor([0, 2]))
    db.close()
    with pytest.raises(ValueError, match="closed"):
        out.sum().backward()


def test_graph_keeps_its_client(path: str) -> None:
    """An output whose module and client the program dropped keeps the
    client open until its backward ran and the graph is gone (as a torch
    graph keeps its parameters)."""
    import gc
    import weakref
    db = emdb.connect("mem://")
    t = db.create_table("kept", D, "sgd", lr=1.0)
    ours = fast_path(emdb.torch.EmbeddingBag(db, t, mode="sum", include_last_offset=True), path)
    out = ours(torch.tensor([1, 2]), torch.tensor([0, 2]))
    alive = weakref.ref(db)
    del db, ours, t                                             # the graph holds the only reference
    gc.collect()
    assert alive() is not None
    out.sum().backward()                                        # pushes through the open client
    alive().update()
    np.testing.assert_array_equal(alive().table("kept").lookup([1, 2]),
                                  -np.ones((2, D), np.float32))
    del out
    gc.collect()
    assert alive() is None
