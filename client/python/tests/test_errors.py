"""Failures raise emdb.Error subclasses with the C code and message, and
bad input is refused before anything changes."""
from __future__ import annotations

import numpy as np
import pytest

import emdb


def test_error_carries_code_and_message(db: emdb.Client) -> None:
    with pytest.raises(emdb.NoTableError) as e:
        db.describe(999)
    err = e.value
    assert isinstance(err, emdb.Error)
    assert err.code == -3 and err.name == "NO_TABLE"
    assert err.message and "NO_TABLE (-3)" in str(err)


def test_classes_follow_the_c_table() -> None:
    codes = emdb.errors.CODES
    assert codes["INVALID"] == -1 and codes["NODE"] == -19
    for name, code in codes.items():
        cls = emdb.errors.BY_CODE[code]
        assert issubclass(cls, emdb.Error)
        assert getattr(emdb, cls.__name__) is cls
    assert issubclass(emdb.InvalidError, ValueError)
    assert issubclass(emdb.errors.BY_CODE[codes["TIMEOUT"]], TimeoutError)
    assert issubclass(emdb.ClosedError, ConnectionError)
    e = emdb.errors.error(codes["TIMEOUT"], "slow")
    assert str(e) == "TIMEOUT (-13): slow"


def test_bad_uri() -> None:
    with pytest.raises(emdb.InvalidError) as e:
        emdb.connect("tcp://127.0.0.1:7878?bogus=1")
    assert "bogus" in e.value.message
    with pytest.raises(emdb.Error):
        emdb.connect("unix:///nonexistent/emdb.sock", connect_timeout_ms=2000)


def test_wrong_shapes_change_nothing(db: emdb.Client) -> None:
    t = db.create_table("d", 4)
    with pytest.raises(ValueError):
        t.pull([1], np.empty((1, 8), np.float32))
    with pytest.raises(TypeError):
        t.pull([1], np.empty((1, 4), np.float64))
    with pytest.raises(ValueError):
        t.push([1, 2], np.ones((1, 4), np.float32))
    with pytest.raises(emdb.BatchError):
        t.pull(np.array([], np.uint64))
    assert t.describe().stats["rows"] == 0


def test_bad_ids(db: emdb.Client) -> None:
    t = db.create_table("i", 2)
    with pytest.raises(TypeError):
        t.pull(np.array([1.5]))
    with pytest.raises(ValueError):
        t.pull(np.array([-1], np.int32))
    with pytest.raises(emdb.InvalidError):
        t.pull([1, 2], offsets=[0, 3])                         # past the batch
    with pytest.raises(ValueError):
        t.pull([1, 2], mode="max", offsets=[0, 2])
    assert t.describe().stats["rows"] == 0


def test_closed_client() -> None:
    db = emdb.connect("mem://")
    db.close()
    db.close()
    with pytest.raises(ValueError):
        db.ping()


def test_server_gone(server) -> None:
    db = emdb.connect(server.uri)
    try:
        db.shutdown()
        server.proc.wait(20)
        with pytest.raises(emdb.ClosedError):
            db.ping()
    finally:
        db.close()
