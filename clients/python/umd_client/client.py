"""A small typed wrapper over the generated umd stubs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence

import grpc
import numpy as np

from . import umd_pb2 as pb
from . import umd_pb2_grpc as rpc

STATUS_OK = 0
STATUS_UNSUPPORTED = 2
STATUS_INTERNAL = 7

_NP_DTYPES = {
    "float32": "f32",
    "float16": "f16",
    "float64": "f64",
    "int32": "i32",
    "int64": "i64",
    "int8": "i8",
    "uint8": "u8",
    "bool": "bool",
    "int16": "i16",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
}
try:  # bf16, the 8-bit floats and the packed sub-byte types come from ml_dtypes (onnx's dep)
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - then those dtypes are refused by name
    _mld = None
if _mld is not None:
    _NP_DTYPES.update({
        "bfloat16": "bf16",
        "float8_e4m3fn": "f8e4m3fn",
        "float8_e4m3fnuz": "f8e4m3fnuz",
        "float8_e5m2": "f8e5m2",
        "float8_e5m2fnuz": "f8e5m2fnuz",
        "float8_e8m0fnu": "f8e8m0",
        "int4": "i4",
        "uint4": "u4",
        "int2": "i2",
        "uint2": "u2",
        "float4_e2m1fn": "f4e2m1",
    })
_UMD_TO_NP = {v: k for k, v in _NP_DTYPES.items()}
#: Bits per element of umd's packed dtypes (ABI 1.4): stored 8/bits per byte, lowest bits
#: first, as ONNX packs them; numpy (ml_dtypes) holds one element per byte.
PACKED_BITS = {"i4": 4, "u4": 4, "f4e2m1": 4, "i2": 2, "u2": 2}


def pack_codes(codes: np.ndarray, bits: int) -> bytes:
    """One code per byte (its low `bits` bits) -> umd's (and ONNX's) packed layout."""
    per = 8 // bits
    c = codes.ravel().astype(np.uint8) & np.uint8((1 << bits) - 1)
    c = np.concatenate([c, np.zeros((-len(c)) % per, np.uint8)]).reshape(-1, per)
    out = np.zeros(len(c), np.uint8)
    for k in range(per):
        out |= c[:, k] << np.uint8(k * bits)
    return out.tobytes()


def unpack_codes(data: bytes, bits: int, n: int) -> np.ndarray:
    """The packed layout -> its first `n` codes, one per byte."""
    b = np.frombuffer(data, np.uint8)
    codes = np.stack([(b >> np.uint8(k * bits)) & np.uint8((1 << bits) - 1)
                      for k in range(8 // bits)], axis=1).ravel()
    return codes[:n]


def _np_dtype(umd_dtype: str) -> np.dtype:
    name = _UMD_TO_NP.get(umd_dtype)
    if name is None:
        raise UmdError(7, f"dtype {umd_dtype} has no numpy type here (install ml_dtypes)")
    return np.dtype(getattr(_mld, name)) if _mld is not None and hasattr(_mld, name) \
        else np.dtype(name)


def _c(a) -> np.ndarray:
    """`a` as a C-contiguous array, keeping a 0-d array 0-d (np.ascontiguousarray makes it 1-d)."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else a.copy(order="C")


def is_strings(array: np.ndarray) -> bool:
    """Whether an array holds strings (numpy `str`/`bytes`/object arrays): umd dtype "string"."""
    return array.dtype.kind in "USO"


def encode_strings(array: np.ndarray) -> bytes:
    """A string array in umd's layout (ABI 1.5): one little-endian u64 *end* offset per element,
    then the UTF-8 text (bytes items as they are)."""
    items = [s if isinstance(s, bytes) else str(s).encode("utf-8") for s in _c(array).ravel()]
    ends = np.cumsum([len(s) for s in items], dtype=np.uint64) if items else \
        np.zeros(0, dtype=np.uint64)
    return ends.astype("<u8").tobytes() + b"".join(items)


def decode_strings(data: bytes, shape: Sequence[int]) -> np.ndarray:
    """umd's bytes of a string tensor as an object array of `str`."""
    n = int(np.prod(shape)) if len(shape) else 1
    ends = np.frombuffer(data[:8 * n], dtype="<u8")
    text, start, out = data[8 * n:], 0, []
    for e in ends.tolist():
        out.append(text[start:e].decode("utf-8"))
        start = e
    return np.array(out, dtype=object).reshape(tuple(shape))


def to_bytes(array: np.ndarray) -> bytes:
    """An array's contents as umd stores them (packed for the sub-byte types, offsets and text
    for strings)."""
    array = _c(array)
    if is_strings(array):
        return encode_strings(array)
    bits = PACKED_BITS.get(_NP_DTYPES.get(str(array.dtype), ""))
    if bits is None:
        return array.tobytes()
    return pack_codes(array.view(np.uint8), bits)


