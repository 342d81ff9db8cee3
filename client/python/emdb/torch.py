"""emdb.torch - embedding tables kept in emdb, as PyTorch modules.

    import emdb, emdb.torch
    db = emdb.connect("unix:///run/emdb.sock")
    db.create_table("user", 64, "adam", lr=1e-3, init=("uniform", -0.05, 0.05))
    emb = emdb.torch.EmbeddingBag(db, "user", mode="sum")
    step = emdb.torch.Step(emb)                # the optimizer runs in emdb
    ...
    loss = f(emb(ids, offsets)); loss.backward()   # backward pushes to emdb
    step.step()                                # Update (or the synchronous step)

EmbeddingBag follows torch.nn.EmbeddingBag's forward(input, offsets,
per_sample_weights) with mode "sum" or "mean", include_last_offset and
padding_idx, and is differentiable through torch.autograd: forward is a
pooled Pull of the engine (inserting IDs it has not seen), backward a
pooled Push of the gradient of the bags.  Gradients stay in emdb and are
applied there by Step.step(); the module has no torch parameters.  Under
torch.no_grad() (inference) forward uses Lookup: read-only, IDs the table
does not hold get its lookup default and are not inserted.

Every difference from torch's own EmbeddingBag and optimizers is listed in
docs/python.md ("Differences from torch").
"""
from __future__ import annotations

import importlib
from typing import Any, Iterable, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import nn

from . import arrays, errors, schema
from .client import Client, Table, TableRef

try:
    #: The fast path's forward and backward in C++ (_torch_bags.cpp), built
    #: by CMake where torch's C++ headers are (libtorch-dev); without it
    #: the Python Function _PooledPull does the same.
    from . import _torch_bags  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built without libtorch-dev
    _torch_bags = None


def _conn(client: Client) -> Any:
    """The _torch_bags.Conn of a client (made once, cleared by close()):
    its handle and the addresses of the C calls of its cffi module."""
    conn = client._torch_conn
    if conn is None:
        ffi, lib = client._native

        def addr(p: Any) -> int:
            return int(ffi.cast("uintptr_t", p))

        conn = _torch_bags.Conn(addr(client._h()), addr(ffi.addressof(lib, "emdb_client_pull_bags")),
                                addr(ffi.addressof(lib, "emdb_client_push_bags")),
                                addr(ffi.addressof(lib, "emdb_client_last_error")))
        client._torch_conn = conn
        client._on_close.append(conn.close)
    return conn


class _Batch:
    """One forward's bags, as the arrays the C calls take, for every batch
    but forward's fast path (weights, padding, 2-D input, other dtypes,
    inference): pointers made once here into the memory of the caller's
    tensors or arrays, kept referenced here while the batch lives.  `ids`
    and `offsets` are int64 CPU tensors or uint64 numpy arrays of the same
    64 bits; ids_np() and offsets_np() give them as uint64 arrays (views)."""

    __slots__ = ("table", "client", "tid", "cast", "ids", "offsets", "n", "n_bags", "mode",
                 "dim", "bag_of", "ids_p", "off_p", "pool")

    def __init__(self, table: Table, ids: Any, offsets: Any, mode: str, pool: int) -> None:
        self.table = table
        self.client = client = table.client
        self.tid = table.id
        ffi = client._native.ffi
        self.cast = ffi.cast
        self.ids = ids
        self.offsets = offsets
        self.mode = mode
        self.pool = pool
        self.dim = table.dim
        self.bag_of: Optional[np.ndarray] = None
        if isinstance(ids, torch.Tensor):
            self.n = ids.numel()
            self.n_bags = offsets.numel() - 1
            self.ids_p = ffi.cast("uint64_t *", ids.data_ptr())
            self.off_p = ffi.cast("uint64_t *", offsets.data_ptr())
        else:
            self.n = ids.size
            self.n_bags = offsets.size - 1
            self.ids_p = ffi.from_buffer("uint64_t[]", ids)
            self.off_p = ffi.from_buffer("uint64_t[]", offsets)

    def ids_np(self) -> np.ndarray:
        """The IDs as a uint64 array (a view)."""
        a = self.ids
        return a.numpy().view(np.uint64) if isinstance(a, torch.Tensor) else a

    def offsets_np(self) -> np.ndarray:
        """The offsets, with the end, as a uint64 array (a view)."""
        a = self.offsets
        return a.numpy().view(np.uint64) if isinstance(a, torch.Tensor) else a

    def bags(self) -> np.ndarray:
        """The bag of every position (int64), made on first use."""
        if self.bag_of is None:
            self.bag_of = np.repeat(np.arange(self.n_bags, dtype=np.int64),
                                    np.diff(self.offsets_np()).astype(np.int64))
        return self.bag_of

    def args(self) -> Tuple[Any, ...]:
        """The arguments the pooled Pull and Push share before the rows."""
        return (self.tid, self.ids_p, self.n, self.off_p, self.n_bags, self.pool, self.dim)

    def call(self, fn: Any, rows: torch.Tensor, weights: Optional[torch.Tensor] = None) -> None:
        """fn(handle, table, ids, n, offsets, n_bags, pool, weights, dim,
        rows): the weighted pooled Pull or Push; rows and weights
        C-contiguous float32 CPU tensors."""
        cast = self.cast
        rc = fn(self.client._h(), self.tid, self.ids_p, self.n, self.off_p, self.n_bags,
                self.pool, cast("float *", weights.data_ptr()), self.dim,
                cast("float *", rows.data_ptr()))
        if rc:
            errors.check(self.client._native, rc)


