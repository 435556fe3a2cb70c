#!/usr/bin/env python3
"""Writes an installed qwen3_moe .tern model as a GGUF file, block for block.

Tern's block formats are byte-compatible with GGUF's (Q8_0, Q4_0, Q4_K, Q6_K,
MXFP4, F32/F16/BF16), so the GGUF holds exactly the weights Tern runs: the
trunk tensors are copied from trunk.bin and each layer's experts are gathered
from experts.bin into GGUF's fused [experts, out, in] tensors. It exists to
measure a peer (llama.cpp) on the same weights as Tern (docs/RESULTS.md); it
shares no code with the engine and needs only the Python standard library.

  /usr/bin/python3 tools/tern_to_gguf.py MODEL.tern OUT.gguf

The tokenizer (tokenizer.json beside the model, byte-level BPE) is written as
a "gpt2" vocabulary with the "qwen2" pre-tokenizer; ids beyond the
tokenizer's vocabulary (padding rows of the embedding) become unused tokens.
"""
import json
import os
import struct
import sys

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# GGUF metadata value types.
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64 = 4, 5, 6, 7, 8, 9, 10
# ggml tensor types of the formats a .tern install holds.
GGML_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "q4_k": 12, "q6_k": 14, "bf16": 30, "mxfp4": 39}

TRUNK_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",
}
EXPERT_NAMES = {"gate": "ffn_gate_exps.weight", "up": "ffn_up_exps.weight", "down": "ffn_down_exps.weight"}


def gguf_name(hf_name):
    if hf_name in TRUNK_NAMES:
        return TRUNK_NAMES[hf_name]
    parts = hf_name.split(".", 3)  # model, layers, N, rest
    if len(parts) == 4 and parts[0] == "model" and parts[1] == "layers" and parts[3] in LAYER_NAMES:
        return f"blk.{parts[2]}.{LAYER_NAMES[parts[3]]}"
    sys.exit(f"tern_to_gguf: no GGUF name for {hf_name} (dense MLP layers are not supported)")


