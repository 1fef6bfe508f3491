#!/usr/bin/env python3
"""Independent float64 reference forward pass for Strata's architectures.

Written from llama.cpp's model definitions (src/models/{llama,qwen2moe,qwen3moe,
olmoe}.cpp and build_moe_ffn in src/llama-graph.cpp), NOT from the engine, so
that the two can check each other. Python 3 + NumPy only; it has its own GGUF
reader (v2/v3, F32/F16/BF16 tensors) and takes token ids, not text.

    python3 reference_forward.py MODEL.gguf --tokens 1,403,407 --out logits.f32

writes little-endian float32 rows of n_vocab logits, one row per position
(teacher forcing, causal attention, whole prompt in one batch), computed in
float64.

Semantics, per llama.cpp:
  * every layer: h = x + Wo·attn(rope(qk_norm(Wq·rms(x)+bq)), ...), then
    out = h + ffn(rms(h)); final rms norm and the output matrix (token_embd
    when output.weight is absent, i.e. tied).
  * RoPE: llama rotates adjacent pairs (x[2i], x[2i+1]) (LLAMA_ROPE_TYPE_NORM);
    qwen2moe, qwen3moe and olmoe rotate (x[i], x[i+n_rot/2]) (NEOX).
  * Q/K norm: qwen3moe RMS-normalises each head (weights of head_dim), olmoe the
    whole Q and K projections (weights of n_head*head_dim) before the split into
    heads; both before RoPE.
  * FFN: a layer whose ffn_gate_inp exists is MoE, else a dense SwiGLU
    down(silu(gate·x) * up·x). MoE: p = softmax(router·x) over all experts, the
    top-k by p, weights = p of those k, renormalised to sum 1 for llama and
    qwen3moe (build_moe_ffn(..., norm_w = true)), not for qwen2moe and olmoe
    (norm_w = false); scaled by {arch}.expert_weights_scale when present and not
    0 or 1; sum_k w_k * down_k(silu(gate_k·x) * up_k·x).
  * qwen2moe shared expert, when its tensors exist: + sigmoid(gate_inp_shexp·x)
    * down_sh(silu(gate_sh·x) * up_sh·x).

deepseek2 (DeepSeek-V2 and V3), written from the papers (DeepSeek-V2 §2.1,
DeepSeek-V3 §2.1) and their published modeling code, in the expanded form
(no weight absorption):
  * MLA: c_q = RMSNorm(W_DQ x) (attn_q_a, attn_q_a_norm), q = W_UQ c_q
    (attn_q_b), or q = W_Q x (attn_q) without a query LoRA; each head's q is
    [q_nope | q_rope]. [c_kv | k_rope] = W_DKV x (attn_kv_a_mqa); c_kv =
    RMSNorm(c_kv) (attn_kv_a_norm); [k_nope | v] per head = W_UKV c_kv
    (attn_kv_b). RoPE (adjacent pairs) on q_rope and on k_rope, which all heads
    share; k = [k_nope | k_rope]. Scores scale 1/sqrt(key_length), times
    mscale^2 with YaRN, mscale = 1 + yarn_log_multiplier * ln(factor).
  * YaRN rotary frequencies (DeepSeek's DeepseekV2YarnRotaryEmbedding):
    inv_freq = interp * (1 - mask) + extrap * mask, interp = extrap / factor,
    mask = 1 - ramp(low, high) over the dims/2 pairs, low/high the correction
    dims of beta_fast = 32 and beta_slow = 1 over the original context;
    cos/sin unscaled (mscale / mscale_all_dim = 1).
  * Routing: s = softmax(router x) (expert_gating_func 1, V2) or sigmoid (2,
    V3). Choice scores = s + exp_probs_b (V3's bias) where present. With expert
    groups, only the experts of the best expert_group_used_count groups stay
    eligible (a group scored by its best choice score for softmax, by the sum
    of its two best for sigmoid). The top-k by choice score, weighted by s;
    divided by their sum when expert_weights_norm; times expert_weights_scale.
  * Shared experts: one SwiGLU of the shexp tensors, added with weight 1.
  * Layers below leading_dense_block_count have a dense FFN.

gpt-oss, written from OpenAI's model card and llama.cpp's openai-moe graph:
  * attention with biases on q, k, v and the output; NeoX RoPE (YaRN's
    frequencies, as above, with the rotated dims times 0.1 ln(factor) + 1);
    per head a learned sink logit in every softmax denominator (no value);
    layers with il % 2 == 0 (sliding_window_pattern, default 2) attend only to
    the last sliding_window positions, their own included.
  * the FFN's norm is post_attention_norm; the router adds its bias, takes the
    top-k logits and weights them by a softmax over those k; each expert
    g = Wg x + bg, u = Wu x + bu, h = min(g, 7) sigmoid(1.702 min(g, 7))
    (clamp(u, -7, 7) + 1), y = Wd h + bd.
  * MXFP4 tensors (ggml type 39) are dequantized from the OCP Microscaling
    spec's E2M1 element and E8M0 scale definitions.
"""

