#!/usr/bin/env python3
"""Export the trained demo model to GGUF (llama architecture, Mixtral expert layout)
and write the trainer's reference logits for the prompts in prompts.txt.

    python3 export.py [--work DIR] [--out resources/models]

Writes into --out:
    strata-demo-moe.gguf           the model: experts Q8_0, token embeddings F16, the
                                   rest F32 (see TENSOR TYPES below)
    strata-demo-moe.prompts.txt    the prompts (a literal \\n is a newline)
    strata-demo-moe.ref.jsonl      per prompt: prompt, tokens (BOS + SPM ids),
                                   logits_offset_rows, greedy (32 ids), greedy_text
    strata-demo-moe.ref.f32        float32 rows of n_vocab logits, one per prompt position
    strata-demo-moe.config.json    the training configuration + final losses + param counts

The reference logits come from an independent float64 NumPy forward pass on the
weights exactly as stored in the GGUF (after F16 / Q8_0 rounding), with ggml's
activation rounding (q8_0 blocks before Q8_0 products, F16 before F16 products).

TENSOR TYPES. The routed experts (75% of the parameters) are Q8_0 and the token
embeddings F16; everything the activations are multiplied with outside the
experts stays F32. ggml (and the engine) round activations to F16 before an F16
product, and a float64 reference cannot reproduce on which side of an F16
rounding boundary a float32 value falls: with F16 attention/FFN/output matrices
the engine and this reference differ by up to ~1e-3 of the logit scale (one
flip propagates through the attention), with F32 ones by float rounding only.
The file stays under 32 MB either way (F32: ~28 MB).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_writer as gw  # noqa: E402
import train as tr  # noqa: E402

N_GREEDY = 32


# ---------------------------------------------------------------------------
# Reference forward pass (float64 NumPy), independent of the torch model.
#
# ggml (and so the engine) does not multiply F16 / Q8_0 weights with float
# activations: it first rounds each activation row to the weight type's
# "vec_dot_type" (F16 for F16 weights; for Q8_0 weights a q8_0 block per 32
# values with d = fp16(amax / 127), q = round_half_even(x * 127 / amax)). The
# reference does the same rounding, then multiplies exactly (float64).

def act_f16(x):
    return x.astype(np.float32).astype(np.float16).astype(np.float64)


def act_q8_0(x):
    x32 = x.astype(np.float32)
    shp = x32.shape
    b = x32.reshape(-1, gw.QK8_0)
    amax = np.abs(b).max(axis=1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(amax != 0, np.float32(127) / np.where(amax != 0, amax, 1), 0).astype(np.float32)
    q = np.clip(np.rint((b * idv).astype(np.float32)), -128, 127)
    return (q.astype(np.float64) * d.astype(np.float16).astype(np.float64)).reshape(shp)


class RefModel:
    def __init__(self, cfg, w, types):
        self.c = cfg
        self.w = {k: v.astype(np.float64) for k, v in w.items()}
        self.types = types

    def act(self, x, key):
        t = self.types[key]
        if t == gw.GGML_F16:
            return act_f16(x)
        if t == gw.GGML_Q8_0:
            return act_q8_0(x)
        return x

    def mm(self, x, key, e=None):
        """x @ W.T with W = weight `key` (expert `e` of a 3-D tensor)."""
        W = self.w[key] if e is None else self.w[key][e]
        return self.act(x, key) @ W.T

    def _rms(self, x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.c["norm_eps"]) * g

    def forward(self, toks):
        c, w = self.c, self.w
        T = len(toks)
        nh, nkv, d = c["n_head"], c["n_head_kv"], c["n_embd"]
        hd = d // nh
        i = np.arange(hd // 2, dtype=np.float64)
        theta = np.arange(T, dtype=np.float64)[:, None] * c["rope_base"] ** (-2.0 * i / hd)[None, :]
        cos, sin = np.cos(theta), np.sin(theta)

        def rope(x):  # x [T, H, hd], adjacent pairs
            x0, x1 = x[..., 0::2], x[..., 1::2]
            out = np.empty_like(x)
            out[..., 0::2] = x0 * cos[:, None, :] - x1 * sin[:, None, :]
            out[..., 1::2] = x0 * sin[:, None, :] + x1 * cos[:, None, :]
            return out

        x = w["tok_embd.weight"][toks]
        mask = np.triu(np.ones((T, T), dtype=bool), 1)
        for l in range(c["n_layer"]):
            p = f"blocks.{l}."
            h = self._rms(x, w[p + "attn_norm.weight"])
            q = rope(self.mm(h, p + "attn.wq.weight").reshape(T, nh, hd))
            k = rope(self.mm(h, p + "attn.wk.weight").reshape(T, nkv, hd))
            v = self.mm(h, p + "attn.wv.weight").reshape(T, nkv, hd)
            g = nh // nkv
            att = np.empty((T, nh, hd))
            for hh in range(nh):
                s = (q[:, hh] @ k[:, hh // g].T) / np.sqrt(hd)
                s[mask] = -np.inf
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
                att[:, hh] = s @ v[:, hh // g]
            x = x + self.mm(att.reshape(T, d), p + "attn.wo.weight")
            h = self._rms(x, w[p + "ffn_norm.weight"])
            if l < c["n_dense"]:
                z = silu(self.mm(h, p + "ffn.gate.weight")) * self.mm(h, p + "ffn.up.weight")
                x = x + self.mm(z, p + "ffn.down.weight")
            else:
                logits = self.mm(h, p + "ffn.router.weight")
                pr = np.exp(logits - logits.max(-1, keepdims=True))
                pr /= pr.sum(-1, keepdims=True)
                k_used = c["n_expert_used"]
                y = np.zeros_like(x)
                for t in range(T):
                    top = np.argsort(-pr[t], kind="stable")[:k_used]
                    wt = pr[t, top] / pr[t, top].sum()
                    for e, we in zip(top, wt):
                        ht = h[t:t + 1]
                        z = silu(self.mm(ht, p + "ffn.w_gate", e)) * self.mm(ht, p + "ffn.w_up", e)
                        y[t] += we * self.mm(z, p + "ffn.w_down", e)[0]
                x = x + y
        x = self._rms(x, w["norm.weight"])
        return self.mm(x, "output.weight")


def silu(x):
    return x / (1.0 + np.exp(-x))


def read_prompts(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                out.append(line.replace("\\n", "\n"))
    return out


def piece_bytes(sp, i):
    if sp.is_byte(i):
        return bytes([int(sp.id_to_piece(i)[3:5], 16)])
    if sp.is_control(i) or sp.is_unknown(i):
        return b""
    return sp.id_to_piece(i).replace("\u2581", " ").encode("utf-8")


def export(work, out_dir, prompts_path=os.path.join(HERE, "prompts.txt")):
    import sentencepiece as spm
    cfg = json.load(open(os.path.join(work, "config.json")))
    final = json.load(open(os.path.join(work, "final.json")))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(work, "tokenizer.model"))
    state = torch.load(os.path.join(work, "model.pt"), map_location="cpu")
    name = cfg["name"]
    V, d, L = cfg["vocab_size"], cfg["n_embd"], cfg["n_layer"]
    assert sp.get_piece_size() == V

    w = gw.GGUFWriter()
    w.add_string("general.architecture", "llama")
    w.add_string("general.name", name)
    w.add_string("general.description",
                 "Strata demo MoE, trained from scratch on the King James Bible (public domain) "
                 "by resources/models/train/train.sh")
    w.add_u32("general.quantization_version", 2)
    w.add_u32("llama.context_length", cfg["n_ctx"])
    w.add_u32("llama.embedding_length", d)
    w.add_u32("llama.block_count", L)
    w.add_u32("llama.feed_forward_length", cfg["n_ff"])
    w.add_u32("llama.attention.head_count", cfg["n_head"])
    w.add_u32("llama.attention.head_count_kv", cfg["n_head_kv"])
    w.add_f32("llama.attention.layer_norm_rms_epsilon", cfg["norm_eps"])
    w.add_f32("llama.rope.freq_base", cfg["rope_base"])
    w.add_u32("llama.rope.dimension_count", d // cfg["n_head"])
    w.add_u32("llama.vocab_size", V)
    w.add_u32("llama.expert_count", cfg["n_expert"])
    w.add_u32("llama.expert_used_count", cfg["n_expert_used"])
    w.add_u32("llama.expert_feed_forward_length", cfg["n_ff_exp"])
    w.add_u32("llama.leading_dense_block_count", cfg["n_dense"])
    # tokenizer (SentencePiece BPE with byte fallback, as llama.cpp writes it)
    tokens, scores, types = [], [], []
    for i in range(V):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(2)
        elif sp.is_control(i):
            types.append(3)
        elif sp.is_byte(i):
            types.append(6)
        else:
            types.append(1)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_string("tokenizer.ggml.pre", "default")
    w.add_array("tokenizer.ggml.tokens", gw.T_STRING, tokens)
    w.add_array("tokenizer.ggml.scores", gw.T_F32, scores)
    w.add_array("tokenizer.ggml.token_type", gw.T_I32, types)
    w.add_u32("tokenizer.ggml.bos_token_id", sp.bos_id())
    w.add_u32("tokenizer.ggml.eos_token_id", sp.eos_id())
    w.add_u32("tokenizer.ggml.unknown_token_id", sp.unk_id())
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_bool("tokenizer.ggml.add_space_prefix", True)

    F32, F16, Q8 = gw.GGML_F32, gw.GGML_F16, gw.GGML_Q8_0
    deq = {}

    types = {}

    def put(gname, key, t):
        deq[key] = torch.from_numpy(w.add_tensor(gname, state[key].float().numpy(), t).copy())
        types[key] = w.tensors[-1][2]  # the type as written

    put("token_embd.weight", "tok_embd.weight", F16)
    for i in range(L):
        p = f"blocks.{i}."
        put(f"blk.{i}.attn_norm.weight", p + "attn_norm.weight", F32)
        put(f"blk.{i}.attn_q.weight", p + "attn.wq.weight", F32)
        put(f"blk.{i}.attn_k.weight", p + "attn.wk.weight", F32)
        put(f"blk.{i}.attn_v.weight", p + "attn.wv.weight", F32)
        put(f"blk.{i}.attn_output.weight", p + "attn.wo.weight", F32)
        put(f"blk.{i}.ffn_norm.weight", p + "ffn_norm.weight", F32)
        if i < cfg["n_dense"]:
            put(f"blk.{i}.ffn_gate.weight", p + "ffn.gate.weight", F32)
            put(f"blk.{i}.ffn_up.weight", p + "ffn.up.weight", F32)
            put(f"blk.{i}.ffn_down.weight", p + "ffn.down.weight", F32)
        else:
            put(f"blk.{i}.ffn_gate_inp.weight", p + "ffn.router.weight", F32)
            put(f"blk.{i}.ffn_gate_exps.weight", p + "ffn.w_gate", Q8)
            put(f"blk.{i}.ffn_up_exps.weight", p + "ffn.w_up", Q8)
            put(f"blk.{i}.ffn_down_exps.weight", p + "ffn.w_down", Q8)
    put("output_norm.weight", "norm.weight", F32)
    put("output.weight", "output.weight", F32)
    assert set(deq) == set(state), set(state) ^ set(deq)
    os.makedirs(out_dir, exist_ok=True)
    gguf_path = os.path.join(out_dir, f"{name}.gguf")
    w.write(gguf_path)
    print(f"wrote {gguf_path}: {os.path.getsize(gguf_path)} bytes", flush=True)

    # Reference logits: an independent float64 NumPy forward pass on the weights
    # exactly as stored, with ggml's activation rounding (what the engine does).
    ref = RefModel(cfg, {k: v.numpy() for k, v in deq.items()}, types)
    prompts = read_prompts(prompts_path)
    rows, refs, off = [], [], 0
    # For the card: how far the trainer's own float32 forward (float activations,
    # de-quantized weights) is from the reference.
    model = tr.Model(cfg)
    model.load_state_dict({k: v for k, v in deq.items()})
    model.eval()
    max_d_torch = 0.0
    for p in prompts:
        toks = [sp.bos_id()] + sp.encode(p)
        lg = ref.forward(toks)
        with torch.no_grad():
            lt = model(torch.tensor([toks]))[0][0].double().numpy()
        max_d_torch = max(max_d_torch, float(np.abs(lt - lg).max()))
        rows.append(lg.astype(np.float32))
        seq = list(toks)
        greedy = []
        for _ in range(N_GREEDY):
            nxt = int(np.argmax(ref.forward(seq)[-1]))
            greedy.append(nxt)
            seq.append(nxt)
        b = b"".join(piece_bytes(sp, t) for t in greedy)
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        refs.append(dict(prompt=p, tokens=toks, logits_offset_rows=off, greedy=greedy, greedy_text=text))
        off += len(toks)
        print(json.dumps(refs[-1]), flush=True)
    print(f"max |logit(torch float32, float activations) - logit(reference)| = {max_d_torch:.4g}", flush=True)
    np.concatenate(rows, 0).astype("<f4").tofile(os.path.join(out_dir, f"{name}.ref.f32"))
    with open(os.path.join(out_dir, f"{name}.ref.jsonl"), "w") as f:
        for r in refs:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    with open(os.path.join(out_dir, f"{name}.prompts.txt"), "w") as f:
        for p in prompts:
            f.write(p.replace("\n", "\\n") + "\n")
    meta = dict(config=cfg, final=final, gguf_bytes=os.path.getsize(gguf_path),
                max_abs_logit_torch_vs_reference=max_d_torch,
                tensor_types=dict(token_embd="F16", experts="Q8_0",
                                  attention_dense_ffn_router_norms_output="F32"))
    with open(os.path.join(out_dir, f"{name}.config.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=tr.DEFAULT_WORK)
    ap.add_argument("--out", default=os.path.normpath(os.path.join(HERE, "..")))
    ap.add_argument("--prompts", default=os.path.join(HERE, "prompts.txt"))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    export(a.work, a.out, a.prompts)


if __name__ == "__main__":
    main()
