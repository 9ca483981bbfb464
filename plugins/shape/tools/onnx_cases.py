#!/usr/bin/env python3
"""Dumps the ONNX backend node-test cases of the shape plugin's ops as a line-based text file
that the `onnx_node_cases` test reads (set UMD_SHAPE_ONNX_CASES to its path):

    /work/venv/bin/python plugins/shape/tools/onnx_cases.py /tmp/shape-cases.txt
    UMD_SHAPE_ONNX_CASES=/tmp/shape-cases.txt cargo test -p umd-plugin-shape onnx_node_cases

Cases with a dtype umd has no counterpart for (int4, float4, strings...) are left out.
"""
import sys

import numpy as np
from onnx import AttributeProto, TensorProto, numpy_helper
from onnx.backend.test.case import node

OPS = {"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Identity", "Cast",
       "CastLike", "ConstantOfShape", "Constant", "Range", "Shape", "Size", "Tile", "Concat",
       "Split", "Slice", "EyeLike", "Trilu"}
DT = {TensorProto.FLOAT: "f32", TensorProto.UINT8: "u8", TensorProto.INT8: "i8",
      TensorProto.INT32: "i32", TensorProto.INT64: "i64", TensorProto.BOOL: "bool",
      TensorProto.FLOAT16: "f16", TensorProto.DOUBLE: "f64", TensorProto.BFLOAT16: "bf16",
      TensorProto.INT16: "i16", TensorProto.UINT16: "u16", TensorProto.UINT32: "u32",
      TensorProto.UINT64: "u64", TensorProto.FLOAT8E4M3FN: "f8e4m3fn",
      TensorProto.FLOAT8E4M3FNUZ: "f8e4m3fnuz", TensorProto.FLOAT8E5M2: "f8e5m2",
      TensorProto.FLOAT8E5M2FNUZ: "f8e5m2fnuz", TensorProto.FLOAT8E8M0: "f8e8m0"}


class Skip(Exception):
    pass


def tensor(t):
    if t.data_type not in DT:
        raise Skip(f"dtype {t.data_type}")
    a = numpy_helper.to_array(t)
    dims = ",".join(str(d) for d in t.dims) or "-"
    return f"{DT[t.data_type]} {dims} {np.ascontiguousarray(a).tobytes().hex() or '-'}"


def attr(a):
    if a.type == AttributeProto.INT:
        return f"i {a.i}"
    if a.type == AttributeProto.INTS:
        return "is " + " ".join(str(v) for v in a.ints)
    if a.type == AttributeProto.FLOAT:
        return f"f {a.f!r}"
    if a.type == AttributeProto.FLOATS:
        return "fs " + " ".join(repr(v) for v in a.floats)
    if a.type == AttributeProto.STRING:
        return "s " + a.s.decode()
    if a.type == AttributeProto.TENSOR:
        return "t " + tensor(a.t)
    raise Skip(f"attribute type {a.type}")


def main(path):
    lines, kept, skipped = [], 0, 0
    for c in node.collect_testcases(None):
        g = c.model.graph
        if len(g.node) != 1 or g.node[0].op_type not in OPS or not c.data_sets:
            continue
        n = g.node[0]
        opset = next((o.version for o in c.model.opset_import if o.domain in ("", "ai.onnx")), 0)
        try:
            body = [f"case {c.name} {n.op_type} {opset} {len(n.output)}"]
            body += [f"attr {a.name} {attr(a)}" for a in n.attribute]
            inputs, outputs = c.data_sets[0]
            it = iter(inputs)
            for name in n.input:
                body.append("in none" if name == "" else "in " + tensor(as_proto(next(it))))
            for o in outputs:
                body.append("out " + tensor(as_proto(o)))
            body.append("end")
            lines += body
            kept += 1
        except (Skip, TypeError, ValueError) as e:
            skipped += 1
            print(f"skip {c.name}: {e}", file=sys.stderr)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{kept} cases written to {path}, {skipped} skipped")


def as_proto(x):
    if isinstance(x, TensorProto):
        return x
    if isinstance(x, list):
        raise Skip("sequence input")
    return numpy_helper.from_array(np.asarray(x))


if __name__ == "__main__":
    main(sys.argv[1])
