#!/usr/bin/env python3
"""The ml plugin's ops (and misc's MelWeightMatrix) through a real `umd serve` against
onnxruntime, on what the ONNX node tests do not exercise: TreeEnsemble with several trees,
every node mode (set membership included), missing values tracking true, every aggregate
function and post transform, f32 and f64; TfIdfVectorizer with random pools, every mode,
weights, skips, int32/int64, 1-D and 2-D; LabelEncoder between numeric types (lists and tensor
attributes); Binarizer; ArrayFeatureExtractor; MelWeightMatrix. One node per model, run by
scripts/conformance.py's `Remote` (the client path of the conformance run).

    python plugins/ml/tools/ort_check.py --umd $CARGO_TARGET_DIR/debug/umd
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import conformance as conf  # noqa: E402

ML = "ai.onnx.ml"
ELEM = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
        np.int32: TensorProto.INT32, np.int64: TensorProto.INT64}


def elem(a):
    return ELEM[a.dtype.type]


def model(node, vals, out_types, opsets):
    graph = helper.make_graph(
        [node], node.op_type,
        [helper.make_tensor_value_info(k, elem(v), v.shape) for k, v in vals.items()],
        [helper.make_tensor_value_info(o, t, None) for o, t in zip(node.output, out_types)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 10
    return m


def tree_case(seed, dt, agg, post, trees=3, members=True, missing=True):
    """A random ensemble. onnxruntime numbers post transforms 1 LOGISTIC, 2 SOFTMAX (ONNX: 1
    SOFTMAX, 2 LOGISTIC), so its model gets the swapped code; `fix` maps umd's MIN/MAX initial
    value for a target no leaf reaches (the reference's ±finfo.max) to onnxruntime's 0."""
    rng = np.random.default_rng(seed)
    nf, nt = 3, 3
    nodes, leaves = [], []  # node: [feat, mode, split, t, tleaf, f, fleaf, miss]
    member_vals = []
    roots = []

    def build(depth, root=False):
        if depth == 0 or (not root and rng.random() < 0.25):
            leaves.append((int(rng.integers(0, nt)), float(rng.uniform(-2, 2))))
            return len(leaves) - 1, 1
        i = len(nodes)
        nodes.append(None)
        mode = int(rng.integers(0, 7 if members else 6))
        # integer splits, members and features: EQ/NEQ hit, and onnxruntime takes only
        # integer set members
        split = float(rng.integers(-2, 3))
        if mode == 6:
            member_vals.extend([float(v) for v in rng.integers(-3, 4, 3)] + [np.nan])
            split = np.nan
        t, tl = build(depth - 1)
        f, fl = build(depth - 1)
        nodes[i] = [int(rng.integers(0, nf)), mode, split, t, tl, f, fl,
                    int(rng.integers(0, 2)) if missing else 0]
        return i, 0

    for _ in range(trees):
        roots.append(build(3, root=True)[0])
    npdt = np.float32 if dt == TensorProto.FLOAT else np.float64
    tens = lambda name, v, t=dt: numpy_helper.from_array(np.array(v, dtype=npdt if t == dt else np.uint8), name)  # noqa: E731
    attrs = dict(
        n_targets=nt, aggregate_function=agg, post_transform={1: 2, 2: 1}.get(post, post),
        tree_roots=roots,
        nodes_featureids=[n[0] for n in nodes],
        nodes_modes=tens("nodes_modes", [n[1] for n in nodes], TensorProto.UINT8),
        nodes_splits=tens("nodes_splits", [n[2] for n in nodes]),
        nodes_truenodeids=[n[3] for n in nodes], nodes_trueleafs=[n[4] for n in nodes],
        nodes_falsenodeids=[n[5] for n in nodes], nodes_falseleafs=[n[6] for n in nodes],
        leaf_targetids=[lf[0] for lf in leaves],
        leaf_weights=tens("leaf_weights", [lf[1] for lf in leaves]))
    if missing:
        attrs["nodes_missing_value_tracks_true"] = [n[7] for n in nodes]
    if member_vals:
        attrs["membership_values"] = tens("membership_values", member_vals)
    x = rng.integers(-3, 4, (7, nf)).astype(npdt)
    x[0, 0] = np.nan
    x[3, 1] = np.nan
    node = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain=ML, **attrs)
    m = model(node, {"X": x}, [dt], [(ML, 5), ("", 21)])
    # what umd is asked: the ONNX post_transform code
    umd_node = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain=ML,
                                **{**attrs, "post_transform": post})
    return m, {"X": x}, 5, umd_node


def tfidf_case(seed, mode, weighted, min_g, max_g, skip, itype, batch):
    rng = np.random.default_rng(seed)
    # distinct n-grams of each length (onnxruntime refuses a repeated one)
    pool = []
    for size, count in [(1, 3), (2, 4), (3, 3)]:
        grams = set()
        while len(grams) < count:
            grams.add(tuple(rng.integers(0, 5, size).tolist()))
        pool += [v for g in sorted(grams, key=lambda _: rng.random()) for v in g]
    counts = [0, 3, 11]
    n = 3 + 4 + 3
    indexes = rng.permutation(n).tolist()
    attrs = dict(mode=mode, min_gram_length=min_g, max_gram_length=max_g, max_skip_count=skip,
                 ngram_counts=counts, ngram_indexes=indexes, pool_int64s=pool)
    if weighted:
        attrs["weights"] = rng.uniform(0.5, 2, n).astype(np.float32).tolist()
    shape = (3, 10) if batch else (12,)
    x = rng.integers(0, 5, shape).astype(itype)
    node = helper.make_node("TfIdfVectorizer", ["X"], ["Y"], **attrs)
    return model(node, {"X": x}, [TensorProto.FLOAT], [("", 21)]), {"X": x}, 21


def label_case(kind, seed):
    rng = np.random.default_rng(seed)
    if kind == "int-float":
        attrs = dict(keys_int64s=[1, 5, 3, 7], values_floats=[0.5, -1.5, 2.25, 9.0],
                     default_float=-4.0)
        x = rng.integers(0, 9, (3, 4)).astype(np.int64)
        out = TensorProto.FLOAT
    elif kind == "float-int":
        attrs = dict(keys_floats=[0.5, -1.0, 2.0], values_int64s=[10, 20, 30])
        x = rng.choice([0.5, -1.0, 2.0, 3.0], (6,)).astype(np.float32)
        out = TensorProto.INT64
    elif kind == "int-int":
        attrs = dict(keys_int64s=[1, 2, 3], values_int64s=[-1, -2, -3], default_int64=99)
        x = rng.integers(0, 5, (8,)).astype(np.int64)
        out = TensorProto.INT64
    else:  # tensors: int64 keys -> double values
        attrs = dict(keys_tensor=numpy_helper.from_array(np.array([4, 8, 6], np.int64), "k"),
                     values_tensor=numpy_helper.from_array(np.array([0.25, 0.5, 0.75]), "v"),
                     default_tensor=numpy_helper.from_array(np.array([-2.0]), "d"))
        x = rng.integers(3, 9, (7,)).astype(np.int64)
        out = TensorProto.DOUBLE
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, **attrs)
    return model(node, {"X": x}, [out], [(ML, 4), ("", 21)]), {"X": x}, 4


def simple_cases():
    rng = np.random.default_rng(7)
    out = []
    for dt in [np.float32, np.float64, np.int64, np.int32]:
        x = (rng.uniform(-3, 3, (4, 5)) if dt in (np.float32, np.float64)
             else rng.integers(-3, 4, (4, 5))).astype(dt)
        if dt == np.float32:  # onnxruntime's Binarizer takes f32 only
            node = helper.make_node("Binarizer", ["X"], ["Y"], domain=ML, threshold=0.5)
            out.append((f"Binarizer {dt.__name__}",
                        (model(node, {"X": x}, [elem(x)], [(ML, 1), ("", 21)]), {"X": x}, 1)))
        node = helper.make_node("ArrayFeatureExtractor", ["X", "Y"], ["Z"], domain=ML)
        y = np.array([4, 0, 2, 2], np.int64)
        out.append((f"ArrayFeatureExtractor {dt.__name__}",
                    (model(node, {"X": x, "Y": y}, [elem(x)], [(ML, 1), ("", 21)]),
                     {"X": x, "Y": y}, 1)))
    return out


def mel_cases():
    out = []
    for bins, dft, sr, lo, hi, odt in [(8, 16, 8192, 0, 4096, None), (10, 64, 16000, 20, 8000, None),
                                       (40, 400, 16000, 125, 3800, None),
                                       (6, 100, 22050, 30, 11025, TensorProto.DOUBLE)]:
        vals = {"num_mel_bins": np.array(bins, np.int32), "dft_length": np.array(dft, np.int32),
                "sample_rate": np.array(sr, np.int32),
                "lower_edge_hertz": np.array(lo, np.float32),
                "upper_edge_hertz": np.array(hi, np.float32)}
        kw = {} if odt is None else {"output_datatype": odt}
        node = helper.make_node("MelWeightMatrix", list(vals), ["output"], **kw)
        out.append((f"MelWeightMatrix {bins} {dft} {sr} {lo}-{hi} {odt}",
                    (model(node, vals, [odt or TensorProto.FLOAT], [("", 17)]), vals, 17)))
    return out


def run(stub, m, vals, opset, umd_node=None):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    want = sess.run(None, vals)
    remote = conf.Remote(stub)
    try:
        for k, v in vals.items():
            remote.upload(k, v, elem(v))
        remote.run_node(umd_node or m.graph.node[0], opset)
        for o, w in zip(m.graph.output, want):
            got, _ = remote.download(o.name, w)
            if got.dtype.kind == "f":  # MIN/MAX of no leaf: ±finfo.max (reference), 0 (ort)
                got = np.where(np.abs(got) == np.finfo(got.dtype).max, 0, got)
            if got.shape != w.shape:
                return f"{o.name}: shape {got.shape}, onnxruntime {w.shape}"
            if not np.allclose(got.astype(np.float64), w.astype(np.float64), rtol=1e-4,
                               atol=1e-5, equal_nan=True):
                err = np.nanmax(np.abs(got.astype(np.float64) - w.astype(np.float64)))
                return f"{o.name}: max error {err}\n got {got}\n ort {w}"
    finally:
        remote.free()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--umd", required=True)
    a = ap.parse_args()
    cases = []
    seed = 0
    for dt in [TensorProto.FLOAT, TensorProto.DOUBLE]:
        for agg in range(4):
            # MIN/MAX: no post transform (a target no leaf reaches differs before it)
            for post in range(5) if agg < 2 else [0]:
                seed += 1
                cases.append((f"TreeEnsemble dt {dt} agg {agg} post {post}",
                              tree_case(seed, dt, agg, post)))
    cases.append(("TreeEnsemble no members, no missing",
                  tree_case(99, TensorProto.FLOAT, 1, 0, members=False, missing=False)))
    for mode in ["TF", "IDF", "TFIDF"]:
        for weighted in [False, True]:
            for (mn, mx, sk) in [(1, 1, 0), (1, 3, 2), (2, 3, 0), (2, 2, 3), (3, 3, 1)]:
                for itype, batch in [(np.int32, False), (np.int64, True)]:
                    seed += 1
                    name = f"TfIdfVectorizer {mode} w={weighted} {mn}-{mx} skip {sk} {itype.__name__}"
                    cases.append((name, tfidf_case(seed, mode, weighted, mn, mx, sk, itype, batch)))
    for kind in ["int-float", "float-int", "int-int", "tensors"]:
        cases.append((f"LabelEncoder {kind}", label_case(kind, 3)))
    cases += simple_cases()
    cases += mel_cases()
    proc, addr = conf.start_server(a.umd)
    import grpc
    stub = conf.rpc.DeviceStub(grpc.insecure_channel(addr))
    failed = 0
    try:
        for name, (m, vals, opset, *umd_node) in cases:
            try:
                err = run(stub, m, vals, opset, *umd_node)
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
