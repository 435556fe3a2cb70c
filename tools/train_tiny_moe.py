#!/usr/bin/env python3
"""Trains a small synthetic Qwen3-MoE checkpoint (from `tern synth`) on a toy language.

Random-weight models have flat next-token distributions: their greedy choice
is a near-tie at most steps, so any rounding (8-bit weights, a different
summation order) flips it and the continuation diverges. Real checkpoints are
decisive. This script gives the test suite a decisive model without
downloading one: it takes a model directory written by `tern synth --dtype f32`
(real Hugging Face layout), trains every weight with PyTorch (Debian's
python3-torch) on sequences from `Language` below, and writes the trained
weights back into model.safetensors (same names, shapes, F32). config.json and
the tokenizer files are left as they are.

The PyTorch forward here is written for training only; the engine and the
independent NumPy reference (tools/reference/qwen3_moe.py) are what is tested.
`--check` runs the NumPy reference on the trained model and compares it with
this forward, so a mismatch between what was trained and what the engine
computes cannot go unnoticed.

Usage:
    /usr/bin/python3 tools/train_tiny_moe.py MODEL_DIR [--steps 600] [--seed 0] [--check]
Writes MODEL_DIR/training.json: the language's parameters, the final loss and
the accuracy of greedy next-token prediction on held-out sequences.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys
import time

# One BLAS thread: the matrices are tiny and torch has its own thread setting.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the caller decides whether this is a skip or an error
    torch = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
import qwen3_moe as ref  # noqa: E402  (reads safetensors and config; float64 reference)


class Language:
    """Two kinds of sequences over disjoint token ranges, SEQ_LEN tokens each.

    - progression: a_i = BASE_P + (a0 + i * s) mod 256, s in 1..7. The next
      token needs the last two tokens (attention to the previous position).
    - walk: a_{i+1} = BASE_W + perm[a_i - BASE_W], a fixed random permutation
      of 256 tokens (a lookup table the experts must memorise).
    Token ids stay below 1000, clear of the synthetic tokenizer's added tokens.
    """

    BASE_P = 100
    BASE_W = 500
    SEQ_LEN = 40

    def __init__(self, seed: int):
        self.perm = np.random.default_rng(seed + 7919).permutation(256)

    def progression(self, a0: int, s: int, n: int):
        return [self.BASE_P + (a0 + i * s) % 256 for i in range(n)]

    def walk(self, a0: int, n: int):
        out = [self.BASE_W + a0]
        while len(out) < n:
            out.append(self.BASE_W + int(self.perm[out[-1] - self.BASE_W]))
        return out

    def continue_sequence(self, prefix, n: int):
        """The language's own continuation of a valid prefix (>= 2 tokens)."""
        if prefix[0] >= self.BASE_W:
            return self.walk(prefix[-1] - self.BASE_W, n + 1)[1:]
        s = (prefix[-1] - prefix[-2]) % 256
        return self.progression(prefix[-1] - self.BASE_P, s, n + 1)[1:]

    def batch(self, rng, n: int):
        seqs = []
        for _ in range(n):
            if rng.random() < 0.5:
                seqs.append(self.progression(int(rng.integers(256)), int(rng.integers(1, 8)), self.SEQ_LEN))
            else:
                seqs.append(self.walk(int(rng.integers(256)), self.SEQ_LEN))
        return np.array(seqs, dtype=np.int64)