import argparse
import struct
import sys

import numpy as np

# ---------------------------------------------------------------- GGUF reader

GGUF_MAGIC = b"GGUF"

_SCALAR = {
    0: ("<B", 1),   # uint8
    1: ("<b", 1),   # int8
    2: ("<H", 2),   # uint16
    3: ("<h", 2),   # int16
    4: ("<I", 4),   # uint32
    5: ("<i", 4),   # int32
    6: ("<f", 4),   # float32
    7: ("<?", 1),   # bool
    10: ("<Q", 8),  # uint64
    11: ("<q", 8),  # int64
    12: ("<d", 8),  # float64
}
_STRING = 8
_ARRAY = 9

GGML_F32 = 0
GGML_F16 = 1
GGML_BF16 = 30
GGML_MXFP4 = 39
_TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
               10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 30: "BF16", 39: "MXFP4"}


def e2m1_value(code):
    """An FP4 E2M1 element (OCP Microscaling Formats v1.0, section 5.3.3):
    sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0; exponent 0 is
    subnormal (0 or 0.5)."""
    sign = -1.0 if code & 0x8 else 1.0
    e = (code >> 1) & 0x3
    m = code & 0x1
    if e == 0:
        return sign * 0.5 * m
    return sign * 2.0 ** (e - 1) * (1.0 + 0.5 * m)


_E2M1 = np.array([e2m1_value(c) for c in range(16)], dtype=np.float64)


