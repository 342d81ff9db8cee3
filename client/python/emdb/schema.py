"""emdb.schema - tables, optimizers, checkpoints and jobs as Python values.

Plain dataclasses converted to and from the C structs of emdb/db.h,
emdb/checkpoint.h and emdb/client.h.  Names of kinds are the C library's
own (emdb_optimizer_name) or their C constants (EMDB_CKPT_FULL, ...), and
the statistics are read field by field from the struct's declaration, so
nothing here repeats a list the headers keep.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Union

from . import _lib

_OPT_FIELDS = ("lr", "eps", "beta1", "beta2", "lr_decay", "initial_accumulator", "beta", "l1", "l2")
# Enumerations whose C values come from the library: the Python name of
# each is its C constant's suffix in lower case.
_INIT_KINDS = ("zeros", "uniform", "normal")          # EMDB_INIT_*
_DEFAULT_KINDS = ("zeros", "init")                     # EMDB_DEFAULT_*
_POOLS = ("sum", "mean")                               # EMDB_POOL_*
_ROLES = ("none", "reader", "trainer", "admin")        # EMDB_ROLE_*
_JOB_KINDS = ("none", "checkpoint_full", "checkpoint_incremental", "restore")  # EMDB_JOB_*
_JOB_STATES = ("idle", "running", "done", "failed")    # EMDB_JOB_*
_CKPT_KINDS = ("full", "incremental")                  # EMDB_CKPT_*
_PHASES = ("pending", "switch", "scan", "write", "sync", "read", "swap", "done",
           "failed")                                   # EMDB_PHASE_*


def _value(native: _lib.Native, prefix: str, name: str) -> int:
    return getattr(native.lib, prefix + name.upper())


def _name(native: _lib.Native, prefix: str, names: tuple, value: int) -> str:
    for n in names:
        if _value(native, prefix, n) == value:
            return n
    return str(value)


_KINDS: Dict[int, Dict[str, int]] = {}


def _opt_kinds(native: _lib.Native) -> Dict[str, int]:
    """name -> emdb_opt_kind, asked of the C library once per module."""
    kinds = _KINDS.get(id(native.lib))
    if kinds is None:
        kinds = {}
        for k in range(1, 64):
            name = _lib.text(native, native.lib.emdb_optimizer_name(k))
            if name:
                kinds[name] = k
        _KINDS[id(native.lib)] = kinds
    return kinds


def optimizer_names() -> list:
    """The optimizers this build knows: "sgd", "adagrad", ..."""
    return list(_opt_kinds(_lib.sockets()))


@dataclass
class Optimizer:
    """A table's optimizer and its hyperparameters (docs/engine.md).

    Fields a kind does not use are ignored by the engine.  Build one with
    `Optimizer.defaults("adam", lr=0.01)`: torch's defaults where torch has
    the optimizer, then the given overrides.
    """

    kind: str = "sgd"
    lr: float = 0.01
    eps: float = 0.0
    beta1: float = 0.0
    beta2: float = 0.0
    lr_decay: float = 0.0
    initial_accumulator: float = 0.0
    beta: float = 0.0
    l1: float = 0.0
    l2: float = 0.0

    @classmethod
    def defaults(cls, kind: str, **overrides: float) -> "Optimizer":
        """emdb_optimizer_defaults(kind), then `overrides` (lr=..., eps=...)."""
        native = _lib.sockets()
        kinds = _opt_kinds(native)
        if kind not in kinds:
            raise ValueError(f"unknown optimizer {kind!r}; known: {', '.join(kinds)}")
        c = native.ffi.new("emdb_optimizer *")
        native.lib.emdb_optimizer_defaults(kinds[kind], c)
        opt = cls(kind=kind, **{f: getattr(c, f) for f in _OPT_FIELDS})
        for k, v in overrides.items():
            if k not in _OPT_FIELDS:
                raise ValueError(f"unknown optimizer field {k!r}; known: {', '.join(_OPT_FIELDS)}")
            setattr(opt, k, float(v))
        return opt

    def state_floats(self, dim: int) -> int:
        """Floats of optimizer state per row at `dim` (SGD 0, Adam 2*dim, ...)."""
        native = _lib.sockets()
        return int(native.lib.emdb_optimizer_state_floats(_opt_kinds(native)[self.kind], dim))


@dataclass
class Init:
    """Initial values of new rows: "zeros", "uniform" (a=low, b=high) or
    "normal" (a=mean, b=std); docs/engine.md gives the exact formula."""

    kind: str = "zeros"
    a: float = 0.0
    b: float = 0.0


InitLike = Union[Init, tuple, str, None]
OptimizerLike = Union[Optimizer, str, None]


@dataclass
class TableConfig:
    """What emdb_table_create takes."""

    name: str
    dim: int
    optimizer: Optimizer = field(default_factory=Optimizer)
    init: Init = field(default_factory=Init)
    seed: int = 0
    lookup_default: str = "zeros"   # "zeros" or "init"


@dataclass
class TableInfo:
    """A table's id, configuration and statistics (emdb_table_describe)."""

    id: int
    config: TableConfig
    stats: Dict[str, int]


@dataclass
class CheckpointInfo:
    """One checkpoint in the server's store (emdb_ckpt_info)."""

    id: int
    kind: str
    tables: int
    parent: int
    base: int
    created_ms: int
    duration_ms: int
    max_step: int
    rows: int
    rows_total: int
    bytes: int


@dataclass
class LinktestResult:
    """What a linktest measured (Client.linktest): the rounds whose every
    reply came back, over `elapsed` seconds, and their bytes as the nodes'
    link counts them (headers included)."""
    rounds: int
    elapsed: float
    bytes_sent: int
    bytes_received: int

    @property
    def rounds_per_sec(self) -> float:
        return self.rounds / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def bytes_per_sec(self) -> float:
        """Goodput, both ways together."""
        return (self.bytes_sent + self.bytes_received) / self.elapsed if self.elapsed > 0 else 0.0


