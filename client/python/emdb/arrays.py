"""emdb.arrays - numpy arrays in and out of the C library without copies.

Inputs (IDs, offsets, gradients) are passed to C as pointers into the
caller's array when it already is C-contiguous memory of the C type:
uint64 IDs, or int64 IDs read as the uint64 of the same 64 bits (so
torch's int64 tensors pass as they are, and hashed IDs of 2^63 and more
survive the trip); float32 gradients.  Anything else (a list, int32 IDs,
float64 gradients, a strided view) is converted once, with its values
checked.  Outputs are numpy arrays the C call writes in place: the
caller's `out` when given (it must be C-contiguous, writable float32 of
the right size, and is returned itself), else a new array.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

ArrayLike = Union[np.ndarray, Sequence[int], Sequence[float], Any]

_UINT64, _INT64 = np.dtype(np.uint64), np.dtype(np.int64)


def ids(a: ArrayLike, what: str = "ids") -> np.ndarray:
    """A 1-D C-contiguous uint64 array of `a`, a view when possible."""
    if type(a) is np.ndarray and a.ndim == 1 and a.flags.c_contiguous:
        kind = a.dtype
        if kind == _UINT64:
            return a                      # already what C takes
        if kind == _INT64:
            return a.view(np.uint64)      # torch's IDs: the common case, no checks to make
    arr = np.asarray(a)
    if arr.dtype != np.uint64:
        if arr.dtype.kind not in "iu":
            if arr.size == 0 and arr.dtype.kind == "f":
                arr = arr.astype(np.uint64)
            else:
                raise TypeError(f"{what}: integers needed, not {arr.dtype}")
        elif arr.dtype.itemsize == 8:
            arr = arr.view(np.uint64)
        else:
            if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
                raise ValueError(f"{what}: negative value {int(arr.min())} in {arr.dtype} array")
            arr = arr.astype(np.uint64)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    return np.ascontiguousarray(arr)


def offsets(a: ArrayLike) -> np.ndarray:
    """Bag offsets as uint64.  A negative int64 offset reads as a value
    past the batch, which the engine refuses (INVALID) like any offset
    that does not rise from 0 to n; narrower types refuse negatives here."""
    return ids(a, "offsets")


def floats(a: ArrayLike, rows: int, dim: int, what: str = "grads") -> np.ndarray:
    """A C-contiguous float32 array of rows * dim values, a view when possible."""
    arr = np.ascontiguousarray(a, dtype=np.float32)
    if arr.size != rows * dim:
        raise ValueError(f"{what}: {rows} x {dim} = {rows * dim} floats needed, "
                         f"got shape {arr.shape}")
    return arr


def out(o: Optional[np.ndarray], rows: int, dim: int, dtype: Any = np.float32,
        what: str = "out") -> np.ndarray:
    """`o` checked to take rows x dim values in place, or a new array."""
    if o is None:
        return np.empty((rows, dim) if dim else (rows,), dtype=dtype)
    if not isinstance(o, np.ndarray):
        raise TypeError(f"{what}: a numpy array, not {type(o).__name__}")
    if o.dtype != dtype:
        raise TypeError(f"{what}: dtype {np.dtype(dtype)} needed, not {o.dtype}")
    if not o.flags.c_contiguous or not o.flags.writeable:
        raise ValueError(f"{what}: a C-contiguous writable array needed")
    if o.size != rows * max(dim, 1):
        raise ValueError(f"{what}: {rows} x {dim} values needed, got shape {o.shape}")
    return o
