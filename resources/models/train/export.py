#!/usr/bin/env python3
"""Export the trained demo model to GGUF (OLMoE architecture, `olmoe`),
quantize it with Strata's own quantizer, and write the reference logits of the
prompts in prompts.txt.

    python3 export.py [--work DIR] [--out resources/models]

Steps:
  1. the float32 checkpoint -> $WORK/strata-demo-moe-f32.gguf (every tensor F32,
     standard olmoe names and metadata, the SentencePiece vocabulary);
  2. `strata-cli quantize --recipe demo` -> --out/strata-demo-moe.gguf: routed
     experts Q8_0, token embeddings F16, the rest F32 (see TENSOR TYPES);
  3. reference logits from an independent float64 NumPy forward pass on the
     weights exactly as stored in that file (read back by gguf_reader.py), with
     ggml's activation rounding (q8_0 blocks before Q8_0 products).

Writes into --out:
    strata-demo-moe.gguf           the model
    strata-demo-moe.prompts.txt    the prompts (a literal \\n is a newline)
    strata-demo-moe.ref.jsonl      per prompt: prompt, tokens (BOS + SPM ids),
                                   logits_offset_rows, greedy (32 ids), greedy_text
    strata-demo-moe.ref.f32        float32 rows of n_vocab logits, one per prompt position
    strata-demo-moe.config.json    the training configuration + final losses + param counts

strata-cli is $STRATA_CLI, else build/app/cli/strata-cli of this checkout
(packaging/build.sh builds it).

TENSOR TYPES. The routed experts (85% of the parameters) are Q8_0 and the token
embeddings F16; everything the activations are multiplied with outside the
experts stays F32. ggml (and the engine) round activations to F16 before an F16
product, and a float64 reference cannot reproduce on which side of an F16
rounding boundary a float32 value falls, so F32 there keeps the engine and this
reference within float rounding. The file stays under 32 MiB.
"""
import argparse
import json
import os
import sys

