"""The generated client against a real `umd serve` process: translate, batch, execute Add and
MatMul with numpy-checked results, and the torch example where torch is installed."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from umd_client import STATUS_UNSUPPORTED, Client, UmdError  # noqa: E402
from umd_client import umd_pb2 as pb  # noqa: E402



@pytest.fixture()
def client(server):
    with Client(server) as c:
        yield c


def test_translate_returns_a_command_buffer(client):
    t = client.translate("Add", [pb.TensorDesc(shape=[2, 3], dtype="torch.float32"),
                                 pb.TensorDesc(shape=[3], dtype="float32")], request_id=9)
    assert t.command_buffer[:6] == b"UMDCMD"
    assert t.kernel_name == "add_f32_bcast"
    assert t.request_id == 9
    assert list(t.outputs[0].shape) == [2, 3]


def test_unsupported_op_is_status_2(client):
    with pytest.raises(UmdError) as e:
        client.translate("NoSuchOnnxOp", [pb.TensorDesc(shape=[1], dtype="f32")])
    assert e.value.status == STATUS_UNSUPPORTED


def test_batch_streams_in_order_with_a_bad_item(client):
    items = [("Add", [np.zeros((4,), np.float32), np.zeros((4,), np.float32)]) for _ in range(50)]
    items[20] = ("Add", [pb.TensorDesc(shape=[4], dtype="nope"), pb.TensorDesc(shape=[4], dtype="f32")])
    got = list(client.batch(items))
    assert [r.request_id for r in got] == list(range(50))
    assert [r.status for r in got].count(0) == 49
    assert got[20].status == 3 and "nope" in got[20].msg


def test_execute_add_and_matmul_match_numpy(client):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7), dtype=np.float32)
    bias = rng.standard_normal((7,), dtype=np.float32)
    (z,) = client.run("Add", a, bias)
    np.testing.assert_array_equal(z, a + bias)

    x = rng.standard_normal((3, 4, 6), dtype=np.float32)
    w = rng.standard_normal((6, 5), dtype=np.float32)
    (y,) = client.run("MatMul", x, w)
    np.testing.assert_allclose(y, x @ w, rtol=1e-5, atol=1e-5)

    big = rng.standard_normal((1 << 20,), dtype=np.float32)  # 4 MiB: several chunks
    (r,) = client.run("Relu", big)
    np.testing.assert_array_equal(r, np.maximum(big, 0))


def test_download_resumes_a_stream_that_ends_early(client):
    """grpcio may end a server stream early without an error when a message fails to decode
    (grpc/grpc#34670): the client resumes the read where it stopped, and fails loudly when the
    stream keeps bringing nothing, never returning a truncated tensor."""
    big = np.arange(5 << 18, dtype=np.float32)  # 5 MiB: five 1 MiB chunks
    h = client.upload(big)
    real = client.device_stub.ReadBuffer
    calls = []

    def first_chunk_only(request):
        calls.append(request.offset)
        for c in real(request):
            yield c
            return

    def nothing(request):
        calls.append(request.offset)
        return iter(())

    try:
        client.device_stub.ReadBuffer = first_chunk_only
        np.testing.assert_array_equal(client.download(h, big.shape, "f32"), big)
        assert calls == [0, 1 << 20, 2 << 20, 3 << 20, 4 << 20]
        calls.clear()
        client.device_stub.ReadBuffer = nothing
        with pytest.raises(UmdError) as e:
            client.download(h, big.shape, "f32")
        assert e.value.status == 7 and "stopped at 0 of 5242880" in e.value.msg
        assert len(calls) == 4
    finally:
        client.device_stub.ReadBuffer = real
        client.free(h)


def test_torch_example_where_installed(server):
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    out = subprocess.run([sys.executable, str(HERE.parent / "examples" / "torch_add.py"), server],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_packed_int4_and_bf16_arrays_round_trip_through_cast(client):
    """ml_dtypes arrays (onnx's dependency): INT4 travels packed two per byte (ABI 1.4)."""
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    x = np.array([1.0, -2.0, 7.9, -8.0, 9.0], np.float32)
    (q,) = client.run("Cast", x, attributes={"to": 22})  # INT4
    assert q.dtype == ml_dtypes.int4
    # Out of range wraps, as ONNX's reference Cast does (9 -> -7). Spelled out: ml_dtypes 0.7
    # turned its own out-of-range float -> int4 conversion into 0, so it is no oracle here.
    np.testing.assert_array_equal(q, np.array([1, -2, 7, -8, -7], ml_dtypes.int4))
    (back,) = client.run("Cast", q, attributes={"to": 1})
    np.testing.assert_array_equal(back, np.array([1, -2, 7, -8, -7], np.float32))
    b = np.array([1.5, -2.25, 3.0], ml_dtypes.bfloat16)
    (f,) = client.run("Cast", b, attributes={"to": 1})
    np.testing.assert_array_equal(f, b.astype(np.float32))


def test_string_tensors_through_device_and_graph(client):
    """ABI 1.5 string tensors: numpy str/object arrays in, object arrays of str out, op by op
    and through a loaded model; a malformed string buffer is refused with status 3."""
    x = np.array(["hello world", "héllo", ""], dtype=object)
    parts, counts = client.run("StringSplit", x)  # no delimiter: runs of whitespace
    assert parts.tolist() == [["hello", "world"], ["héllo", ""], ["", ""]]
    np.testing.assert_array_equal(counts, [2, 1, 0])
    (eq,) = client.run("Equal", np.array(["a", "b"]), np.array(["a", "c"]))
    np.testing.assert_array_equal(eq, [True, False])

    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    suffix = nh.from_array(np.array(["!"], dtype=object), "suffix")
    g = h.make_graph(
        [h.make_node("StringNormalizer", ["x"], ["up"], case_change_action="UPPER"),
         h.make_node("StringConcat", ["up", "suffix"], ["y"]),
         h.make_node("Constant", [], ["tags"], value_strings=["<", ">"]),
         h.make_node("StringConcat", ["tags", "x"], ["t"]),
         h.make_node("Identity", ["suffix"], ["s"])],
        "strings", [h.make_tensor_value_info("x", T.STRING, [None])],
        [h.make_tensor_value_info("y", T.STRING, [None]),
         h.make_tensor_value_info("t", T.STRING, [None]),
         h.make_tensor_value_info("s", T.STRING, [1])], [suffix])
    model = client.load_model(h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
                              .SerializeToString())
    out = model.run({"x": np.array(["abc", "Straße"], dtype=object)})
    assert out["y"].tolist() == ["ABC!", "STRASSE!"]
    assert out["t"].tolist() == ["<abc", ">Straße"]
    assert out["s"].tolist() == ["!"]  # an initializer passed through: its text kept
    model.unload()

    # a buffer larger than its string tensor: the tensor ends where its last offset says
    from umd_client.client import encode_strings
    padded = client.upload(np.frombuffer(encode_strings(np.array(["a b"])) + b"\0" * 16, np.uint8))
    r = client.execute("StringSplit", [padded], [pb.TensorDesc(shape=[1], dtype="string")])
    parts = client.download(r.outputs[0], list(r.output_descs[0].shape), "string")
    assert parts.tolist() == [["a", "b"]] and r.output_descs[0].text_bytes == 2
    client.free(padded)

    bad = client.upload(np.frombuffer(b"\x09" + b"\x00" * 7 + b"a", np.uint8))  # ends at 9 of 1
    with pytest.raises(UmdError) as e:
        client.execute("StringNormalizer", [bad], [pb.TensorDesc(shape=[1], dtype="string")])
    assert e.value.status == 3 and "last offset says 9 bytes of text" in e.value.msg
    client.free(bad)
