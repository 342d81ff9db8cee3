"""Fixtures of the Python package's tests.

The package is imported from a build tree: $EMDB_PYTHON_BUILD, else the
repository's build/release (tools/test.sh builds it there).  The server is
$EMDB_TEST_SERVER (tools/test.sh passes the ASan build's), else the build
tree's net/emdb-server.  Every server a test starts is stopped when the
test ends, failed or not.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[3]
BUILD = Path(os.environ.get("EMDB_PYTHON_BUILD", REPO / "build" / "release"))
sys.path.insert(0, str(BUILD / "python"))
sys.path.insert(0, str(REPO / "client" / "python" / "examples"))

try:
    import emdb  # noqa: E402,F401  (after the path is set)
except ImportError as e:
    pytest.exit(f"cannot import emdb from {BUILD / 'python'}: {e}; build the CMake target "
                "emdb_python there, or point EMDB_PYTHON_BUILD at a build tree that has it",
                returncode=1)


def server_bin() -> str:
    return os.environ.get("EMDB_TEST_SERVER") or str(BUILD / "net" / "emdb-server")


class Server:
    """An emdb-server on a Unix socket in a temporary directory, with a
    checkpoint store."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        self.sock = tmp / "emdb.sock"
        self.log = tmp / "server.log"
        port_file = tmp / "port"
        # The port file is written once the server listens (the socket
        # file alone appears at bind time, before it accepts).
        argv = [server_bin(), "--bind", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
                "--unix-socket", str(self.sock), "--data-dir", str(tmp / "data"), *extra]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().endswith("\n")
                   and self.sock.exists()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait()
                pytest.fail(f"emdb-server did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.01)
        self.uri = f"unix://{self.sock}"

    def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after 20 s) and check that it
        exited cleanly: status 0, so a sanitizer's report fails the test."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.returncode == 0, \
            f"emdb-server exited with {self.proc.returncode}: {self.log.read_text()[-3000:]}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(params=["mem", "unix"])
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test that takes it runs over mem:// and over unix:// to a server."""
    if request.param == "mem":
        yield "mem://"
        return
    s = Server(tmp_path)
    try:
        yield s.uri
    finally:
        s.stop()


@pytest.fixture
def db(uri: str) -> Iterator[emdb.Client]:
    with emdb.connect(uri) as c:
        yield c
