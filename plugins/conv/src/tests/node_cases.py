#!/usr/bin/env python3
"""Writes the ONNX backend node-test cases of this plugin's ops (from onnx's own generators,
numpy seed 0) in the line format `node_cases.rs` reads:

    case NAME OP OUTPUTS
    attr NAME ints|int|text VALUE...
    input DTYPE DIMS... | VALUES...
    output DTYPE DIMS... | VALUES...

Usage: node_cases.py OUT [MAX_ELEMENTS]  (cases with more input elements are left out).
"""
import importlib
import sys

import numpy as np
import onnx
from onnx.backend.test.case.base import Base

MODULES = ["conv", "convtranspose", "maxpool", "averagepool", "lppool",
           "globalaveragepool", "globalmaxpool", "convinteger", "qlinearconv", "deformconv"]
DT = {"float32": "f32", "uint8": "u8", "int8": "i8", "int32": "i32", "int64": "i64",
      "float64": "f64"}


def main():
    out = open(sys.argv[1], "w")
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 60

    def expect(node, inputs, outputs, name, **_):
        inputs = [np.asarray(i) for i in inputs]
        outputs = [np.asarray(o) for o in outputs]
        if sum(i.size for i in inputs) > limit:
            return
        out.write(f"case {name} {node.op_type} {len(node.output)}\n")
        for a in node.attribute:
            v = onnx.helper.get_attribute_value(a)
            if isinstance(v, bytes):
                out.write(f"attr {a.name} text {v.decode()}\n")
            elif isinstance(v, int):
                out.write(f"attr {a.name} int {v}\n")
            else:
                out.write(f"attr {a.name} ints {' '.join(map(str, v))}\n")
        for kind, ts in (("input", inputs), ("output", outputs)):
            for t in ts:
                vals = " ".join(repr(float(v)) if t.dtype.kind == "f" else str(int(v))
                                for v in t.flatten())
                out.write(f"{kind} {DT[t.dtype.name]} {' '.join(map(str, t.shape))} | {vals}\n")

    for m in MODULES:
        mod = importlib.import_module("onnx.backend.test.case.node." + m)
        mod.expect = expect
        for cls in vars(mod).values():
            if isinstance(cls, type) and issubclass(cls, Base) and cls is not Base:
                for f in sorted(dir(cls)):
                    if f.startswith("export"):
                        np.random.seed(0)
                        getattr(cls, f)()


main()
