"""Shared fixtures of the Python tests: `server`, a real `umd serve` (UMD_BIN, default
target/debug/umd) on a free loopback port for the module's tests."""

import os
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
UMD_BIN = os.environ.get("UMD_BIN", str(HERE.parents[2] / "target" / "debug" / "umd"))


@pytest.fixture(scope="module")
def server():
    import socket
    import sys
    import time
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([UMD_BIN, "serve", "--addr", f"127.0.0.1:{port}", "--log-interval", "0"],
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert proc.poll() is None, "umd serve exited"
            time.sleep(0.05)
    sys.path.insert(0, str(HERE.parent))
    yield f"127.0.0.1:{port}"
    proc.terminate()
    assert proc.wait(timeout=20) == 0
