#!/usr/bin/python3
"""dlrm.py - a small DLRM-style click model trained with its embeddings in emdb.

    emdb-server --unix-socket /tmp/emdb.sock --bind "" &
    PYTHONPATH=build/release/python client/python/examples/dlrm.py --uri unix:///tmp/emdb.sock
    PYTHONPATH=build/release/python client/python/examples/dlrm.py --uri mem://   # no server

Three sparse features (a user, the items of the session, the ad's
categories: bags of IDs) live in emdb tables behind emdb.torch.EmbeddingBag;
the dense part is a bottom MLP over four dense features, the pairwise dot
products of all feature vectors (DLRM's interaction), and a top MLP giving
the click logit.  The data is synthetic click logs: each ID of each feature
has a hidden true effect, and a click is drawn from the sigmoid of their
sum, so the loss has something to learn and falls as training goes.

Each step: forward (pooled Pulls), loss.backward() (the pooled Pushes of
the embeddings' gradients, torch's gradients of the dense layers), then
the dense optimizer's step and emdb.torch.Step.step() (an Update of every
table, in emdb).  client/python/tests/test_dlrm.py trains the same model
with torch.nn.EmbeddingBag and torch.optim.SparseAdam / Adagrad and checks
that the weights agree.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Sequence, Tuple

import numpy as np
import torch
from torch import nn

import emdb
import emdb.torch

#: (name, vocabulary, largest bag, pooling) of each sparse feature.
FEATURES: Sequence[Tuple[str, int, int, str]] = (
    ("user", 500, 1, "sum"),
    ("items", 2000, 5, "mean"),
    ("category", 100, 3, "sum"),
)
DENSE = 4

Bags = List[Tuple[torch.Tensor, torch.Tensor]]


class ClickData:
    """Synthetic click logs with a hidden truth, reproducible from a seed."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.truth = [self.rng.normal(0, 1, vocab) for _, vocab, _, _ in FEATURES]
        self.dense_w = self.rng.normal(0, 1, DENSE)

    def batch(self, size: int) -> Tuple[torch.Tensor, Bags, torch.Tensor]:
        """dense (size, DENSE), one (ids, offsets) per feature, labels (size,)."""
        rng = self.rng
        dense = rng.normal(0, 1, (size, DENSE)).astype(np.float32)
        logit = dense @ self.dense_w
        bags: Bags = []
        for (name, vocab, most, _), truth in zip(FEATURES, self.truth):
            lens = rng.integers(1, most + 1, size)
            # Zipf-like: small IDs are the frequent ones, as in real logs.
            ids = np.minimum((rng.pareto(1.2, lens.sum()) * vocab / 20).astype(np.int64), vocab - 1)
            offsets = np.concatenate(([0], np.cumsum(lens)[:-1]))
            logit += np.add.reduceat(truth[ids], offsets) / lens
            bags.append((torch.from_numpy(ids), torch.from_numpy(offsets.astype(np.int64))))
        labels = (rng.random(size) < 1 / (1 + np.exp(-logit))).astype(np.float32)
        return torch.from_numpy(dense), bags, torch.from_numpy(labels)


class DLRM(nn.Module):
    """Bottom MLP, embeddings, pairwise interactions, top MLP."""

    def __init__(self, embeddings: Sequence[nn.Module], dim: int, hidden: int = 32) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(DENSE, hidden), nn.ReLU(), nn.Linear(hidden, dim),
                                    nn.ReLU())
        self.embeddings = nn.ModuleList(embeddings)
        f = len(embeddings) + 1
        self.top = nn.Sequential(nn.Linear(dim + f * (f - 1) // 2, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))
        self.pairs = torch.tril_indices(f, f, offset=-1)

    def forward(self, dense: torch.Tensor, bags: Bags) -> torch.Tensor:
        x = self.bottom(dense)
        vecs = torch.stack([x] + [e(ids, off) for e, (ids, off) in zip(self.embeddings, bags)], 1)
        inter = torch.bmm(vecs, vecs.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([x, inter], 1)).squeeze(1)


def emdb_model(db: emdb.Client, dim: int, optimizer: str, lr: float, prefix: str = "dlrm",
               seed: int = 0) -> Tuple[DLRM, emdb.torch.Step]:
    """The model with its embeddings in emdb tables (created when missing)
    and the Step that applies their optimizer."""
    embs = []
    for name, _, _, mode in FEATURES:
        t = db.create_table(f"{prefix}_{name}", dim, optimizer, lr=lr, exist_ok=True,
                            init=("uniform", -0.1, 0.1), seed=seed, lookup_default="init")
        embs.append(emdb.torch.EmbeddingBag(db, t, mode=mode))
    torch.manual_seed(seed)
    model = DLRM(embs, dim)
    return model, emdb.torch.Step(embs)


def train(uri: str, steps: int, batch: int = 256, dim: int = 16, optimizer: str = "adam",
          lr: float = 0.01, every: int = 50, out=sys.stdout) -> List[float]:
    """Train for `steps` steps; returns the loss of every step."""
    data = ClickData(1)
    losses = []
    with emdb.connect(uri) as db:
        model, step = emdb_model(db, dim, optimizer, lr)
        dense_opt = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = nn.BCEWithLogitsLoss()
        for i in range(steps):
            dense, bags, labels = data.batch(batch)
            loss = loss_fn(model(dense, bags), labels)
            dense_opt.zero_grad()
            loss.backward()          # pushes the embeddings' gradients to emdb
            dense_opt.step()
            step.step()              # emdb applies its optimizer to the tables
            losses.append(loss.item())
            if every and (i % every == 0 or i == steps - 1):
                print(f"step {i:5d}  loss {np.mean(losses[-every:]):.4f}", file=out)
        with torch.no_grad():        # inference: Lookup, nothing inserted
            dense, bags, labels = data.batch(batch)
            p = torch.sigmoid(model(dense, bags))
            acc = ((p > 0.5).float() == labels).float().mean().item()
        print(f"held-out accuracy {acc:.3f}", file=out)
    return losses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uri", default="mem://", help="emdb URI (default mem://)")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--optimizer", default="adam", choices=emdb.optimizer_names())
    ap.add_argument("--lr", type=float, default=0.01)
    a = ap.parse_args()
    train(a.uri, a.steps, a.batch, a.dim, a.optimizer, a.lr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