class Writer:
    def __init__(self):
        self.kv = []

    @staticmethod
    def string(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def add(self, key, vtype, value):
        if vtype == T_STRING:
            payload = self.string(value)
        elif vtype == T_ARRAY:
            item_type, items = value
            if item_type == T_STRING:
                body = b"".join(self.string(x) for x in items)
            else:
                fmt = {T_INT32: "<i", T_UINT32: "<I", T_FLOAT32: "<f"}[item_type]
                body = b"".join(struct.pack(fmt, x) for x in items)
            payload = struct.pack("<IQ", item_type, len(items)) + body
        else:
            fmt = {T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q"}[vtype]
            payload = struct.pack(fmt, value)
        self.kv.append(self.string(key) + struct.pack("<I", vtype) + payload)


def tokenizer_metadata(w, model_dir, vocab_size, cfg):
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    tokens = [None] * vocab_size
    types = [5] * vocab_size  # unused
    for piece, i in tok["model"]["vocab"].items():
        if i < vocab_size:
            tokens[i], types[i] = piece, 1  # normal
    for a in tok.get("added_tokens", []):
        if a["id"] < vocab_size:
            tokens[a["id"]], types[a["id"]] = a["content"], 3 if a.get("special") else 4  # control / user
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i] = f"[PAD{i}]"
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"].get("merges", [])]
    w.add("tokenizer.ggml.model", T_STRING, "gpt2")
    w.add("tokenizer.ggml.pre", T_STRING, "qwen2")
    w.add("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens))
    w.add("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types))
    w.add("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges))
    for key, field in (("eos", "eos_token_id"), ("bos", "bos_token_id")):
        if isinstance(cfg.get(field), int):
            w.add(f"tokenizer.ggml.{key}_token_id", T_UINT32, cfg[field])
    w.add("tokenizer.ggml.add_bos_token", T_BOOL, False)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model_dir, out_path = sys.argv[1], sys.argv[2]
    with open(os.path.join(model_dir, "manifest.json")) as f:
        m = json.load(f)
    if m["architecture"] != "qwen3_moe":
        sys.exit(f"tern_to_gguf: {m['architecture']} is not supported (qwen3_moe only)")
    cfg = m["config"]
    moe_layers = {l["layer"] for l in m["experts"]["layers"]}
    if len(moe_layers) != cfg["num_hidden_layers"]:
        sys.exit("tern_to_gguf: every layer must be a MoE layer (llama.cpp's qwen3moe has no dense layers)")
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]

    w = Writer()
    a = "qwen3moe"
    w.add("general.architecture", T_STRING, a)
    w.add("general.name", T_STRING, os.path.basename(os.path.normpath(model_dir)))
    w.add("general.alignment", T_UINT32, ALIGNMENT)
    w.add(f"{a}.context_length", T_UINT32, cfg["max_position_embeddings"])
    w.add(f"{a}.embedding_length", T_UINT32, cfg["hidden_size"])
    w.add(f"{a}.block_count", T_UINT32, cfg["num_hidden_layers"])
    w.add(f"{a}.feed_forward_length", T_UINT32, cfg["intermediate_size"])
    w.add(f"{a}.expert_feed_forward_length", T_UINT32, cfg["moe_intermediate_size"])
    w.add(f"{a}.attention.head_count", T_UINT32, cfg["num_attention_heads"])
    w.add(f"{a}.attention.head_count_kv", T_UINT32, cfg["num_key_value_heads"])
    w.add(f"{a}.attention.key_length", T_UINT32, head_dim)
    w.add(f"{a}.attention.value_length", T_UINT32, head_dim)
    w.add(f"{a}.rope.dimension_count", T_UINT32, head_dim)
    w.add(f"{a}.rope.freq_base", T_FLOAT32, float(cfg["rope_theta"]))
    w.add(f"{a}.attention.layer_norm_rms_epsilon", T_FLOAT32, float(cfg["rms_norm_eps"]))
    w.add(f"{a}.expert_count", T_UINT32, cfg["num_experts"])
    w.add(f"{a}.expert_used_count", T_UINT32, cfg["num_experts_per_tok"])
    tokenizer_metadata(w, model_dir, cfg["vocab_size"], cfg)

    # Tensors: (name, ne (innermost first), type, size, source) where source
    # is a list of (file, offset, size) pieces.
    trunk_file = os.path.join(model_dir, m["trunk"]["file"])
    experts_file = os.path.join(model_dir, m["experts"]["file"])
    tensors = []
    for t in m["trunk"]["tensors"]:
        tensors.append((gguf_name(t["name"]), list(reversed(t["shape"])), GGML_TYPE[t["format"]], t["size"],
                        [(trunk_file, t["offset"], t["size"])]))
    for l in m["experts"]["layers"]:
        for s in l["sections"]:
            pieces = [(experts_file, l["offset"] + e * l["stride"] + s["offset"], s["size"])
                      for e in range(l["num_experts"])]
            tensors.append((f"blk.{l['layer']}.{EXPERT_NAMES[s['name']]}",
                            list(reversed(s["shape"])) + [l["num_experts"]], GGML_TYPE[s["format"]],
                            s["size"] * l["num_experts"], pieces))

    infos, offset = [], 0
    for name, ne, ggml_type, size, _ in tensors:
        infos.append(Writer.string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
                     + struct.pack("<IQ", ggml_type, offset))
        offset += size + (-size % ALIGNMENT)

    tmp = out_path + ".part"
    with open(tmp, "wb") as out:
        out.write(GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(w.kv)))
        for kv in w.kv:
            out.write(kv)
        for info in infos:
            out.write(info)
        out.write(b"\0" * (-out.tell() % ALIGNMENT))
        handles = {}
        for _, _, _, size, pieces in tensors:
            for path, off, n in pieces:
                f = handles.setdefault(path, open(path, "rb"))
                f.seek(off)
                while n:
                    chunk = f.read(min(n, 64 << 20))
                    if not chunk:
                        sys.exit(f"tern_to_gguf: {path} ends early")
                    out.write(chunk)
                    n -= len(chunk)
            out.write(b"\0" * (-size % ALIGNMENT))
        for f in handles.values():
            f.close()
    os.replace(tmp, out_path)
    print(f"wrote {out_path}: {len(tensors)} tensors, {os.path.getsize(out_path) / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
