"""A minimal GGUF v3 reader for the export's reference pass: the metadata it
needs and tensors of type F32, F16 and Q8_0, de-quantized to float64 exactly
as stored (the bytes `strata-cli quantize` wrote)."""
import struct

import numpy as np

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class GGUFFile:
    def __init__(self, path):
        self.data = open(path, "rb").read()
        d = self.data
        if d[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", d, 4)
        off = 24
        self.metadata = {}
        for _ in range(n_kv):
            key, off = self._str(off)
            vtype = struct.unpack_from("<I", d, off)[0]
            val, off = self._value(vtype, off + 4)
            self.metadata[key] = val
        self.tensors = {}
        for _ in range(n_tensors):
            name, off = self._str(off)
            nd = struct.unpack_from("<I", d, off)[0]
            ne = struct.unpack_from(f"<{nd}Q", d, off + 4)
            off += 4 + 8 * nd
            ttype, toff = struct.unpack_from("<IQ", d, off)
            off += 12
            self.tensors[name] = (ne, ttype, toff)
        align = int(self.metadata.get("general.alignment", 32))
        self.data_start = (off + align - 1) // align * align

    def _str(self, off):
        n = struct.unpack_from("<Q", self.data, off)[0]
        return self.data[off + 8:off + 8 + n].decode("utf-8"), off + 8 + n

    def _value(self, vtype, off):
        if vtype == 8:
            return self._str(off)
        if vtype == 9:
            etype, n = struct.unpack_from("<IQ", self.data, off)
            off += 12
            out = []
            for _ in range(n):
                v, off = self._value(etype, off)
                out.append(v)
            return out, off
        fmt = _SCALAR[vtype]
        return struct.unpack_from(fmt, self.data, off)[0], off + struct.calcsize(fmt)

    def type_of(self, name):
        return self.tensors[name][1]

    def tensor(self, name):
        """float64 array shaped as numpy sees it: ne reversed (rows last-but-one)."""
        ne, ttype, toff = self.tensors[name]
        n = int(np.prod(ne))
        start = self.data_start + toff
        if ttype == 0:
            a = np.frombuffer(self.data, dtype="<f4", count=n, offset=start).astype(np.float64)
        elif ttype == 1:
            a = np.frombuffer(self.data, dtype="<f2", count=n, offset=start).astype(np.float64)
        elif ttype == 8:
            nb = n // 32
            blocks = np.frombuffer(self.data, dtype=np.uint8, count=nb * 34, offset=start).reshape(nb, 34)
            d = blocks[:, :2].copy().view("<f2").astype(np.float64)
            q = blocks[:, 2:].copy().view(np.int8).astype(np.float64)
            a = (q * d).reshape(-1)
        else:
            raise ValueError(f"{name}: type {ttype} is not read by this reader (F32, F16, Q8_0)")
        return a.reshape(tuple(reversed(ne)))
