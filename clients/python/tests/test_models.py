"""Whole models through `umd run-model` against onnxruntime (CPU execution provider): models
built here with onnx.helper and random weights (an MLP, a LeNet-style CNN, a transformer encoder
layer with dynamic batch and sequence, MobileNetV2's first blocks with ReLU6, a GPT-2 block with a
causal mask and the tanh GELU), and the model tests shipped in the `onnx` wheel
(`simple`, `pytorch-converted`, `pytorch-operator`): each passes, or is listed in MODELS.md with
the op that is missing (the test then checks that umd says so with a clear error)."""

import json
import os
import subprocess
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ort = pytest.importorskip("onnxruntime")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
UMD_BIN = os.environ.get("UMD_BIN", str(ROOT / "target" / "debug" / "umd"))
ONNX_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
RNG = np.random.default_rng(7)


def weight(name, *shape, scale=0.3):
    return nh.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def run_umd(model_path: Path, feeds: dict, out: Path, extra=()):
    """Runs `umd run-model` with the feeds as .npy files; returns (outputs by name, figures)."""
    out.mkdir(parents=True, exist_ok=True)
    args = [UMD_BIN, "run-model", str(model_path), "--out", str(out), "--repeat", "2", "--json"]
    for name, arr in feeds.items():
        f = out / f"in_{len(args)}.npy"
        np.save(f, as_unicode(arr) if arr.dtype.kind in "OS" else arr)
        args += ["-i", f"{name}={f}"]
    r = subprocess.run(args + list(extra), capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    figures = json.loads(r.stdout)
    outs = {o["name"]: np.load(out / f"{o['name']}.npy") for o in figures["outputs"]}
    return outs, figures


def as_unicode(arr: np.ndarray) -> np.ndarray:
    """A string array (ONNX gives bytes objects) as NumPy `str`, which .npy stores as `<U`."""
    items = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in arr.ravel()]
    return np.array(items, dtype=str).reshape(arr.shape)


def reference(model_path: Path, feeds: dict) -> dict:
    s = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def check_against_ort(model, feeds, tmp_path, rtol=1e-3, atol=1e-4):
    onnx.checker.check_model(model)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    got, figures = run_umd(path, feeds, tmp_path / "out")
    want = reference(path, feeds)
    assert set(got) == set(want)
    for name, w in want.items():
        assert got[name].shape == w.shape, name
        if w.dtype.kind in "OSU":
            assert got[name].astype(str).tolist() == w.astype(str).tolist(), name
            continue
        np.testing.assert_allclose(got[name], w, rtol=rtol, atol=atol, err_msg=name)
    return figures


