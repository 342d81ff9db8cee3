"""The Client's calls over mem:// and unix://, checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import emdb


def test_tables(db: emdb.Client) -> None:
    t = db.create_table("ads", 8, "adam", lr=0.002, init=("uniform", -0.5, 0.5), seed=7)
    assert (t.name, t.dim, t.optimizer) == ("ads", 8, "adam")
    assert db.find_table("ads") == t.id
    assert db.list_tables() == [t.id]
    info = db.describe("ads")
    assert info.id == t.id
    assert info.config.optimizer.kind == "adam"
    assert info.config.optimizer.lr == pytest.approx(0.002)
    assert info.config.optimizer.beta2 == pytest.approx(0.999)   # torch's default kept
    assert (info.config.init.kind, info.config.init.a, info.config.init.b) == ("uniform", -0.5, 0.5)
    assert info.config.seed == 7
    assert info.stats["rows"] == 0
    assert db.create_table("ads", 8, exist_ok=True).id == t.id
    with pytest.raises(emdb.ExistsError):
        db.create_table("ads", 8)
    with pytest.raises(emdb.ExistsError):
        db.create_table("ads", 16, exist_ok=True)         # another dim
    db.create_table("b", 4)
    assert [x.name for x in db.tables()] == ["ads", "b"]
    t.drop()
    assert [x.name for x in db.tables()] == ["b"]
    with pytest.raises(emdb.NoTableError):
        db.find_table("ads")


def test_pull_push_update(db: emdb.Client) -> None:
    t = db.create_table("w", 4, "sgd", lr=0.5)
    ids = np.array([3, 1, 3, 2**64 - 1], dtype=np.uint64)
    assert np.array_equal(t.pull(ids), np.zeros((4, 4), np.float32))
    g = np.arange(16, dtype=np.float32).reshape(4, 4)
    t.push(ids, g)
    assert t.describe().stats["pending_rows"] == 3
    assert t.update() == 3
    want = {3: -0.5 * (g[0] + g[2]), 1: -0.5 * g[1], 2**64 - 1: -0.5 * g[3]}
    got = t.pull(np.array(list(want), dtype=np.uint64))
    assert np.array_equal(got, np.stack(list(want.values())))
    assert t.describe().stats["step"] == 1


def test_pooled(db: emdb.Client) -> None:
    t = db.create_table("p", 3, "sgd", lr=1.0, init=("uniform", -1, 1), seed=3)
    ids = np.array([5, 6, 7, 5, 9], dtype=np.uint64)
    off = np.array([0, 2, 2, 5], dtype=np.uint64)         # bags {5,6} {} {7,5,9}
    rows = t.pull(ids)
    s = t.pull(ids, offsets=off, mode="sum")
    m = t.pull(ids, offsets=off, mode="mean")
    want = np.stack([rows[0] + rows[1], np.zeros(3), rows[2] + rows[3] + rows[4]])
    np.testing.assert_allclose(s, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(m, want / np.array([[2], [1], [3]]), rtol=1e-6, atol=1e-7)
    g = np.array([[1, 2, 3], [4, 5, 6], [3, 6, 9]], dtype=np.float32)
    t.push(ids, g, offsets=off, mode="mean")
    t.update()
    after = t.pull(np.array([5, 6, 7, 9], dtype=np.uint64))
    delta = {5: g[0] / 2 + g[2] / 3, 6: g[0] / 2, 7: g[2] / 3, 9: g[2] / 3}
    want = np.stack([rows[0] - delta[5], rows[1] - delta[6], rows[2] - delta[7], rows[4] - delta[9]])
    np.testing.assert_allclose(after, want, rtol=1e-6, atol=1e-6)


def test_ticket_and_push_update(db: emdb.Client) -> None:
    t = db.create_table("tk", 2, "sgd", lr=1.0)
    ids = [10, 11, 10]
    with t.prefetch(ids) as tk:
        assert len(tk) == 3 and tk.table == t.id
        t.push(tk, np.ones((3, 2), np.float32))
        assert t.update() == 2
        np.testing.assert_array_equal(t.pull(tk), [[-2, -2], [-1, -1], [-2, -2]])
        assert t.push_update(tk, np.ones((3, 2), np.float32)) == 2
        np.testing.assert_array_equal(t.pull(tk, offsets=[0, 1, 3], mode="sum"), [[-4, -4], [-6, -6]])
    fut = db.prefetch_async(t, np.array([12, 13], dtype=np.int64))
    tk = fut.result(timeout=30)
    assert len(tk) == 2 and fut.done()
    t.push(tk, np.ones((1, 2), np.float32), offsets=[0, 2])
    tk.free()
    tk.free()                                    # idempotent
    with pytest.raises(ValueError):
        t.pull(tk)


def test_lookup_never_inserts(db: emdb.Client) -> None:
    t = db.create_table("lk", 4, "sgd", init=("uniform", 0, 1), lookup_default="init")
    z = db.create_table("lz", 4, "sgd", init=("uniform", 0, 1))
    init = t.lookup([1, 2])
    assert t.describe().stats["rows"] == 0
    np.testing.assert_array_equal(t.pull([2]), init[1:])            # the initial value
    out, found = t.lookup([1, 2], with_found=True)
    assert found.tolist() == [False, True]
    np.testing.assert_array_equal(z.lookup([1]), np.zeros((1, 4)))
    assert z.describe().stats["rows"] == 0


def test_read_state_and_update_sync(db: emdb.Client) -> None:
    t = db.create_table("st", 2, "adam", lr=0.1)
    t.push([4], np.array([[1.0, -2.0]], np.float32))
    assert t.update_sync(1) == 1
    st, found = t.read_state([4, 5], with_found=True)
    assert st.shape == (2, 4) and found.tolist() == [True, False]
    np.testing.assert_allclose(st[0], [0.1, -0.2, 0.001, 0.004], rtol=1e-6)   # m then v
    assert not st[1].any()


def test_server_calls(db: emdb.Client) -> None:
    db.ping()
    assert db.role == "admin"
    assert db.server.startswith("emdb")
    assert db.max_batch > 0 and db.protocol_version >= 2
    db.timeout_ms = 1234
    assert db.timeout_ms == 1234
    assert isinstance(db.stats()["total"]["rows"], int)
    assert "max_batch" in db.config_get("max_batch")


def test_info_and_checkpoints(server) -> None:
    with emdb.connect(server.uri) as db:
        assert "# Server" in db.info()
        db.config_set("max_tickets", 1000)
        assert db.config_get("max_tickets") == {"max_tickets": "1000"}
        t = db.create_table("ck", 2, "sgd", lr=1.0)
        t.push([1], np.ones((1, 2), np.float32))
        t.update()
        ck = db.checkpoint()
        assert ck.kind == "full" and ck.rows == 1 and ck.tables == 1
        t.push([1], np.ones((1, 2), np.float32))
        t.update()
        assert db.job_status().state == "done"
        job = db.checkpoint_start("incremental")
        st = db.job_wait(job, timeout=60)
        assert st.state == "done" and st.result.kind == "incremental"
        assert [c.id for c in db.checkpoints()] == [ck.id, st.result.id]
        db.delete_checkpoint(st.result.id)
        assert db.restore(ck.id).id == ck.id
        np.testing.assert_array_equal(db.table("ck").pull([1]), [[-1, -1]])


def test_checkpoint_needs_server() -> None:
    with emdb.connect("mem://") as db:
        with pytest.raises(emdb.UnsupportedError) as e:
            db.checkpoint()
        assert e.value.code == emdb.errors.CODES["UNSUPPORTED"]


def test_mem_shared_by_name() -> None:
    with emdb.connect("mem://py-shared") as a, emdb.connect("mem://py-shared") as b:
        a.create_table("s", 2)
        assert b.find_table("s") == a.find_table("s")


def test_weighted_bags(db: emdb.Client) -> None:
    t = db.create_table("wb", 2, "sgd", lr=1.0, init=("uniform", -1, 1))
    ids = np.array([1, 2, 1], np.uint64)
    off = [0, 2, 3]
    w = np.array([0.5, 2.0, -1.0], np.float32)
    rows = t.pull(ids)
    got = t.pull(ids, offsets=off, weights=w)
    np.testing.assert_allclose(got, [0.5 * rows[0] + 2 * rows[1], -rows[2]], rtol=1e-6)
    with t.prefetch(ids) as tk:
        np.testing.assert_array_equal(t.pull(tk, offsets=off, weights=w), got)
        t.push(tk, np.ones((2, 2), np.float32), offsets=off, weights=w)
    t.update()
    # ID 1 gets 0.5 * 1 + (-1) * 1, ID 2 gets 2 * 1; sgd lr 1 subtracts them
    np.testing.assert_allclose(t.pull([1, 2]), [rows[0] + 0.5, rows[1] - 2], rtol=1e-6)
    with pytest.raises(emdb.InvalidError):
        t.pull(ids, offsets=off, mode="mean", weights=w)       # as torch: sum only
    with pytest.raises(ValueError):
        t.pull(ids, weights=w)                                  # weights need bags
    with pytest.raises(ValueError):
        t.push(ids, np.ones((2, 2), np.float32), offsets=off, weights=w[:2])


def test_alter_table(db: emdb.Client) -> None:
    t = db.create_table("al", 2, "adam", lr=0.1)
    opt = t.alter(lr=0.05, beta1=0.8)
    assert (opt.lr, opt.beta1, opt.beta2) == (0.05, 0.8, pytest.approx(0.999))
    cfg = t.describe().config.optimizer
    assert cfg.lr == pytest.approx(0.05) and cfg.beta1 == pytest.approx(0.8)
    with pytest.raises(emdb.InvalidError):
        t.alter(lr=-1.0)                      # refused, nothing changes
    assert t.describe().config.optimizer.lr == pytest.approx(0.05)
    with pytest.raises(emdb.InvalidError):
        t.alter(initial_accumulator=1.0)      # fixed at creation


def test_scan_and_load(db: emdb.Client) -> None:
    t = db.create_table("sc", 3, "adam", init=("uniform", -1, 1))
    ids = np.array([0, 5, 2**64 - 1, 77], np.uint64)
    t.push(ids, np.ones((4, 3), np.float32))
    t.update()
    got = {}
    for page in t.scan(page_rows=3, with_state=True):
        assert page.step == 1 and page.state.shape == (len(page.ids), 6)
        for i, r, s in zip(page.ids, page.rows, page.state):
            assert int(i) not in got
            got[int(i)] = (r, s)
    assert sorted(got) == sorted(int(i) for i in ids)
    np.testing.assert_array_equal(np.stack([got[int(i)][0] for i in ids]), t.lookup(ids))
    np.testing.assert_array_equal(np.stack([got[int(i)][1] for i in ids]), t.read_state(ids))
    u = db.create_table("sc2", 3, "adam")
    u.load(ids, t.lookup(ids), t.read_state(ids))
    np.testing.assert_array_equal(u.lookup(ids), t.lookup(ids))
    np.testing.assert_array_equal(u.read_state(ids), t.read_state(ids))
    with pytest.raises(ValueError):
        u.load(ids, np.ones((3, 3), np.float32))