def from_bytes(data: bytes, shape: Sequence[int], umd_dtype: str) -> np.ndarray:
    """umd's bytes of a tensor as an array of `shape` (unpacking the sub-byte types; strings as
    an object array of `str`)."""
    if umd_dtype == "string":
        return decode_strings(data, shape)
    dt = _np_dtype(umd_dtype)
    n = int(np.prod(shape)) if len(shape) else 1
    bits = PACKED_BITS.get(umd_dtype)
    if bits is None:
        return np.frombuffer(data, dtype=dt)[:n].reshape(tuple(shape)).copy()
    return unpack_codes(data, bits, n).view(dt).reshape(tuple(shape)).copy()

#: Bytes per WriteBuffer message (well under gRPC's 4 MiB default).
CHUNK = 1 << 20
#: Tries in a row that bring no bytes before a buffer read fails (each resumes where the last
#: stream ended).
READ_ATTEMPTS = 4


def _byte_len(shape: Sequence[int], umd_dtype: str) -> int:
    """Bytes a tensor of a fixed-size dtype takes in a umd buffer (packed dtypes rounded up)."""
    n = int(np.prod(shape)) if len(shape) else 1
    bits = PACKED_BITS.get(umd_dtype)
    if bits is not None:
        return (n * bits + 7) // 8
    return n * _np_dtype(umd_dtype).itemsize


class UmdError(RuntimeError):
    """A non-zero umd status, with its readable message."""

    def __init__(self, status: int, msg: str):
        super().__init__(f"umd status {status}: {msg}")
        self.status = status
        self.msg = msg


@dataclass
class Translation:
    command_buffer: bytes
    kernel_name: str
    plugin: str
    outputs: List[pb.TensorDesc]
    request_id: int


def desc(array_or_shape, dtype: Optional[str] = None, name: str = "") -> pb.TensorDesc:
    """A TensorDesc from a numpy array, or from a shape and a dtype name."""
    if isinstance(array_or_shape, np.ndarray):
        shape = array_or_shape.shape
        dtype = dtype or ("string" if is_strings(array_or_shape)
                          else _NP_DTYPES[str(array_or_shape.dtype)])
    else:
        shape = tuple(array_or_shape)
    return pb.TensorDesc(name=name, shape=list(shape), dtype=dtype or "float32")


def _request(op: str, inputs: Sequence, attributes: Optional[Dict[str, object]], request_id: int,
             target: str = "") -> pb.TranslateRequest:
    descs = [x if isinstance(x, pb.TensorDesc) else desc(x) for x in inputs]
    attrs = {k: str(v) for k, v in (attributes or {}).items()}
    return pb.TranslateRequest(op_type=op, inputs=descs, attributes=attrs, request_id=request_id,
                               target=target)


