"""emdb.client - a connection to an emdb database (include/emdb/client.h).

One `Client` wraps one emdb_client handle: tcp://, tls://, unix:// through
libemdb_client.so, mem:// through the module with the engine inside
(emdb._lib).  Every method is a synchronous call of the C library, which
releases the GIL while it runs (cffi does so around every C call), so
several Python threads may use one Client at once, as the C handle allows.

Invariants:
  1. Every pointer handed to C points into a numpy array that this module
     holds a reference to until the C call (or, for prefetch_async, the
     future) is complete: the C library's lifetime rule.
  2. A Ticket or future is freed once: by its free()/close(), by the
     garbage collector, or by Client.close(), which frees those still alive
     before it closes the handle (emdb_client_close requires it).
  3. Results are written by C straight into the array that is returned
     (pull, lookup, read_state): no copy is made after the call.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib, arrays, errors, schema
from .schema import (CheckpointInfo, Init, InitLike, JobStatus, Optimizer, OptimizerLike,
                     TableConfig, TableInfo)

TableRef = Union["Table", int, str]


class ScanPage(NamedTuple):
    """One page of Client.scan."""

    ids: np.ndarray             # uint64 (n,)
    rows: np.ndarray            # float32 (n, dim)
    state: Optional[np.ndarray]  # float32 (n, state floats), when asked
    step: int                   # the table's step the page is consistent at


class Ticket:
    """A Prefetch's result: the batch's resolved rows, for pull and push.

    Valid only with the Client that made it.  Free it with free() (or use
    it as a context manager); the garbage collector and Client.close()
    free it otherwise.
    """

    __slots__ = ("_client", "_t", "table", "count", "__weakref__")

    def __init__(self, client: "Client", t: Any) -> None:
        self._client = client
        self._t = t
        lib = client._native.lib
        self.table: int = int(lib.emdb_client_ticket_table(t))
        self.count: int = int(lib.emdb_client_ticket_count(t))

    def __len__(self) -> int:
        return self.count

    def free(self) -> None:
        """Release the ticket (on the server too); idempotent."""
        t, self._t = self._t, None
        if t is not None and self._client._c is not None:
            self._client._native.lib.emdb_client_ticket_free(t)
            self._client._tickets.discard(self)

    def __enter__(self) -> "Ticket":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass


class PrefetchFuture:
    """An asynchronous Prefetch (Client.prefetch_async): result() gives the
    Ticket.  Keeps the IDs alive until complete (the C lifetime rule)."""

    def __init__(self, client: "Client", f: Any, out: Any, keep: np.ndarray) -> None:
        self._client = client
        self._f = f
        self._out = out
        self._keep = keep
        self._ticket: Optional[Ticket] = None

    def done(self) -> bool:
        """True once the request completed (successfully or not)."""
        return self._f is None or self._client._native.lib.emdb_future_poll(self._f) != \
            self._client._native.lib.EMDB_FUTURE_PENDING

    def result(self, timeout: Optional[float] = None) -> Ticket:
        """Wait (at most `timeout` seconds; None: until done) and return the
        Ticket, or raise the request's error (TimeoutError when `timeout`
        passed first: the request is still in flight, call again)."""
        if self._ticket is not None:
            return self._ticket
        if self._f is None:
            raise ValueError("prefetch future already consumed or freed")
        native = self._client._native
        ms = -1 if timeout is None else int(timeout * 1000)
        rc = native.lib.emdb_future_wait(self._f, ms)
        if rc == native.lib.EMDB_FUTURE_PENDING:
            raise TimeoutError(f"prefetch still in flight after {timeout} s")
        f, self._f = self._f, None
        self._client._futures.discard(self)
        native.lib.emdb_future_free(f)
        self._keep = None
        if rc != 0:
            raise errors.error(rc, _lib.text(native, native.lib.emdb_client_last_error()))
        self._ticket = self._client._adopt(self._out[0])
        return self._ticket

    def free(self) -> None:
        """Abandon the request (its ticket, if any, is released)."""
        f, self._f = self._f, None
        if f is not None and self._client._c is not None:
            self._client._native.lib.emdb_future_free(f)
            self._client._futures.discard(self)
        self._keep = None

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass


class Table:
    """A table of one Client: its id, name and dim, and the data-plane
    calls bound to it (`t.pull(ids)` is `client.pull(t, ids)`)."""

    __slots__ = ("client", "id", "name", "dim", "optimizer")

    def __init__(self, client: "Client", tid: int, name: str, dim: int, optimizer: str) -> None:
        self.client = client
        self.id = tid
        self.name = name
        self.dim = dim
        self.optimizer = optimizer

    def __repr__(self) -> str:
        return f"<emdb.Table {self.name!r} id={self.id} dim={self.dim} {self.optimizer}>"

    def describe(self) -> TableInfo:
        return self.client.describe(self)

    def prefetch(self, ids: arrays.ArrayLike) -> Ticket:
        return self.client.prefetch(self, ids)

    def pull(self, ids: Any, out: Optional[np.ndarray] = None, **kw: Any) -> np.ndarray:
        return self.client.pull(self, ids, out, **kw)

    def push(self, ids: Any, grads: arrays.ArrayLike, **kw: Any) -> None:
        self.client.push(self, ids, grads, **kw)

    def push_update(self, ids: Any, grads: arrays.ArrayLike) -> int:
        return self.client.push_update(self, ids, grads)

    def update(self) -> int:
        return self.client.update(self)

    def update_sync(self, workers: int) -> int:
        return self.client.update_sync(self, workers)

    def lookup(self, ids: arrays.ArrayLike, out: Optional[np.ndarray] = None, **kw: Any) -> Any:
        return self.client.lookup(self, ids, out, **kw)

    def read_state(self, ids: arrays.ArrayLike, **kw: Any) -> Any:
        return self.client.read_state(self, ids, **kw)

    def reserve(self, rows: int) -> None:
        self.client.reserve(self, rows)

    def alter(self, **hyper: float) -> Optimizer:
        return self.client.alter_table(self, **hyper)

    def scan(self, page_rows: int = 16384, with_state: bool = False) -> Iterator[ScanPage]:
        return self.client.scan(self, page_rows, with_state)

    def load(self, ids: arrays.ArrayLike, rows: arrays.ArrayLike,
             state: Optional[arrays.ArrayLike] = None) -> None:
        self.client.load(self, ids, rows, state)

    def drop(self) -> None:
        self.client.drop_table(self)


class Client:
    """A connection to an emdb database; made by emdb.connect().

    Use it as a context manager, or call close().  Methods raise
    emdb.Error subclasses (emdb.errors) on failure.
    """

    def __init__(self, native: _lib.Native, c: Any, uri: str) -> None:
        self._native = native
        self._c = c
        self.uri = uri
        self._tickets: "weakref.WeakSet[Ticket]" = weakref.WeakSet()
        self._futures: "weakref.WeakSet[PrefetchFuture]" = weakref.WeakSet()
        self._dims: Dict[int, Tuple[int, str]] = {}
        self.worker_rank: Optional[int] = None   # connect(worker_rank=...)
        #: Called by close() before the handle is freed (emdb.torch's C++
        #: autograd nodes hold the handle and must stop using it).
        self._on_close: List[Callable[[], None]] = []
        self._torch_conn: Any = None             # emdb.torch's _torch_bags.Conn, made once

    # ---- the handle ------------------------------------------------------

    def close(self) -> None:
        """Free the tickets and futures still alive, then close the handle.
        Idempotent.  No other call on this Client may be running."""
        if self._c is None:
            return
        for f in list(self._futures):
            f.free()
        for t in list(self._tickets):
            t.free()
        for fn in self._on_close:
            fn()
        c, self._c = self._c, None
        self._native.lib.emdb_client_close(c)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<emdb.Client {self.uri!r}{' closed' if self._c is None else ''}>"

    def _h(self) -> Any:
        if self._c is None:
            raise ValueError("emdb.Client is closed")
        return self._c

    def _check(self, rc: int) -> None:
        if rc != 0:
            errors.check(self._native, rc)

    @property
    def role(self) -> str:
        """"reader", "trainer" or "admin": what AUTH granted."""
        return schema.role_name(self._native, self._native.lib.emdb_client_role(self._h()))

    @property
    def server(self) -> str:
        """The server's name and version ("emdb 0.1.0")."""
        return _lib.text(self._native, self._native.lib.emdb_client_server(self._h()))

    @property
    def max_batch(self) -> int:
        """The largest batch of IDs one call may carry."""
        return int(self._native.lib.emdb_client_max_batch(self._h()))

    @property
    def protocol_version(self) -> int:
        return int(self._native.lib.emdb_client_protocol_version(self._h()))

    @property
    def timeout_ms(self) -> int:
        """Timeout of requests submitted from now on (0 = none); settable."""
        return int(self._native.lib.emdb_client_timeout(self._h()))

    @timeout_ms.setter
    def timeout_ms(self, ms: int) -> None:
        self._native.lib.emdb_client_set_timeout(self._h(), int(ms))

    # ---- server ----------------------------------------------------------

    def ping(self) -> None:
        self._check(self._native.lib.emdb_client_ping(self._h()))

    def info(self, section: Optional[str] = None) -> str:
        """The server's INFO text ("# Section" headings, "key: value" lines)."""
        ffi, lib = self._native
        p = ffi.new("char **")
        self._check(lib.emdb_client_info(self._h(), section.encode() if section else ffi.NULL, p))
        try:
            return ffi.string(p[0]).decode("utf-8", "replace")
        finally:
            lib.emdb_free(p[0])

    def config_get(self, pattern: str = "*") -> Dict[str, str]:
        """Settings whose key matches the glob `pattern`, as a dict."""
        ffi, lib = self._native
        kv = ffi.new("emdb_client_kv **")
        n = ffi.new("size_t *")
        self._check(lib.emdb_client_config_get(self._h(), pattern.encode(), kv, n))
        try:
            return {ffi.string(kv[0][i].key).decode(): ffi.string(kv[0][i].value).decode()
                    for i in range(n[0])}
        finally:
            lib.emdb_free(kv[0])

    def config_set(self, key: str, value: Any) -> None:
        """Set one run-time setting (docs/server.md); admin."""
        self._check(self._native.lib.emdb_client_config_set(self._h(), key.encode(),
                                                             str(value).encode()))

    def shutdown(self) -> None:
        """Ask the server to exit; admin."""
        self._check(self._native.lib.emdb_client_shutdown(self._h()))

    # ---- tables ----------------------------------------------------------

    def create_table(self, name: str, dim: int, optimizer: OptimizerLike = "sgd", *,
                     init: InitLike = None, seed: int = 0, lookup_default: str = "zeros",
                     exist_ok: bool = False, **hyper: float) -> Table:
        """Create a table and return it.

        optimizer: a name ("sgd", "adagrad", "rowwise_adagrad", "adam",
        "ftrl") with torch's defaults, or an emdb.Optimizer; hyperparameters
        given as keywords (lr=0.01, eps=...) override them.  init: "zeros",
        ("uniform", low, high), ("normal", mean, std) or an emdb.Init.
        lookup_default: what Lookup returns for an ID the table does not
        hold, "zeros" or "init" (its initial value).  With exist_ok, a
        table of that name that exists is returned instead (its dim must
        match).
        """
        cfg = TableConfig(name=name, dim=int(dim), optimizer=schema.as_optimizer(optimizer, hyper),
                          init=schema.as_init(init), seed=int(seed), lookup_default=lookup_default)
        ffi, lib = self._native
        c = schema.config_to_c(self._native, cfg)
        out = ffi.new("uint32_t *")
        rc = lib.emdb_client_table_create(self._h(), c, out)
        if rc == errors.CODES["EXISTS"] and exist_ok:
            t = self.table(name)
            if t.dim != cfg.dim:
                raise errors.error(rc, f"table {name!r} exists with dim {t.dim}, not {cfg.dim}")
            return t
        self._check(rc)
        self._dims[out[0]] = (cfg.dim, cfg.optimizer.kind)
        return Table(self, int(out[0]), name, cfg.dim, cfg.optimizer.kind)

    def table(self, ref: TableRef) -> Table:
        """The Table with this name or id (NoTableError if none)."""
        if isinstance(ref, Table):
            return ref
        tid = self.find_table(ref) if isinstance(ref, str) else int(ref)
        info = self.describe(tid)
        return Table(self, tid, info.config.name, info.config.dim, info.config.optimizer.kind)

    def tables(self) -> List[Table]:
        """Every live table, in creation order."""
        return [self.table(i) for i in self.list_tables()]

    def find_table(self, name: str) -> int:
        """The id of the table called `name`."""
        out = self._native.ffi.new("uint32_t *")
        self._check(self._native.lib.emdb_client_table_find(self._h(), name.encode(), out))
        return int(out[0])

    def drop_table(self, table: TableRef) -> None:
        tid = self._tid(table)
        self._check(self._native.lib.emdb_client_table_drop(self._h(), tid))
        self._dims.pop(tid, None)

    def describe(self, table: TableRef) -> TableInfo:
        """Configuration and statistics of one table."""
        tid = self._tid(table)
        c = self._native.ffi.new("emdb_table_info *")
        self._check(self._native.lib.emdb_client_table_describe(self._h(), tid, c))
        info = schema.info_from_c(self._native, c)
        self._dims[tid] = (info.config.dim, info.config.optimizer.kind)
        return info

    def list_tables(self) -> List[int]:
        """Ids of the live tables, in creation order."""
        ffi, lib = self._native
        n = ffi.new("size_t *")
        while True:
            self._check(lib.emdb_client_table_list(self._h(), ffi.NULL, 0, n))
            cap = n[0] + 16
            ids = ffi.new("uint32_t[]", cap)
            self._check(lib.emdb_client_table_list(self._h(), ids, cap, n))
            if n[0] <= cap:
                return [int(ids[i]) for i in range(n[0])]

    def stats(self) -> Dict[str, Any]:
        """The database's statistics: tables, alloc_bytes, alloc_peak and the
        sums over every table under "total"."""
        ffi = self._native.ffi
        c = ffi.new("emdb_db_stats *")
        self._check(self._native.lib.emdb_client_stats(self._h(), c))
        return {"tables": c.tables, "alloc_bytes": c.alloc_bytes, "alloc_peak": c.alloc_peak,
                "total": schema.struct_dict(self._native, c.total, "emdb_table_stats")}

    def reserve(self, table: TableRef, rows: int) -> None:
        """Make room for `rows` rows before training (emdb_client_table_reserve)."""
        self._check(self._native.lib.emdb_client_table_reserve(self._h(), self._tid(table),
                                                                int(rows)))

    def alter_table(self, table: TableRef, **hyper: float) -> Optimizer:
        """Change the optimizer's hyperparameters while the table serves (a
        learning-rate schedule): lr, eps, beta1, beta2, lr_decay, beta, l1,
        l2.  Applied at a step boundary: the next Update uses them, none
        mixes old and new (emdb_client_table_alter).  Returns the table's
        optimizer as it now is.  kind and initial_accumulator are fixed."""
        opt = schema.as_optimizer(self.describe(table).config.optimizer, hyper)
        c = self._native.ffi.new("emdb_optimizer *")
        schema.optimizer_to_c(self._native, opt, c)
        self._check(self._native.lib.emdb_client_table_alter(self._h(), self._tid(table), c))
        return opt

    def scan(self, table: TableRef, page_rows: int = 16384,
             with_state: bool = False) -> Iterator[ScanPage]:
        """Iterate over every row of the table, a page at a time (Redis
        SCAN style, emdb_client_table_scan): each page is a ScanPage of
        `ids` (uint64), `rows` (n, dim) and, with_state, the optimizer
        `state` (n, state floats), consistent at one step (`step`).  Every
        row the table holds for the whole scan comes back exactly once;
        pages may be short.  Over a socket a page must fit the server's
        max_frame (LimitError: ask for fewer page_rows)."""
        ffi, lib = self._native
        t = self.table(table)
        per_row = Optimizer(kind=t.optimizer).state_floats(t.dim) if with_state else 0
        n, nxt, step = ffi.new("size_t *"), ffi.new("uint64_t *"), ffi.new("uint64_t *")
        cursor = 0
        while True:
            ids = np.empty(page_rows, np.uint64)
            rows = np.empty((page_rows, t.dim), np.float32)
            state = np.empty((page_rows, per_row), np.float32) if per_row else None
            self._check(lib.emdb_client_table_scan(
                self._h(), t.id, cursor, page_rows, t.dim, per_row,
                ffi.from_buffer("uint64_t[]", ids, True), ffi.from_buffer("float[]", rows, True),
                ffi.from_buffer("float[]", state, True) if per_row else ffi.NULL, n, nxt, step))
            k = n[0]
            if k:
                yield ScanPage(ids[:k], rows[:k], state[:k] if per_row else None, int(step[0]))
            cursor = nxt[0]
            if cursor == 0:
                return

    def load(self, table: TableRef, ids: arrays.ArrayLike, rows: arrays.ArrayLike,
             state: Optional[arrays.ArrayLike] = None) -> None:
        """Write rows (n, dim) to ids, inserting the IDs the table lacks
        (pretrained embeddings coming in), and with `state` their optimizer
        state (n, state floats); without it, new rows get the initial
        state and held rows keep theirs (emdb_client_table_load)."""
        ffi, lib = self._native
        t = self.table(table)
        a = arrays.ids(ids)
        r = arrays.floats(rows, a.size, t.dim, "rows")
        per_row = 0
        sp = ffi.NULL
        if state is not None:
            per_row = Optimizer(kind=t.optimizer).state_floats(t.dim)
            sp = ffi.from_buffer("float[]", arrays.floats(state, a.size, per_row, "state"))
        self._check(lib.emdb_client_table_load(self._h(), t.id, ffi.from_buffer("uint64_t[]", a),
                                               a.size, t.dim, ffi.from_buffer("float[]", r),
                                               per_row, sp))

    def _tid(self, table: TableRef) -> int:
        if isinstance(table, Table):
            return table.id
        if isinstance(table, str):
            return self.find_table(table)
        return int(table)

    def _table_dim(self, table: TableRef) -> Tuple[int, int]:
        if isinstance(table, Table):
            return table.id, table.dim
        tid = self._tid(table)
        d = self._dims.get(tid)
        if d is None:
            self.describe(tid)
            d = self._dims[tid]
        return tid, d[0]

    # ---- data plane ------------------------------------------------------

    def _adopt(self, t: Any) -> Ticket:
        tk = Ticket(self, t)
        self._tickets.add(tk)
        return tk

    def _ticket(self, tk: Ticket) -> Any:
        if tk._client is not self:
            raise ValueError("the ticket belongs to another Client")
        if tk._t is None:
            raise ValueError("the ticket was freed")
        return tk._t

    def prefetch(self, table: TableRef, ids: arrays.ArrayLike) -> Ticket:
        """Resolve (and insert) ids; the Ticket lets pull and push skip the index."""
        ffi, lib = self._native
        a = arrays.ids(ids)
        out = ffi.new("emdb_client_ticket **")
        self._check(lib.emdb_client_prefetch(self._h(), self._tid(table),
                                             ffi.from_buffer("uint64_t[]", a), a.size, out))
        return self._adopt(out[0])

    def prefetch_async(self, table: TableRef, ids: arrays.ArrayLike) -> PrefetchFuture:
        """Submit a Prefetch and return at once; .result() gives the Ticket.
        The data loader's call: resolve batch i+1 while batch i computes."""
        ffi, lib = self._native
        a = arrays.ids(ids)
        out = ffi.new("emdb_client_ticket **")
        f = lib.emdb_client_prefetch_async(self._h(), self._tid(table),
                                           ffi.from_buffer("uint64_t[]", a), a.size, out)
        if f == ffi.NULL:
            raise MemoryError(_lib.text(self._native, lib.emdb_client_last_error()))
        fut = PrefetchFuture(self, f, out, a)
        self._futures.add(fut)
        return fut

    def pull(self, table: TableRef, ids: Union[Ticket, arrays.ArrayLike],
             out: Optional[np.ndarray] = None, *, offsets: Optional[arrays.ArrayLike] = None,
             mode: str = "sum", weights: Optional[arrays.ArrayLike] = None) -> np.ndarray:
        """The rows of `ids` (or of a Ticket), inserting unseen IDs.

        Plain: an (n, dim) float32 array, row i for ids[i].  Pooled (with
        `offsets`): an (n_bags, dim) array, bag b the sum (mode "sum") or
        mean ("mean") of rows offsets[b] .. offsets[b+1]-1; offsets has
        n_bags + 1 entries from 0 to n (torch's include_last_offset=True).
        `weights` (pooled, mode "sum" only: torch's per_sample_weights)
        holds one float per ID, multiplying its row in its bag's sum.
        `out`, when given, is written in place and returned.
        """
        ffi, lib = self._native
        tid, dim = self._table_dim(table)
        c = self._h()
        ticket, t, a, n = self._batch(ids, offsets, weights)
        if offsets is None:
            o = arrays.out(out, n, dim)
            op = ffi.from_buffer("float[]", o, True)
            if ticket:
                rc = lib.emdb_client_pull_ticket(c, tid, t, dim, op)
            else:
                rc = lib.emdb_client_pull(c, tid, ffi.from_buffer("uint64_t[]", a), n, dim, op)
            self._check(rc)
            return o
        off = arrays.offsets(offsets)
        nb = max(off.size - 1, 0)
        o = arrays.out(out, nb, dim)
        args = self._bag_args(off, nb, mode, weights, n)
        args += (dim, ffi.from_buffer("float[]", o, True))
        if ticket:
            fn = lib.emdb_client_pull_bags_weighted_ticket if weights is not None \
                else lib.emdb_client_pull_bags_ticket
            rc = fn(c, tid, t, *args)
        else:
            fn = lib.emdb_client_pull_bags_weighted if weights is not None \
                else lib.emdb_client_pull_bags
            rc = fn(c, tid, ffi.from_buffer("uint64_t[]", a), n, *args)
        self._check(rc)
        return o

    def _batch(self, ids: Any, offsets: Any, weights: Any) -> tuple:
        """(is a ticket, the C ticket or None, the uint64 IDs or None, n)."""
        if weights is not None and offsets is None:
            raise ValueError("weights need offsets (they weight rows in their bags)")
        if isinstance(ids, Ticket):
            return True, self._ticket(ids), None, ids.count
        a = arrays.ids(ids)
        return False, None, a, a.size

    def _bag_args(self, off: np.ndarray, nb: int, mode: str, weights: Any, n: int) -> tuple:
        """offsets, n_bags, pool[, weights] of a pooled call."""
        ffi = self._native.ffi
        args: tuple = (ffi.from_buffer("uint64_t[]", off), nb, schema.pool_value(self._native, mode))
        if weights is not None:
            args += (ffi.from_buffer("float[]", arrays.floats(weights, n, 1, "weights")),)
        return args

    def push(self, table: TableRef, ids: Union[Ticket, arrays.ArrayLike],
             grads: arrays.ArrayLike, *, offsets: Optional[arrays.ArrayLike] = None,
             mode: str = "sum", weights: Optional[arrays.ArrayLike] = None) -> None:
        """Accumulate gradients until the next update (duplicates summed).

        Plain: grads has n x dim values, row i for ids[i].  Pooled (with
        `offsets`, as in pull): one gradient per bag, n_bags x dim, which
        every ID of the bag receives (divided by the bag's size under
        "mean", multiplied by the ID's weight with `weights`): the backward
        of a pooled pull.
        """
        ffi, lib = self._native
        tid, dim = self._table_dim(table)
        c = self._h()
        ticket, t, a, n = self._batch(ids, offsets, weights)
        if offsets is None:
            gp = ffi.from_buffer("float[]", arrays.floats(grads, n, dim))
            if ticket:
                rc = lib.emdb_client_push_ticket(c, tid, t, dim, gp)
            else:
                rc = lib.emdb_client_push(c, tid, ffi.from_buffer("uint64_t[]", a), n, dim, gp)
            self._check(rc)
            return
        off = arrays.offsets(offsets)
        nb = max(off.size - 1, 0)
        args = self._bag_args(off, nb, mode, weights, n)
        args += (dim, ffi.from_buffer("float[]", arrays.floats(grads, nb, dim)))
        if ticket:
            fn = lib.emdb_client_push_bags_weighted_ticket if weights is not None \
                else lib.emdb_client_push_bags_ticket
            rc = fn(c, tid, t, *args)
        else:
            fn = lib.emdb_client_push_bags_weighted if weights is not None \
                else lib.emdb_client_push_bags
            rc = fn(c, tid, ffi.from_buffer("uint64_t[]", a), n, *args)
        self._check(rc)

    def push_update(self, table: TableRef, ids: Union[Ticket, arrays.ArrayLike],
                    grads: arrays.ArrayLike) -> int:
        """A push and then an update of the table in one request; returns
        the rows updated (emdb_client_push_update)."""
        ffi, lib = self._native
        tid, dim = self._table_dim(table)
        rows = ffi.new("uint64_t *")
        if isinstance(ids, Ticket):
            g = arrays.floats(grads, ids.count, dim)
            rc = lib.emdb_client_push_update_ticket(self._h(), tid, self._ticket(ids), dim,
                                                    ffi.from_buffer("float[]", g), rows)
        else:
            a = arrays.ids(ids)
            g = arrays.floats(grads, a.size, dim)
            rc = lib.emdb_client_push_update(self._h(), tid, ffi.from_buffer("uint64_t[]", a),
                                             a.size, dim, ffi.from_buffer("float[]", g), rows)
        self._check(rc)
        return int(rows[0])

    def update(self, table: Optional[TableRef] = None) -> int:
        """Apply the optimizer to every row with a gradient (one step of the
        table; None: every table); returns the rows updated."""
        ffi, lib = self._native
        rows = ffi.new("uint64_t *")
        if table is None:
            rc = lib.emdb_client_update_all(self._h(), rows)
        else:
            rc = lib.emdb_client_update(self._h(), self._tid(table), rows)
        self._check(rc)
        return int(rows[0])

    def update_sync(self, table: Optional[TableRef], workers: int) -> int:
        """A synchronous step of `workers` data-parallel workers: returns
        once all have called and the Update was applied, once (table None:
        every table)."""
        ffi, lib = self._native
        rows = ffi.new("uint64_t *")
        tid = 0 if table is None else self._tid(table)
        self._check(lib.emdb_client_update_sync(self._h(), tid, int(workers), rows))
        return int(rows[0])

    def lookup(self, table: TableRef, ids: arrays.ArrayLike, out: Optional[np.ndarray] = None,
               *, with_found: bool = False) -> Any:
        """Read-only rows for inference: IDs the table does not hold get
        its lookup default and are not inserted.  Returns the (n, dim)
        array, or (array, found) with a bool array when with_found."""
        ffi, lib = self._native
        tid, dim = self._table_dim(table)
        a = arrays.ids(ids)
        o = arrays.out(out, a.size, dim)
        found = np.empty(a.size, dtype=np.uint8) if with_found else None
        rc = lib.emdb_client_lookup(self._h(), tid, ffi.from_buffer("uint64_t[]", a), a.size, dim,
                                    ffi.from_buffer("float[]", o, True),
                                    ffi.from_buffer("uint8_t[]", found, True) if with_found
                                    else ffi.NULL)
        self._check(rc)
        return (o, found.view(np.bool_)) if with_found else o

    def read_state(self, table: TableRef, ids: arrays.ArrayLike, *,
                   with_found: bool = False) -> Any:
        """The optimizer state of ids, (n, state floats per row), in the
        layout of docs/engine.md (Adam: m then v); IDs not held give zeros."""
        ffi, lib = self._native
        t = self.table(table) if not isinstance(table, Table) else table
        per_row = Optimizer(kind=t.optimizer).state_floats(t.dim)
        a = arrays.ids(ids)
        o = np.empty((a.size, per_row), dtype=np.float32)
        found = np.empty(a.size, dtype=np.uint8)
        rc = lib.emdb_client_read_state(self._h(), t.id, ffi.from_buffer("uint64_t[]", a), a.size,
                                        per_row, ffi.from_buffer("float[]", o, True) if per_row
                                        else ffi.NULL, ffi.from_buffer("uint8_t[]", found, True))
        self._check(rc)
        return (o, found.view(np.bool_)) if with_found else o

    # ---- checkpoints -----------------------------------------------------

    def _ckpt_kind(self, kind: str) -> int:
        lib = self._native.lib
        kinds = {"full": lib.EMDB_CKPT_FULL, "incremental": lib.EMDB_CKPT_INCREMENTAL}
        if kind not in kinds:
            raise ValueError(f"kind must be 'full' or 'incremental', not {kind!r}")
        return kinds[kind]

    def checkpoint(self, kind: str = "full") -> CheckpointInfo:
        """Write a checkpoint of every table and wait for it (server with a
        data_dir; mem:// raises UnsupportedError)."""
        info = self._native.ffi.new("emdb_ckpt_info *")
        self._check(self._native.lib.emdb_client_checkpoint(self._h(), self._ckpt_kind(kind), info))
        return schema.ckpt_from_c(self._native, info)

    def checkpoint_start(self, kind: str = "full") -> int:
        """Start a checkpoint job and return its number at once."""
        job = self._native.ffi.new("uint64_t *")
        self._check(self._native.lib.emdb_client_checkpoint_start(self._h(), self._ckpt_kind(kind),
                                                                   job))
        return int(job[0])

    def restore(self, ckpt_id: int = 0) -> CheckpointInfo:
        """Replace every table with checkpoint ckpt_id (0: the latest); waits."""
        info = self._native.ffi.new("emdb_ckpt_info *")
        self._check(self._native.lib.emdb_client_restore(self._h(), int(ckpt_id), info))
        self._dims.clear()
        return schema.ckpt_from_c(self._native, info)

    def restore_start(self, ckpt_id: int = 0) -> int:
        job = self._native.ffi.new("uint64_t *")
        self._check(self._native.lib.emdb_client_restore_start(self._h(), int(ckpt_id), job))
        self._dims.clear()
        return int(job[0])

    def job_status(self, job: int = 0) -> JobStatus:
        """The status of a job (0: the newest)."""
        st = self._native.ffi.new("emdb_job_status *")
        self._check(self._native.lib.emdb_client_job_status(self._h(), int(job), st))
        return schema.job_from_c(self._native, st)

    def job_wait(self, job: int = 0, timeout: Optional[float] = None,
                 poll_ms: int = 0) -> JobStatus:
        """Wait until the job is done (raises its error if it failed, or
        TimeoutError when `timeout` seconds passed first)."""
        ffi, lib = self._native
        st = ffi.new("emdb_job_status *")
        ms = -1 if timeout is None else int(timeout * 1000)
        self._check(lib.emdb_client_job_wait(self._h(), int(job), ms, poll_ms, ffi.NULL, ffi.NULL,
                                             st))
        return schema.job_from_c(self._native, st)

    def checkpoints(self) -> List[CheckpointInfo]:
        """The complete checkpoints in the server's store, oldest first."""
        ffi, lib = self._native
        p = ffi.new("emdb_ckpt_info **")
        n = ffi.new("size_t *")
        self._check(lib.emdb_client_checkpoint_list(self._h(), p, n))
        try:
            return [schema.ckpt_from_c(self._native, p[0][i]) for i in range(n[0])]
        finally:
            lib.emdb_free(p[0])

    def delete_checkpoint(self, ckpt_id: int) -> None:
        self._check(self._native.lib.emdb_client_checkpoint_delete(self._h(), int(ckpt_id)))

    def linktest(self, msgs: Sequence[Tuple[int, int, int]], depth: int = 8,
                 duration: float = 1.0) -> "schema.LinktestResult":
        """Measure the links of the node this client talks to (admin;
        docs/cluster.md "Linktest"): it keeps `depth` rounds in flight for
        `duration` seconds, a round being one message per (rank,
        request_bytes, reply_bytes) of msgs, through its own link with no
        engine in between.  Raises UnsupportedError on a server that is not
        part of a cluster (and on mem://), InvalidError for a request out
        of bounds (nothing is sent), BusyError while another runs there,
        NodeError when a peer fails."""
        ffi, lib = self._native
        m = ffi.new("emdb_linktest_msg[]", max(len(msgs), 1))
        for i, (rank, req, rep) in enumerate(msgs):
            m[i].rank, m[i].request_bytes, m[i].reply_bytes = int(rank), int(req), int(rep)
        out = ffi.new("emdb_linktest_result *")
        self._check(lib.emdb_client_linktest(self._h(), m, len(msgs), int(depth),
                                             max(0, int(round(duration * 1000))), out))
        return schema.LinktestResult(int(out.rounds), out.elapsed_ns / 1e9, int(out.bytes_sent),
                                     int(out.bytes_received))


