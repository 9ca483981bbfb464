#!/usr/bin/env python3
"""Writes cases for the reduce plugin's cross-check test (src/tests/xcheck.rs): every op of the
plugin over many dtypes, shapes and attributes, with outputs from the ONNX reference evaluator.

    /work/venv/bin/python plugins/reduce/scripts/xcheck_gen.py /tmp/cases.txt
    REDUCE_XCHECK=/tmp/cases.txt cargo test -p umd-plugin-reduce xcheck -- --nocapture

Known differences (reported, and accepted by the test): the integer mean of an empty set (the
reference casts NaN to int, giving INT_MIN; the plugin gives 0), ReduceMax of an empty bool set
under opset < 20 (the reference fills -inf cast to bool = True; opset 20 says False), and
ReduceSumSquare's output dtype on int32 (the reference widens to int64).
"""
import sys
import numpy as np, onnx, itertools
from onnx import helper, TensorProto
from onnx.reference import ReferenceEvaluator
rng = np.random.default_rng(0)
NP2ONNX = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, np.float64: TensorProto.DOUBLE,
           np.int32: TensorProto.INT32, np.int64: TensorProto.INT64, np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8, np.bool_: TensorProto.BOOL}
NAME = {np.float32:'f32', np.float16:'f16', np.float64:'f64', np.int32:'i32', np.int64:'i64', np.int8:'i8', np.uint8:'u8', np.bool_:'bool'}
out = open(sys.argv[1] if len(sys.argv) > 1 else 'cases.txt', 'w')
def fmt(a):
    return ' '.join(repr(float(v)) for v in np.asarray(a).ravel())
def emit(name, op, opset, attrs, x, const, const_scalar, outputs):
    out.write(f'case {name}\nop {op} {opset}\n')
    for k,v in attrs.items():
        if isinstance(v, list): out.write(f'attr {k} ints {",".join(map(str,v))}\n')
        else: out.write(f'attr {k} int {v}\n')
    out.write(f'input {NAME[x.dtype.type]} {",".join(map(str,x.shape))} : {fmt(x)}\n')
    if const is not None:
        out.write(f'const {"scalar" if const_scalar else len(const)} : {" ".join(map(str,const))}\n')
    for o in outputs:
        out.write(f'output {NAME[o.dtype.type]} {",".join(map(str,o.shape))} : {fmt(o)}\n')
    out.write('end\n')
n = 0
def run(op, opset, attrs, x, const=None, const_scalar=False, nout=1):
    global n
    inputs = ['x'] + (['c'] if const is not None else [])
    outs = [f'y{i}' for i in range(nout)]
    node = helper.make_node(op, inputs, outs, **attrs)
    vi = [helper.make_tensor_value_info('x', NP2ONNX[x.dtype.type], x.shape)]
    if const is not None:
        vi.append(helper.make_tensor_value_info('c', TensorProto.INT64, [] if const_scalar else [len(const)]))
    g = helper.make_graph([node], 'g', vi, [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)])
    feeds = {'x': x}
    if const is not None:
        feeds['c'] = np.array(const[0] if const_scalar else const, dtype=np.int64)
    try:
        res = ReferenceEvaluator(m).run(None, feeds)
    except Exception as e:
        return
    n += 1
    emit(f'{op}-{n}', op, opset, attrs, x, const, const_scalar, res)

def data(shape, dt, kind='normal'):
    if dt == np.bool_: return rng.integers(0, 2, shape).astype(dt)
    if dt == np.uint8: return rng.integers(0, 20, shape).astype(dt)
    if np.issubdtype(dt, np.integer): return rng.integers(-3, 4, shape).astype(dt)
    if kind == 'pos': return (rng.uniform(0.5, 3, shape)).astype(dt)
    return (rng.integers(-40, 40, shape) / 8).astype(dt)

shapes_axes = [((3,4,5),[1]), ((3,4,5),[0,2]), ((3,4,5),[-1]), ((3,4,5),[]), ((2,0,4),[1]), ((2,0,4),[2]), ((2,3,4,5),[1,3]), ((6,37),[1]), ((37,6),[0])]
reds = ['ReduceSum','ReduceMean','ReduceMax','ReduceMin','ReduceProd','ReduceL1','ReduceL2','ReduceSumSquare','ReduceLogSum','ReduceLogSumExp']
for op in reds:
    dts = [np.float32, np.float16, np.float64, np.int32, np.int64]
    if op in ('ReduceMax','ReduceMin'): dts += [np.int8, np.uint8, np.bool_]
    if op in ('ReduceLogSum','ReduceLogSumExp'): dts = [np.float32, np.float16, np.float64]
    new = 13 if op == 'ReduceSum' else 18
    for dt in dts:
        for shape, axes in shapes_axes:
            for keep in (0, 1):
                x = data(shape, dt, 'pos' if op == 'ReduceLogSum' else 'normal')
                if op == 'ReduceProd' and np.issubdtype(dt, np.floating): x = (x / 4).astype(dt)
                run(op, 20 if dt == np.bool_ else new, {'keepdims': keep}, x, axes, False)
                if axes:
                    run(op, 11, {'keepdims': keep, 'axes': axes}, x)
                else:
                    run(op, 11, {'keepdims': keep}, x)
        x = data((3,4), dt, 'pos' if op == 'ReduceLogSum' else 'normal')
        run(op, 20 if dt == np.bool_ else new, {'keepdims': 1, 'noop_with_empty_axes': 1}, x, [], False)
for op in ['ArgMax','ArgMin']:
    for dt in [np.float32, np.float16, np.float64, np.int32, np.int64, np.int8, np.uint8]:
        for shape in [(2,2),(3,4,5),(4,300)]:
            for axis in range(-len(shape), len(shape)):
                for keep, last in [(0,0),(1,1),(1,0)]:
                    run(op, 13, {'axis': axis, 'keepdims': keep, 'select_last_index': last}, data(shape, dt))
for dt in [np.float32, np.float16, np.float64, np.int32, np.int64]:
    for shape in [(5,),(2,3),(3,4,5)]:
        for axis in range(-len(shape), len(shape)):
            for ex, rev in itertools.product((0,1),(0,1)):
                run('CumSum', 14, {'exclusive': ex, 'reverse': rev}, data(shape, dt), [axis], True)
for dt in [np.float32, np.float16, np.float64, np.int32, np.int64, np.int8, np.uint8]:
    for shape in [(4,),(3,4),(2,5,3),(3,50)]:
        for axis in range(-len(shape), len(shape)):
            r = shape[axis]
            for k in sorted({0, 1, r//2, r}):
                for largest in (0, 1):
                    run('TopK', 11, {'axis': axis, 'largest': largest}, data(shape, dt), [k], False, nout=2)
    run('TopK', 1, {'k': 2, 'axis': 0}, data((5,), dt), None, False, nout=2)
print(n, 'cases')