class Client:
    """A connection to ``umd serve``."""

    def __init__(self, address: str = "127.0.0.1:50051", device: str = ""):
        self.channel = grpc.insecure_channel(address)
        self.translator = rpc.TranslatorStub(self.channel)
        self.device_stub = rpc.DeviceStub(self.channel)
        self.device = device

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- translation ---------------------------------------------------------------------------

    def translate(self, op: str, inputs: Sequence, attributes: Optional[Dict[str, object]] = None,
                  request_id: int = 0, target: str = "") -> Translation:
        """Translates one op; raises UmdError on a non-zero status."""
        r = self.translator.Translate(_request(op, inputs, attributes, request_id, target))
        if r.status != STATUS_OK:
            raise UmdError(r.status, r.msg)
        return Translation(r.command_buffer, r.kernel_name, r.plugin, list(r.outputs), r.request_id)

    def batch(self, requests: Iterable[tuple]) -> Iterator[pb.TranslateResponse]:
        """Streams (op, inputs[, attributes]) tuples through SubmitBatch; yields each response
        (with its own status) in request order as it arrives."""

        def items():
            for i, item in enumerate(requests):
                op, inputs, *rest = item
                yield pb.SubmitRequest(request=_request(op, inputs, rest[0] if rest else None, i))

        for resp in self.translator.SubmitBatch(items()):
            yield resp.response

    # -- buffers and execution ---------------------------------------------------------------

    def upload(self, array: np.ndarray) -> str:
        """Copies an array into a new device buffer; returns its handle."""
        data = to_bytes(array)
        r = self.device_stub.CreateBuffer(pb.CreateBufferRequest(device=self.device, bytes=len(data)))
        if r.status != STATUS_OK:
            raise UmdError(r.status, r.msg)

        def chunks():
            yield pb.WriteChunk(device=self.device, handle=r.handle, data=data[:CHUNK])
            for off in range(CHUNK, len(data), CHUNK):
                yield pb.WriteChunk(data=data[off:off + CHUNK])

        w = self.device_stub.WriteBuffer(chunks())
        if w.status != STATUS_OK:
            raise UmdError(w.status, w.msg)
        return r.handle

    def download(self, handle: str, shape: Sequence[int], dtype: str) -> np.ndarray:
        """Reads a device buffer into an array of `shape` and umd dtype name `dtype`.

        The bytes the tensor takes are read explicitly and counted (a string tensor's from its
        end offsets): grpcio can end a server stream early without raising when one message
        fails to decode (grpc/grpc#34670), so a short read resumes from the offset reached and
        fails loudly — after READ_ATTEMPTS tries in a row that bring nothing — instead of
        returning a truncated tensor."""
        if dtype == "string":
            n = int(np.prod(shape)) if len(shape) else 1
            head = self._read_exactly(handle, 0, 8 * n)
            text = int(np.frombuffer(head[-8:], dtype="<u8")[0]) if n else 0
            data = head + self._read_exactly(handle, 8 * n, text)
        else:
            data = self._read_exactly(handle, 0, _byte_len(shape, dtype))
        return from_bytes(data, shape, dtype)

    def _read_exactly(self, handle: str, offset: int, need: int) -> bytes:
        """`need` bytes of a buffer from `offset`, resuming a stream that ends early."""
        data = bytearray()
        idle = 0
        while len(data) < need:
            before = len(data)
            for c in self.device_stub.ReadBuffer(pb.ReadRequest(
                    device=self.device, handle=handle, offset=offset + len(data),
                    length=need - len(data), chunk_bytes=CHUNK)):
                data += c.data
            idle = 0 if len(data) > before else idle + 1
            if idle >= READ_ATTEMPTS:
                raise UmdError(STATUS_INTERNAL,
                               f"read of buffer {handle} stopped at {offset + len(data)} of "
                               f"{offset + need} bytes: {READ_ATTEMPTS} tries brought nothing")
        return bytes(data)

    def free(self, handle: str) -> None:
        self.device_stub.FreeBuffer(pb.BufferRequest(device=self.device, handle=handle))

    def execute(self, op: str, handles: Sequence[str], descs: Sequence[pb.TensorDesc],
                attributes: Optional[Dict[str, object]] = None) -> pb.ExecuteResponse:
        """Runs an op on device buffers and waits; returns output handles and descriptions."""
        r = self.device_stub.Execute(pb.ExecuteRequest(
            device=self.device, op=_request(op, descs, attributes, 0), inputs=list(handles),
            wait=True))
        if r.status != STATUS_OK:
            raise UmdError(r.status, r.msg)
        return r

    def run(self, op: str, *arrays: np.ndarray, attributes: Optional[Dict[str, object]] = None
            ) -> List[np.ndarray]:
        """Uploads the arrays, runs the op, downloads every output, frees everything."""
        handles = [self.upload(a) for a in arrays]
        try:
            r = self.execute(op, handles, [desc(a) for a in arrays], attributes)
            outs = [self.download(h, d.shape, d.dtype) for h, d in zip(r.outputs, r.output_descs)]
            for h in r.outputs:
                self.free(h)
            return outs
        finally:
            for h in handles:
                self.free(h)

    # -- models (umd.Graph) ---------------------------------------------------------------------

    def load_model(self, path_or_bytes) -> "Model":
        """Loads an ONNX model (a path or its bytes) on the server; returns a :class:`Model`."""
        data = path_or_bytes if isinstance(path_or_bytes, (bytes, bytearray)) else \
            open(path_or_bytes, "rb").read()

        def chunks():
            yield pb.ModelChunk(device=self.device, data=bytes(data[:CHUNK]))
            for off in range(CHUNK, len(data), CHUNK):
                yield pb.ModelChunk(data=bytes(data[off:off + CHUNK]))

        r = rpc.GraphStub(self.channel).LoadModel(chunks())
        if r.status != STATUS_OK:
            raise UmdError(r.status, r.msg)
        return Model(self, r.handle, list(r.inputs), list(r.outputs))


def _map_value(m: dict, name: str, value_dtype: str) -> pb.MapValue:
    """A dict as a map input: int keys as int64, str keys as strings; values in the model's
    declared value type (as given when it declares none)."""
    keys = list(m.keys())
    if all(isinstance(k, str) for k in keys):
        k = np.array(keys, dtype=object)
    elif all(isinstance(k, (int, np.integer)) for k in keys):
        k = np.array(keys, dtype=np.int64)
    else:
        raise UmdError(3, f"`{name}`: map keys must be all int or all str")
    vals = list(m.values())
    if value_dtype == "string" or (not value_dtype and all(isinstance(x, str) for x in vals)):
        v = np.array(vals, dtype=object)
    elif value_dtype:
        v = np.array(vals, dtype=_np_dtype(value_dtype))
    else:
        v = np.array(vals)
    return pb.MapValue(keys=pb.TensorValue(desc=desc(k, name=name), data=to_bytes(k)),
                       values=pb.TensorValue(desc=desc(v, name=name), data=to_bytes(v)))