def _grad32(grad: torch.Tensor) -> torch.Tensor:
    """The gradient of the bags as a C-contiguous float32 CPU tensor: the
    tensor itself when it already is one (what backward receives from an
    ordinary float32 loss), else a copy."""
    if grad.dtype is torch.float32 and grad.is_cpu and grad.is_contiguous():
        return grad
    return grad.detach().to(device="cpu", dtype=torch.float32).contiguous()


class _PooledPull(torch.autograd.Function):
    """forward: pooled Pull; backward: pooled Push of grad_output.

    args are what the two C calls share before the rows: (table id, ids,
    n, offsets, bags, pool, dim), pointers into the memory of `keep`'s
    tensors or arrays, which the graph keeps referenced until backward.
    Nothing else is built per step: where emdb._torch_bags is not built,
    this is the path of a training loop's every batch (where it is, the
    C++ node PushBags does the same for the fast path's batches, and this
    Function serves the other forms; docs/python.md, "Benchmark")."""

    @staticmethod
    def forward(ctx: Any, anchor: torch.Tensor, client: Client,  # type: ignore[override]
                args: Tuple[Any, ...], keep: Any) -> torch.Tensor:
        ctx.call = (client, args, keep)
        out = torch.empty((args[4], args[6]), dtype=torch.float32)
        if args[2]:
            ffi, lib = client._native
            rc = lib.emdb_client_pull_bags(client._h(), *args, ffi.cast("float *", out.data_ptr()))
            if rc:
                errors.check(client._native, rc)
        else:
            out.zero_()
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Any, ...]:  # type: ignore[override]
        client, args, _ = ctx.call
        if args[2]:
            g = _grad32(grad)
            ffi, lib = client._native
            rc = lib.emdb_client_push_bags(client._h(), *args, ffi.cast("float *", g.data_ptr()))
            if rc:
                errors.check(client._native, rc)
        return None, None, None, None


class _WeightedPull(torch.autograd.Function):
    """Bags with per-sample weights: the engine's weighted pooled Pull, and
    its weighted pooled Push (each ID receives w_i * grad_bag) backward.
    When the weights need a gradient (the dot product of grad_bag and the
    ID's row, which the engine does not compute), forward also pulls the
    rows, as they are at forward time."""

    @staticmethod
    def forward(ctx: Any, anchor: torch.Tensor, weights: torch.Tensor,  # type: ignore[override]
                b: _Batch) -> torch.Tensor:
        lib = b.table.client._native.lib
        w = weights.detach().contiguous()
        out = torch.empty((b.n_bags, b.dim), dtype=torch.float32)
        rows = None
        if b.n:
            b.call(lib.emdb_client_pull_bags_weighted, out, w)
            if ctx.needs_input_grad[1]:
                rows = torch.empty((b.n, b.dim), dtype=torch.float32)
                b.table.client.pull(b.table, b.ids_np(), rows.numpy())
        else:
            out.zero_()
        ctx.b, ctx.w, ctx.rows = b, w, rows
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Any, ...]:  # type: ignore[override]
        b: _Batch = ctx.b
        gw = torch.zeros_like(ctx.w) if ctx.needs_input_grad[1] else None
        if b.n:
            g = _grad32(grad)
            b.call(b.table.client._native.lib.emdb_client_push_bags_weighted, g, ctx.w)
            if gw is not None:
                gw = (g.index_select(0, torch.from_numpy(b.bags())) * ctx.rows).sum(1)
        return None, gw, None


