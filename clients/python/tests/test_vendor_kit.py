"""The vendor kit end to end: `umd plugin new` writes a plugin project in a temporary directory
outside the workspace (nothing of the repo copied into it; the SDK by path), `umd plugin build`
makes the component (cargo --offline: from the local registry cache), `umd serve --watch` picks
it up from a watched directory, and its op `Scale` runs over gRPC, checked against numpy."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from umd_client import Client, UmdError  # noqa: E402

ROOT = HERE.parents[2]
UMD_BIN = os.environ.get("UMD_BIN", str(ROOT / "target" / "debug" / "umd"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def component():
    tmp = Path(tempfile.mkdtemp(prefix="umd-vendor-kit-"))
    assert ROOT not in tmp.resolve().parents, "the project must live outside the workspace"
    try:
        subprocess.run([UMD_BIN, "plugin", "new", "kitscale", "--dir", str(tmp), "--sdk", str(ROOT / "sdk")],
                       check=True)
        project = tmp / "kitscale"
        env = dict(os.environ, CARGO_TARGET_DIR=str(project / "target"))
        built = subprocess.run([UMD_BIN, "plugin", "build", "--offline", str(project)], env=env,
                               stdout=subprocess.PIPE, text=True, timeout=1500)
        assert built.returncode == 0, "umd plugin build failed (see the captured stderr)"
        path = Path(built.stdout.strip().splitlines()[-1])
        assert path.is_file() and path.suffix == ".wasm", built.stdout
        assert project in path.parents, f"the component is built inside the project: {path}"
        yield path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_plugin_new_build_then_served_by_watch(component, tmp_path):
    watched = tmp_path / "plugins"
    watched.mkdir()
    port = free_port()
    log = open(tmp_path / "serve.log", "w+")  # a file: a pipe nobody reads could stall the server
    proc = subprocess.Popen([UMD_BIN, "serve", "--addr", f"127.0.0.1:{port}", "--log-interval", "0",
                             "--watch", "--plugins", str(watched)], stderr=log)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, f"umd serve exited: {(tmp_path / 'serve.log').read_text()}"
                assert time.time() < deadline, "umd serve did not listen within 30 s"
                time.sleep(0.05)
        with Client(f"127.0.0.1:{port}") as c:
            x = np.linspace(-3, 3, 1000, dtype=np.float32)
            with pytest.raises(UmdError):
                c.run("Scale", x, attributes={"alpha": 2.5})  # not loaded yet
            shutil.copy(component, watched / component.name)
            deadline = time.time() + 30
            while True:
                try:
                    (y,) = c.run("Scale", x, attributes={"alpha": 2.5})
                    break
                except UmdError:
                    assert time.time() < deadline, "the watched plugin was not loaded within 30 s"
                    time.sleep(0.2)
            np.testing.assert_allclose(y, 2.5 * x, rtol=1e-6)
            xh = np.array([1, -2, 0.5, 3], dtype=np.float16)
            (yh,) = c.run("Scale", xh, attributes={"alpha": 2.0})
            assert yh.dtype == np.float16
            np.testing.assert_array_equal(yh, 2 * xh)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