import subprocess

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_reader  # noqa: E402
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
    """OLMoE as llama.cpp computes it (build_olmoe), on GGUF-named weights."""

    def __init__(self, cfg, w, types):
        self.c = cfg
        self.w = w          # GGUF name -> float64 array
        self.types = types  # GGUF name -> ggml type id

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
        nh, nkv, hd = c["n_head"], c["n_head_kv"], c["head_dim"]
        i = np.arange(hd // 2, dtype=np.float64)
        theta = np.arange(T, dtype=np.float64)[:, None] * c["rope_base"] ** (-2.0 * i / hd)[None, :]
        cos, sin = np.cos(theta), np.sin(theta)

        def rope(x):  # x [T, H, hd], NeoX: pairs (i, i + hd/2)
            x0, x1 = x[..., :hd // 2], x[..., hd // 2:]
            return np.concatenate((x0 * cos[:, None, :] - x1 * sin[:, None, :],
                                   x0 * sin[:, None, :] + x1 * cos[:, None, :]), axis=-1)

        x = w["token_embd.weight"][toks]
        mask = np.triu(np.ones((T, T), dtype=bool), 1)
        for l in range(c["n_layer"]):
            p = f"blk.{l}."
            h = self._rms(x, w[p + "attn_norm.weight"])
            # RMSNorm over the whole Q and K projections, then RoPE per head.
            q = self._rms(self.mm(h, p + "attn_q.weight"), w[p + "attn_q_norm.weight"])
            k = self._rms(self.mm(h, p + "attn_k.weight"), w[p + "attn_k_norm.weight"])
            q = rope(q.reshape(T, nh, hd))
            k = rope(k.reshape(T, nkv, hd))
            v = self.mm(h, p + "attn_v.weight").reshape(T, nkv, hd)
            g = nh // nkv
            att = np.empty((T, nh, hd))
            for hh in range(nh):
                s = (q[:, hh] @ k[:, hh // g].T) / np.sqrt(hd)
                s[mask] = -np.inf
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
                att[:, hh] = s @ v[:, hh // g]
            x = x + self.mm(att.reshape(T, nh * hd), p + "attn_output.weight")
            h = self._rms(x, w[p + "ffn_norm.weight"])
            logits = self.mm(h, p + "ffn_gate_inp.weight")
            pr = np.exp(logits - logits.max(-1, keepdims=True))
            pr /= pr.sum(-1, keepdims=True)
            k_used = c["n_expert_used"]
            y = np.zeros_like(x)
            for t in range(T):
                top = np.argsort(-pr[t], kind="stable")[:k_used]
                wt = pr[t, top]  # OLMoE: the probabilities themselves, not renormalised
                for e, we in zip(top, wt):
                    ht = h[t:t + 1]
                    z = silu(self.mm(ht, p + "ffn_gate_exps.weight", e)) * self.mm(ht, p + "ffn_up_exps.weight", e)
                    y[t] += we * self.mm(z, p + "ffn_down_exps.weight", e)[0]
            x = x + y
        x = self._rms(x, w["output_norm.weight"])
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


def gguf_names(L):
    """(GGUF tensor name, trainer state key) of every tensor, in file order."""
    out = [("token_embd.weight", "tok_embd.weight")]
    for i in range(L):
        p, b = f"blocks.{i}.", f"blk.{i}."
        out += [(b + "attn_norm.weight", p + "attn_norm.weight"),
                (b + "attn_q.weight", p + "attn.wq.weight"),
                (b + "attn_k.weight", p + "attn.wk.weight"),
                (b + "attn_v.weight", p + "attn.wv.weight"),
                (b + "attn_q_norm.weight", p + "attn.q_norm.weight"),
                (b + "attn_k_norm.weight", p + "attn.k_norm.weight"),
                (b + "attn_output.weight", p + "attn.wo.weight"),
                (b + "ffn_norm.weight", p + "ffn_norm.weight"),
                (b + "ffn_gate_inp.weight", p + "ffn.router.weight"),
                (b + "ffn_gate_exps.weight", p + "ffn.w_gate"),
                (b + "ffn_up_exps.weight", p + "ffn.w_up"),
                (b + "ffn_down_exps.weight", p + "ffn.w_down")]
    out += [("output_norm.weight", "norm.weight"), ("output.weight", "output.weight")]
    return out


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
    a = "olmoe."
    w.add_string("general.architecture", "olmoe")
    w.add_string("general.name", name)
    w.add_string("general.description",
                 "Strata demo MoE, trained from scratch on the King James Bible (public domain) "
                 "by resources/models/train/train.sh")
    w.add_u32(a + "context_length", cfg["n_ctx"])
    w.add_u32(a + "embedding_length", d)
    w.add_u32(a + "block_count", L)
    # Every layer is MoE: llama.cpp's olmoe takes the expert width from here.
    w.add_u32(a + "feed_forward_length", cfg["n_ff_exp"])
    w.add_u32(a + "attention.head_count", cfg["n_head"])
    w.add_u32(a + "attention.head_count_kv", cfg["n_head_kv"])
    w.add_f32(a + "attention.layer_norm_rms_epsilon", cfg["norm_eps"])
    w.add_f32(a + "rope.freq_base", cfg["rope_base"])
    w.add_u32(a + "expert_count", cfg["n_expert"])
    w.add_u32(a + "expert_used_count", cfg["n_expert_used"])
    w.add_u32(a + "expert_feed_forward_length", cfg["n_ff_exp"])
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

    names = gguf_names(L)
    for gname, key in names:
        w.add_tensor(gname, state[key].float().numpy(), gw.GGML_F32)
    assert set(k for _, k in names) == set(state), set(state) ^ set(k for _, k in names)
    os.makedirs(out_dir, exist_ok=True)
    f32_path = os.path.join(work, f"{name}-f32.gguf")
    w.write(f32_path)
    gguf_path = os.path.join(out_dir, f"{name}.gguf")
    cli = os.environ.get("STRATA_CLI") or os.path.join(HERE, "..", "..", "..", "build", "app", "cli", "strata-cli")
    if not os.path.exists(cli):
        sys.exit(f"strata-cli not found at {cli}: build Strata first (packaging/build.sh) or set STRATA_CLI")
    subprocess.run([cli, "quantize", "--quiet", "--recipe", "demo", f32_path, gguf_path], check=True)
    print(f"wrote {gguf_path}: {os.path.getsize(gguf_path)} bytes", flush=True)

    # The weights exactly as stored in the shipped file.
    g = gguf_reader.GGUFFile(gguf_path)
    stored = {gname: g.tensor(gname) for gname, _ in names}
    ftypes = {gname: g.type_of(gname) for gname, _ in names}
    deq = {key: torch.from_numpy(stored[gname].astype(np.float32)) for gname, key in names}

    # Reference logits: an independent float64 NumPy forward pass on the weights
    # exactly as stored, with ggml's activation rounding (what the engine does).
    ref = RefModel(cfg, stored, ftypes)
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
                                  attention_router_norms_output="F32"),
                quantized_by="strata-cli quantize --recipe demo")
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