def _host(t: torch.Tensor) -> np.ndarray:
    """The numpy view of an index tensor (a copy only off the CPU)."""
    if t.device.type == "cpu" and not t.requires_grad:
        return t.numpy()
    return t.detach().cpu().numpy()


class EmbeddingBag(nn.Module):
    """torch.nn.EmbeddingBag over an emdb table.

    Args:
        client: an emdb.Client.
        table: the table (an emdb.Table, its name or id); create it first
            with client.create_table, which also chooses the optimizer.
        dim: optional check of the table's dim (embedding_dim).
        mode: "sum" or "mean" (torch's default, "mean"); "max" is not
            offered.
        include_last_offset: as torch: offsets has one entry per bag plus
            the end (True) or one per bag (False).
        padding_idx: an ID left out of every bag (of the sum and of the
            mean's count) and never pushed to, as torch.

    forward(input, offsets=None, per_sample_weights=None) returns a float32
    (bags, dim) tensor (on input's device).  input is a 1-D tensor of IDs
    with offsets, or a 2-D (bags, ids per bag) tensor without; IDs are
    torch's int64, read as the uint64 IDs of the same 64 bits.
    per_sample_weights (mode "sum" only, as torch) scales each ID's row,
    through the engine's weighted pooled Pull and Push (protocol version 3).
    """

    def __init__(self, client: Client, table: TableRef, dim: Optional[int] = None,
                 mode: str = "mean", include_last_offset: bool = False,
                 padding_idx: Optional[int] = None) -> None:
        super().__init__()
        if mode not in ("sum", "mean"):
            raise ValueError(f"mode must be 'sum' or 'mean', not {mode!r}")
        self.client = client
        self.table = client.table(table)
        if dim is not None and dim != self.table.dim:
            raise ValueError(f"table {self.table.name!r} has dim {self.table.dim}, not {dim}")
        self.embedding_dim = self.table.dim
        self.mode = mode
        self.include_last_offset = include_last_offset
        self.padding_idx = padding_idx
        self._pool = schema.pool_value(client._native, mode)
        # What forward's fast path passes to the C calls, fixed for the
        # module's life (a table's id and dim never change).
        self._tid, self._dim, self._cast = self.table.id, self.table.dim, client._native.ffi.cast
        # The C++ forward and backward of the fast path, when built.
        self._conn = _conn(client) if _torch_bags is not None else None
        # The leaf autograd hangs the Pull/Push function on: never updated,
        # not a parameter (torch optimizers over .parameters() ignore it).
        self._anchor = torch.empty(0, requires_grad=True)

    def extra_repr(self) -> str:
        s = f"table={self.table.name!r}, dim={self.embedding_dim}, mode={self.mode!r}"
        if self.include_last_offset:
            s += ", include_last_offset=True"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    # ---- state_dict: the table's rows through scan and load ----------
    #
    # torch's EmbeddingBag saves "weight" (num_embeddings, dim); an emdb
    # table has no index range, so this module saves "ids" (int64, the
    # uint64 IDs' bits) and "weight" (len(ids), dim), row i for ids[i],
    # every row the table holds, read with Client.scan; loading writes
    # them with Client.load (inserting IDs the table lacks, keeping the
    # optimizer state of those it holds).  Optimizer state is not in the
    # module's state_dict, as it is not in torch's.

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        ids, rows = [], []
        for page in self.client.scan(self.table):
            ids.append(page.ids)
            rows.append(page.rows)
        dim = self.table.dim
        destination[prefix + "ids"] = torch.from_numpy(
            np.concatenate(ids).view(np.int64) if ids else np.empty(0, np.int64))
        destination[prefix + "weight"] = torch.from_numpy(
            np.concatenate(rows) if rows else np.empty((0, dim), np.float32))

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: Any,
                              strict: bool, missing_keys: List[str], unexpected_keys: List[str],
                              error_msgs: List[str]) -> None:
        keys = (prefix + "ids", prefix + "weight")
        if not all(k in state_dict for k in keys):
            missing_keys.extend(k for k in keys if k not in state_dict)
            return
        ids = state_dict[keys[0]].detach().cpu().numpy()
        w = state_dict[keys[1]].detach().to(device="cpu", dtype=torch.float32).numpy()
        if w.shape != (ids.size, self.table.dim):
            error_msgs.append(f"{keys[1]}: shape {tuple(w.shape)}, expected "
                              f"({ids.size}, {self.table.dim})")
            return
        for lo in range(0, ids.size, 65536):
            self.client.load(self.table, ids[lo:lo + 65536], w[lo:lo + 65536])

    def _batch(self, input: torch.Tensor, offsets: Optional[torch.Tensor],
               weights: Optional[torch.Tensor]) -> Tuple[_Batch, Optional[torch.Tensor]]:
        # Every batch but forward's fast path: the fast path's tensors
        # themselves under no_grad (Lookup), else IDs and offsets made
        # uint64 arrays (views where they already are 64-bit) with the end
        # offset, padding removed, weights checked.
        if (offsets is not None and weights is None and self.padding_idx is None
                and self.include_last_offset and input.dtype is torch.int64
                and offsets.dtype is torch.int64 and input.dim() == 1 and offsets.dim() == 1
                and input.is_cpu and offsets.is_cpu and input.is_contiguous()
                and offsets.is_contiguous()):
            return _Batch(self.table, input, offsets, self.mode, self._pool), None
        if input.dim() == 2:
            if offsets is not None:
                raise ValueError("offsets must be None when input is 2-D (bags, ids per bag)")
            bags, per = input.shape
            off = np.arange(0, bags * per + 1, max(per, 1), dtype=np.uint64)[:bags + 1]
            if per == 0:
                off = np.zeros(bags + 1, dtype=np.uint64)
            ids = arrays.ids(_host(input).reshape(-1))
        elif input.dim() == 1:
            if offsets is None or offsets.dim() != 1:
                raise ValueError("offsets (1-D) are needed when input is 1-D")
            ids = arrays.ids(_host(input))
            off = _host(offsets)
            off = off.view(np.uint64) if off.dtype == np.int64 else arrays.offsets(off)
            if not self.include_last_offset:
                off = np.append(off, np.uint64(ids.size))
            if off.size < 2 and not self.include_last_offset:
                raise ValueError("offsets: at least one bag")
        else:
            raise ValueError(f"input must be 1-D or 2-D, not {input.dim()}-D")
        if weights is not None:
            if self.mode != "sum":
                raise ValueError("per_sample_weights work only with mode='sum' (as in torch)")
            weights = weights.to(device="cpu", dtype=torch.float32).reshape(-1)
            if weights.numel() != ids.size:
                raise ValueError(f"per_sample_weights: {ids.size} values needed, "
                                 f"got {weights.numel()}")
        if self.padding_idx is not None:
            keep = ids != np.uint64(self.padding_idx & 0xFFFFFFFFFFFFFFFF)
            if not keep.all():
                kept = np.concatenate((np.zeros(1, np.uint64), np.cumsum(keep, dtype=np.uint64)))
                if off.size and (off[-1] > ids.size or np.any(off[1:] < off[:-1])):
                    raise ValueError("offsets must not decrease and must end at most at len(input)")
                off = kept[off.astype(np.int64)]
                ids = ids[keep]
                if weights is not None:
                    weights = weights[torch.from_numpy(keep)]
        return _Batch(self.table, ids, off, self.mode, self._pool), weights

    def forward(self, input: torch.Tensor, offsets: Optional[torch.Tensor] = None,
                per_sample_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
        # A training loop's usual batch: 1-D int64 IDs and offsets with the
        # end, in CPU memory, no padding or weights.  The C calls read the
        # tensors' own memory: nothing is converted, checked or allocated
        # but the output (the engine checks the offsets).  In C++ where
        # emdb._torch_bags is built (it checks the tensors and grad mode,
        # and returns None when they do not fit), else the Python Function.
        if (self._conn is not None and per_sample_weights is None and offsets is not None
                and self.include_last_offset and self.padding_idx is None):
            out = _torch_bags.pull_bags(self._conn, self.client, input, offsets, self._tid,
                                        self._pool, self._dim)
            if out is not None:
                return out
        grad = torch.is_grad_enabled()
        if (grad and per_sample_weights is None and offsets is not None
                and self.include_last_offset and self.padding_idx is None
                and input.dtype is torch.int64 and offsets.dtype is torch.int64
                and input.dim() == 1 and offsets.dim() == 1 and input.is_cpu and offsets.is_cpu
                and input.is_contiguous() and offsets.is_contiguous()):
            cast = self._cast
            return _PooledPull.apply(
                self._anchor, self.client,
                (self._tid, cast("uint64_t *", input.data_ptr()), input.numel(),
                 cast("uint64_t *", offsets.data_ptr()), offsets.numel() - 1, self._pool,
                 self._dim), (input, offsets))
        b, w = self._batch(input, offsets, per_sample_weights)
        if grad:
            if w is None:
                out = _PooledPull.apply(self._anchor, self.client, b.args(), b)
            else:
                out = _WeightedPull.apply(self._anchor, w, b)
        else:
            out = self._lookup(b, w)
        return out if input.is_cpu else out.to(input.device)

    def _lookup(self, b: _Batch, w: Optional[torch.Tensor]) -> torch.Tensor:
        """Inference: Lookup (never inserts) and pool here."""
        out = torch.zeros((b.n_bags, b.dim), dtype=torch.float32)
        if not b.n:
            return out
        rows = torch.from_numpy(self.client.lookup(self.table, b.ids_np()))
        if w is not None:
            rows = rows * w.unsqueeze(1)
        out.index_add_(0, torch.from_numpy(b.bags()), rows)
        if self.mode == "mean":
            counts = torch.from_numpy(np.diff(b.offsets_np()).astype(np.float32))
            out /= counts.clamp(min=1).unsqueeze(1)
        return out


Stepped = Union[EmbeddingBag, Table]

#: torch >= 2.0: the wrapper of Optimizer.step that runs the step hooks and
#: the profiler's label (torch 1.x has only the label, made by hand below).
_TORCH_STEP_WRAP = getattr(torch.optim.Optimizer, "profile_hook_step", None)
_optim_module = importlib.import_module("torch.optim.optimizer")
#: torch >= 2.0: the global step hooks, dicts that torch's register
#: functions fill in place (torch 1.x has none).  Looked up once here: a
#: missing attribute of a module costs an AttributeError and its message
#: on every lookup, which step() would pay at every step.
_GLOBAL_STEP_HOOKS = tuple(d for d in (getattr(_optim_module, "_global_optimizer_pre_hooks", None),
                                       getattr(_optim_module, "_global_optimizer_post_hooks", None))
                           if d is not None)
_profiler_enabled = torch.autograd._profiler_enabled


def _profiled(opt: torch.optim.Optimizer) -> bool:
    """Whether step() must go through torch's wrapper: the autograd
    profiler records, or a step hook (of this optimizer or global) is
    registered."""
    return bool(_profiler_enabled()
                or getattr(opt, "_optimizer_step_pre_hooks", None)
                or getattr(opt, "_optimizer_step_post_hooks", None)
                or any(_GLOBAL_STEP_HOOKS))


def _step_profiled(opt: "Step", closure: Any) -> Any:
    """Step._apply as torch.optim runs an optimizer's step: under the
    profiler's label "Optimizer.step#<class>.step", with the step hooks."""
    if _TORCH_STEP_WRAP is not None:
        return _TORCH_STEP_WRAP(type(opt)._apply)(opt, closure)
    with torch.autograd.profiler.record_function(f"Optimizer.step#{type(opt).__name__}.step"):
        out = opt._apply(closure)
        opt._optimizer_step_code()
        return out


class Step(torch.optim.Optimizer):
    """The optimizer of emdb tables, as a torch.optim.Optimizer.

    Each table has its optimizer inside emdb (chosen at create_table);
    step() applies it: an Update of every table of the given modules, or
    with workers > 1 the synchronous step of data-parallel training
    (update_sync: returns once every worker has pushed and the Update was
    applied once).  Call it after loss.backward(), as optimizer.step().

    There is one param group per table, holding its "lr": change it (by
    hand, or with a torch.optim.lr_scheduler) and the next step() sends the
    new value to emdb first (Client.alter_table), so the schedule applies
    at that step boundary.  set_hyperparameters(eps=...) changes the
    others.  zero_grad() does nothing that matters: gradients live in emdb,
    and step() applies and clears them (docs/python.md).
    """

    def __init__(self, modules: Union[Stepped, Iterable[Stepped]], workers: int = 1) -> None:
        if isinstance(modules, (EmbeddingBag, Table)):
            modules = [modules]
        self.tables: List[Table] = []
        seen = set()
        for m in modules:
            t = m.table if isinstance(m, EmbeddingBag) else m
            if not isinstance(t, Table):
                raise TypeError(f"Step takes emdb.torch.EmbeddingBag or emdb.Table, not {m!r}")
            key = (id(t.client), t.id)
            if key not in seen:
                seen.add(key)
                self.tables.append(t)
        if not self.tables:
            raise ValueError("Step needs at least one table")
        if workers < 1:
            raise ValueError("workers must be at least 1")
        for t in self.tables:
            rank = getattr(t.client, "worker_rank", None)
            if workers > 1 and rank is not None and rank >= workers:
                raise ValueError(f"worker_rank {rank} of {t.client.uri} is not below workers={workers}")
        self.workers = workers
        self.last_rows = 0
        self._rows = self.tables[0].client._native.ffi.new("uint64_t *")
        # torch.optim wants tensors in its groups: a placeholder per table.
        self._applied: List[float] = []
        groups = []
        for t in self.tables:
            lr = t.describe().config.optimizer.lr
            self._applied.append(lr)
            groups.append({"params": [torch.empty(0, requires_grad=True)], "lr": lr})
        super().__init__(groups, {})

    def step(self, closure: Any = None) -> Any:
        """Apply every table's optimizer (rows updated in .last_rows), after
        sending any changed "lr" of the param groups; returns closure's loss
        when a closure is given, as torch.optim."""
        if _profiled(self):
            return _step_profiled(self, closure)
        return self._apply(closure)

    # torch.optim.Optimizer wraps the step() of each subclass once, at the
    # first instance, in a profiler label (from torch 2.0 also running the
    # step hooks): about 10 us a call, where a bare Update costs a few.
    # This attribute tells it the wrapping is done: step() itself takes
    # torch's path (_step_profiled) when the profiler is on or a step hook
    # is registered, and the short one otherwise.
    step.hooked = True  # type: ignore[attr-defined]

    def _apply(self, closure: Any = None) -> Any:
        """step() without the profiler's label and torch's step hooks."""
        loss = closure() if closure is not None else None
        rows = 0
        for i, (t, g) in enumerate(zip(self.tables, self.param_groups)):
            if g["lr"] != self._applied[i]:
                t.alter(lr=g["lr"])
                self._applied[i] = g["lr"]
            if self.workers == 1:
                # Client.update without its argument handling: once per step.
                lib = t.client._native.lib
                rc = lib.emdb_client_update(t.client._h(), t.id, self._rows)
                if rc:
                    errors.check(t.client._native, rc)
                rows += self._rows[0]
            else:
                rows += t.update_sync(self.workers)
        self.last_rows = rows
        return loss

    def set_hyperparameters(self, **hyper: float) -> None:
        """Change hyperparameters of every table now (Client.alter_table):
        lr, eps, beta1, beta2, lr_decay, beta, l1, l2."""
        for i, t in enumerate(self.tables):
            opt = t.alter(**hyper)
            self.param_groups[i]["lr"] = self._applied[i] = opt.lr