@dataclass
class JobStatus:
    """A checkpoint or restore job (emdb_job_status)."""

    job: int
    kind: str
    state: str
    phase: str
    rows_done: int
    rows_total: int
    bytes_done: int
    bytes_total: int
    result: Optional[CheckpointInfo]
    error: int
    message: str


# ---- conversions --------------------------------------------------------

def as_init(init: InitLike) -> Init:
    if init is None:
        return Init()
    if isinstance(init, Init):
        return init
    if isinstance(init, str):
        return Init(init)
    if isinstance(init, tuple) and 1 <= len(init) <= 3:
        return Init(*init)
    raise TypeError(f"init: an emdb.Init, a kind name or a (kind, a, b) tuple, not {init!r}")


def as_optimizer(opt: OptimizerLike, hyper: Dict[str, float]) -> Optimizer:
    if opt is None:
        opt = "sgd"
    if isinstance(opt, str):
        return Optimizer.defaults(opt, **hyper)
    if isinstance(opt, Optimizer):
        return dataclasses.replace(opt, **{k: float(v) for k, v in hyper.items()}) if hyper else opt
    raise TypeError(f"optimizer: an emdb.Optimizer or a name, not {opt!r}")


def optimizer_to_c(native: _lib.Native, opt: Optimizer, c: Any) -> None:
    """Fill the emdb_optimizer c from opt."""
    kinds = _opt_kinds(native)
    if opt.kind not in kinds:
        raise ValueError(f"unknown optimizer {opt.kind!r}; known: {', '.join(kinds)}")
    c.kind = kinds[opt.kind]
    for f in _OPT_FIELDS:
        setattr(c, f, getattr(opt, f))


def config_to_c(native: _lib.Native, cfg: TableConfig) -> Any:
    ffi, lib = native.ffi, native.lib
    if cfg.init.kind not in _INIT_KINDS:
        raise ValueError(f"unknown init {cfg.init.kind!r}; known: {', '.join(_INIT_KINDS)}")
    if cfg.lookup_default not in _DEFAULT_KINDS:
        raise ValueError(f"lookup_default must be one of {', '.join(_DEFAULT_KINDS)}")
    name = cfg.name.encode()
    c = ffi.new("emdb_table_config *")
    if len(name) >= len(c.name):
        raise ValueError(f"table name {cfg.name!r} longer than {len(c.name) - 1} bytes")
    c.size = ffi.sizeof("emdb_table_config")
    c.dim = cfg.dim
    c.name = name
    optimizer_to_c(native, cfg.optimizer, c.optimizer)
    c.init.kind = _value(native, "EMDB_INIT_", cfg.init.kind)
    c.init.a = cfg.init.a
    c.init.b = cfg.init.b
    c.seed = cfg.seed
    c.lookup_default = _value(native, "EMDB_DEFAULT_", cfg.lookup_default)
    return c


def config_from_c(native: _lib.Native, c: Any) -> TableConfig:
    lib = native.lib
    opt = Optimizer(kind=_lib.text(native, lib.emdb_optimizer_name(c.optimizer.kind)),
                    **{f: getattr(c.optimizer, f) for f in _OPT_FIELDS})
    init = Init(_name(native, "EMDB_INIT_", _INIT_KINDS, c.init.kind), c.init.a, c.init.b)
    return TableConfig(name=native.ffi.string(c.name).decode(), dim=c.dim, optimizer=opt,
                       init=init, seed=c.seed,
                       lookup_default=_name(native, "EMDB_DEFAULT_", _DEFAULT_KINDS, c.lookup_default))


def struct_dict(native: _lib.Native, c: Any, ctype: str) -> Dict[str, int]:
    """Every integer field of a flat struct, by its declared name."""
    return {name: getattr(c, name) for name, _ in native.ffi.typeof(ctype).fields}


def info_from_c(native: _lib.Native, c: Any) -> TableInfo:
    return TableInfo(id=c.id, config=config_from_c(native, c.config),
                     stats=struct_dict(native, c.stats, "emdb_table_stats"))


def ckpt_from_c(native: _lib.Native, c: Any) -> CheckpointInfo:
    kw = {name: getattr(c, name) for name, _ in native.ffi.typeof("emdb_ckpt_info").fields}
    kw["kind"] = _name(native, "EMDB_CKPT_", _CKPT_KINDS, c.kind)
    return CheckpointInfo(**kw)


def job_from_c(native: _lib.Native, c: Any) -> JobStatus:
    p = c.progress
    return JobStatus(
        job=c.job, kind=_name(native, "EMDB_JOB_", _JOB_KINDS, c.kind),
        state=_name(native, "EMDB_JOB_", _JOB_STATES, c.state),
        phase=_name(native, "EMDB_PHASE_", _PHASES, p.phase),
        rows_done=p.rows_done, rows_total=p.rows_total, bytes_done=p.bytes_done,
        bytes_total=p.bytes_total,
        result=ckpt_from_c(native, c.result) if c.state == native.lib.EMDB_JOB_DONE else None,
        error=c.error, message=native.ffi.string(c.message).decode("utf-8", "replace"))


def pool_value(native: _lib.Native, mode: str) -> int:
    if mode not in _POOLS:
        raise ValueError(f"mode must be 'sum' or 'mean', not {mode!r}")
    return _value(native, "EMDB_POOL_", mode)


def role_name(native: _lib.Native, role: int) -> str:
    return _name(native, "EMDB_ROLE_", _ROLES, role)