class TorchQwen3Moe:
    """Differentiable Qwen3-MoE forward over the checkpoint's own tensors."""

    def __init__(self, cfg: "ref.Config", tensors: dict):
        self.cfg = cfg
        self.p = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in tensors.items()}
        hd = cfg.head_dim
        self.inv_freq = torch.tensor(1.0 / (cfg.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)),
                                     dtype=torch.float32)

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.rms_norm_eps) * w

    def lin(self, x, name, bias=False):
        y = x @ self.p[name + ".weight"].t()
        return y + self.p[name + ".bias"] if bias else y

    def mlp(self, x, prefix):
        return self.lin(F.silu(self.lin(x, prefix + "gate_proj")) * self.lin(x, prefix + "up_proj"),
                        prefix + "down_proj")

    def forward(self, ids):
        c, p = self.cfg, self.p
        B, T = ids.shape
        x = p["model.embed_tokens.weight"][ids]
        freqs = torch.outer(torch.arange(T, dtype=torch.float32), self.inv_freq)
        cos, sin = torch.cat([freqs, freqs], -1).cos(), torch.cat([freqs, freqs], -1).sin()
        mask = torch.full((T, T), float("-inf")).triu(1)
        H, KV, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        aux = 0.0
        for l in range(c.num_hidden_layers):
            pre = f"model.layers.{l}."
            h = self.rms(x, p[pre + "input_layernorm.weight"])
            q = self.lin(h, pre + "self_attn.q_proj", c.attention_bias).view(B, T, H, hd)
            k = self.lin(h, pre + "self_attn.k_proj", c.attention_bias).view(B, T, KV, hd)
            v = self.lin(h, pre + "self_attn.v_proj", c.attention_bias).view(B, T, KV, hd)
            q = self.rms(q, p[pre + "self_attn.q_norm.weight"])
            k = self.rms(k, p[pre + "self_attn.k_norm.weight"])

            def rope(t):
                half = hd // 2
                rot = torch.cat([-t[..., half:], t[..., :half]], -1)
                return t * cos[None, :, None, :] + rot * sin[None, :, None, :]

            q, k = rope(q).transpose(1, 2), rope(k).transpose(1, 2)
            v = v.transpose(1, 2)
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask, -1) @ v
            x = x + self.lin(att.transpose(1, 2).reshape(B, T, H * hd), pre + "self_attn.o_proj", c.attention_bias)
            h = self.rms(x, p[pre + "post_attention_layernorm.weight"])
            if not c.is_moe_layer(l):
                x = x + self.mlp(h, pre + "mlp.")
                continue
            flat = h.reshape(B * T, -1)
            probs = torch.softmax(self.lin(flat, pre + "mlp.gate"), -1)
            w, idx = probs.topk(c.num_experts_per_tok, -1)
            if c.norm_topk_prob:
                w = w / w.sum(-1, keepdim=True)
            out = torch.zeros_like(flat)
            for e in range(c.num_experts):
                rows, slot = (idx == e).nonzero(as_tuple=True)
                if rows.numel():
                    y = self.mlp(flat[rows], f"{pre}mlp.experts.{e}.")
                    out = out.index_add(0, rows, y * w[rows, slot, None])
            # Switch-style load balancing: fraction routed x mean probability per expert.
            frac = torch.zeros(c.num_experts).index_add(0, idx.reshape(-1), torch.ones(idx.numel())) / idx.numel()
            aux = aux + c.num_experts * (frac * probs.mean(0)).sum()
            x = x + out.view(B, T, -1)
        x = self.rms(x, p["model.norm.weight"])
        head = p["model.embed_tokens.weight"] if c.tie_word_embeddings else p["lm_head.weight"]
        return x @ head.t(), aux


def write_safetensors(path: str, tensors: dict) -> None:
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check", action="store_true", help="compare with the NumPy reference after training")
    args = ap.parse_args(argv)
    if torch is None:
        print("train_tiny_moe: PyTorch is not installed (Debian: python3-torch)", file=sys.stderr)
        return 3
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    cfg = ref.Config.from_dict(json.load(open(os.path.join(args.model_dir, "config.json"))))
    store = ref.TensorStore(args.model_dir)
    if set(store.files) != {"model.safetensors"}:
        raise SystemExit("train_tiny_moe: expects a single model.safetensors (small models only)")
    names = sorted(store.where)
    model = TorchQwen3Moe(cfg, {n: store.get(n) for n in names})
    lang = Language(args.seed)
    rng = np.random.default_rng(args.seed)
    opt = torch.optim.AdamW(list(model.p.values()), lr=args.lr, weight_decay=0.0)
    started = time.time()
    loss_v = float("nan")
    for step in range(args.steps):
        lr = args.lr * min(1.0, (step + 1) / 20) * (0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        ids = torch.from_numpy(lang.batch(rng, args.batch))
        logits, aux = model.forward(ids[:, :-1])
        # Position 0 of a progression cannot be predicted (stride unknown); it still trains.
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        (loss + 0.01 * aux).backward()
        opt.step()
        loss_v = float(loss)
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d} loss {loss_v:.4f} aux {float(aux):.3f} ({time.time() - started:.0f} s)", flush=True)

    with torch.no_grad():
        held = torch.from_numpy(lang.batch(np.random.default_rng(args.seed + 1), 64))
        logits, _ = model.forward(held[:, :-1])
        pred = logits.argmax(-1)[:, 1:]  # skip position 0 (unpredictable for progressions)
        accuracy = float((pred == held[:, 2:]).float().mean())
        top2 = logits[:, 1:].topk(2, -1).values
        median_margin = float((top2[..., 0] - top2[..., 1]).median())
    write_safetensors(os.path.join(args.model_dir, "model.safetensors"),
                      {n: model.p[n].detach().numpy() for n in names})
    report = {"steps": args.steps, "seed": args.seed, "final_loss": loss_v, "heldout_accuracy": accuracy,
              "heldout_median_top2_margin": median_margin, "seconds": round(time.time() - started, 1),
              "language": {"progression_base": lang.BASE_P, "walk_base": lang.BASE_W,
                           "walk_permutation": [int(v) for v in lang.perm]}}
    if args.check:
        numpy_model = ref.load_model(args.model_dir)
        ids = held[0, :24].tolist()
        want = numpy_model.forward(ids)
        with torch.no_grad():
            got = model.forward(torch.tensor([ids]))[0][0].double().numpy()
        report["max_abs_diff_vs_numpy_reference"] = float(np.abs(got - want).max())
        report["logit_scale"] = float(np.abs(want).max())
    with open(os.path.join(args.model_dir, "training.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k != "language"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
