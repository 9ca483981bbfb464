#!/usr/bin/env python3
"""Traces an ONNX backend node test through umd: runs its model (`umd.Graph`) with every node
output as a graph output, on umd and on onnx's reference evaluator, and prints each node whose
outputs differ (how many values, by how much). For a Softmax that differs, also compares both
with the f64 softmax correctly rounded to the output dtype.

    clients/python/.venv/bin/python scripts/trace_test.py test_attention_3d_causal_bf16_expanded \\
        --umd target/debug/umd

How CONFORMANCE.md's "traced" notes (scripts/conformance.py, NOTES) were established.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx.backend.test.loader import load_model_tests
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "clients", "python"))
import conformance  # noqa: E402
from umd_client.client import Client  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("test")
    ap.add_argument("--umd", default="target/debug/umd")
    args = ap.parse_args()
    found = [t for t in load_model_tests(kind="node") if t.name == args.test]
    if not found:
        raise SystemExit(f"no node test named {args.test}")
    t = found[0]
    m = t.model
    known = {o.name for o in m.graph.output}
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in known and o in inferred:
                m.graph.output.append(inferred[o])
                known.add(o)
    inputs = {i.name: v for i, v in zip(m.graph.input, t.data_sets[0][0])}
    names = [o.name for o in m.graph.output]
    ref = dict(zip(names, ReferenceEvaluator(m).run(None, inputs)))
    proc, addr = conformance.start_server(args.umd)
    try:
        with Client(addr) as c:
            got = c.load_model(m.SerializeToString()).run(inputs)
    finally:
        proc.kill()
    same = True
    for n in m.graph.node:
        for o in n.output:
            if o not in got or o not in ref:
                continue
            a, b = np.asarray(got[o]), np.asarray(ref[o])
            if a.dtype.kind in "biu" or a.dtype == bool:
                if not np.array_equal(a, b):
                    same = False
                    print(f"{n.op_type} -> {o}: {(a != b).sum()} of {a.size} differ")
                continue
            d = np.nan_to_num(np.abs(a.astype(np.float64) - b.astype(np.float64)), nan=0.0)
            if d.max() > 0:
                same = False
                print(f"{n.op_type} -> {o} ({a.dtype}): {(d > 0).sum()} of {a.size} differ, "
                      f"max {d.max():.3g}")
                if n.op_type == "Softmax":
                    axis = next((onnx.helper.get_attribute_value(x) for x in n.attribute
                                 if x.name == "axis"), -1)
                    x = np.asarray(ref[n.input[0]]).astype(np.float64)
                    e = np.exp(x - x.max(axis=axis, keepdims=True))
                    exact = (e / e.sum(axis=axis, keepdims=True)).astype(a.dtype)
                    print(f"  against the f64 softmax rounded to {a.dtype}: umd differs in "
                          f"{(a != exact).sum()}, the reference in {(b != exact).sum()}")
    if same:
        print("every node output equals the reference evaluator's")


if __name__ == "__main__":
    main()