def _map_from(m: pb.MapValue) -> dict:
    """A map output as a dict of Python scalars (as onnxruntime returns maps)."""
    k = from_bytes(m.keys.data, list(m.keys.desc.shape), m.keys.desc.dtype)
    v = from_bytes(m.values.data, list(m.values.desc.shape), m.values.desc.dtype)
    return {(kk if isinstance(kk, str) else int(kk)):
            (vv if isinstance(vv, str) else vv.item()) for kk, vv in zip(k.tolist(), v)}


class Model:
    """A model loaded on the server: :meth:`run` it with named arrays; :meth:`unload` frees it."""

    def __init__(self, client: Client, handle: str, inputs, outputs):
        self.client, self.handle, self.inputs, self.outputs = client, handle, inputs, outputs
        self._stub = rpc.GraphStub(client.channel)
        self.peak_bytes = 0

    def run(self, inputs: Dict[str, object]) -> Dict[str, object]:
        """Runs the model; returns every output by name. A tensor is an array; a sequence (or
        an optional's value, for inputs and outputs the model declares as sequences or
        optionals) is a list of arrays; an optional without a value is ``None``; a map is a
        ``dict`` of scalars, a sequence of maps a list of them (as onnxruntime gives them)."""
        values, lists = [], []
        declared = {d.name: d.dtype for d in self.inputs}
        for name, v in inputs.items():
            if v is None:
                lists.append(pb.ValueList(name=name, none=True))
            elif isinstance(v, dict) or (isinstance(v, (list, tuple)) and v
                                         and all(isinstance(m, dict) for m in v)):
                maps = [v] if isinstance(v, dict) else v
                lists.append(pb.ValueList(name=name, maps=[
                    _map_value(m, name, declared.get(name, "")) for m in maps]))
            elif isinstance(v, (list, tuple)):
                lists.append(pb.ValueList(name=name, items=[
                    pb.TensorValue(desc=desc(_c(a), name=name),
                                   data=to_bytes(a)) for a in v]))
            else:
                arr = _c(v)
                values.append(pb.TensorValue(desc=desc(arr, name=name), data=to_bytes(arr)))
        r = self._stub.Run(pb.RunModelRequest(handle=self.handle, inputs=values,
                                              list_inputs=lists))
        if r.status != STATUS_OK:
            raise UmdError(r.status, r.msg)
        self.peak_bytes = r.peak_bytes
        out: Dict[str, object] = {}
        for t in r.outputs:
            out[t.desc.name] = from_bytes(t.data, list(t.desc.shape), t.desc.dtype)
        for v in r.list_outputs:
            if v.maps:
                maps = [_map_from(m) for m in v.maps]
                out[v.name] = maps[0] if v.map else maps
                continue
            out[v.name] = None if v.none else [
                from_bytes(t.data, list(t.desc.shape), t.desc.dtype) for t in v.items]
        return out

    def run_on_device(self, inputs: Dict[str, object],
                      out_buffers: Optional[Dict[str, str]] = None) -> Dict[str, tuple]:
        """Runs the model with its outputs left on the device (no download): each input is an
        array (sent by value) or a ``(handle, shape, dtype)`` of this client's buffers (bound as
        it is); each output goes into ``out_buffers[name]`` where given, else into a new buffer.
        Returns ``{name: (handle, shape, dtype)}`` — ready to be the next run's input."""
        values, buffers = [], []
        for name, v in inputs.items():
            if isinstance(v, tuple):
                handle, shape, dtype = v
                buffers.append(pb.DeviceTensor(
                    desc=pb.TensorDesc(name=name, shape=list(shape), dtype=dtype), handle=handle))
            else:
                arr = _c(v)
                values.append(pb.TensorValue(desc=desc(arr, name=name), data=to_bytes(arr)))
        outs = [pb.DeviceTensor(desc=pb.TensorDesc(name=n), handle=h)
                for n, h in (out_buffers or {}).items()]
        r = self._stub.Run(pb.RunModelRequest(handle=self.handle, inputs=values,
                                              input_buffers=buffers, output_buffers=outs,
                                              outputs_on_device=True))
        if r.status != STATUS_OK:
            raise UmdError(r.status, r.msg)
        self.peak_bytes = r.peak_bytes
        return {t.desc.name: (t.handle, list(t.desc.shape), t.desc.dtype) for t in r.output_buffers}

    def unload(self) -> None:
        r = self._stub.Unload(pb.UnloadModelRequest(handle=self.handle))
        if r.status != STATUS_OK:
            raise UmdError(r.status, r.msg)
