#!/usr/bin/env python3
"""Writes fixtures/onnx_cases.txt: the ONNX backend node tests of this plugin's ops plus extra
cases (random shapes and attributes) whose expected outputs come from ONNX's reference
implementation (onnx.reference.ReferenceEvaluator). The Rust test `onnx_cases` replays them.

    /work/venv/bin/python plugins/gather/scripts/gen_onnx_cases.py

Format, one record per case:
    case NAME OP OPSET
    attr NAME (i|f|s|is|fs) VALUE...
    in DTYPE SHAPE VALUE...     (SHAPE: dims joined by 'x', '-' for a scalar)
    absent
    out DTYPE SHAPE VALUE...
    end
"""
import os
import sys
import warnings

import numpy as np
import ml_dtypes
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

warnings.filterwarnings("ignore")
OPS = {"Gather", "GatherElements", "GatherND", "ScatterElements", "Scatter", "ScatterND", "Pad",
       "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "OneHot"}
DT = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(ml_dtypes.bfloat16): "bf16",
      np.dtype(np.float64): "f64", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
      np.dtype(np.int8): "i8", np.dtype(np.uint8): "u8", np.dtype(np.bool_): "bool"}
ONNX_DT = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
           np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16, np.dtype(np.float64): TensorProto.DOUBLE,
           np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
           np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8,
           np.dtype(np.bool_): TensorProto.BOOL}


def tensor_line(kind, a):
    a = np.asarray(a)
    shape = "x".join(str(d) for d in a.shape) if a.ndim else "-"
    vals = " ".join(repr(float(v)) for v in a.astype(np.float64).ravel())
    return f"{kind} {DT[a.dtype]} {shape} {vals}".rstrip()


def attr_line(name, v):
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, (bool, int, np.integer)):
        return f"attr {name} i {int(v)}"
    if isinstance(v, (float, np.floating)):
        return f"attr {name} f {float(np.float32(v))!r}"  # ONNX stores float attributes as f32
    if isinstance(v, str):
        return f"attr {name} s {v}"
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, (int, np.integer)) for x in v):
            return f"attr {name} is " + " ".join(str(int(x)) for x in v)
        return f"attr {name} fs " + " ".join(repr(float(np.float32(x))) for x in v)
    raise ValueError(f"attribute {name}: {v!r}")


def record(name, op, opset, attrs, inputs, outputs):
    lines = [f"case {name} {op} {opset}"]
    lines += [attr_line(k, v) for k, v in attrs.items()]
    for a in inputs:
        lines.append("absent" if a is None else tensor_line("in", a))
    lines += [tensor_line("out", o) for o in outputs]
    lines.append("end")
    return "\n".join(lines)


def node_tests():
    from onnx.backend.test.case.node import collect_testcases
    out = []
    for t in collect_testcases(None):
        nodes = t.model.graph.node
        if len(nodes) != 1 or nodes[0].op_type not in OPS:
            continue
        n = nodes[0]
        opset = max(o.version for o in t.model.opset_import if o.domain in ("", "ai.onnx"))
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        for ins, outs in t.data_sets:
            it = iter(ins)
            inputs = [next(it) if name else None for name in n.input]
            out.append(record(t.name, n.op_type, opset, attrs, inputs, outs))
    return out


