#!/usr/bin/env python3
"""RNN, LSTM and GRU through a real `umd serve` against onnxruntime, on what the ONNX node tests
do not exercise: sequence_lens (zero padding of Y, Y_h the last valid step or 0 for a length 0, reverse within each
sequence's length), bidirectional, clip, activations with alpha/beta, LSTM peepholes and
input_forget, GRU linear_before_reset, initial states. Random f32 inputs, one node per model;
each node is run by scripts/conformance.py's `Remote` (the same client path as the conformance).

    python plugins/recurrent/tools/ort_check.py --umd $CARGO_TARGET_DIR/debug/umd
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, TensorProto

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import conformance as conf  # noqa: E402


def case(op, seed, direction="forward", lens=None, attrs=None, c0=True, peep=True, bias=True,
         h0=True, seq=4, batch=3, inp=3, hidden=5):
    rng = np.random.default_rng(seed)
    g = {"RNN": 1, "LSTM": 4, "GRU": 3}[op]
    d = 2 if direction == "bidirectional" else 1
    f = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)  # noqa: E731
    vals = {"X": f(seq, batch, inp), "W": f(d, g * hidden, inp), "R": f(d, g * hidden, hidden)}
    names = ["X", "W", "R"]
    names.append("B" if bias else "")
    if bias:
        vals["B"] = f(d, 2 * g * hidden)
    names.append("sequence_lens" if lens is not None else "")
    if lens is not None:
        vals["sequence_lens"] = np.array(lens, dtype=np.int32)
    names.append("initial_h" if h0 else "")
    if h0:
        vals["initial_h"] = f(d, batch, hidden)
    if op == "LSTM":
        names.append("initial_c" if c0 else "")
        if c0:
            vals["initial_c"] = f(d, batch, hidden)
        names.append("P" if peep else "")
        if peep:
            vals["P"] = f(d, 3 * hidden)
    while names and names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, hidden_size=hidden, direction=direction,
                            **(attrs or {}))
    tp = lambda n, a: helper.make_tensor_value_info(  # noqa: E731
        n, TensorProto.INT32 if a.dtype == np.int32 else TensorProto.FLOAT, a.shape)
    graph = helper.make_graph([node], op, [tp(n, vals[n]) for n in names if n],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                               for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, vals


def run(stub, model, vals):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {k: v for k, v in vals.items()})
    remote = conf.Remote(stub)
    try:
        for k, v in vals.items():
            remote.upload(k, v, TensorProto.INT32 if v.dtype == np.int32 else TensorProto.FLOAT)
        remote.run_node(model.graph.node[0], 14)
        for o, w in zip(model.graph.output, want):
            got, _ = remote.download(o.name, w)
            if got.shape != w.shape or not np.allclose(got, w, rtol=1e-4, atol=1e-5):
                err = np.abs(got - w).max() if got.shape == w.shape else "shape"
                return f"{o.name}: max error {err}"
    finally:
        remote.free()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--umd", required=True)
    a = ap.parse_args()
    proc, addr = conf.start_server(a.umd)
    import grpc
    stub = conf.rpc.DeviceStub(grpc.insecure_channel(addr))
    acts = {
        "RNN": [["Relu"], ["LeakyRelu"], ["ThresholdedRelu"], ["ScaledTanh"], ["HardSigmoid"],
                ["Elu"], ["Softsign"], ["Softplus"], ["Affine"], ["Sigmoid"]],
        "GRU": [["HardSigmoid", "Softsign"], ["Sigmoid", "ScaledTanh"]],
        "LSTM": [["HardSigmoid", "Elu", "Softsign"], ["Sigmoid", "Tanh", "Affine"]],
    }
    cases = []
    for op in ["RNN", "GRU", "LSTM"]:
        for direction in ["forward", "reverse", "bidirectional"]:
            cases.append((f"{op} {direction}", case(op, 1, direction)))
            cases.append((f"{op} {direction} lens", case(op, 2, direction, lens=[4, 0, 1])))
            cases.append((f"{op} {direction} bare", case(op, 3, direction, bias=False, h0=False,
                                                         c0=False, peep=False)))
            cases.append((f"{op} {direction} clip", case(op, 4, direction, attrs={"clip": 0.4})))
        for i, names in enumerate(acts[op]):
            attrs = {"activations": names, "activation_alpha": [0.6] * 3,
                     "activation_beta": [0.3] * 3}
            k = sum(n in ("Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
                          "Elu") for n in names)
            kb = sum(n in ("Affine", "ScaledTanh", "HardSigmoid") for n in names)
            attrs["activation_alpha"] = [0.6 + 0.1 * j for j in range(k)]
            attrs["activation_beta"] = [0.3 - 0.1 * j for j in range(kb)]
            if not k:
                del attrs["activation_alpha"]
            if not kb:
                del attrs["activation_beta"]
            cases.append((f"{op} acts {names}", case(op, 10 + i, attrs=attrs)))
    cases.append(("LSTM input_forget", case("LSTM", 20, attrs={"input_forget": 1})))
    cases.append(("GRU linear_before_reset bidirectional lens",
                  case("GRU", 21, "bidirectional", lens=[3, 4, 1],
                       attrs={"linear_before_reset": 1})))
    failed = 0
    try:
        for name, (model, vals) in cases:
            try:
                err = run(stub, model, vals)
            except Exception as e:  # noqa: BLE001
                err = f"{type(e).__name__}: {e}"
            print(("ok   " if err is None else "FAIL ") + name + ("" if err is None else f": {err}"))
            failed += err is not None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"{len(cases)} cases, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