def dequantize_mxfp4(raw, n):
    """ggml's MXFP4 blocks of 32 elements, 17 bytes each: the shared E8M0
    scale byte (2^(e-127), OCP MX section 5.4.1; 255 is NaN), then 16 bytes
    whose low nibbles are elements 0-15 and high nibbles elements 16-31."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(n // 32, 17)
    e = blocks[:, 0].astype(np.int64)
    scale = np.where(e == 255, np.nan, np.ldexp(1.0, e - 127))
    qs = blocks[:, 1:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=1)          # (blocks, 32)
    return (_E2M1[codes] * scale[:, None]).reshape(n)


class GGUFError(Exception):
    pass


class _Reader:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.buf):
            raise GGUFError("truncated file (wanted %d bytes at offset %d)" % (n, self.pos))
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def scalar(self, t):
        fmt, size = _SCALAR[t]
        return struct.unpack(fmt, self.take(size))[0]

    def string(self):
        n = self.scalar(10)
        return bytes(self.take(n)).decode("utf-8", errors="replace")

    def value(self, t):
        if t in _SCALAR:
            return self.scalar(t)
        if t == _STRING:
            return self.string()
        if t == _ARRAY:
            et = self.scalar(4)
            n = self.scalar(10)
            if et in _SCALAR:
                fmt, size = _SCALAR[et]
                raw = self.take(size * n)
                return list(struct.unpack("<" + fmt[1] * n, raw))
            return [self.value(et) for _ in range(n)]
        raise GGUFError("unknown metadata value type %d" % t)


class GGUF:
    """Metadata dict and lazily converted float64 tensors (numpy, C order:
    ne = [n0, n1, n2] becomes shape (n2, n1, n0))."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = memoryview(f.read())
        r = _Reader(self.buf)
        if bytes(r.take(4)) != GGUF_MAGIC:
            raise GGUFError("%s: not a GGUF file" % path)
        self.version = r.scalar(4)
        if self.version not in (2, 3):
            raise GGUFError("%s: GGUF version %d not supported" % (path, self.version))
        n_tensors = r.scalar(10)
        n_kv = r.scalar(10)
        self.meta = {}
        for _ in range(n_kv):
            key = r.string()
            t = r.scalar(4)
            self.meta[key] = r.value(t)
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            n_dims = r.scalar(4)
            ne = [r.scalar(10) for _ in range(n_dims)]
            t = r.scalar(4)
            off = r.scalar(10)
            infos.append((name, ne, t, off))
        align = int(self.meta.get("general.alignment", 32))
        data_start = (r.pos + align - 1) // align * align
        self.infos = {}
        for name, ne, t, off in infos:
            self.infos[name] = (ne, t, data_start + off)
        self._cache = {}

    def has(self, name):
        return name in self.infos

    def ne(self, name):
        return self.infos[name][0]

    def tensor(self, name):
        if name in self._cache:
            return self._cache[name]
        if name not in self.infos:
            raise GGUFError("tensor %s not found" % name)
        ne, t, off = self.infos[name]
        n = 1
        for d in ne:
            n *= d
        if t == GGML_F32:
            a = np.frombuffer(self.buf, dtype="<f4", count=n, offset=off)
        elif t == GGML_F16:
            a = np.frombuffer(self.buf, dtype="<f2", count=n, offset=off)
        elif t == GGML_BF16:
            u = np.frombuffer(self.buf, dtype="<u2", count=n, offset=off).astype(np.uint32) << 16
            a = u.view(np.float32)
        elif t == GGML_MXFP4:
            if n % 32:
                raise GGUFError("tensor %s: %d elements are not whole MXFP4 blocks of 32" % (name, n))
            a = dequantize_mxfp4(self.buf[off:off + n // 32 * 17], n)
        else:
            raise GGUFError("tensor %s has type %s; this reference reads F32, F16, BF16 and MXFP4 only"
                            % (name, _TYPE_NAMES.get(t, str(t))))
        a = a.astype(np.float64).reshape(tuple(reversed(ne)))
        self._cache[name] = a
        return a


# ---------------------------------------------------------------- the model

ROPE_NORM = "norm"   # adjacent pairs
ROPE_NEOX = "neox"   # (i, i + n_rot/2)

ARCHS = {
    # arch: (rope type, Q/K norm, renormalise the top-k routing weights)
    "llama": (ROPE_NORM, None, True),
    "qwen2moe": (ROPE_NEOX, None, False),
    "qwen3moe": (ROPE_NEOX, "head", True),
    "olmoe": (ROPE_NEOX, "whole", False),
    "deepseek2": (ROPE_NORM, None, False),   # MLA; renormalisation from expert_weights_norm
    "gpt-oss": (ROPE_NEOX, None, False),     # its own routing (softmax over the chosen logits)
}


def rms_norm(x, w, eps):
    # x: (..., n); ggml_rms_norm then multiply by the weight
    ms = np.mean(x * x, axis=-1, keepdims=True)
    y = x / np.sqrt(ms + eps)
    return y * w if w is not None else y


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def yarn_inv_freq(n_rot, base, factor, orig_ctx, beta_fast=32.0, beta_slow=1.0):
    """DeepSeek's YaRN frequencies for the n_rot/2 rotated pairs."""
    extrap = base ** (-2.0 * np.arange(n_rot // 2, dtype=np.float64) / n_rot)
    interp = extrap / factor

    def correction_dim(rotations):
        return (n_rot * np.log(orig_ctx / (rotations * 2 * np.pi))) / (2 * np.log(base))

    low = max(np.floor(correction_dim(beta_fast)), 0)
    high = min(np.ceil(correction_dim(beta_slow)), n_rot - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(n_rot // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    mask = 1.0 - ramp
    return interp * (1 - mask) + extrap * mask


def rope(x, pos, n_rot, base, freq_scale, mode, inv_freq=None, mscale=1.0):
    """x: (T, H, D); pos: (T,). Rotates the first n_rot dims of every head;
    mscale multiplies the rotated dims (YaRN's magnitude correction)."""
    T, H, D = x.shape
    half = n_rot // 2
    inv = base ** (-2.0 * np.arange(half, dtype=np.float64) / n_rot)  # theta_scale^i
    if inv_freq is not None:
        inv, freq_scale = inv_freq, 1.0
    theta = (pos.astype(np.float64)[:, None] * freq_scale) * inv[None, :]  # (T, half)
    c = np.cos(theta)[:, None, :] * mscale
    s = np.sin(theta)[:, None, :] * mscale
    out = x.copy()
    if mode == ROPE_NORM:
        x0 = x[:, :, 0:n_rot:2]
        x1 = x[:, :, 1:n_rot:2]
        out[:, :, 0:n_rot:2] = x0 * c - x1 * s
        out[:, :, 1:n_rot:2] = x0 * s + x1 * c
    else:
        x0 = x[:, :, 0:half]
        x1 = x[:, :, half:n_rot]
        out[:, :, 0:half] = x0 * c - x1 * s
        out[:, :, half:n_rot] = x0 * s + x1 * c
    return out


class Model:
    def __init__(self, path):
        g = GGUF(path)
        self.g = g
        m = g.meta
        arch = m.get("general.architecture")
        if arch not in ARCHS:
            raise GGUFError("architecture %r not supported (supported: %s)" % (arch, ", ".join(ARCHS)))
        self.arch = arch
        self.rope_mode, self.qk_norm, self.norm_w = ARCHS[arch]

        def key(k, default=None, required=False):
            full = arch + "." + k
            if full in m:
                return m[full]
            if required:
                raise GGUFError("metadata %s missing" % full)
            return default

        def scalar_or_first(v):
            return v[0] if isinstance(v, list) else v

        self.n_embd = int(key("embedding_length", required=True))
        self.n_layer = int(key("block_count", required=True))
        self.n_head = int(scalar_or_first(key("attention.head_count", required=True)))
        self.n_head_kv = int(scalar_or_first(key("attention.head_count_kv", self.n_head)))
        self.head_k = int(key("attention.key_length", self.n_embd // self.n_head))
        self.head_v = int(key("attention.value_length", self.head_k))
        self.mla = arch == "deepseek2"
        if self.head_k != self.head_v and not self.mla:
            raise GGUFError("key_length != value_length is not supported")
        self.eps = float(key("attention.layer_norm_rms_epsilon", required=True))
        self.rope_base = float(key("rope.freq_base", 10000.0))
        self.n_rot = int(key("rope.dimension_count", self.head_k))
        self.freq_scale = 1.0
        self.inv_freq = None
        self.mscale = 1.0
        self.rope_mscale = 1.0
        self.oss = arch == "gpt-oss"
        # gpt-oss: every other layer (the even ones) attends over a sliding window.
        self.n_swa = int(key("attention.sliding_window", 0)) if self.oss else 0
        self.swa_period = int(key("attention.sliding_window_pattern", 2)) if self.oss else 0
        scaling = key("rope.scaling.type", "none")
        if scaling == "linear":
            self.freq_scale = 1.0 / float(key("rope.scaling.factor", 1.0))
        elif scaling == "yarn" and self.mla:
            factor = float(key("rope.scaling.factor", required=True))
            orig = int(key("rope.scaling.original_context_length", required=True))
            self.inv_freq = yarn_inv_freq(self.n_rot, self.rope_base, factor, orig)
            self.mscale = 1.0 + float(key("rope.scaling.yarn_log_multiplier", 0.0)) * np.log(factor)
        elif scaling == "yarn" and arch == "gpt-oss":
            # The YaRN paper's frequencies (as DeepSeek's); the magnitude
            # correction 0.1 ln(s) + 1 multiplies the rotated q and k.
            factor = float(key("rope.scaling.factor", required=True))
            orig = int(key("rope.scaling.original_context_length", required=True))
            self.inv_freq = yarn_inv_freq(self.n_rot, self.rope_base, factor, orig)
            self.rope_mscale = 1.0 + 0.1 * np.log(factor)
        elif scaling not in ("none", None):
            raise GGUFError("rope scaling %r not supported" % scaling)
        if float(key("rope.scale_linear", 1.0) or 1.0) != 1.0:
            self.freq_scale = 1.0 / float(key("rope.scale_linear"))
        self.n_expert = int(key("expert_count", 0))
        self.n_expert_used = int(key("expert_used_count", 0))
        self.w_scale = float(key("expert_weights_scale", 0.0))
        self.n_dense_lead = int(key("leading_dense_block_count", 0))
        scale = float(key("attention.scale", 0.0)) if arch == "llama" else 0.0
        self.kq_scale = scale if scale != 0.0 else 1.0 / np.sqrt(self.head_k)
        self.kq_scale *= self.mscale * self.mscale
        if self.mla:
            self.kv_lora = int(key("attention.kv_lora_rank", required=True))
            self.q_lora = int(key("attention.q_lora_rank", 0))
            self.norm_w = bool(key("expert_weights_norm", False))
            self.gating = int(key("expert_gating_func", 1))
            self.n_groups = int(key("expert_group_count", 0))
            self.groups_used = int(key("expert_group_used_count", 0))
            self.n_head_kv = self.n_head
        if self.n_head % self.n_head_kv != 0:
            raise GGUFError("n_head %d is not a multiple of n_head_kv %d" % (self.n_head, self.n_head_kv))

        self.tok_embd = g.tensor("token_embd.weight")            # (n_vocab, n_embd)
        self.n_vocab = self.tok_embd.shape[0]
        self.output_norm = g.tensor("output_norm.weight")
        self.output = g.tensor("output.weight") if g.has("output.weight") else self.tok_embd

        for il in range(self.n_layer):
            moe = g.has("blk.%d.ffn_gate_inp.weight" % il)
            if il < self.n_dense_lead and moe:
                raise GGUFError("layer %d is below leading_dense_block_count=%d but has a router"
                                % (il, self.n_dense_lead))
            if moe and (self.n_expert == 0 or self.n_expert_used == 0):
                raise GGUFError("layer %d has a router but expert_count/expert_used_count is 0" % il)

    def t(self, il, name, optional=False):
        full = "blk.%d.%s" % (il, name)
        if optional and not self.g.has(full):
            return None
        return self.g.tensor(full)

    # -------------------------------------------------------- blocks

    def attention_mla(self, il, x, pos):
        T, H = x.shape[0], self.n_head
        dk, dv, rot = self.head_k, self.head_v, self.n_rot
        nope = dk - rot
        if self.q_lora > 0:
            cq = rms_norm(x @ self.t(il, "attn_q_a.weight").T, self.t(il, "attn_q_a_norm.weight"), self.eps)
            q = cq @ self.t(il, "attn_q_b.weight").T
        else:
            q = x @ self.t(il, "attn_q.weight").T
        q = q.reshape(T, H, dk)
        ckv = x @ self.t(il, "attn_kv_a_mqa.weight").T                    # (T, kv_lora + rot)
        c = rms_norm(ckv[:, :self.kv_lora], self.t(il, "attn_kv_a_norm.weight"), self.eps)
        k_rope = rope(ckv[:, None, self.kv_lora:], pos, rot, self.rope_base, self.freq_scale, ROPE_NORM, self.inv_freq)
        kv = (c @ self.t(il, "attn_kv_b.weight").T).reshape(T, H, nope + dv)
        k = np.concatenate([kv[:, :, :nope], np.repeat(k_rope, H, axis=1)], axis=2)   # (T, H, dk)
        v = kv[:, :, nope:]
        q_rope = rope(q[:, :, nope:], pos, rot, self.rope_base, self.freq_scale, ROPE_NORM, self.inv_freq)
        q = np.concatenate([q[:, :, :nope], q_rope], axis=2)
        mask = np.triu(np.full((T, T), -np.inf), k=1)
        out = np.empty((T, H, dv))
        for h in range(H):
            s = (q[:, h, :] @ k[:, h, :].T) * self.kq_scale + mask
            out[:, h, :] = softmax(s, axis=-1) @ v[:, h, :]
        return out.reshape(T, H * dv) @ self.t(il, "attn_output.weight").T

    def route_deepseek(self, il, logits):
        """Expert ids (best first) and weights for one token's router logits."""
        s = sigmoid(logits) if self.gating == 2 else softmax(logits)
        choice = s.copy()
        b = self.t(il, "exp_probs_b.bias", optional=True)
        if b is not None:
            choice = choice + b
        if self.n_groups > 1 and self.groups_used < self.n_groups:
            g = choice.reshape(self.n_groups, -1)
            if self.gating == 2:
                gscore = np.sort(g, axis=1)[:, -2:].sum(axis=1)
            else:
                gscore = g.max(axis=1)
            keep = np.argsort(-gscore, kind="stable")[:self.groups_used]
            allowed = np.zeros(self.n_groups, dtype=bool)
            allowed[keep] = True
            choice = np.where(np.repeat(allowed, g.shape[1]), choice, -np.inf)
        sel = np.argsort(-choice, kind="stable")[:self.n_expert_used]
        w = s[sel]
        if self.norm_w:
            w = w / np.sum(w)
        return sel, w * self.w_scale if self.w_scale != 0.0 else w

    def attention(self, il, x, pos):
        if self.mla:
            return self.attention_mla(il, x, pos)
        T = x.shape[0]
        H, Hkv, D = self.n_head, self.n_head_kv, self.head_k
        q = x @ self.t(il, "attn_q.weight").T
        k = x @ self.t(il, "attn_k.weight").T
        v = x @ self.t(il, "attn_v.weight").T
        for name, which in (("attn_q.bias", "q"), ("attn_k.bias", "k"), ("attn_v.bias", "v")):
            b = self.t(il, name, optional=True)
            if b is not None:
                if which == "q":
                    q = q + b
                elif which == "k":
                    k = k + b
                else:
                    v = v + b
        if self.qk_norm == "whole":
            q = rms_norm(q, self.t(il, "attn_q_norm.weight"), self.eps)
            k = rms_norm(k, self.t(il, "attn_k_norm.weight"), self.eps)
        q = q.reshape(T, H, D)
        k = k.reshape(T, Hkv, D)
        v = v.reshape(T, Hkv, D)
        if self.qk_norm == "head":
            q = rms_norm(q, self.t(il, "attn_q_norm.weight"), self.eps)
            k = rms_norm(k, self.t(il, "attn_k_norm.weight"), self.eps)
        q = rope(q, pos, self.n_rot, self.rope_base, self.freq_scale, self.rope_mode, self.inv_freq, self.rope_mscale)
        k = rope(k, pos, self.n_rot, self.rope_base, self.freq_scale, self.rope_mode, self.inv_freq, self.rope_mscale)

        group = H // Hkv
        mask = np.triu(np.full((T, T), -np.inf), k=1)  # query i sees keys 0..i
        if self.n_swa > 0 and il % self.swa_period < self.swa_period - 1:
            # A sliding-window layer: query i sees keys i - n_swa + 1 .. i.
            mask = mask + np.tril(np.full((T, T), -np.inf), k=-self.n_swa)
        sinks = self.t(il, "attn_sinks.weight") if self.oss else None
        out = np.empty((T, H, D))
        for h in range(H):
            kh = k[:, h // group, :]
            vh = v[:, h // group, :]
            s = (q[:, h, :] @ kh.T) * self.kq_scale + mask
            if sinks is None:
                p = softmax(s, axis=-1)
            else:
                # A learned per-head logit joins every row's softmax denominator
                # (gpt-oss's attention sink) and takes no value.
                m = np.maximum(np.max(s, axis=-1, keepdims=True), sinks[h])
                e = np.exp(s - m)
                p = e / (np.sum(e, axis=-1, keepdims=True) + np.exp(sinks[h] - m))
            out[:, h, :] = p @ vh
        out = out.reshape(T, H * D) @ self.t(il, "attn_output.weight").T
        bo = self.t(il, "attn_output.bias", optional=True)
        if bo is not None:
            out = out + bo
        return out

    def dense_ffn(self, il, x):
        gate = x @ self.t(il, "ffn_gate.weight").T
        up = x @ self.t(il, "ffn_up.weight").T
        return (silu(gate) * up) @ self.t(il, "ffn_down.weight").T

    def moe_ffn_oss(self, il, x):
        """gpt-oss: logits = router x + b; the top-k logits, weighted by a
        softmax over those k; each expert: g = Wg x + bg, u = Wu x + bu,
        h = min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, -7, 7) + 1),
        y = Wd h + bd."""
        logits = x @ self.t(il, "ffn_gate_inp.weight").T + self.t(il, "ffn_gate_inp.bias")
        gate_e, up_e, down_e = (self.t(il, n) for n in ("ffn_gate_exps.weight", "ffn_up_exps.weight",
                                                         "ffn_down_exps.weight"))
        bg, bu, bd = (self.t(il, n) for n in ("ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"))
        out = np.zeros_like(x)
        for t in range(x.shape[0]):
            sel = np.argsort(-logits[t], kind="stable")[:self.n_expert_used]
            w = softmax(logits[t, sel])
            for e, we in zip(sel, w):
                g = np.minimum(gate_e[e] @ x[t] + bg[e], 7.0)
                u = np.clip(up_e[e] @ x[t] + bu[e], -7.0, 7.0)
                h = g * sigmoid(1.702 * g) * (u + 1.0)
                out[t] += we * (down_e[e] @ h + bd[e])
        return out

    def moe_ffn(self, il, x):
        if self.oss:
            return self.moe_ffn_oss(il, x)
        T = x.shape[0]
        router = self.t(il, "ffn_gate_inp.weight")          # (n_expert, n_embd)
        gate_e = self.t(il, "ffn_gate_exps.weight")         # (n_expert, n_ff, n_embd)
        up_e = self.t(il, "ffn_up_exps.weight")             # (n_expert, n_ff, n_embd)
        down_e = self.t(il, "ffn_down_exps.weight")         # (n_expert, n_embd, n_ff)
        probs = softmax(x @ router.T, axis=-1)              # (T, n_expert)
        k = self.n_expert_used
        out = np.zeros_like(x)
        for t in range(T):
            if self.mla:
                sel, w = self.route_deepseek(il, x[t] @ router.T)
            else:
                # top-k by probability, best first (ties: lower index first)
                sel = np.argsort(-probs[t], kind="stable")[:k]
                w = probs[t, sel]
                if self.norm_w:
                    w = w / max(np.sum(w), 6.103515625e-5)
                if self.w_scale != 0.0 and self.w_scale != 1.0:
                    w = w * self.w_scale
            for e, we in zip(sel, w):
                hidden = silu(gate_e[e] @ x[t]) * (up_e[e] @ x[t])
                out[t] += we * (down_e[e] @ hidden)
        if self.g.has("blk.%d.ffn_up_shexp.weight" % il):
            sh = silu(x @ self.t(il, "ffn_gate_shexp.weight").T) * (x @ self.t(il, "ffn_up_shexp.weight").T)
            sh = sh @ self.t(il, "ffn_down_shexp.weight").T
            gi = self.t(il, "ffn_gate_inp_shexp.weight", optional=True)
            if gi is not None:
                sh = sh * sigmoid(x @ gi.reshape(-1))[:, None]
            out = out + sh
        return out

    def forward(self, tokens):
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.size == 0:
            raise ValueError("no tokens")
        if tokens.min() < 0 or tokens.max() >= self.n_vocab:
            raise ValueError("token id out of range [0, %d)" % self.n_vocab)
        pos = np.arange(tokens.size)
        x = self.tok_embd[tokens]                             # (T, n_embd)
        for il in range(self.n_layer):
            h = x + self.attention(il, rms_norm(x, self.t(il, "attn_norm.weight"), self.eps), pos)
            y = rms_norm(h, self.t(il, "post_attention_norm.weight" if self.oss else "ffn_norm.weight"), self.eps)
            if self.g.has("blk.%d.ffn_gate_inp.weight" % il):
                f = self.moe_ffn(il, y)
            else:
                f = self.dense_ffn(il, y)
            x = h + f
        x = rms_norm(x, self.output_norm, self.eps)
        return x @ self.output.T                              # (T, n_vocab)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="GGUF file (F32/F16/BF16/MXFP4 tensors)")
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--dequantize", metavar="TENSOR", help="instead: write this tensor's values as float32")
    ap.add_argument("--out", required=True, help="output file: float32 rows of n_vocab logits (or the tensor)")
    args = ap.parse_args(argv)
    if args.dequantize:
        try:
            GGUF(args.model).tensor(args.dequantize).astype("<f4").tofile(args.out)
        except (GGUFError, OSError) as e:
            print("reference_forward: %s" % e, file=sys.stderr)
            return 2
        return 0
    if not args.tokens:
        ap.error("--tokens is required (or --dequantize)")
    try:
        tokens = [int(s) for s in args.tokens.replace(" ", "").split(",") if s != ""]
        model = Model(args.model)
        logits = model.forward(tokens)
    except (GGUFError, ValueError, OSError) as e:
        print("reference_forward: %s" % e, file=sys.stderr)
        return 2
    logits.astype("<f4").tofile(args.out)
    print("reference_forward: %s arch=%s layers=%d tokens=%d vocab=%d"
          % (args.model, model.arch, model.n_layer, len(tokens), model.n_vocab), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
