"""emdb - the Python client of the emdb embedding database.

    import emdb
    with emdb.connect("unix:///run/emdb.sock") as db:        # or tcp://, mem://
        ads = db.create_table("ads", 64, "adam", init=("uniform", -0.05, 0.05))
        tk = ads.prefetch(ids)                 # resolve the batch once
        rows = ads.pull(tk)                    # (n, 64) float32, written in place by C
        ads.push(tk, grads)                    # gradients stay in the server
        ads.update()                           # the optimizer runs there
        tk.free()

Built on the C client library (include/emdb/client.h, the manual for every
call's rules) through cffi; arrays pass to C without copies (emdb.arrays).
Errors raise emdb.Error subclasses carrying the C code and message
(emdb.errors).  PyTorch: emdb.torch.EmbeddingBag.  docs/python.md has the
whole guide.
"""
import builtins as _builtins

from . import errors
from .client import Client, PrefetchFuture, ScanPage, Table, Ticket, connect
from .errors import Error
from .schema import (CheckpointInfo, Init, JobStatus, LinktestResult, Optimizer, TableConfig,
                     TableInfo, optimizer_names)

# emdb.NoTableError, emdb.DimError, ...: one class per code of emdb/error.h.
globals().update({cls.__name__: cls for cls in errors.BY_CODE.values()})

__all__ = ["connect", "Client", "Table", "Ticket", "PrefetchFuture", "ScanPage", "Error", "errors",
           "Optimizer", "Init", "TableConfig", "TableInfo", "CheckpointInfo", "JobStatus", "LinktestResult",
           "optimizer_names"] + [cls.__name__ for cls in errors.BY_CODE.values()
                                 if not hasattr(_builtins, cls.__name__)]
