"""Minimal GGUF v3 writer (no dependencies beyond NumPy).

Only what the demo-model exporter needs: scalar/string/array metadata and
F32, F16 and Q8_0 tensors. Layout follows ggml's gguf.c: header, KV pairs,
tensor infos, padding to `alignment`, then tensor data, each tensor padded to
`alignment`. GGUF `ne` order is the reverse of the NumPy shape.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# metadata value types
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY, T_U64, T_I64, T_F64 = range(13)

# ggml tensor types
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
QK8_0 = 32


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _scalar(vtype, v):
    fmt = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
           T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}[vtype]
    return struct.pack(fmt, v)


def quantize_q8_0(x):
    """ggml's quantize_row_q8_0_ref on a float32 array whose last dim is a multiple of 32.
    Returns (raw bytes, dequantized float32 array of the same shape)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    assert x.shape[-1] % QK8_0 == 0
    blocks = x.reshape(-1, QK8_0)
    amax = np.abs(blocks).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), np.float32(0)).astype(np.float32)
    v = (blocks * inv[:, None]).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)  # roundf: half away from 0
    d16 = d.astype(np.float16)
    raw = np.empty(blocks.shape[0], dtype=[("d", "<f2"), ("qs", "i1", (QK8_0,))])
    raw["d"] = d16
    raw["qs"] = q
    deq = (q.astype(np.float32) * d16.astype(np.float32)[:, None]).reshape(x.shape)
    return raw.tobytes(), deq


class GGUFWriter:
    def __init__(self):
        self.kv = []        # list of bytes
        self.tensors = []   # (name, shape, ggml_type, bytes)

    # -- metadata ---------------------------------------------------------
    def _add(self, key, vtype, payload):
        self.kv.append(_str(key) + struct.pack("<I", vtype) + payload)

    def add_u32(self, key, v): self._add(key, T_U32, _scalar(T_U32, int(v)))
    def add_i32(self, key, v): self._add(key, T_I32, _scalar(T_I32, int(v)))
    def add_f32(self, key, v): self._add(key, T_F32, _scalar(T_F32, float(v)))
    def add_bool(self, key, v): self._add(key, T_BOOL, _scalar(T_BOOL, bool(v)))
    def add_string(self, key, v): self._add(key, T_STRING, _str(v))

    def add_array(self, key, etype, values):
        payload = struct.pack("<IQ", etype, len(values))
        if etype == T_STRING:
            payload += b"".join(_str(s) for s in values)
        elif etype == T_F32:
            payload += np.asarray(values, dtype="<f4").tobytes()
        elif etype == T_I32:
            payload += np.asarray(values, dtype="<i4").tobytes()
        elif etype == T_U32:
            payload += np.asarray(values, dtype="<u4").tobytes()
        else:
            raise ValueError("unsupported array type")
        self._add(key, T_ARRAY, payload)

    # -- tensors ----------------------------------------------------------
    def add_tensor(self, name, array, ggml_type):
        """Adds `array` (NumPy shape, row-major) as `ggml_type`. Returns the float32
        array exactly as a reader will de-quantize it."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        if ggml_type == GGML_F32:
            raw, deq = a.astype("<f4").tobytes(), a
        elif ggml_type == GGML_F16:
            h = a.astype("<f2")
            raw, deq = h.tobytes(), h.astype(np.float32)
        elif ggml_type == GGML_Q8_0:
            raw, deq = quantize_q8_0(a)
        else:
            raise ValueError("unsupported tensor type")
        self.tensors.append((name, a.shape, ggml_type, raw))
        return deq

    def write(self, path):
        def pad(n):
            return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT

        infos = b""
        offset = 0
        for name, shape, t, raw in self.tensors:
            ne = list(reversed(shape))
            infos += _str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
            infos += struct.pack("<IQ", t, offset)
            offset += len(raw) + pad(len(raw))
        head = GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))
        head += b"".join(self.kv) + infos
        with open(path, "wb") as f:
            f.write(head)
            f.write(b"\0" * pad(len(head)))
            for _, _, _, raw in self.tensors:
                f.write(raw)
                f.write(b"\0" * pad(len(raw)))
