"""The DLRM example: trained with its embeddings in emdb it learns, and it
reaches the same weights as the same model trained with torch's own
EmbeddingBag and torch.optim.SparseAdam / Adagrad."""
from __future__ import annotations

import io

import numpy as np
import pytest

import emdb

torch = pytest.importorskip("torch", reason="python3-torch is not installed")
import dlrm  # noqa: E402  (client/python/examples, put on sys.path by conftest)

DIM, LR, STEPS = 8, 0.05, 6


def torch_twin(model: dlrm.DLRM, tables, optimizer: str):
    """The same model with torch.nn.EmbeddingBag (sparse gradients), its
    weights copied from emdb's initial rows, and its optimizers."""
    embs = []
    for (name, vocab, _, mode), t in zip(dlrm.FEATURES, tables):
        e = torch.nn.EmbeddingBag(vocab, DIM, mode=mode, sparse=True)
        with torch.no_grad():
            e.weight.copy_(torch.from_numpy(t.lookup(np.arange(vocab))))   # the initial values
        embs.append(e)
    twin = dlrm.DLRM(embs, DIM)
    twin.bottom.load_state_dict(model.bottom.state_dict())
    twin.top.load_state_dict(model.top.state_dict())
    sparse = [e.weight for e in embs]
    if optimizer == "adam":
        sparse_opt = torch.optim.SparseAdam(sparse, lr=LR)
    else:
        sparse_opt = torch.optim.Adagrad(sparse, lr=LR)
    dense = [p for n, p in twin.named_parameters() if not n.startswith("embeddings")]
    return twin, sparse_opt, torch.optim.SGD(dense, lr=0.1)


@pytest.mark.parametrize("optimizer", ["adam", "adagrad"])
def test_same_weights_as_torch(uri: str, optimizer: str) -> None:
    with emdb.connect(uri) as db:
        model, step = dlrm.emdb_model(db, DIM, optimizer, LR, seed=3)
        tables = [e.table for e in model.embeddings]
        twin, sparse_opt, twin_dense = torch_twin(model, tables, optimizer)
        dense_opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss_fn = torch.nn.BCEWithLogitsLoss()
        data = dlrm.ClickData(2)
        start = [t.lookup(np.arange(v)) for t, (_, v, _, _) in zip(tables, dlrm.FEATURES)]
        for _ in range(STEPS):
            x, bags, labels = data.batch(64)
            loss = loss_fn(model(x, bags), labels)
            dense_opt.zero_grad()
            loss.backward()
            dense_opt.step()
            step.step()
            ref = loss_fn(twin(x, bags), labels)
            twin_dense.zero_grad()
            sparse_opt.zero_grad()
            ref.backward()
            twin_dense.step()
            sparse_opt.step()
            assert abs(loss.item() - ref.item()) < 1e-5
        for t, e, s, (_, v, _, _) in zip(tables, twin.embeddings, start, dlrm.FEATURES):
            got = t.lookup(np.arange(v))
            assert np.abs(got - s).max() > 10 * 1e-5                 # training moved them
            np.testing.assert_allclose(got, e.weight.detach().numpy(), rtol=0, atol=1e-5)
        for (n, a), b in zip(((n, p) for n, p in model.named_parameters()),
                             (p for n, p in twin.named_parameters()
                              if not n.startswith("embeddings"))):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=0, atol=1e-5,
                                       err_msg=n)


def test_example_learns(uri: str) -> None:
    out = io.StringIO()
    losses = dlrm.train(uri, steps=150, batch=256, every=50, out=out)
    assert np.mean(losses[-30:]) < np.mean(losses[:30]) - 0.02, out.getvalue()
    assert "held-out accuracy" in out.getvalue()
