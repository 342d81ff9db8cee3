"""Client.linktest: the node-to-node link measured through the Python
client, on real emdb-server nodes forming a cluster over UCX on loopback
(docs/cluster.md "Linktest"), and refused where there is no link."""
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator, List

import pytest

import emdb
from conftest import server_bin


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """n emdb-server nodes of one cluster, all started before any is
    waited for (a node is ready only once every node is reachable)."""

    def __init__(self, tmp: Path, n: int) -> None:
        (tmp / "cluster").write_text(f"cluster_id py-{os.getpid()}\n" + "".join(
            f"node {i} 127.0.0.1:{_free_port()}\n" for i in range(n)))
        secret = tmp / "secret"
        secret.write_text("python-linktest-secret-0123456789\n")
        secret.chmod(0o600)
        env = dict(os.environ, UCX_TLS=os.environ.get("UCX_TLS", "tcp"), UCX_NET_DEVICES="lo")
        self.procs: List[subprocess.Popen] = []
        self.logs = [tmp / f"node{i}.log" for i in range(n)]
        ports = [tmp / f"node{i}.port" for i in range(n)]
        self.uris = [f"unix://{tmp / f'node{i}.sock'}" for i in range(n)]
        for i in range(n):
            argv = [server_bin(), "--bind", "127.0.0.1", "--port", "0", "--port-file", str(ports[i]),
                    "--unix-socket", str(tmp / f"node{i}.sock"), "--io-threads", "1",
                    "--cluster-file", str(tmp / "cluster"), "--cluster-rank", str(i),
                    "--cluster-secret-file", str(secret)]
            with open(self.logs[i], "wb") as log:
                self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                                   stderr=subprocess.STDOUT, env=env))
        deadline = time.monotonic() + 60
        for i in range(n):
            while not (ports[i].exists() and ports[i].read_text().endswith("\n")):
                if self.procs[i].poll() is not None or time.monotonic() > deadline:
                    for p in self.procs:
                        if p.poll() is None:
                            p.kill()
                            p.wait()
                    pytest.fail(f"node {i} did not start: {self.logs[i].read_text()[-2000:]}")
                time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM every node (SIGKILL after 20 s); each must exit 0, so a
        sanitizer's report fails the test."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        bad = [i for i, p in enumerate(self.procs) if p.returncode != 0]
        assert not bad, "".join(f"node {i} exited with {self.procs[i].returncode}: "
                                f"{self.logs[i].read_text()[-2000:]}\n" for i in bad)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3)
    try:
        yield c
    finally:
        c.stop()


def test_linktest_measures_the_links_of_a_cluster(cluster: Cluster) -> None:
    with emdb.connect(cluster.uris[0]) as db:
        msgs = [(1, 4112, 65552), (2, 4112, 65552)]
        r = db.linktest(msgs, depth=4, duration=0.3)
        assert r.rounds > 0 and r.elapsed > 0
        assert r.bytes_sent == r.rounds * 2 * 4112
        assert r.bytes_received == r.rounds * 2 * 65552
        assert r.rounds_per_sec > 0
        assert r.bytes_per_sec == pytest.approx((r.bytes_sent + r.bytes_received) / r.elapsed)
        # Out of bounds: refused with the reason, nothing run.
        with pytest.raises(emdb.InvalidError, match="depth"):
            db.linktest(msgs, depth=0, duration=0.1)
        with pytest.raises(emdb.InvalidError, match="rank 0"):
            db.linktest([(0, 4112, 4112)], depth=1, duration=0.1)
        with pytest.raises(emdb.InvalidError):
            db.linktest([], depth=1, duration=0.1)
    # Any node can test its own links.
    with emdb.connect(cluster.uris[2]) as db:
        assert db.linktest([(0, 64, 64)], depth=1, duration=0.1).rounds > 0


def test_linktest_is_refused_without_a_cluster(server) -> None:
    with emdb.connect(server.uri) as db:
        with pytest.raises(emdb.UnsupportedError, match="not part of a cluster"):
            db.linktest([(1, 4112, 4112)], depth=1, duration=0.1)
    with emdb.connect("mem://") as db:
        with pytest.raises(emdb.UnsupportedError):
            db.linktest([(1, 4112, 4112)], depth=1, duration=0.1)
