"""Fixtures: the real Herald server binary, started on free ports.

The binary is $HERALD_BIN, else debug/herald in the directory cargo builds
the workspace into (`cargo metadata` says which: $CARGO_TARGET_DIR, a
.cargo/config.toml, or target/ in the checkout), built once with
`cargo build -p herald` if missing.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parent.parent
REPO = SDK.parent.parent


def herald_bin() -> Path:
    env = os.environ.get("HERALD_BIN")
    if env:
        return Path(env)
    path = cargo_target_dir() / "debug" / "herald"
    if not path.exists():
        subprocess.run(["cargo", "build", "-p", "herald"], cwd=REPO, check=True)
    return path


def cargo_target_dir() -> Path:
    """Where cargo builds the workspace (scripts/target-dir does the same)."""
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout
    return Path(json.loads(meta)["target_directory"])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    """One `herald serve` process; restartable on the same ports."""

    binary: Path
    http_port: int = field(default_factory=free_port)
    tcp_port: int = field(default_factory=free_port)
    extra: list[str] = field(default_factory=list)
    tls: ssl.SSLContext | None = None
    """With ``--tls-cert``/``--tls-key`` in ``extra``: how to trust the server."""
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def ws_url(self) -> str:
        scheme = "wss" if self.tls is not None else "ws"
        return f"{scheme}://127.0.0.1:{self.http_port}/ws"

    @property
    def tcp_url(self) -> str:
        return f"tcp://127.0.0.1:{self.tcp_port}"

    def start(self) -> None:
        fd, name = tempfile.mkstemp(prefix="herald-", suffix=".log")
        os.close(fd)
        self.log = Path(name)
        args = [
            str(self.binary),
            "serve",
            "--listen",
            f"127.0.0.1:{self.http_port}",
            "--tcp-listen",
            f"127.0.0.1:{self.tcp_port}",
            *self.extra,
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"herald exited: {self.log.read_text()}")
            try:
                conn = (
                    http.client.HTTPSConnection("127.0.0.1", self.http_port, timeout=1, context=self.tls)
                    if self.tls is not None
                    else http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=1)
                )
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
                conn.close()
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("herald did not become healthy in 15 s")

    def stop(self, graceful: bool = False) -> None:
        """Kill the process at once (SIGKILL): connections drop without a close.
        ``graceful``: SIGTERM instead, and wait for the server's own shutdown
        (it closes every connection with 1001, going away)."""
        if self.proc is not None:
            if graceful:
                self.proc.terminate()
            else:
                self.proc.kill()
            self.proc.wait(timeout=20)
            self.proc = None
        if self.log is not None:
            self.log.unlink(missing_ok=True)
            self.log = None


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """One server shared by the tests that do not stop it."""
    s = Server(herald_bin())
    s.start()
    yield s
    s.stop()


@pytest.fixture
def own_server() -> Iterator[Server]:
    """A server of the test's own, which the test may kill and restart."""
    s = Server(herald_bin())
    s.start()
    yield s
    s.stop()
