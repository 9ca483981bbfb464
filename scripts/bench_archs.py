#!/usr/bin/env python3
"""Common model architectures at full size with random weights — MobileNetV2 at 224 (Conv,
BatchNormalization, Clip as ReLU6, depthwise convs, residual Adds), a two-layer GPT-2 (d 256, 64
tokens: embeddings, Trilu causal mask, Split, the tanh GELU with Pow), a YOLO-style detector at
160 (LeakyRelu, MaxPool, Resize, Concat, Sigmoid) and an LSTM (32 steps, batch 4, 64 -> 128) —
each checked against onnxruntime (max error) and timed against it in the same run: three rounds,
each onnxruntime's median of 20 runs then `umd run-model --repeat 20` of every binary given;
medians of the rounds. Prints a Markdown table for BENCHMARKS.md.

Usage: scripts/bench_archs.py UMD_BIN [BASELINE_UMD_BIN] [mnv2|gpt2|yolo|lstm ...]"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

RNG = np.random.default_rng(3)


def W(name, *shape, scale=0.1, dtype=np.float32):
    return nh.from_array((RNG.standard_normal(shape) * scale).astype(dtype), name)


def C(name, arr):
    return nh.from_array(np.asarray(arr), name)


def mobilenet_v2(batch=1, res=224):
    nodes, inits = [], []
    def conv(x, cin, cout, k, s, g, name, act=True):
        inits.append(W(name+"_w", cout, cin//g, k, k, scale=(2.0/(cin//g*k*k))**0.5))
        inits.append(W(name+"_b", cout, scale=0.01))
        nodes.append(h.make_node("Conv", [x, name+"_w", name+"_b"], [name+"_c"], kernel_shape=[k,k], strides=[s,s], pads=[k//2]*4, group=g))
        # BatchNorm (not folded) then Clip 0..6
        for p, v in [("s", 1+0.1*RNG.standard_normal(cout)), ("o", 0.1*RNG.standard_normal(cout)), ("m", 0.1*RNG.standard_normal(cout)), ("v", 1+0.1*np.abs(RNG.standard_normal(cout)))]:
            inits.append(C(name+"_bn"+p, v.astype(np.float32)))
        nodes.append(h.make_node("BatchNormalization", [name+"_c", name+"_bns", name+"_bno", name+"_bnm", name+"_bnv"], [name+"_n"]))
        if act:
            nodes.append(h.make_node("Clip", [name+"_n", "zero", "six"], [name]))
            return name
        return name+"_n"
    inits += [C("zero", np.float32(0)), C("six", np.float32(6))]
    x = conv("x", 3, 32, 3, 2, 1, "stem")
    cfg = [(1,16,1,1),(6,24,2,2),(6,32,3,2),(6,64,4,2),(6,96,3,1),(6,160,3,2),(6,320,1,1)]
    cin = 32; i = 0
    for t, c, n, s in cfg:
        for j in range(n):
            stride = s if j == 0 else 1
            hid = cin * t
            y = x
            if t != 1:
                y = conv(y, cin, hid, 1, 1, 1, f"b{i}e")
            y = conv(y, hid, hid, 3, stride, hid, f"b{i}d")
            y = conv(y, hid, c, 1, 1, 1, f"b{i}p", act=False)
            if stride == 1 and cin == c:
                nodes.append(h.make_node("Add", [x, y], [f"b{i}r"])); y = f"b{i}r"
            x = y; cin = c; i += 1
    x = conv(x, cin, 1280, 1, 1, 1, "head")
    nodes.append(h.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(h.make_node("Flatten", ["gap"], ["flat"]))
    inits += [W("fc_w", 1000, 1280, scale=0.03), W("fc_b", 1000, scale=0.01)]
    nodes.append(h.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1))
    nodes.append(h.make_node("Softmax", ["logits"], ["prob"], axis=1))
    g = h.make_graph(nodes, "mnv2", [h.make_tensor_value_info("x", T.FLOAT, [batch,3,res,res])], [h.make_tensor_value_info("prob", T.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), {"x": RNG.standard_normal((batch,3,res,res)).astype(np.float32)}

def gpt2(layers=2, d=256, heads=4, seq=64, vocab=2000):
    nodes, inits = [], []
    dh = d // heads
    inits += [W("wte", vocab, d, scale=0.02), W("wpe", 1024, d, scale=0.01)]
    inits += [C("zero_i", np.int64(0)), C("one_i", np.int64(1)), C("ax1", np.array([1], np.int64))]
    nodes += [h.make_node("Shape", ["ids"], ["ids_shape"]),
              h.make_node("Gather", ["ids_shape", "one_i"], ["S"], axis=0),
              h.make_node("Range", ["zero_i", "S", "one_i"], ["pos"]),
              h.make_node("Gather", ["wte", "ids"], ["tok"]),
              h.make_node("Gather", ["wpe", "pos"], ["pe"]),
              h.make_node("Add", ["tok", "pe"], ["h0"])]
    # causal mask [S,S] : Trilu of ones, then Where
    inits += [C("neg", np.float32(-1e9)), C("shape_b", np.array([0, 0, heads, dh], np.int64)), C("shape_m", np.array([0, 0, d], np.int64)), C("sqrt_dh", np.float32(np.sqrt(dh))),
              C("half", np.float32(0.5)), C("c044", np.float32(0.044715)), C("three", np.float32(3.0)), C("s2p", np.float32(np.sqrt(2/np.pi))), C("onef", np.float32(1.0))]
    nodes += [h.make_node("Concat", ["S_1", "S_1"], ["SS"], axis=0),
              h.make_node("Unsqueeze", ["S", "ax0"], ["S_1"])]
    inits.append(C("ax0", np.array([0], np.int64)))
    nodes += [h.make_node("ConstantOfShape", ["SS"], ["ones"], value=nh.from_array(np.array([1], np.uint8).astype(bool))),
              h.make_node("Trilu", ["ones"], ["causal"], upper=0)]
    x = "h0"
    def ln(x, name):
        inits.append(C(name+"_g", (1+0.1*RNG.standard_normal(d)).astype(np.float32)))
        inits.append(C(name+"_b", (0.1*RNG.standard_normal(d)).astype(np.float32)))
        nodes.append(h.make_node("LayerNormalization", [x, name+"_g", name+"_b"], [name], axis=-1, epsilon=1e-5))
        return name
    def lin(x, din, dout, name):
        inits.append(W(name+"_w", din, dout, scale=0.05)); inits.append(W(name+"_b", dout, scale=0.01))
        nodes.append(h.make_node("MatMul", [x, name+"_w"], [name+"_m"]))
        nodes.append(h.make_node("Add", [name+"_m", name+"_b"], [name]))
        return name
    for l in range(layers):
        p = f"l{l}"
        a = ln(x, p+"ln1")
        qkv = lin(a, d, 3*d, p+"qkv")
        nodes.append(h.make_node("Split", [qkv, "split3"], [p+"q", p+"k", p+"v"], axis=-1))
        for t in "qkv":
            nodes.append(h.make_node("Reshape", [p+t, "shape_b"], [p+t+"r"]))
            perm = [0,2,3,1] if t == "k" else [0,2,1,3]
            nodes.append(h.make_node("Transpose", [p+t+"r"], [p+t+"t"], perm=perm))
        nodes += [h.make_node("MatMul", [p+"qt", p+"kt"], [p+"s"]),
                  h.make_node("Div", [p+"s", "sqrt_dh"], [p+"sd"]),
                  h.make_node("Where", ["causal", p+"sd", "neg"], [p+"sm"]),
                  h.make_node("Softmax", [p+"sm"], [p+"pr"], axis=-1),
                  h.make_node("MatMul", [p+"pr", p+"vt"], [p+"o"]),
                  h.make_node("Transpose", [p+"o"], [p+"ot"], perm=[0,2,1,3]),
                  h.make_node("Reshape", [p+"ot", "shape_m"], [p+"om"])]
        o = lin(p+"om", d, d, p+"proj")
        nodes.append(h.make_node("Add", [x, o], [p+"r1"]))
        m = ln(p+"r1", p+"ln2")
        f = lin(m, d, 4*d, p+"fc")
        # gelu tanh
        nodes += [h.make_node("Pow", [f, "three"], [p+"g3"]), h.make_node("Mul", [p+"g3", "c044"], [p+"g4"]),
                  h.make_node("Add", [f, p+"g4"], [p+"g5"]), h.make_node("Mul", [p+"g5", "s2p"], [p+"g6"]),
                  h.make_node("Tanh", [p+"g6"], [p+"g7"]), h.make_node("Add", [p+"g7", "onef"], [p+"g8"]),
                  h.make_node("Mul", [f, p+"g8"], [p+"g9"]), h.make_node("Mul", [p+"g9", "half"], [p+"gelu"])]
        f2 = lin(p+"gelu", 4*d, d, p+"fc2")
        nodes.append(h.make_node("Add", [p+"r1", f2], [p+"out"]))
        x = p+"out"
    x = ln(x, "lnf")
    nodes.append(h.make_node("Transpose", ["wte"], ["wteT"], perm=[1,0]))
    nodes.append(h.make_node("MatMul", [x, "wteT"], ["logits"]))
    inits.append(C("split3", np.array([d, d, d], np.int64)))
    g = h.make_graph(nodes, "gpt2", [h.make_tensor_value_info("ids", T.INT64, [1, "S"])], [h.make_tensor_value_info("logits", T.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), {"ids": RNG.integers(0, vocab, (1, seq)).astype(np.int64)}

def yolo_ish(res=160):
    nodes, inits = [], []
    def cbl(x, cin, cout, k, s, name):
        inits.append(W(name+"_w", cout, cin, k, k, scale=(2.0/(cin*k*k))**0.5)); inits.append(W(name+"_b", cout, scale=0.01))
        nodes.append(h.make_node("Conv", [x, name+"_w", name+"_b"], [name+"_c"], kernel_shape=[k,k], strides=[s,s], pads=[k//2]*4))
        nodes.append(h.make_node("LeakyRelu", [name+"_c"], [name], alpha=0.1))
        return name
    x = cbl("x", 3, 16, 3, 1, "c1"); nodes.append(h.make_node("MaxPool", [x], ["p1"], kernel_shape=[2,2], strides=[2,2]))
    x = cbl("p1", 16, 32, 3, 1, "c2"); nodes.append(h.make_node("MaxPool", [x], ["p2"], kernel_shape=[2,2], strides=[2,2]))
    x2 = cbl("p2", 32, 64, 3, 1, "c3"); nodes.append(h.make_node("MaxPool", [x2], ["p3"], kernel_shape=[2,2], strides=[2,2]))
    x = cbl("p3", 64, 128, 3, 1, "c4")
    x = cbl(x, 128, 64, 1, 1, "c5")
    inits.append(C("scales", np.array([1,1,2,2], np.float32))); inits.append(C("roi", np.array([], np.float32)))
    nodes.append(h.make_node("Resize", [x, "roi", "scales"], ["up"], mode="nearest"))
    nodes.append(h.make_node("Concat", ["up", x2], ["cat"], axis=1))
    x = cbl("cat", 128, 64, 3, 1, "c6")
    inits.append(W("det_w", 255, 64, 1, 1, scale=0.1)); inits.append(W("det_b", 255, scale=0.1))
    nodes.append(h.make_node("Conv", [x, "det_w", "det_b"], ["det"]))
    inits.append(C("rs", np.array([1, 3, 85, -1], np.int64)))
    nodes += [h.make_node("Reshape", ["det", "rs"], ["det_r"]), h.make_node("Transpose", ["det_r"], ["det_t"], perm=[0,1,3,2]), h.make_node("Sigmoid", ["det_t"], ["out"])]
    g = h.make_graph(nodes, "yolo", [h.make_tensor_value_info("x", T.FLOAT, [1,3,res,res])], [h.make_tensor_value_info("out", T.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), {"x": RNG.standard_normal((1,3,res,res)).astype(np.float32)}

def lstm_model(seq=32, batch=4, inp=64, hid=128):
    inits = [W("W", 1, 4*hid, inp, scale=0.1), W("R", 1, 4*hid, hid, scale=0.1), W("B", 1, 8*hid, scale=0.1), W("fc", hid, 10, scale=0.1)]
    nodes = [h.make_node("LSTM", ["x", "W", "R", "B"], ["Y", "Yh"], hidden_size=hid),
             h.make_node("Squeeze", ["Yh", "ax0"], ["last"]),
             h.make_node("MatMul", ["last", "fc"], ["out"])]
    inits.append(C("ax0", np.array([0], np.int64)))
    g = h.make_graph(nodes, "lstm", [h.make_tensor_value_info("x", T.FLOAT, [seq,batch,inp])], [h.make_tensor_value_info("out", T.FLOAT, None), h.make_tensor_value_info("Y", T.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), {"x": RNG.standard_normal((seq,batch,inp)).astype(np.float32)}

MODELS = {"mnv2": mobilenet_v2, "gpt2": gpt2, "yolo": yolo_ish, "lstm": lstm_model}


def umd_steady(binary, model, feeds, work):
    args = [binary, "run-model", str(model), "--repeat", "20", "--json", "--out", str(work / "out")]
    for k, v in feeds.items():
        np.save(work / f"{k}.npy", v)
        args += ["-i", f"{k}={work}/{k}.npy"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{binary}: {r.stderr.strip()[:400]}")
    fig = json.loads(r.stdout)
    outs = {o["name"]: np.load(work / "out" / f"{o['name']}.npy") for o in fig["outputs"]}
    return fig["steady_s"] * 1000, outs


def main():
    args = sys.argv[1:]
    bins = [a for a in args if a not in MODELS]
    names = [a for a in args if a in MODELS] or list(MODELS)
    if not bins:
        sys.exit(__doc__)
    print("| model | " + " | ".join(f"`{Path(b).name}` steady (ratio)" for b in bins)
          + " | onnxruntime steady | max error |")
    print("|---" * (len(bins) + 3) + "|")
    for name in names:
        model, feeds = MODELS[name]()
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            path = work / "model.onnx"
            onnx.save(model, path)
            s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            want = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
            times = {b: [] for b in bins}
            orts, err = [], 0.0
            for _ in range(3):
                for _ in range(3):
                    s.run(None, feeds)
                ts = []
                for _ in range(20):
                    t = time.perf_counter()
                    s.run(None, feeds)
                    ts.append(time.perf_counter() - t)
                orts.append(np.median(ts) * 1000)
                for b in bins:
                    ms, outs = umd_steady(b, path, feeds, work)
                    times[b].append(ms)
                    for k, w in want.items():
                        err = max(err, float(np.max(np.abs(outs[k] - w))))
            o = np.median(orts)
            cells = [f"{np.median(times[b]):.2f} ms ({np.median(times[b]) / o:.1f}×)" for b in bins]
            print(f"| {name} | " + " | ".join(cells) + f" | {o:.2f} ms | {err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
