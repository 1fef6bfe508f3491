#!/usr/bin/env python3
"""Renders packaging/icons/strata.svg's shapes to PNGs (48, 64, 128, 256 px)
without any image library: the same geometry, 4x4 supersampled. Run it after
changing the SVG; the PNGs are committed (hicolor theme sizes)."""
import os, struct, zlib

def rrect(x, y, rx, ry, w, h, r):
    # inside a rounded rectangle?
    if x < rx or x > rx + w or y < ry or y > ry + h:
        return False
    cx = min(max(x, rx + r), rx + w - r)
    cy = min(max(y, ry + r), ry + h - r)
    return (x - cx) ** 2 + (y - cy) ** 2 <= r * r

def lerp(a, b, t):
    return a + (b - a) * t

C0 = (0x63, 0xa8, 0xff)
C1 = (0x7a, 0x5c, 0xff)
BARS = [(64, 82, 128, 22, 1.0), (80, 117, 96, 22, 0.92), (96, 152, 64, 22, 0.84)]

def pixel(u, v):
    """Colour (r, g, b, a) at (u, v) in the 256 x 256 design space."""
    if not rrect(u, v, 16, 16, 224, 224, 52):
        return (0, 0, 0, 0)
    t = min(max(((u - 16) + (v - 16)) / 448.0, 0.0), 1.0)
    col = [lerp(C0[i], C1[i], t) for i in range(3)]
    for (bx, by, bw, bh, op) in BARS:
        if rrect(u, v, bx, by, bw, bh, 11):
            col = [lerp(c, 255, op) for c in col]
    return (col[0], col[1], col[2], 255)

def render(size, ss=4):
    rows = []
    scale = 256.0 / size
    for y in range(size):
        row = bytearray([0])
        for x in range(size):
            acc = [0.0, 0.0, 0.0, 0.0]
            for sy in range(ss):
                for sx in range(ss):
                    u = (x + (sx + 0.5) / ss) * scale
                    v = (y + (sy + 0.5) / ss) * scale
                    r, g, b, a = pixel(u, v)
                    acc[0] += r * a; acc[1] += g * a; acc[2] += b * a; acc[3] += a
            n = ss * ss
            a = acc[3] / n
            if a > 0:
                row += bytes([int(acc[0] / acc[3] + 0.5), int(acc[1] / acc[3] + 0.5), int(acc[2] / acc[3] + 0.5), int(a + 0.5)])
            else:
                row += bytes([0, 0, 0, 0])
        rows.append(bytes(row))
    raw = b"".join(rows)
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for s in (48, 64, 128, 256):
        with open(os.path.join(here, "strata-%d.png" % s), "wb") as f:
            f.write(render(s))