def connect(uri: str, token: Optional[str] = None, *, timeout_ms: Optional[int] = None,
            connect_timeout_ms: Optional[int] = None, mem_threads: Optional[int] = None,
            client_name: Optional[str] = None, busy_poll_us: Optional[int] = None,
            tls_ca_file: Optional[str] = None, tls_cert_file: Optional[str] = None,
            tls_key_file: Optional[str] = None, worker_rank: Optional[int] = None) -> Client:
    """Open a connection: tcp://HOST[:PORT], tls://HOST[:PORT],
    unix:///PATH or mem://[NAME] (the engine in this process), with the
    URI query keys of include/emdb/client.h (token=, timeout=, ...).

    Keywords are emdb_client_options' fields; None keeps the C default.
    worker_rank (0 .. 65535): this connection is that worker of a
    data-parallel trainer: its pushes are summed in rank order, so a
    step's rows are the same bits whichever worker pushed first, and its
    update_sync steps are numbered, so that one called again after an
    error is never counted twice (include/emdb/client.h).
    Raises emdb.Error subclasses: InvalidError (bad URI), IoError,
    AuthError, TimeoutError, ...
    """
    native = _lib.for_uri(uri)
    ffi, lib = native
    opts = ffi.new("emdb_client_options *")
    lib.emdb_py_options_init(opts)                      # EMDB_CLIENT_OPTIONS_INIT
    keep = []

    def cstr(s: Optional[str]) -> Any:
        if s is None:
            return ffi.NULL
        b = ffi.new("char[]", s.encode())
        keep.append(b)
        return b

    for name, v in (("timeout_ms", timeout_ms), ("connect_timeout_ms", connect_timeout_ms),
                    ("mem_threads", mem_threads), ("busy_poll_us", busy_poll_us),
                    ("worker_rank", worker_rank)):
        if v is not None:
            if int(v) < 0:
                raise ValueError(f"{name} must not be negative, not {v}")
            setattr(opts, name, int(v))
    opts.token = cstr(token)
    opts.client_name = cstr(client_name)
    opts.tls_ca_file = cstr(tls_ca_file)
    opts.tls_cert_file = cstr(tls_cert_file)
    opts.tls_key_file = cstr(tls_key_file)
    out = ffi.new("emdb_client **")
    rc = lib.emdb_client_connect(uri.encode(), opts, out)
    errors.check(native, rc)
    c = Client(native, out[0], uri)
    c.worker_rank = None if worker_rank is None else int(worker_rank)
    return c
