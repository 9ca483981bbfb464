"""Shared fixtures of the Python tests: `server`, a real `umd serve` (UMD_BIN, default
target/debug/umd) on a free loopback port for the module's tests. Its log goes to a temporary
file (never an undrained pipe, which would stall a chatty server) and is shown if it fails to
start."""

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
UMD_BIN = os.environ.get("UMD_BIN", str(HERE.parents[2] / "target" / "debug" / "umd"))
sys.path.insert(0, str(HERE.parent))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [UMD_BIN, "serve", "--addr", f"127.0.0.1:{port}", "--log-interval", "0"],
            stderr=log)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    proc.kill()
                    proc.wait(timeout=20)
                    log.seek(0)
                    raise RuntimeError(f"umd serve did not start: {log.read()[-4000:]}")
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
        proc.terminate()
        code = proc.wait(timeout=20)
        log.seek(0)
        assert code == 0, f"SIGTERM drains and exits 0, not {code}: {log.read()[-4000:]}"
