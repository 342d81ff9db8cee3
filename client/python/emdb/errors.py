"""emdb.errors - emdb's error codes as Python exceptions.

Every failing call raises a subclass of `Error`, chosen by the code the C
library returned, carrying the code (`.code`, the negative emdb_err number;
`.name`, its name in include/emdb/error.h such as "NO_TABLE") and the C
library's message (`.message`, emdb_client_last_error()).  The classes are
made from the C library's own table of codes (emdb_err_name), so a code
added there becomes a class here without an edit: NO_TABLE is
`NoTableError`, DIM `DimError`, and so on.  Four also derive from the
built-in exception a Python program expects: INVALID from ValueError,
NOMEM from MemoryError, TIMEOUT from TimeoutError and CLOSED from
ConnectionError.
"""
from __future__ import annotations

import builtins
from typing import Dict, Type

from . import _lib


class Error(Exception):
    """An emdb call failed.

    Attributes:
        code: the emdb_err value (negative), e.g. -3.
        name: its name without prefix, e.g. "NO_TABLE".
        message: the detailed message of the C library.
    """

    code: int
    name: str
    message: str

    def __init__(self, code: int, name: str, message: str) -> None:
        self.code = code
        self.name = name
        self.message = message
        Exception.__init__(self, f"{name} ({code}): {message}")

    def __str__(self) -> str:  # OSError's own __str__ would show errno
        return f"{self.name} ({self.code}): {self.message}"

    def __reduce__(self):  # picklable across processes
        return (type(self), (self.code, self.name, self.message))


_BUILTIN_BASE = {
    "INVALID": builtins.ValueError,
    "NOMEM": builtins.MemoryError,
    "TIMEOUT": builtins.TimeoutError,
    "CLOSED": builtins.ConnectionError,
}

#: code -> exception class, for every code the C library names.
BY_CODE: Dict[int, Type[Error]] = {}
#: name ("NO_TABLE") -> code (-3).
CODES: Dict[str, int] = {}


def _class_name(name: str) -> str:
    return "".join(w.capitalize() for w in name.split("_")) + "Error"


def _make_classes() -> None:
    native = _lib.sockets()
    code = -1
    while True:
        name = _lib.text(native, native.lib.emdb_err_name(code))
        if name == "UNKNOWN":
            break
        doc = _lib.text(native, native.lib.emdb_strerror(code))
        bases = (Error,) + ((_BUILTIN_BASE[name],) if name in _BUILTIN_BASE else ())
        cls = type(_class_name(name), bases, {"__doc__": f"emdb {name} ({code}): {doc}.",
                                              "__module__": __name__})
        BY_CODE[code] = cls
        CODES[name] = code
        globals()[cls.__name__] = cls
        code -= 1


_make_classes()


def error(code: int, message: str) -> Error:
    """The exception for `code` with `message`."""
    native = _lib.sockets()
    cls = BY_CODE.get(code, Error)
    return cls(code, _lib.text(native, native.lib.emdb_err_name(code)), message)


def check(native: _lib.Native, rc: int) -> None:
    """Raise the exception of rc when it is not EMDB_OK (0)."""
    if rc != 0:
        raise error(rc, _lib.text(native, native.lib.emdb_client_last_error()))