def reference(op, opset, attrs, inputs, name):
    """Runs one node with ONNX's reference; None inputs are absent."""
    names = [f"i{k}" if a is not None else "" for k, a in enumerate(inputs)]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(op, names, ["y"], **attrs)
    graph_inputs = [helper.make_tensor_value_info(nm, ONNX_DT[np.asarray(a).dtype], np.asarray(a).shape)
                    for nm, a in zip(names, inputs) if nm]
    graph = helper.make_graph([node], name, graph_inputs,
                              [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {nm: a for nm, a in zip(names, inputs) if nm}
    ev = ReferenceEvaluator(model)
    node_rt = ev.rt_nodes_[0]
    if op == "Resize" and hasattr(node_rt, "cubic_coeff_a"):
        # the node tests (and ONNX's generator) compute cubic coefficients with a Python float;
        # the evaluator would hand the attribute over as np.float32 and compute them in f32
        node_rt.cubic_coeff_a = float(node_rt.cubic_coeff_a)
    (y,) = ev.run(None, feeds)
    return record(name, op, opset, attrs, inputs[:len(names)], [y])


def extra_cases(rng):
    out = []

    def add(op, opset, attrs, inputs, name):
        try:
            out.append(reference(op, opset, attrs, inputs, name))
        except Exception as e:  # a configuration the reference refuses: skip it
            print(f"skip {name}: {type(e).__name__}: {e}", file=sys.stderr)

    def data(shape, dt):
        if np.dtype(dt).kind == "f":
            return (rng.standard_normal(shape) * 4).astype(dt)
        if dt == np.bool_:
            return rng.integers(0, 2, shape).astype(dt)
        lo, hi = (0, 250) if dt == np.uint8 else (-100, 100)
        return rng.integers(lo, hi, shape).astype(dt)

    # Resize: every mode x coordinate mode, scales and sizes, up and down, several ranks
    cmodes = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
              "half_pixel_symmetric", "tf_crop_and_resize"]
    k = 0
    for mode in ["nearest", "linear", "cubic"]:
        for cm in cmodes:
            for trial in range(4):
                rank = [2, 3, 4, 4][trial]
                shape = [int(x) for x in rng.integers(1, 6, rank)]
                if rank == 4:
                    shape[0] = 1
                dt = [np.float32, np.float32, np.float64, np.uint8][trial] if mode != "nearest" else \
                    [np.float32, np.int64, np.float16, np.uint8][trial]
                x = data(shape, dt)
                attrs = {"mode": mode, "coordinate_transformation_mode": cm}
                if mode == "nearest":
                    attrs["nearest_mode"] = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"][trial]
                if mode == "cubic":
                    attrs["cubic_coeff_a"] = [-0.75, -0.5, -0.75, -0.6][trial]
                if trial % 2 == 1 and mode != "nearest":
                    attrs["exclude_outside"] = 1
                roi = None
                if cm == "tf_crop_and_resize":
                    lo = rng.uniform(-0.3, 0.5, rank).astype(np.float32)
                    hi = (lo + rng.uniform(0.3, 1.0, rank)).astype(np.float32)
                    roi = np.concatenate([lo, hi]).astype(np.float32)
                    attrs["extrapolation_value"] = float(np.float32(rng.uniform(-5, 5)))
                if trial % 2 == 0:
                    scales = rng.choice([0.5, 0.6, 1.0, 1.5, 2.0, 2.5, 3.0, 0.75], rank).astype(np.float32)
                    inputs = [x, roi if roi is not None else np.array([], np.float32), scales]
                else:
                    sizes = np.array([max(1, int(round(d * rng.choice([0.5, 1.0, 1.7, 2.0, 3.0])))) for d in shape],
                                     np.int64)
                    inputs = [x, roi if roi is not None else np.array([], np.float32),
                              np.array([], np.float32), sizes]
                    if roi is None and trial == 3:
                        inputs[1] = None
                        inputs[2] = None
                add("Resize", 19, attrs, inputs, f"x_resize_{k}_{mode}_{cm}")
                k += 1
    # antialias downscaling, axes, keep_aspect_ratio_policy
    for trial in range(8):
        mode = ["linear", "cubic"][trial % 2]
        x = data([1, 2, 9, 8], np.float32)
        attrs = {"mode": mode, "antialias": 1}
        if trial >= 4:
            attrs["exclude_outside"] = 1
        scales = np.array([1, 1, [0.5, 0.3, 0.25, 0.7][trial % 4], [0.4, 0.6, 0.2, 0.5][trial % 4]], np.float32)
        add("Resize", 19, attrs, [x, None, scales], f"x_resize_aa_{trial}")
    for trial, (axes, pol) in enumerate([([2, 3], "not_larger"), ([3, 2], "not_smaller"), ([3, 1], "stretch"),
                                         ([1], "not_larger")]):
        x = data([1, 3, 4, 5], np.float32)
        sizes = np.array([7, 3][:len(axes)], np.int64)
        attrs = {"mode": "linear", "axes": axes, "keep_aspect_ratio_policy": pol}
        add("Resize", 19, attrs, [x, None, None, sizes], f"x_resize_axes_{trial}")
    for trial in range(3):
        x = data([2, 3, 4], np.float32)
        roi = np.array([0.1, 0.2, 0.9, 0.7], np.float32)
        attrs = {"mode": ["linear", "nearest", "cubic"][trial], "axes": [1, 2],
                 "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 2.5}
        add("Resize", 19, attrs, [x, roi, None, np.array([5, 3], np.int64)], f"x_resize_roi_axes_{trial}")
    # Resize 10 / Upsample 9 integer scales (their references agree with asymmetric floor)
    x = data([1, 1, 2, 3], np.float32)
    add("Upsample", 9, {"mode": "nearest"}, [x, np.array([1, 1, 2, 3], np.float32)], "x_upsample_9")

    # Pad: every mode, pads wider than the axis, axes input, constant value input, dtypes
    for trial in range(16):
        mode = ["constant", "reflect", "edge", "wrap"][trial % 4]
        dt = [np.float32, np.int32, np.float16, np.int8][trial // 4]
        shape = [int(x) for x in rng.integers(1, 5, 3)]
        x = data(shape, dt)
        pads = rng.integers(0, 7, 6).astype(np.int64)
        inputs = [x, pads]
        if mode == "constant" and trial % 8 == 0:
            inputs.append(np.array(3, dtype=dt))
        add("Pad", 19, {"mode": mode}, inputs, f"x_pad_{trial}_{mode}")
    x = data([2, 3, 4], np.float32)
    add("Pad", 19, {"mode": "reflect"}, [x, np.array([3, 1, 2, 5], np.int64), None, np.array([-1, 1], np.int64)],
        "x_pad_axes")
    add("Pad", 2, {"mode": "constant", "pads": [1, 0, 2, 0, 1, 1], "value": 1.5}, [x], "x_pad_attr")

    # Gather family
    for trial in range(6):
        dt = [np.float32, np.int8, np.float16, np.int64, np.bool_, np.float64][trial]
        shape = [int(x) for x in rng.integers(1, 5, 1 + trial % 3)]
        axis = int(rng.integers(-len(shape), len(shape)))
        d = shape[axis]
        it = np.int32 if trial % 2 else np.int64
        idx = rng.integers(-d, d, [int(x) for x in rng.integers(1, 4, trial % 3)]).astype(it)
        add("Gather", 13, {"axis": axis}, [data(shape, dt), idx], f"x_gather_{trial}")
        ishape = list(shape)
        ishape[axis] = int(rng.integers(1, 4))
        idx = rng.integers(-d, d, ishape).astype(it)
        add("GatherElements", 13, {"axis": axis % len(shape)}, [data(shape, dt), idx], f"x_gather_elements_{trial}")
    for trial, (dshape, ishape, b) in enumerate([([3, 4, 2], [5, 2], 0), ([2, 3, 4], [2, 4, 1], 1),
                                                 ([2, 3, 4, 2], [2, 3, 1, 1], 2), ([4, 3], [2, 2, 2], 0)]):
        d = np.array(dshape[b:])
        k = ishape[-1]
        idx = np.stack([rng.integers(-d[j], d[j], ishape[:-1]) for j in range(k)], -1).astype(np.int64)
        add("GatherND", 13, {"batch_dims": b}, [data(dshape, np.float32), idx], f"x_gathernd_{trial}")

    # Scatter family: reductions on floats and integers, duplicates
    for trial in range(10):
        red = ["none", "add", "mul", "max", "min"][trial % 5]
        dt = np.float32 if trial < 5 else np.int32
        x = data([4, 5], dt)
        axis = trial % 2
        idx = rng.integers(-x.shape[axis], x.shape[axis], [3, 5] if axis == 0 else [4, 3]).astype(np.int64)
        if red == "none":  # unique indices: duplicates are undefined
            idx = np.stack([rng.permutation(x.shape[axis])[:3] for _ in range(5)], 1) if axis == 0 else \
                np.stack([rng.permutation(x.shape[axis])[:3] for _ in range(4)], 0)
        upd = data(idx.shape, dt)
        add("ScatterElements", 18, {"axis": axis, "reduction": red}, [x, idx, upd], f"x_scatter_elements_{trial}")
        x = data([4, 3, 2], dt)
        idx = rng.integers(0, 4, [3, 1]).astype(np.int64) if red != "none" else \
            rng.permutation(4)[:3].reshape(3, 1).astype(np.int64)
        upd = data([3, 3, 2], dt)
        add("ScatterND", 18, {"reduction": red}, [x, idx, upd], f"x_scatternd_{trial}")

    # layout ops
    for trial in range(4):
        mode = ["DCR", "CRD"][trial % 2]
        dt = [np.float32, np.uint8][trial // 2]
        b = 2 + trial % 2
        add("DepthToSpace", 13, {"blocksize": b, "mode": mode}, [data([2, 2 * b * b, 2, 3], dt)], f"x_d2s_{trial}")
        add("SpaceToDepth", 28, {"blocksize": b, "mode": mode}, [data([2, 3, 2 * b, b], dt)], f"x_s2d_{trial}")
    for trial in range(4):
        it = [np.int64, np.int32, np.float32, np.int8][trial]
        idx = rng.integers(-5, 6, [2, 3]).astype(it)
        depth = np.array(4, [np.int64, np.float32, np.int32, np.float64][trial])
        # exact values: the reference computes hit * (on - off) + off, which may round
        vals = (rng.integers(-8, 8, [2]) / 2).astype([np.float32, np.int64, np.float16, np.uint8][trial])
        add("OneHot", 11, {"axis": [-1, 0, 1, 2][trial]}, [idx, depth, vals], f"x_onehot_{trial}")
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "fixtures", "onnx_cases.txt")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    cases = node_tests() + extra_cases(np.random.default_rng(7))
    with open(path, "w") as f:
        f.write(f"# generated by scripts/gen_onnx_cases.py (onnx {onnx.__version__}); {len(cases)} cases\n")
        f.write("\n".join(cases) + "\n")
    print(f"{len(cases)} cases -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
