"""emdb._lib - the two cffi extension modules, loaded on demand.

emdb._native (libemdb_client.so: tcp://, tls://, unix://) is what every
program loads; emdb._native_mem (the client, its mem:// transport and the
engine, linked statically) is imported only when a program first opens a
mem:// database, so a trainer that talks to a server never maps the engine
or RocksDB.  Both are compiled from the same declarations (build_ffi.py),
but each has its own `ffi`: a handle opened through one module is only ever
passed back to that module's functions (Client keeps the pair it was
opened with).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional


class Native(NamedTuple):
    """One extension module: its ffi (types, buffers) and lib (functions)."""

    ffi: Any
    lib: Any


_sockets: Optional[Native] = None
_mem: Optional[Native] = None


def sockets() -> Native:
    """The bindings over libemdb_client.so (tcp://, tls://, unix://)."""
    global _sockets
    if _sockets is None:
        from . import _native  # type: ignore[attr-defined]

        _sockets = Native(_native.ffi, _native.lib)
    return _sockets


def mem() -> Native:
    """The bindings with the engine inside, for mem:// URIs."""
    global _mem
    if _mem is None:
        try:
            from . import _native_mem  # type: ignore[attr-defined]
        except ImportError as e:  # pragma: no cover - a partial install
            raise ImportError(
                "mem:// needs emdb._native_mem, which this installation lacks "
                "(built by CMake target emdb_python): " + str(e)) from e
        _mem = Native(_native_mem.ffi, _native_mem.lib)
    return _mem


def for_uri(uri: str) -> Native:
    """The module that can open `uri`."""
    return mem() if uri.startswith("mem:") else sockets()


def text(native: Native, p: Any) -> str:
    """A C string (NULL: "") as str."""
    if p == native.ffi.NULL:
        return ""
    return native.ffi.string(p).decode("utf-8", "replace")