def test_mlp(tmp_path):
    nodes = [h.make_node("Gemm", ["x", "w1", "b1"], ["h1"], transB=1),
             h.make_node("Relu", ["h1"], ["r1"]),
             h.make_node("MatMul", ["r1", "w2"], ["h2"]),
             h.make_node("Add", ["h2", "b2"], ["h3"]),
             h.make_node("Sigmoid", ["h3"], ["y"])]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, [8, 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, [8, 10])],
                     [weight("w1", 128, 64), weight("b1", 128), weight("w2", 128, 10), weight("b2", 10)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    fig = check_against_ort(m, {"x": RNG.standard_normal((8, 64)).astype(np.float32)}, tmp_path)
    assert fig["submissions"] == 1 and fig["launched"] == 5


def lenet():
    nodes = [
        h.make_node("Conv", ["x", "c1w", "c1b"], ["c1"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p1", "c2w", "c2b"], ["c2"], kernel_shape=[5, 5]),
        h.make_node("Relu", ["c2"], ["r2"]),
        h.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Flatten", ["p2"], ["f"], axis=1),
        h.make_node("Gemm", ["f", "f1w", "f1b"], ["g1"], transB=1),
        h.make_node("Relu", ["g1"], ["r3"]),
        h.make_node("Gemm", ["r3", "f2w", "f2b"], ["g2"], transB=1),
        # Reshape through a shape computed from the graph: Shape → Gather → Concat, folded.
        h.make_node("Shape", ["g2"], ["s"]),
        h.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        h.make_node("Concat", ["n", "minus1"], ["shape"], axis=0),
        h.make_node("Reshape", ["g2", "shape"], ["logits"]),
        h.make_node("Softmax", ["logits"], ["y"], axis=1),
    ]
    inits = [weight("c1w", 6, 1, 5, 5), weight("c1b", 6), weight("c2w", 16, 6, 5, 5), weight("c2b", 16),
             weight("f1w", 120, 400, scale=0.05), weight("f1b", 120), weight("f2w", 10, 120, scale=0.1),
             weight("f2b", 10), nh.from_array(np.array([0], np.int64), "zero"),
             nh.from_array(np.array([-1], np.int64), "minus1")]
    g = h.make_graph(nodes, "lenet", [h.make_tensor_value_info("x", T.FLOAT, [2, 1, 28, 28])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 10])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_lenet(tmp_path):
    fig = check_against_ort(lenet(), {"x": RNG.standard_normal((2, 1, 28, 28)).astype(np.float32)},
                            tmp_path)
    assert fig["folded"] == 3, fig  # Shape, Gather, Concat
    assert fig["views"] == 2, fig  # Flatten, Reshape
    assert fig["submissions"] == 1
    assert fig["peak_bytes"] < fig["intermediate_bytes"], fig


def encoder_layer(d=32, heads=4, ff=64):
    hd = d // heads
    c = lambda name, arr, dt=np.int64: nh.from_array(np.array(arr, dt), name)  # noqa: E731
    nodes = []

    def n(op, ins, outs, **kw):
        nodes.append(h.make_node(op, ins, outs, **kw))

    # q, k, v: [B, S, D] → [B, H, S, hd]
    n("Shape", ["x"], ["xs"])
    n("Gather", ["xs", "i0"], ["B"], axis=0)
    n("Gather", ["xs", "i1"], ["S"], axis=0)
    n("Concat", ["B", "S", "nheads", "hdim"], ["split_shape"], axis=0)
    n("Concat", ["B", "S", "dmodel"], ["merge_shape"], axis=0)
    for name in "qkv":
        n("MatMul", ["x", f"w{name}"], [f"{name}0"])
        n("Add", [f"{name}0", f"b{name}"], [f"{name}1"])
        n("Reshape", [f"{name}1", "split_shape"], [f"{name}2"])
        n("Transpose", [f"{name}2"], [f"{name}h"], perm=[0, 2, 1, 3] if name != "k" else [0, 2, 3, 1])
    n("MatMul", ["qh", "kh"], ["scores0"])
    n("Mul", ["scores0", "scale"], ["scores1"])
    # mask [B, S]: 1 keeps a key, 0 masks it (Where with -inf-like fill).
    n("Unsqueeze", ["mask", "axes12"], ["mask4"])
    n("Cast", ["mask4"], ["maskb"], to=T.BOOL)
    n("Where", ["maskb", "scores1", "neg"], ["scores2"])
    n("Softmax", ["scores2"], ["probs"], axis=-1)
    n("MatMul", ["probs", "vh"], ["ctx0"])
    n("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3])
    n("Reshape", ["ctx1", "merge_shape"], ["ctx2"])
    n("MatMul", ["ctx2", "wo"], ["att0"])
    n("Add", ["att0", "bo"], ["att1"])
    n("Add", ["x", "att1"], ["res1"])
    n("LayerNormalization", ["res1", "g1", "be1"], ["ln1"], axis=-1, epsilon=1e-5)
    n("MatMul", ["ln1", "w1"], ["f0"])
    n("Add", ["f0", "b1"], ["f1"])
    # Gelu, the erf form: 0.5 x (1 + erf(x / sqrt 2))
    n("Div", ["f1", "sqrt2"], ["ge0"])
    n("Erf", ["ge0"], ["ge1"])
    n("Add", ["ge1", "one"], ["ge2"])
    n("Mul", ["f1", "ge2"], ["ge3"])
    n("Mul", ["ge3", "half"], ["gelu"])
    n("MatMul", ["gelu", "w2"], ["f2"])
    n("Add", ["f2", "b2"], ["f3"])
    n("Add", ["ln1", "f3"], ["res2"])
    n("LayerNormalization", ["res2", "g2w", "be2"], ["y"], axis=-1, epsilon=1e-5)
    f = np.float32
    inits = [c("i0", [0]), c("i1", [1]), c("nheads", [heads]), c("hdim", [hd]), c("dmodel", [d]),
             c("axes12", [1, 2]), c("scale", 1 / np.sqrt(hd), f), c("neg", -1e9, f),
             c("sqrt2", np.sqrt(2), f), c("one", 1, f), c("half", 0.5, f),
             weight("wo", d, d), weight("bo", d), weight("w1", d, ff), weight("b1", ff),
             weight("w2", ff, d), weight("b2", d),
             nh.from_array((1 + 0.1 * RNG.standard_normal(d)).astype(f), "g1"), weight("be1", d),
             nh.from_array((1 + 0.1 * RNG.standard_normal(d)).astype(f), "g2w"), weight("be2", d)]
    for name in "qkv":
        inits += [weight(f"w{name}", d, d), weight(f"b{name}", d)]
    g = h.make_graph(nodes, "encoder",
                     [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", d]),
                      h.make_tensor_value_info("mask", T.INT64, ["batch", "seq"])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", d])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("batch,seq", [(2, 5), (3, 9)])
def test_transformer_encoder_layer_dynamic_shapes(tmp_path, batch, seq):
    mask = np.ones((batch, seq), np.int64)
    mask[0, seq - 2:] = 0
    feeds = {"x": RNG.standard_normal((batch, seq, 32)).astype(np.float32), "mask": mask}
    fig = check_against_ort(encoder_layer(), feeds, tmp_path)
    assert fig["submissions"] == 1
    assert fig["peak_bytes"] < fig["intermediate_bytes"], fig


def test_frozen_weights_multiply_from_copies_the_host_packed_once(tmp_path):
    # 64 token rows against weights 512 and 384 wide (a MatMul, a Gemm with transB), then a
    # 1×1 conv 384 → 256 over 8×8 positions: the MatMul's and the Gemm's weights are multiplied
    # from copies the host packed once and keeps — where the CPU has the packed kernels (AVX2
    # + FMA) — and every result matches onnxruntime's
    nodes = [h.make_node("MatMul", ["x", "w1"], ["h1"]),
             h.make_node("Gemm", ["h1", "w2"], ["h2"], transB=1),
             h.make_node("Reshape", ["h2", "shape"], ["img"]),
             h.make_node("Conv", ["img", "wc"], ["y"])]
    g = h.make_graph(nodes, "packed", [h.make_tensor_value_info("x", T.FLOAT, [64, 256])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 256, 8, 8])],
                     [weight("w1", 256, 512, scale=0.05), weight("w2", 384, 512, scale=0.05),
                      weight("wc", 256, 384, 1, 1, scale=0.05),
                      nh.from_array(np.array([1, 384, 8, 8], np.int64), "shape")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    fig = check_against_ort(m, {"x": RNG.standard_normal((64, 256)).astype(np.float32)}, tmp_path)
    if cpu_has_packed_kernels():
        assert fig["packed_copies"] >= 3 and fig["packed_bytes"] >= 4 * (256 * 512 + 384 * 512), fig
    else:
        assert fig["packed_copies"] == fig["packed_bytes"] == 0, fig


def cpu_has_packed_kernels():
    """Whether this CPU has the host's packed GEMM kernels (x86-64 with AVX2 and FMA)."""
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return "avx2" in flags and "fma" in flags


def mobilenet_v2_blocks(res):
    """MobileNetV2's first blocks as torchvision exports them: Conv → BatchNormalization →
    Clip(0, 6) (ReLU6, bounds as shared initializers), depthwise stride-2 convs, a projection
    without activation, a residual Add, then GlobalAveragePool → Flatten → Gemm → Softmax."""
    nodes, inits = [], [nh.from_array(np.float32(0), "zero"), nh.from_array(np.float32(6), "six")]

    def conv(x, cin, cout, k, s, g, name, act=True):
        inits.append(weight(name + "_w", cout, cin // g, k, k, scale=(2.0 / (cin // g * k * k)) ** 0.5))
        nodes.append(h.make_node("Conv", [x, name + "_w"], [name + "_c"], kernel_shape=[k, k],
                                 strides=[s, s], pads=[k // 2] * 4, group=g))
        stats = [1 + 0.1 * RNG.standard_normal(cout), 0.1 * RNG.standard_normal(cout),
                 0.1 * RNG.standard_normal(cout), 1 + 0.1 * np.abs(RNG.standard_normal(cout))]
        for p, v in zip("somv", stats):
            inits.append(nh.from_array(v.astype(np.float32), f"{name}_{p}"))
        nodes.append(h.make_node("BatchNormalization", [name + "_c"] + [f"{name}_{p}" for p in "somv"],
                                 [name + "_n"]))
        if not act:
            return name + "_n"
        nodes.append(h.make_node("Clip", [name + "_n", "zero", "six"], [name]))
        return name

    x, cin = conv("x", 3, 16, 3, 2, 1, "stem"), 16
    for i, (t, c, stride) in enumerate([(1, 8, 1), (4, 12, 2), (4, 12, 1)]):
        y = conv(x, cin, cin * t, 1, 1, 1, f"b{i}e") if t != 1 else x
        y = conv(y, cin * t, cin * t, 3, stride, cin * t, f"b{i}d")
        y = conv(y, cin * t, c, 1, 1, 1, f"b{i}p", act=False)
        if stride == 1 and cin == c:
            nodes.append(h.make_node("Add", [x, y], [f"b{i}r"]))
            y = f"b{i}r"
        x, cin = y, c
    inits += [weight("fc_w", 10, cin), weight("fc_b", 10)]
    nodes += [h.make_node("GlobalAveragePool", [x], ["gap"]), h.make_node("Flatten", ["gap"], ["flat"]),
              h.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
              h.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    g = h.make_graph(nodes, "mobilenet_v2_blocks", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, res, res])],
                     [h.make_tensor_value_info("prob", T.FLOAT, [1, 10])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def test_mobilenet_v2_blocks_with_relu6(tmp_path):
    fig = check_against_ort(mobilenet_v2_blocks(48),
                            {"x": RNG.standard_normal((1, 3, 48, 48)).astype(np.float32)}, tmp_path)
    # every Conv → BatchNormalization (→ Clip) is one launch: the 10 convs, then
    # GlobalAveragePool, Gemm and Softmax at most (16 or more when a Clip runs on its own)
    assert fig["launched"] <= 13, fig


def gpt2_block(d=64, heads=4, vocab=97):
    """A GPT-2 block as exported: token and position embeddings (Shape → Gather → Range), a
    causal mask from Trilu, Split into q, k, v, the tanh GELU written out with Pow(x, 3),
    weights tied to the output projection."""
    dh = d // heads
    f = np.float32
    c = lambda name, v, dt=np.int64: nh.from_array(np.asarray(v, dtype=dt), name)
    nodes = [h.make_node("Shape", ["ids"], ["shape"]), h.make_node("Gather", ["shape", "i1"], ["S"], axis=0),
             h.make_node("Range", ["i0", "S", "i1"], ["pos"]), h.make_node("Gather", ["wte", "ids"], ["tok"]),
             h.make_node("Gather", ["wpe", "pos"], ["pe"]), h.make_node("Add", ["tok", "pe"], ["h0"]),
             h.make_node("Unsqueeze", ["S", "ax0"], ["S1"]), h.make_node("Concat", ["S1", "S1"], ["SS"], axis=0),
             h.make_node("ConstantOfShape", ["SS"], ["ones"], value=nh.from_array(np.array([True]))),
             h.make_node("Trilu", ["ones"], ["causal"], upper=0),
             h.make_node("LayerNormalization", ["h0", "g1", "be1"], ["a"], axis=-1, epsilon=1e-5),
             h.make_node("MatMul", ["a", "wqkv"], ["qkv0"]), h.make_node("Add", ["qkv0", "bqkv"], ["qkv"]),
             h.make_node("Split", ["qkv", "split3"], ["q", "k", "v"], axis=-1)]
    for t, perm in [("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])]:
        nodes += [h.make_node("Reshape", [t, "heads"], [t + "r"]), h.make_node("Transpose", [t + "r"], [t + "t"], perm=perm)]
    nodes += [h.make_node("MatMul", ["qt", "kt"], ["s0"]), h.make_node("Div", ["s0", "sqrt_dh"], ["s1"]),
              h.make_node("Where", ["causal", "s1", "neg"], ["s2"]), h.make_node("Softmax", ["s2"], ["p"], axis=-1),
              h.make_node("MatMul", ["p", "vt"], ["o0"]), h.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
              h.make_node("Reshape", ["o1", "merge"], ["o2"]), h.make_node("MatMul", ["o2", "wo"], ["o3"]),
              h.make_node("Add", ["h0", "o3"], ["r1"]),
              h.make_node("LayerNormalization", ["r1", "g2", "be2"], ["m"], axis=-1, epsilon=1e-5),
              h.make_node("MatMul", ["m", "w1"], ["f"]),
              # 0.5 f (1 + tanh(sqrt(2 / pi) (f + 0.044715 f^3)))
              h.make_node("Pow", ["f", "three"], ["g0"]), h.make_node("Mul", ["g0", "c044"], ["g1_"]),
              h.make_node("Add", ["f", "g1_"], ["g2_"]), h.make_node("Mul", ["g2_", "s2p"], ["g3"]),
              h.make_node("Tanh", ["g3"], ["g4"]), h.make_node("Add", ["g4", "onef"], ["g5"]),
              h.make_node("Mul", ["f", "g5"], ["g6"]), h.make_node("Mul", ["g6", "half"], ["gelu"]),
              h.make_node("MatMul", ["gelu", "w2"], ["f2"]), h.make_node("Add", ["r1", "f2"], ["r2"]),
              h.make_node("Transpose", ["wte"], ["wteT"], perm=[1, 0]), h.make_node("MatMul", ["r2", "wteT"], ["logits"])]
    inits = [weight("wte", vocab, d, scale=0.1), weight("wpe", 64, d, scale=0.05), c("i0", 0), c("i1", 1),
             c("ax0", [0]), c("split3", [d, d, d]), c("heads", [0, 0, heads, dh]), c("merge", [0, 0, d]),
             c("sqrt_dh", np.sqrt(dh), f), c("neg", -1e9, f), c("three", 3, f), c("c044", 0.044715, f),
             c("s2p", np.sqrt(2 / np.pi), f), c("onef", 1, f), c("half", 0.5, f),
             weight("wqkv", d, 3 * d), weight("bqkv", 3 * d), weight("wo", d, d), weight("w1", d, 4 * d),
             weight("w2", 4 * d, d), c("g1", 1 + 0.1 * RNG.standard_normal(d), f), weight("be1", d),
             c("g2", 1 + 0.1 * RNG.standard_normal(d), f), weight("be2", d)]
    g = h.make_graph(nodes, "gpt2_block", [h.make_tensor_value_info("ids", T.INT64, [1, "seq"])],
                     [h.make_tensor_value_info("logits", T.FLOAT, [1, "seq", vocab])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("seq", [7, 24])
def test_gpt2_block_with_causal_mask_and_tanh_gelu(tmp_path, seq):
    feeds = {"ids": RNG.integers(0, 97, (1, seq)).astype(np.int64)}
    check_against_ort(gpt2_block(), feeds, tmp_path)


def test_inference_dropout_is_the_identity(tmp_path):
    # For inference (no training_mode, a mask nothing reads) the loader makes Dropout an
    # Identity view; with the mask read it runs the plugin's Dropout (mask all true).
    nodes = [h.make_node("Relu", ["x"], ["r"]),
             h.make_node("Dropout", ["r", "ratio"], ["d", "unread_mask"], name="drop"),
             h.make_node("Add", ["d", "x"], ["y"])]
    io = ([h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
          [h.make_tensor_value_info("y", T.FLOAT, [3, 4])])
    ratio = nh.from_array(np.array(0.5, np.float32), "ratio")
    m = h.make_model(h.make_graph(nodes, "drop", *io, [ratio]), opset_imports=[h.make_opsetid("", 13)])
    fig = check_against_ort(m, {"x": RNG.standard_normal((3, 4)).astype(np.float32)}, tmp_path)
    assert fig["views"] == 1 and fig["launched"] == 2, fig
    nodes[1] = h.make_node("Dropout", ["r", "ratio"], ["d", "mask"], name="drop")
    nodes.append(h.make_node("Not", ["mask"], ["nmask"]))
    m = h.make_model(h.make_graph(nodes, "drop", *io, [ratio]), opset_imports=[h.make_opsetid("", 13)])
    fig = check_against_ort(m, {"x": RNG.standard_normal((3, 4)).astype(np.float32)}, tmp_path)
    assert fig["views"] == 0, fig


def local_functions_model():
    """A model as onnxscript and PyTorch's exporters write them: model-local functions, one with
    an attribute reference and a default (`Act`), one calling another (`Block`), called in the
    main graph and inside an If branch."""
    leaky = h.make_node("LeakyRelu", ["t"], ["y"])
    leaky.attribute.append(h.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    act = h.make_function("local", "Act", ["x"], ["y"], [h.make_node("Add", ["x", "x"], ["t"]), leaky],
                          [h.make_opsetid("", 17)], attributes=[],
                          attribute_protos=[h.make_attribute("alpha", 0.5)])
    block = h.make_function(
        "local", "Block", ["x", "w"], ["y"],
        [h.make_node("MatMul", ["x", "w"], ["m"]),
         h.make_node("Act", ["m"], ["a"], domain="local", alpha=0.1),
         h.make_node("Act", ["a"], ["y"], domain="local")],
        [h.make_opsetid("", 17), h.make_opsetid("local", 1)])
    branch = lambda name, op: h.make_graph(  # noqa: E731
        [h.make_node(op, ["b1"], [name], domain="local")] if op == "Act" else
        [h.make_node(op, ["b1"], [name])], name, [],
        [h.make_tensor_value_info(name, T.FLOAT, [4, 8])])
    nodes = [h.make_node("Block", ["x", "w1"], ["b1"], domain="local"),
             h.make_node("ReduceSum", ["b1"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["y"], then_branch=branch("t", "Act"),
                         else_branch=branch("e", "Neg"))]
    g = h.make_graph(nodes, "functions", [h.make_tensor_value_info("x", T.FLOAT, [4, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4, 8])],
                     [weight("w1", 8, 8), nh.from_array(np.array(0, np.float32), "zero")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("local", 1)],
                        functions=[act, block])


def test_model_local_functions_are_inlined(tmp_path):
    m = local_functions_model()
    for sign in (1.0, -1.0):  # both branches of the If
        x = (np.abs(RNG.standard_normal((4, 8))) * sign).astype(np.float32)
        (tmp_path / str(sign)).mkdir()
        fig = check_against_ort(m, {"x": x}, tmp_path / str(sign))
        assert fig["nodes"] >= 8, fig  # Block's MatMul and both Acts' Add + LeakyRelu inlined


# --- classic ONNX-ML pipelines (ai.onnx.ml), as scikit-learn converters write them ---------------

ML_OPSETS = [h.make_opsetid("", 17), h.make_opsetid("ai.onnx.ml", 1)]


def ml_model(nodes, inputs, outputs):
    g = h.make_graph(nodes, "ml", inputs, outputs)
    return h.make_model(g, opset_imports=ML_OPSETS, ir_version=8)


def ml_node(op, ins, outs, **attrs):
    return h.make_node(op, ins, outs, domain="ai.onnx.ml", **attrs)


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"])
def test_scaler_then_multiclass_linear_classifier(tmp_path, post):
    c, k = 5, 3
    m = ml_model(
        [ml_node("Scaler", ["x"], ["s"], offset=list(RNG.standard_normal(c)),
                 scale=list(RNG.uniform(0.5, 2.0, c))),
         ml_node("LinearClassifier", ["s"], ["label", "proba"],
                 coefficients=list(RNG.standard_normal(k * c)),
                 intercepts=list(RNG.standard_normal(k)), classlabels_ints=[3, 7, 11],
                 post_transform=post)],
        [vi("x", T.FLOAT, [None, c])],
        [vi("label", T.INT64, [None]), vi("proba", T.FLOAT, [None, k])])
    x = RNG.standard_normal((17, c)).astype(np.float32)
    check_against_ort(m, {"x": x}, tmp_path, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("post,labels", [
    ("NONE", [0, 1]), ("NONE", [4, 9]), ("NONE", []), ("LOGISTIC", [0, 1]), ("LOGISTIC", [4, 9]),
    ("LOGISTIC", []), ("SOFTMAX", [4, 9]), ("PROBIT", [])])
def test_binary_linear_classifier(tmp_path, post, labels):
    """One score column: onnxruntime's binary rules (label by the raw score's sign; with two
    labels the scores become [1 - s, s], with LOGISTIC [sigmoid(-s), sigmoid(s)]; without, only
    PROBIT transforms a single score)."""
    c = 4
    attrs = dict(coefficients=list(RNG.standard_normal(c) * 0.1), intercepts=[0.05],
                 post_transform=post)
    if labels:
        attrs["classlabels_ints"] = labels
    if post == "PROBIT":  # keep the score inside (0, 1)
        attrs["intercepts"] = [0.5]
    width = 2 if len(labels) == 2 else 1
    m = ml_model([ml_node("LinearClassifier", ["x"], ["label", "score"], **attrs)],
                 [vi("x", T.DOUBLE, [None, c])],
                 [vi("label", T.INT64, [None]), vi("score", T.FLOAT, [None, width])])
    x = RNG.uniform(-1, 1, (23, c))
    if post == "PROBIT":
        x *= 0.5
    # onnxruntime's f32 PROBIT cancels near a score of 0.5: one ulp of the score moves it ~3e-5
    atol = 1e-4 if post == "PROBIT" else 1e-6
    check_against_ort(m, {"x": x}, tmp_path, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_imputer_normalizer_linear_regressor(tmp_path, norm):
    c, t = 6, 2
    m = ml_model(
        [ml_node("Imputer", ["x"], ["xi"], imputed_value_floats=list(RNG.uniform(0, 1, c)),
                 replaced_value_float=float("nan")),
         ml_node("Normalizer", ["xi"], ["xn"], norm=norm),
         ml_node("LinearRegressor", ["xn"], ["y"], coefficients=list(RNG.standard_normal(t * c)),
                 intercepts=[0.5, -0.25], targets=t)],
        [vi("x", T.FLOAT, [None, c])], [vi("y", T.FLOAT, [None, t])])
    x = RNG.standard_normal((11, c)).astype(np.float32)
    x[RNG.uniform(size=x.shape) < 0.2] = np.nan
    x[3] = 0.0  # a zero row: its norm is 0 and it is copied
    check_against_ort(m, {"x": x}, tmp_path, rtol=1e-5, atol=1e-6)


def test_onehot_feature_vectorizer_regressor_on_integers(tmp_path):
    cats = [2, 5, 9, 40]
    m = ml_model(
        [ml_node("OneHotEncoder", ["cat"], ["oh"], cats_int64s=cats, zeros=1),
         ml_node("Imputer", ["num"], ["ni"], imputed_value_int64s=[7], replaced_value_int64=-1),
         ml_node("Scaler", ["ni"], ["ns"], offset=[1.0], scale=[0.5]),
         ml_node("FeatureVectorizer", ["ns", "oh"], ["f"], inputdimensions=[4, len(cats)]),
         ml_node("LinearRegressor", ["f"], ["y"],
                 coefficients=list(RNG.standard_normal(3 + len(cats) + 1)), intercepts=[1.0])],
        [vi("cat", T.INT64, [None]), vi("num", T.INT64, [None, 3])],
        [vi("y", T.FLOAT, [None, 1]), vi("f", T.FLOAT, [None, 4 + len(cats)])])
    cat = np.array([2, 9, 3, 40, 5, 2, -1], np.int64)  # 3 and -1 are unknown: zero rows
    num = RNG.integers(-1, 4, (7, 3)).astype(np.int64)
    check_against_ort(m, {"cat": cat, "num": num}, tmp_path, rtol=1e-5, atol=1e-6)


def random_forest(rng, n_trees, depth, nf, n_out, class_ids=None, positive=True):
    """Legacy tree-ensemble attributes: full trees of `depth`, random features, thresholds,
    modes and missing-value tracking; each leaf weighs a random subset of outputs (or of
    `class_ids`). Node ids are shuffled within a tree (the root is still the smallest)."""
    modes = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values",
                         "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids",
                         "nodes_missing_value_tracks_true", "w_tree", "w_node", "w_id", "w")}
    ids = class_ids if class_ids is not None else list(range(n_out))
    for t in range(n_trees):
        n = 2 ** (depth + 1) - 1
        names = [0] + list(rng.permutation(np.arange(1, n)) + 10)  # root 0, others shuffled
        for i in range(n):
            leaf = i >= 2 ** depth - 1
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(int(names[i]))
            a["nodes_featureids"].append(0 if leaf else int(rng.integers(nf)))
            a["nodes_values"].append(0.0 if leaf else float(np.round(rng.normal(), 1)))
            a["nodes_modes"].append("LEAF" if leaf else modes[int(rng.integers(6)) if
                                                            rng.uniform() < 0.3 else 0])
            a["nodes_truenodeids"].append(0 if leaf else int(names[2 * i + 1]))
            a["nodes_falsenodeids"].append(0 if leaf else int(names[2 * i + 2]))
            a["nodes_missing_value_tracks_true"].append(int(rng.integers(2)))
            if leaf:
                for k in ids:
                    if len(ids) == 1 or rng.uniform() < 0.7:
                        w = rng.uniform(0, 1) if positive else rng.normal()
                        a["w_tree"].append(t)
                        a["w_node"].append(int(names[i]))
                        a["w_id"].append(k)
                        a["w"].append(float(w))
    return a


def forest_node(a, kind, **extra):
    pre = "target" if kind == "TreeEnsembleRegressor" else "class"
    attrs = {k: v for k, v in a.items() if not k.startswith("w")}
    attrs[f"{pre}_treeids"], attrs[f"{pre}_nodeids"] = a["w_tree"], a["w_node"]
    attrs[f"{pre}_ids"], attrs[f"{pre}_weights"] = a["w_id"], a["w"]
    attrs.update(extra)
    outs = ["y"] if kind == "TreeEnsembleRegressor" else ["label", "proba"]
    return ml_node(kind, ["x"], outs, **attrs)


def forest_input(rng, elem, n=40, nf=4):
    x = np.round(rng.normal(size=(n, nf)), 1)  # ties with the thresholds exercise EQ/LEQ
    if elem == T.INT64:
        return np.round(x * 2).astype(np.int64)
    x[rng.uniform(size=x.shape) < 0.1] = np.nan
    return x.astype(np.float32 if elem == T.FLOAT else np.float64)


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("targets,base,post", [
    (1, [], "NONE"), (1, [0.25], "NONE"), (3, [], "NONE"), (3, [0.5, -1.0, 2.0], "SOFTMAX"),
    (3, [], "LOGISTIC")])
@pytest.mark.parametrize("elem", [T.FLOAT, T.DOUBLE])  # onnxruntime has no integer X here
def test_tree_ensemble_regressor(tmp_path, agg, targets, base, post, elem):
    rng = np.random.default_rng(zlib.crc32(repr((agg, targets, base, post, elem)).encode()))
    a = random_forest(rng, 5, 3, 4, targets, positive=False)
    extra = dict(n_targets=targets, aggregate_function=agg, post_transform=post)
    if base:
        extra["base_values"] = base
    m = ml_model([forest_node(a, "TreeEnsembleRegressor", **extra)],
                 [vi("x", elem, [None, 4])], [vi("y", T.FLOAT, [None, targets])])
    figures = check_against_ort(m, {"x": forest_input(rng, elem)}, tmp_path, rtol=1e-5,
                                atol=1e-5)
    # the forest's table is written by setup launches once (ABI 1.7), not on every run
    assert figures["setup_launches"] >= 1 and figures["launches"] == 1, figures


@pytest.mark.parametrize("case", [
    # (labels, class ids the leaves weigh, weights >= 0, base_values, post_transform)
    ([5, 6, 7], [0, 1, 2], True, [], "NONE"),
    ([5, 6, 7], [0, 1, 2], False, [0.1, 0.2, 0.3], "SOFTMAX"),
    ([5, 6, 7], [0, 2], True, [], "LOGISTIC"),
    ([3, 9], [1], True, [], "NONE"),            # binary case, probabilities of class 1
    ([3, 9], [1], False, [], "LOGISTIC"),       # binary case, mixed weights (boosting)
    ([3, 9], [1], False, [], "NONE"),
    ([3, 9], [0, 1], True, [], "NONE"),         # both classes weighed: onnxruntime's 1/0 labels
    ([3, 9], [1], True, [0.5], "NONE"),
])
def test_tree_ensemble_classifier(tmp_path, case):
    labels, ids, positive, base, post = case
    rng = np.random.default_rng(len(ids) * 31 + len(labels) + len(base) + len(post))
    a = random_forest(rng, 6, 3, 4, len(labels), class_ids=ids, positive=positive)
    extra = dict(classlabels_int64s=labels, post_transform=post)
    if base:
        extra["base_values"] = base
    m = ml_model([forest_node(a, "TreeEnsembleClassifier", **extra)],
                 [vi("x", T.FLOAT, [None, 4])],
                 [vi("label", T.INT64, [None]), vi("proba", T.FLOAT, [None, len(labels)])])
    check_against_ort(m, {"x": forest_input(rng, T.FLOAT)}, tmp_path, rtol=1e-5, atol=1e-5)


def random_svm(rng, kernel, n_classes, per_class, nf, proba):
    attrs = dict(kernel_type=kernel, kernel_params=[0.3, 0.5, 3.0])
    if per_class:
        nv = sum(per_class)
        attrs.update(vectors_per_class=per_class,
                     support_vectors=list(np.round(rng.normal(size=nv * nf), 2)),
                     coefficients=list(np.round(rng.normal(size=(n_classes - 1) * nv), 2)),
                     rho=list(np.round(rng.normal(size=n_classes * (n_classes - 1) // 2), 2)))
        if proba:
            pairs = n_classes * (n_classes - 1) // 2
            attrs.update(prob_a=list(rng.uniform(-3, -0.5, pairs)),
                         prob_b=list(rng.normal(size=pairs) * 0.1))
    else:
        attrs.update(coefficients=list(np.round(rng.normal(size=n_classes * nf), 2)),
                     rho=[0.25])
    return attrs


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("classes,per_class,proba,post", [
    (3, [2, 3, 1], False, "NONE"), (3, [2, 3, 1], True, "NONE"), (4, [1, 2, 2, 1], True, "NONE"),
    (2, [3, 2], False, "NONE"), (2, [3, 2], False, "LOGISTIC"), (2, [3, 2], True, "NONE"),
    (4, [2, 1, 1, 2], False, "SOFTMAX"), (3, [], False, "NONE"), (2, [], False, "NONE")])
def test_svm_classifier(tmp_path, kernel, classes, per_class, proba, post):
    rng = np.random.default_rng(zlib.crc32(repr((kernel, classes, per_class, proba, post)).encode()))
    nf = 3
    attrs = random_svm(rng, kernel, classes, per_class, nf, proba)
    attrs.update(classlabels_ints=list(range(10, 10 + classes)), post_transform=post)
    width = classes if (proba or not per_class) else (
        2 if classes == 2 else classes * (classes - 1) // 2)
    m = ml_model([ml_node("SVMClassifier", ["x"], ["label", "scores"], **attrs)],
                 [vi("x", T.FLOAT, [None, nf])],
                 [vi("label", T.INT64, [None]), vi("scores", T.FLOAT, [None, width])])
    x = rng.normal(size=(30, nf)).astype(np.float32)
    check_against_ort(m, {"x": x}, tmp_path, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("vectors,one_class", [(5, 0), (5, 1), (0, 0)])
def test_svm_regressor(tmp_path, kernel, vectors, one_class):
    rng = np.random.default_rng(zlib.crc32(repr((kernel, vectors, one_class)).encode()))
    nf = 3
    attrs = dict(kernel_type=kernel, kernel_params=[0.3, 0.5, 2.0], n_supports=vectors,
                 rho=[0.5], one_class=one_class)
    if vectors:
        attrs.update(support_vectors=list(rng.normal(size=vectors * nf)),
                     coefficients=list(rng.normal(size=vectors)))
    else:
        attrs.update(coefficients=list(rng.normal(size=nf)))
    m = ml_model([ml_node("SVMRegressor", ["x"], ["y"], **attrs)],
                 [vi("x", T.FLOAT, [None, nf])], [vi("y", T.FLOAT, [None, 1])])
    x = rng.normal(size=(30, nf)).astype(np.float32)
    check_against_ort(m, {"x": x}, tmp_path, rtol=1e-4, atol=1e-5)


NAMES = ["setosa", "versicolor", "virginica", "", "x y"]


@pytest.mark.parametrize("case", [
    # (intercepts, labels, post): multiclass; one score column with two labels (binary rules)
    (3, 3, "SOFTMAX"), (1, 2, "LOGISTIC"), (1, 2, "NONE")])
def test_linear_classifier_string_labels(tmp_path, case):
    """String class labels (a scikit-learn classifier fit on string targets): computed on the
    CPU device when the node runs, from X's value; the scores stay numbers, then a ZipMap."""
    k, n_labels, post = case
    c = 4
    labels = NAMES[:n_labels]
    width = 2 if (k == 1 and n_labels == 2) else k
    m = ml_model(
        [ml_node("LinearClassifier", ["x"], ["label", "proba"],
                 coefficients=list(RNG.standard_normal(k * c)),
                 intercepts=list(RNG.standard_normal(k) * 0.1), classlabels_strings=labels,
                 post_transform=post)],
        [vi("x", T.FLOAT, [None, c])],
        [vi("label", T.STRING, [None]), vi("proba", T.FLOAT, [None, width])])
    x = RNG.standard_normal((11, c)).astype(np.float32)
    check_against_ort(m, {"x": x}, tmp_path, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [
    ([0, 1, 2], True, "NONE"), ([0, 1, 2], False, "SOFTMAX"), ([1], False, "LOGISTIC"),
    ([0, 1], True, "NONE")])
def test_tree_ensemble_classifier_string_labels(tmp_path, case):
    ids, positive, post = case
    labels = NAMES[:3] if len(ids) == 3 else NAMES[:2]
    rng = np.random.default_rng(len(ids) * 7 + len(post))
    a = random_forest(rng, 6, 3, 4, len(labels), class_ids=ids, positive=positive)
    m = ml_model([forest_node(a, "TreeEnsembleClassifier", classlabels_strings=labels,
                              post_transform=post)],
                 [vi("x", T.FLOAT, [None, 4])],
                 [vi("label", T.STRING, [None]), vi("proba", T.FLOAT, [None, len(labels)])])
    check_against_ort(m, {"x": forest_input(rng, T.FLOAT)}, tmp_path, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("classes,per_class,proba", [
    (3, [2, 3, 1], True), (2, [3, 2], False), (3, [], False)])
def test_svm_classifier_string_labels(tmp_path, classes, per_class, proba):
    rng = np.random.default_rng(classes * 13 + len(per_class) + proba)
    nf = 3
    attrs = random_svm(rng, "RBF", classes, per_class, nf, proba)
    attrs.update(classlabels_strings=NAMES[:classes])
    width = classes if (proba or not per_class) else (
        2 if classes == 2 else classes * (classes - 1) // 2)
    m = ml_model([ml_node("SVMClassifier", ["x"], ["label", "scores"], **attrs)],
                 [vi("x", T.FLOAT, [None, nf])],
                 [vi("label", T.STRING, [None]), vi("scores", T.FLOAT, [None, width])])
    x = rng.normal(size=(30, nf)).astype(np.float32)
    check_against_ort(m, {"x": x}, tmp_path, rtol=1e-4, atol=1e-5)


def test_numbers_to_strings_at_run_time(tmp_path):
    """Ops that make strings from numbers computed in the run (ArgMax → LabelEncoder, Cast to
    string) run on their inputs' values."""
    m = h.make_model(h.make_graph(
        [h.make_node("ArgMax", ["x"], ["i"], axis=1, keepdims=0),
         h.make_node("LabelEncoder", ["i"], ["s"], domain="ai.onnx.ml", keys_int64s=[0, 1, 2],
                     values_strings=["a", "b", "c"], default_string="?"),
         h.make_node("Mul", ["x", "x"], ["sq"]),
         h.make_node("Cast", ["i"], ["istr"], to=T.STRING)], "g",
        [vi("x", T.FLOAT, [None, 3])],
        [vi("s", T.STRING, [None]), vi("sq", T.FLOAT, [None, 3]), vi("istr", T.STRING, [None])]),
        opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.onnx.ml", 2)], ir_version=8)
    x = RNG.standard_normal((7, 3)).astype(np.float32)
    check_against_ort(m, {"x": x}, tmp_path, rtol=1e-6, atol=1e-6)


TOKENIZER_CASES = {
    "separators": dict(separators=[" ", ","]),
    "separator-regexes-min2": dict(separators=[r"\s+", "[,;]"], mincharnum=2),
    "separators-in-turn": dict(separators=["b", "ab"]),
    "separator-longest": dict(separators=["a|ab|ab "]),
    "separator-marked": dict(separators=["l+"], mark=1),
    "tokenexp": dict(tokenexp="[a-zA-Z0-9_]+"),
    "tokenexp-longest": dict(tokenexp="a|ab|abc|b"),
    "tokenexp-min2-marked": dict(tokenexp=r"\w\w+", mark=1, mincharnum=2),
    "tokenexp-dot": dict(tokenexp="."),
    "characters": dict(separators=[""], mark=1),
}


@pytest.mark.parametrize("shape", [[6], [2, 3]])
@pytest.mark.parametrize("case", list(TOKENIZER_CASES))
def test_tokenizer_matches_onnxruntime(tmp_path, case, shape):
    """com.microsoft Tokenizer: separators (RE2 patterns applied in turn), token expressions
    (leftmost-longest, as onnxruntime compiles them), characters; marks, padding, mincharnum."""
    attrs = dict(mark=0, mincharnum=1, pad_value="#")
    attrs.update(TOKENIZER_CASES[case])
    node = h.make_node("Tokenizer", ["text"], ["tokens"], domain="com.microsoft", **attrs)
    g = h.make_graph([node], "tok", [vi("text", T.STRING, shape)],
                     [vi("tokens", T.STRING, shape + [None])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)],
                     ir_version=8)
    text = np.array(["the cat, sat;on  mat", "abcabc ab", "héllo wörld", "", "a",
                     "x,y;;z  abab"], dtype=object).reshape(shape)
    check_against_ort(m, {"text": text}, tmp_path)


def test_category_mapper_onehot_pipeline_on_strings(tmp_path):
    """A string column mapped to ids (unknown: -1), one-hot encoded, then a regressor."""
    cats = ["red", "green", "blue"]
    m = ml_model(
        [ml_node("CategoryMapper", ["colour"], ["id"], cats_strings=cats, cats_int64s=[0, 1, 2],
                 default_int64=-1),
         ml_node("OneHotEncoder", ["id"], ["oh"], cats_int64s=[0, 1, 2], zeros=1),
         ml_node("LinearRegressor", ["oh"], ["y"], coefficients=[1.0, 2.0, 3.0],
                 intercepts=[0.5])],
        [vi("colour", T.STRING, [None])],
        [vi("id", T.INT64, [None]), vi("y", T.FLOAT, [None, 1])])
    colour = np.array(["blue", "red", "mauve", "green", "red"], dtype=object)
    check_against_ort(m, {"colour": colour}, tmp_path, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [[6], [3, 2]])
def test_string_onehot_encoder_scaler_pipeline(tmp_path, shape):
    """What skl2onnx writes for a categorical column: OneHotEncoder on the strings themselves
    (`cats_strings`; unknown ones all-zero, a repeated category at its last place), then
    numbers."""
    cats = ["red", "green", "blue", "green"]
    m = ml_model(
        [ml_node("OneHotEncoder", ["colour"], ["oh"], cats_strings=cats, zeros=1),
         h.make_node("Flatten", ["oh"], ["flat"]) if len(shape) > 1 else
         h.make_node("Identity", ["oh"], ["flat"]),
         ml_node("Scaler", ["flat"], ["y"], offset=[0.5], scale=[2.0])],
        [vi("colour", T.STRING, shape)],
        [vi("oh", T.FLOAT, shape + [4]), vi("y", T.FLOAT, [None, None])])
    colour = np.array(["blue", "red", "mauve", "green", "", "red"], dtype=object).reshape(shape)
    check_against_ort(m, {"colour": colour}, tmp_path, rtol=1e-6, atol=1e-6)


def test_string_onehot_encoder_without_zeros_refuses_unknown(tmp_path):
    m = ml_model([ml_node("OneHotEncoder", ["c"], ["oh"], cats_strings=["a", "b"], zeros=0)],
                 [vi("c", T.STRING, [2])], [vi("oh", T.FLOAT, [2, 2])])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    with pytest.raises(RuntimeError, match="`z` is not one of the categories"):
        run_umd(path, {"c": np.array(["a", "z"], dtype=object)}, tmp_path / "out")
    got, _ = run_umd(path, {"c": np.array(["b", "a"], dtype=object)}, tmp_path / "out2")
    np.testing.assert_array_equal(got["oh"], [[0, 1], [1, 0]])


# --- random ops: seeded draws equal the ONNX reference evaluator's (NumPy's legacy RandomState) --

@pytest.mark.parametrize("op,attrs", [
    ("RandomUniform", dict(low=-1.3, high=3.7)), ("RandomNormal", dict(mean=0.7, scale=2.3))])
@pytest.mark.parametrize("elem", [T.FLOAT, T.DOUBLE, T.FLOAT16])
def test_seeded_random_ops_match_the_reference_evaluator(tmp_path, op, attrs, elem):
    from onnx.reference import ReferenceEvaluator
    nodes = [h.make_node(op, [], ["r"], dtype=elem, shape=[7, 33], seed=3.0, **attrs),
             h.make_node(op + "Like", ["x"], ["rl"], dtype=elem, seed=11.0, **attrs)]
    m = h.make_model(h.make_graph(nodes, "rnd", [vi("x", T.FLOAT, [4, 5])],
                                  [vi("r", elem, [7, 33]), vi("rl", elem, [4, 5])]),
                     opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(m)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    x = np.zeros((4, 5), np.float32)
    got, _ = run_umd(path, {"x": x}, tmp_path / "o")
    want = dict(zip(["r", "rl"], ReferenceEvaluator(m).run(None, {"x": x})))
    for k in want:
        assert got[k].dtype == want[k].dtype, k
        np.testing.assert_allclose(got[k].astype(np.float64), want[k].astype(np.float64),
                                   rtol=1e-6, atol=0, err_msg=k)


def test_unseeded_random_ops_differ_between_calls_and_multinomial_follows_its_logits(tmp_path):
    """Unseeded: every call draws anew (two nodes, same attributes, differ); a plugin has no
    entropy, so a new process repeats its sequence (README)."""
    logits = np.log(np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], np.float32))
    nodes = [h.make_node("RandomUniform", [], ["u"], shape=[64]),
             h.make_node("RandomUniform", [], ["u2"], shape=[64]),
             h.make_node("Multinomial", ["l"], ["m"], sample_size=4000, seed=5.0)]
    m = h.make_model(h.make_graph(nodes, "rnd", [vi("l", T.FLOAT, [2, 3])],
                                  [vi("u", T.FLOAT, [64]), vi("u2", T.FLOAT, [64]),
                                   vi("m", T.INT32, [2, 4000])]),
                     opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    a, _ = run_umd(path, {"l": logits}, tmp_path / "a")
    b, _ = run_umd(path, {"l": logits}, tmp_path / "b")
    assert not np.array_equal(a["u"], a["u2"]), "two unseeded calls drew the same numbers"
    assert ((a["u"] >= 0) & (a["u"] < 1)).all()
    np.testing.assert_array_equal(a["m"], b["m"])  # seeded: the same samples
    for row, p in zip(a["m"], np.exp(logits)):
        freq = np.bincount(row, minlength=3) / row.size
        np.testing.assert_allclose(freq, p, atol=0.03)


@pytest.mark.parametrize("scale,pooled", [(1.0, [2, 2]), (0.5, [3, 4]), (0.25, [5, 3])])
def test_max_roi_pool(tmp_path, scale, pooled):
    x = RNG.standard_normal((2, 3, 10, 12)).astype(np.float32)
    rois = np.array([[0, 0, 0, 11, 9], [1, 2.4, 3.5, 8, 7], [0, 5, 5, 5, 5], [1, -3, -2, 30, 4],
                     [1, 10.5, 1, 2, 8]], np.float32)
    node = h.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=pooled,
                       spatial_scale=scale)
    m = h.make_model(h.make_graph([node], "roi", [vi("x", T.FLOAT, [2, 3, 10, 12]),
                                                  vi("rois", T.FLOAT, [5, 5])],
                                  [vi("y", T.FLOAT, [5, 3] + pooled)]),
                     opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    check_against_ort(m, {"x": x, "rois": rois}, tmp_path, rtol=0, atol=0)


def test_bad_inputs_are_clear_errors(tmp_path):
    path = tmp_path / "lenet.onnx"
    onnx.save(lenet(), path)
    with pytest.raises(RuntimeError, match="dimension 2 is 27, not 28"):
        run_umd(path, {"x": np.zeros((2, 1, 27, 28), np.float32)}, tmp_path / "o1")
    with pytest.raises(RuntimeError, match="dtype f64 instead of f32"):
        run_umd(path, {"x": np.zeros((2, 1, 28, 28), np.float64)}, tmp_path / "o2")
    with pytest.raises(RuntimeError, match="`nope` is not an input"):
        run_umd(path, {"x": np.zeros((2, 1, 28, 28), np.float32), "nope": np.zeros(1)},
                tmp_path / "o3")
    (tmp_path / "junk.onnx").write_bytes(b"\x0a\xff\xff\xff\xff\x0fnot a model")
    with pytest.raises(RuntimeError, match="not an ONNX ModelProto"):
        run_umd(tmp_path / "junk.onnx", {}, tmp_path / "o4")
    enc = tmp_path / "enc.onnx"
    onnx.save(encoder_layer(), enc)
    with pytest.raises(RuntimeError, match="dynamic dimensions: give it with -i"):
        run_umd(enc, {}, tmp_path / "o5")


# --- the onnx wheel's model tests ---------------------------------------------------------------

def model_dirs():
    for kind in ("simple", "pytorch-converted", "pytorch-operator"):
        for d in sorted((ONNX_DATA / kind).iterdir()):
            if (d / "model.onnx").exists() and (d / "test_data_set_0").exists():
                yield pytest.param(d, id=f"{kind}/{d.name}")


def missing_models() -> dict:
    """MODELS.md rows `| kind/name | reason |` of models that do not run, with their reason."""
    table = (ROOT / "MODELS.md").read_text()
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1] == "missing":
            rows[cells[0].strip("`")] = cells[2]
    return rows


def load_case(d: Path):
    model = onnx.load(d / "model.onnx")
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    feeds, want = {}, []
    ds = d / "test_data_set_0"
    for i, name in enumerate(names):
        t = onnx.TensorProto()
        t.ParseFromString((ds / f"input_{i}.pb").read_bytes())
        feeds[name] = nh.to_array(t)
    i = 0
    while (ds / f"output_{i}.pb").exists():
        t = onnx.TensorProto()
        t.ParseFromString((ds / f"output_{i}.pb").read_bytes())
        want.append(nh.to_array(t))
        i += 1
    return model, feeds, want


@pytest.mark.parametrize("case", list(model_dirs()))
def test_onnx_model_tests(case, tmp_path):
    key = f"{case.parent.name}/{case.name}"
    missing = missing_models()
    model, feeds, want = load_case(case)
    try:
        got, _ = run_umd(case / "model.onnx", feeds, tmp_path / "out")
    except RuntimeError as e:
        assert key in missing, f"{key} fails and is not listed in MODELS.md: {e}"
        return
    assert key not in missing, f"{key} passes now: remove it from MODELS.md"
    outs = [o.name for o in model.graph.output]
    for name, w in zip(outs, want):
        if w.dtype.kind in "OSU":
            np.testing.assert_array_equal(got[name], as_unicode(w), err_msg=f"{key} {name}")
            continue
        np.testing.assert_allclose(got[name].astype(np.float64), w.astype(np.float64),
                                   rtol=1e-3, atol=1e-4, equal_nan=True, err_msg=f"{key} {name}")


# --- the same engine over gRPC (umd.Graph) ------------------------------------------------------

def test_grpc_load_run_unload(server, tmp_path):
    from umd_client import Client, UmdError
    model = encoder_layer()
    path = tmp_path / "enc.onnx"
    onnx.save(model, path)
    with Client(server) as c:
        m = c.load_model(path)
        assert [i.name for i in m.inputs] == ["x", "mask"]
        assert list(m.inputs[0].shape) == [-1, -1, 32]
        for batch, seq in [(1, 4), (2, 7)]:
            feeds = {"x": RNG.standard_normal((batch, seq, 32)).astype(np.float32),
                     "mask": np.ones((batch, seq), np.int64)}
            got = m.run(feeds)
            want = reference(path, feeds)
            np.testing.assert_allclose(got["y"], want["y"], rtol=1e-3, atol=1e-4)
            assert 0 < m.peak_bytes
        with pytest.raises(UmdError, match="is missing"):
            m.run({"x": np.zeros((1, 4, 32), np.float32)})
        with pytest.raises(UmdError, match="not an ONNX ModelProto"):
            c.load_model(b"\x0a\xff\xff\xff\xff\x0fjunk")
        cyclic = h.make_model(h.make_graph(
            [h.make_node("Add", ["x", "b"], ["a"]), h.make_node("Relu", ["a"], ["b"])], "cyc",
            [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("a", T.FLOAT, [2])]))
        with pytest.raises(UmdError, match="cycle"):
            c.load_model(cyclic.SerializeToString())
        w = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[1 << 29])  # a 2 GiB declaration
        huge = h.make_model(h.make_graph(
            [h.make_node("Relu", ["w"], ["y"])], "huge", [], [h.make_tensor_value_info("y", T.FLOAT, [1 << 29])],
            [w]))
        with pytest.raises(UmdError, match="larger than"):
            c.load_model(huge.SerializeToString())
        # the server keeps serving after all of that
        assert m.run(feeds)["y"].shape == (2, 7, 32)
        m.unload()
        with pytest.raises(UmdError, match="no model"):
            m.run(feeds)


def test_grpc_runs_chain_on_device_buffers(server):
    from umd_client import Client, UmdError
    double = h.make_model(h.make_graph(
        [h.make_node("Add", ["x", "x"], ["y"])], "double",
        [h.make_tensor_value_info("x", T.FLOAT, ["n"])], [h.make_tensor_value_info("y", T.FLOAT, ["n"])]),
        opset_imports=[h.make_opsetid("", 17)])
    x = np.arange(6, dtype=np.float32) - 2.5
    with Client(server) as c:
        m = c.load_model(double.SerializeToString())
        y = m.run_on_device({"x": x})["y"]
        assert y[1:] == ([6], "f32")
        z = m.run_on_device({"x": y})["y"]  # the first run's output, still on the device
        np.testing.assert_array_equal(c.download(*z), x * 4)
        into = c.upload(np.zeros(6, np.float32))
        assert m.run_on_device({"x": z}, {"y": into})["y"][0] == into
        np.testing.assert_array_equal(c.download(into, [6], "f32"), x * 8)
        small = c.upload(np.zeros(2, np.float32))
        with pytest.raises(UmdError, match="its buffer has 8"):
            m.run_on_device({"x": z}, {"y": small})
        with pytest.raises(UmdError, match="no buffer"):
            m.run_on_device({"x": ("buf-0", [6], "f32")})
        for handle in (y[0], z[0], into, small):
            c.free(handle)
        m.unload()


def test_grpc_control_flow_and_sequences(server):
    """If/Loop bodies and sequences run on the server's host graph engine; an endless Loop
    is stopped at its iteration bound with a clear error and the server keeps serving."""
    from umd_client import Client, UmdError
    f = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)  # noqa: E731
    # Loop: acc += x for M trips; each trip's acc stacked.
    body = h.make_graph(
        [h.make_node("Add", ["acc", "x"], ["acc2"]), h.make_node("Identity", ["c"], ["c2"]),
         h.make_node("Identity", ["acc2"], ["scan"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         f("acc", [2])], [h.make_tensor_value_info("c2", T.BOOL, []), f("acc2", [2]), f("scan", [2])])
    loop = h.make_model(h.make_graph(
        [h.make_node("Loop", ["m", "", "acc0"], ["acc", "scans"], body=body)], "loop",
        [h.make_tensor_value_info("m", T.INT64, []), f("x", [2]), f("acc0", [2])],
        [f("acc", [2]), f("scans", [None, 2])]), opset_imports=[h.make_opsetid("", 17)])
    # A sequence in, one out: SequenceInsert(seq, t) and its length.
    seq = h.make_model(h.make_graph(
        [h.make_node("SequenceInsert", ["s", "t"], ["s2"]), h.make_node("SequenceLength", ["s2"], ["n"])],
        "seq", [h.make_tensor_sequence_value_info("s", T.FLOAT, None), f("t", [None])],
        [h.make_tensor_sequence_value_info("s2", T.FLOAT, None), h.make_tensor_value_info("n", T.INT64, [])]),
        opset_imports=[h.make_opsetid("", 17)])
    # Endless: no trip count, a condition passed through.
    endless_body = h.make_graph(
        [h.make_node("Identity", ["c"], ["c2"]), h.make_node("Identity", ["v"], ["v2"])], "b",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []), f("v", [1])],
        [h.make_tensor_value_info("c2", T.BOOL, []), f("v2", [1])])
    endless = h.make_model(h.make_graph(
        [h.make_node("Loop", ["", "", "v0"], ["v"], body=endless_body)], "endless",
        [f("v0", [1])], [f("v", [1])]), opset_imports=[h.make_opsetid("", 17)])
    x = np.array([1.0, 10.0], np.float32)
    with Client(server) as c:
        m = c.load_model(loop.SerializeToString())
        out = m.run({"m": np.array(3, np.int64), "x": x, "acc0": np.zeros(2, np.float32)})
        np.testing.assert_array_equal(out["acc"], x * 3)
        np.testing.assert_array_equal(out["scans"], np.stack([x, x * 2, x * 3]))
        s = c.load_model(seq.SerializeToString())
        items = [np.ones(1, np.float32), np.arange(3, dtype=np.float32)]
        out = s.run({"s": items, "t": np.full(2, 7, np.float32)})
        assert int(out["n"]) == 3
        assert [a.tolist() for a in out["s2"]] == [[1.0], [0.0, 1.0, 2.0], [7.0, 7.0]]
        e = c.load_model(endless.SerializeToString())
        with pytest.raises(UmdError, match="limit exceeded"):
            e.run({"v0": np.zeros(1, np.float32)})
        # the server keeps serving
        np.testing.assert_array_equal(
            m.run({"m": np.array(1, np.int64), "x": x, "acc0": x})["acc"], x * 2)


# --- maps (ai.onnx.ml): ZipMap, DictVectorizer, CastMap over gRPC, against onnxruntime ----------

def seq_map_info(name, key):
    return h.make_value_info(name, h.make_sequence_type_proto(
        h.make_map_type_proto(key, h.make_tensor_type_proto(T.FLOAT, []))))


def map_info(name, key, value):
    return h.make_value_info(name, h.make_map_type_proto(key, h.make_tensor_type_proto(value, [])))


def ort_session(model):
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("labels", [[3, 7, 11], ["setosa", "versicolor", "virginica"]])
def test_grpc_classifier_with_zipmap_matches_onnxruntime(server, labels):
    """What skl2onnx writes for a classifier: label and scores, the scores zipped into one map
    per row (`output_probability`, a sequence of maps)."""
    from umd_client import Client
    c, k = 4, 3
    strings = isinstance(labels[0], str)
    zip_attr = {"classlabels_strings" if strings else "classlabels_int64s": labels}
    m = ml_model(
        [ml_node("LinearClassifier", ["x"], ["label", "proba"],
                 coefficients=list(RNG.standard_normal(k * c)),
                 intercepts=list(RNG.standard_normal(k)), classlabels_ints=[0, 1, 2],
                 post_transform="SOFTMAX"),
         ml_node("ZipMap", ["proba"], ["output_probability"], **zip_attr)],
        [vi("x", T.FLOAT, [None, c])],
        [vi("label", T.INT64, [None]),
         seq_map_info("output_probability", T.STRING if strings else T.INT64)])
    x = RNG.standard_normal((9, c)).astype(np.float32)
    want = dict(zip(["label", "output_probability"], ort_session(m).run(None, {"x": x})))
    with Client(server) as cl:
        model = cl.load_model(m.SerializeToString())
        got = model.run({"x": x})
        model.unload()
    np.testing.assert_array_equal(got["label"], want["label"])
    assert len(got["output_probability"]) == len(want["output_probability"]) == 9
    for g, w in zip(got["output_probability"], want["output_probability"]):
        assert set(g) == set(w)
        for key in w:
            assert g[key] == pytest.approx(w[key], rel=1e-5, abs=1e-6), key


# (onnxruntime's Python binding feeds a dict of floats as map(*, float) only: no double case)
@pytest.mark.parametrize("key,value", [(T.STRING, T.FLOAT), (T.STRING, T.INT64),
                                       (T.INT64, T.FLOAT), (T.INT64, T.STRING)])
def test_grpc_dict_vectorizer_matches_onnxruntime(server, key, value):
    from umd_client import Client
    vocab = ["b", "a", "zz", "c", "a"] if key == T.STRING else [5, -1, 0, 42, 5]
    vattr = {"string_vocabulary" if key == T.STRING else "int64_vocabulary": vocab}
    m = ml_model([ml_node("DictVectorizer", ["x"], ["y"], **vattr)],
                 [map_info("x", key, value)], [vi("y", value, [1, len(vocab)])])
    keys = ["a", "zz", "q"] if key == T.STRING else [0, 5, 7]
    vals = {T.FLOAT: [1.5, -2.0, 3.0], T.INT64: [4, -9, 2**40],
            T.STRING: ["x", "", "yy"]}[value]
    feed = dict(zip(keys, vals))
    if value == T.FLOAT:
        want = ort_session(m).run(None, {"x": feed})[0]
    else:  # onnxruntime's Python binding feeds dicts of floats only: its kernel's rule
        zero = "" if value == T.STRING else 0
        want = np.array([[feed.get(v, zero) for v in vocab]],
                        dtype=object if value == T.STRING else np.int64)
    with Client(server) as cl:
        model = cl.load_model(m.SerializeToString())
        got = model.run({"x": feed})["y"]
        model.unload()
    assert got.shape == want.shape
    if value == T.STRING:
        assert got.tolist() == want.tolist()
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("value", [T.FLOAT, T.STRING])
@pytest.mark.parametrize("cast_to", ["TO_FLOAT", "TO_INT64", "TO_STRING"])
@pytest.mark.parametrize("form,max_map", [("DENSE", 1), ("SPARSE", 6)])
def test_grpc_cast_map_matches_onnxruntime(server, value, cast_to, form, max_map):
    from umd_client import Client
    out_t = {"TO_FLOAT": T.FLOAT, "TO_INT64": T.INT64, "TO_STRING": T.STRING}[cast_to]
    m = ml_model([ml_node("CastMap", ["x"], ["y"], cast_to=cast_to, map_form=form,
                          max_map=max_map)],
                 [map_info("x", T.INT64, value)], [vi("y", out_t, [1, None])])
    nums = [2.5, -7.25, 1e6 + 0.5, 3.0]
    vals = nums if value == T.FLOAT else ["2.5", "-7.25", " 1000000.5", "3"]
    feed = dict(zip([4, 0, 9, 2], vals))
    if value == T.FLOAT:
        want = ort_session(m).run(None, {"x": feed})[0]
    else:  # onnxruntime's Python binding feeds dicts of floats only: its kernel's rule
        import re
        cast = {"TO_FLOAT": lambda v: np.float32(float(v)),
                "TO_INT64": lambda v: int(re.match(r"\s*[+-]?\d+", v).group()),
                "TO_STRING": lambda v: v}[cast_to]
        pad = {"TO_FLOAT": 0.0, "TO_INT64": 0, "TO_STRING": "0.f"}[cast_to]
        row = [cast(feed[k]) for k in sorted(feed)] if form == "DENSE" else \
            [cast(feed[i]) if i in feed else pad for i in range(max_map)]
        want = np.array([row], dtype={"TO_FLOAT": np.float32, "TO_INT64": np.int64,
                                      "TO_STRING": object}[cast_to])
    with Client(server) as cl:
        model = cl.load_model(m.SerializeToString())
        got = model.run({"x": feed})["y"]
        model.unload()
    assert got.shape == want.shape
    if out_t == T.STRING:
        assert got.tolist() == want.tolist()
    else:
        np.testing.assert_array_equal(got, want)


def test_grpc_bad_maps_are_clear_errors(server):
    from umd_client import Client, UmdError
    m = ml_model([ml_node("DictVectorizer", ["x"], ["y"], string_vocabulary=["a", "b"])],
                 [map_info("x", T.STRING, T.FLOAT)], [vi("y", T.FLOAT, [1, 2])])
    zm = ml_model([ml_node("ZipMap", ["p"], ["z"], classlabels_int64s=[1, 2])],
                  [vi("p", T.FLOAT, [None, None])], [seq_map_info("z", T.INT64)])
    with Client(server) as cl:
        model = cl.load_model(m.SerializeToString())
        with pytest.raises(UmdError, match=r"holds map\(string, f32\); map\(i64, f32\)"):
            model.run({"x": {1: 1.0}})
        with pytest.raises(UmdError, match="declared a map"):
            model.run({"x": np.zeros(2, np.float32)})
        z = cl.load_model(zm.SerializeToString())
        with pytest.raises(UmdError, match="3 scores per row for 2 class labels"):
            z.run({"p": np.zeros((2, 3), np.float32)})
        # the server keeps serving
        assert model.run({"x": {"b": 2.0}})["y"].tolist() == [[0.0, 2.0]]
        # an empty dict tells no key type: it is the declared one
        ints = ml_model([ml_node("DictVectorizer", ["x"], ["y"], int64_vocabulary=[4, 2])],
                        [map_info("x", T.INT64, T.FLOAT)], [vi("y", T.FLOAT, [1, 2])])
        im = cl.load_model(ints.SerializeToString())
        assert im.run({"x": {}})["y"].tolist() == [[0.0, 0.0]]
        assert model.run({"x": {}})["y"].tolist() == [[0.0, 0.0]]


def test_cli_writes_zipmap_probabilities_as_json(tmp_path):
    """`umd run-model` on a classifier with ZipMap: the maps land in <name>.json, equal to
    onnxruntime's; the label stays a .npy file."""
    c = 3
    m = ml_model(
        [ml_node("LinearClassifier", ["x"], ["label", "proba"],
                 coefficients=list(RNG.standard_normal(2 * c)), intercepts=[0.1, -0.2],
                 classlabels_ints=[5, 9], post_transform="LOGISTIC"),
         ml_node("ZipMap", ["proba"], ["output_probability"], classlabels_int64s=[5, 9])],
        [vi("x", T.FLOAT, [4, c])],
        [vi("label", T.INT64, [4]), seq_map_info("output_probability", T.INT64)])
    path = tmp_path / "clf.onnx"
    onnx.save(m, path)
    x = RNG.standard_normal((4, c)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    r = subprocess.run([UMD_BIN, "run-model", str(path), "-i", f"x={tmp_path / 'x.npy'}",
                        "--out", str(out), "--repeat", "1"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert "2 maps" not in r.stdout and "4 maps, the first" in r.stdout
    want = dict(zip(["label", "output_probability"], ort_session(m).run(None, {"x": x})))
    np.testing.assert_array_equal(np.load(out / "label.npy"), want["label"])
    got = json.loads((out / "output_probability.json").read_text())
    assert len(got) == 4
    for g, w in zip(got, want["output_probability"]):
        assert {int(k): v for k, v in g.items()} == pytest.approx(w, rel=1e-5, abs=1e-6)


def residual_cnn():
    """A ResNet block (conv → BN → Relu → conv → BN, a projection conv → BN, Sum, Relu) and a
    DenseNet-style pre-activation (BN → Mul → Add → Relu → conv, the scale and shift per
    channel), random weights: the chains the conv and norm plugins fuse."""
    def bn(x, p, c, y):
        inits.extend([nh.from_array((RNG.random(c) + 0.5).astype(np.float32), f"{p}s"),
                      weight(f"{p}b", c), weight(f"{p}m", c),
                      nh.from_array((RNG.random(c) + 0.5).astype(np.float32), f"{p}v")])
        return h.make_node("BatchNormalization", [x, f"{p}s", f"{p}b", f"{p}m", f"{p}v"], [y],
                           epsilon=1e-3)
    inits = [weight("w1", 8, 4, 3, 3), weight("w2", 8, 8, 3, 3), weight("wp", 8, 4, 1, 1),
             weight("w3", 6, 8, 1, 1), weight("mul", 8, 1, 1), weight("add", 1, 8, 1, 1)]
    nodes = [
        h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), bn("c1", "n1", 8, "a1"),
        h.make_node("Relu", ["a1"], ["r1"]),
        h.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]), bn("c2", "n2", 8, "a2"),
        h.make_node("Conv", ["x", "wp"], ["cp"]), bn("cp", "np", 8, "ap"),
        h.make_node("Sum", ["a2", "ap"], ["s"]), h.make_node("Relu", ["s"], ["r2"]),
        bn("r2", "n3", 8, "a3"), h.make_node("Mul", ["a3", "mul"], ["m3"]),
        h.make_node("Add", ["add", "m3"], ["s3"]), h.make_node("Relu", ["s3"], ["r3"]),
        h.make_node("Conv", ["r3", "w3"], ["y"]),
    ]
    g = h.make_graph(nodes, "residual", [h.make_tensor_value_info("x", T.FLOAT, [2, 4, 19, 19])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 6, 19, 19])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_fused_chains_match_onnxruntime(tmp_path):
    feeds = {"x": RNG.standard_normal((2, 4, 19, 19)).astype(np.float32)}
    fig = check_against_ort(residual_cnn(), feeds, tmp_path)
    # Conv.BN.Relu (3), the projection's Conv.BN.Sum.Relu (4), Conv.BN (2),
    # BN.Mul.Add.Relu (4); the last conv alone: 5 launches for 14 nodes
    assert (fig["fused"], fig["launched"]) == (13, 5), fig


@pytest.mark.parametrize("n", [10, 12, 16, 45, 64, 360, 7])
def test_inverse_dft_forms_values_as_numpy_ifft_of_complex64(tmp_path, n):
    # numpy >= 2 computes ifft of complex64 in float32; the ONNX reference's expected data is
    # that. Lengths with prime factors 2, 3, 5 match it bit for bit; others (7) are exact.
    x = RNG.standard_normal((3, n, 2)).astype(np.float32)
    x[1] = np.arange(2 * n, dtype=np.float32).reshape(n, 2)  # exact results near 0
    node = h.make_node("DFT", ["x", "", "axis"], ["y"], inverse=1)
    axis = nh.from_array(np.array(1, dtype=np.int64), "axis")
    g = h.make_graph([node], "dft", [h.make_tensor_value_info("x", T.FLOAT, [3, n, 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [axis])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
    path = tmp_path / "dft.onnx"
    onnx.save(model, path)
    got, _ = run_umd(path, {"x": x}, tmp_path / "out")
    y = got["y"]
    c = x[..., 0] + 1j * x[..., 1]
    if n == 7:
        want = np.fft.ifft(c.astype(np.complex128), axis=1)
        np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], want, rtol=1e-6, atol=1e-6)
    else:
        want = np.fft.ifft(c.astype(np.complex64), axis=1)
        assert want.dtype == np.complex64
        assert np.array_equal(y, np.stack([want.real, want.imag], axis=-1))
    # the forward transform (an FFT in f64 where the length allows) is numpy's f64 one, rounded
    model.graph.node[0].attribute[0].i = 0
    onnx.save(model, path)
    got, _ = run_umd(path, {"x": x}, tmp_path / "fwd")
    want = np.fft.fft(c.astype(np.complex128), axis=1)
    np.testing.assert_allclose(got["y"][..., 0] + 1j * got["y"][..., 1], want, rtol=1e-6,
                               atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 0])
def test_float16_softmax_rounds_as_the_onnx_reference(tmp_path, axis):
    from onnx.reference import ReferenceEvaluator

    # rows of 300: numpy's pairwise summation splits them (blocks of <= 128 values)
    x = (RNG.standard_normal((6, 300)) * 3).astype(np.float16)
    node = h.make_node("Softmax", ["x"], ["y"], axis=axis)
    g = h.make_graph([node], "sm", [h.make_tensor_value_info("x", T.FLOAT16, [6, 300])],
                     [h.make_tensor_value_info("y", T.FLOAT16, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    path = tmp_path / "softmax.onnx"
    onnx.save(model, path)
    got, _ = run_umd(path, {"x": x}, tmp_path / "out")
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert want.dtype == np.float16
    assert np.array_equal(got["y"], want)
