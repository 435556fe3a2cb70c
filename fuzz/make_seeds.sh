#!/usr/bin/env bash
# Regenerates the committed fuzz seeds (fuzz/corpus/<target>/) and the small
# model the container target runs manifests against (fuzz/data/container/)
# from `tern synth` + `tern install` outputs. Deterministic for a given Tern;
# rerun after a container format change.
#   fuzz/make_seeds.sh [path/to/tern]     (default build/release/bin/tern)
set -euo pipefail
cd "$(dirname "$0")/.."
tern=$(realpath "${1:-build/release/bin/tern}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

rm -rf fuzz/corpus fuzz/data
mkdir -p fuzz/corpus/{safetensors,config,container,tokenizer,trace,usage} fuzz/data/container/{qwen3_moe,gpt_oss,qwen3_next} \
  fuzz/data/safetensors

# The built-in tokenizer cut to the 256 byte tokens + 24 merges + the added
# tokens, so models and seeds stay a few KB.
"$tern" synth --preset tiny -o "$tmp/tiny" -q >/dev/null
"$py" - "$tmp/tiny/tokenizer.json" "$tmp/tok.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
keep = 24
vocab = {s: i for s, i in t["model"]["vocab"].items() if i < 256 + keep}
merges = [m for m in t["model"]["merges"][:keep] if "".join(m if isinstance(m, list) else m.split(" ")) in vocab]
t["model"]["vocab"], t["model"]["merges"] = vocab, merges
for n, a in enumerate(t["added_tokens"]):
    a["id"] = 256 + keep + n
json.dump(t, open(sys.argv[2], "w"), ensure_ascii=False, separators=(",", ":"))
PY

# config.json seeds: presets and the options that change the tensor table.
cp "$tmp/tiny/config.json" fuzz/corpus/config/tiny.json
micro=(--preset tiny --experts 4 --top-k 2 --hidden 32 --heads 2 --kv-heads 1 --head-dim 16
       --moe-ffn 32 --ffn 64 --max-position 256 --tokenizer "$tmp/tok.json")
i=0
for extra in "--layers 2" "--layers 2 --tie-embeddings" "--layers 2 --attention-bias --no-norm-topk" \
             "--layers 3 --mlp-only-layers 0" "--layers 4 --decoder-sparse-step 2"; do
  # shellcheck disable=SC2086
  "$tern" synth "${micro[@]}" $extra -o "$tmp/c$i" -q >/dev/null
  cp "$tmp/c$i/config.json" "fuzz/corpus/config/micro-$i.json"
  i=$((i + 1))
done
"$py" - fuzz/corpus/config/micro-0.json fuzz/corpus/config/micro-rope-yarn.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY

"$tern" synth --arch gpt_oss --preset tiny -o "$tmp/gpt_oss-tiny" -q >/dev/null
cp "$tmp/gpt_oss-tiny/config.json" fuzz/corpus/config/gpt_oss-tiny.json
"$tern" synth --arch gpt_oss --preset tiny --layout float -o "$tmp/gpt_oss-float" -q >/dev/null
cp "$tmp/gpt_oss-float/config.json" fuzz/corpus/config/gpt_oss-tiny-float.json
for arch in mixtral olmoe qwen2_moe deepseek_v3 glm4_moe qwen3_next gemma4; do
  "$tern" synth --arch $arch --preset tiny -o "$tmp/$arch-tiny" -q >/dev/null
  cp "$tmp/$arch-tiny/config.json" fuzz/corpus/config/$arch-tiny.json
done

# The container target's models (one per architecture, default block
# formats) and their manifests.
install_fixture() {  # architecture, synth args...
  local arch=$1
  shift
  "$tern" synth --arch "$arch" "${micro[@]}" --layers 2 "$@" -o "$tmp/hf-$arch" -q >/dev/null
  "$tern" install "$tmp/hf-$arch" -o "$tmp/$arch.tern" -q >/dev/null 2>&1
  cp "$tmp/$arch.tern/trunk.bin" "$tmp/$arch.tern/experts.bin" "fuzz/data/container/$arch/"
  [ "$arch" = qwen3_moe ] && cp "$tmp/$arch.tern/manifest.json" "fuzz/data/container/$arch/"  # the usage target's model
  "$py" - "$tmp/$arch.tern/manifest.json" "fuzz/corpus/container/$arch.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["source"] = {"path": "hf", "shards": 1}  # no machine-specific path in a committed file
json.dump(m, open(sys.argv[2], "w"), indent=1)
PY
}
install_fixture qwen3_moe --tie-embeddings
install_fixture gpt_oss
# Gated DeltaNet (a state per sequence) and gated attention, one layer each.
install_fixture qwen3_next --set linear_num_key_heads=1 --set linear_num_value_heads=2 --set linear_key_head_dim=8 \
  --set linear_value_head_dim=8 --set full_attention_interval=2 --set shared_expert_intermediate_size=32

# safetensors seeds: the model's 1-D tensors with their data; one matrix; and
# the whole header over a data section cut short (the truncation path).
"$py" - "$tmp/hf-qwen3_moe/model.safetensors" fuzz/corpus/safetensors <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
def write(path, names, cut=None):
    h, out = {"__metadata__": {"format": "pt"}}, b""
    for name in names:
        e = header[name]
        b, end = e["data_offsets"]
        h[name] = {"dtype": e["dtype"], "shape": e["shape"], "data_offsets": [len(out), len(out) + end - b]}
        out += data[b:end]
    text = json.dumps(h, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    blob = struct.pack("<Q", len(text)) + text + out
    open(path, "wb").write(blob[:cut] if cut else blob)
names = [k for k in header if k != "__metadata__"]
vectors = [k for k in names if len(header[k]["shape"]) == 1]
write(sys.argv[2] + "/vectors.safetensors", vectors[:6])
write(sys.argv[2] + "/matrix.safetensors", ["model.layers.0.self_attn.k_proj.weight"])
full = struct.pack("<Q", n) + raw[8:8 + n]
open(sys.argv[2] + "/full-header-truncated.safetensors", "wb").write(full + data[:64])
PY
# The shard an index.json input names (the target's second mode), and an index seed.
cp fuzz/corpus/safetensors/vectors.safetensors fuzz/data/safetensors/model-00001-of-00001.safetensors
"$py" - fuzz/corpus/safetensors/vectors.safetensors fuzz/corpus/safetensors/index.json <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
names = [k for k in json.loads(raw[8:8 + n]) if k != "__metadata__"]
index = {"metadata": {"total_size": len(raw) - 8 - n},
         "weight_map": {k: "model-00001-of-00001.safetensors" for k in names}}
json.dump(index, open(sys.argv[2], "w"), indent=1)
PY

# tokenizer seeds: tokenizer.json, then a NUL byte and text to encode.
cp "$tmp/tok.json" fuzz/corpus/tokenizer/small.json
printf '%s\0%s' "$(cat "$tmp/tok.json")" $'Hello <|im_start|>user\n déjà vu 12 <think>x</think>\t\t  end' \
  > fuzz/corpus/tokenizer/small-with-text.bin
"$py" - "$tmp/tok.json" fuzz/corpus/tokenizer/llama3-style.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
bos = t["added_tokens"][0]
t["normalizer"] = None
t["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}
t["post_processor"] = {"type": "Sequence", "processors": [
    {"type": "ByteLevel", "trim_offsets": False},
    {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": bos["content"], "type_id": 0}},
                                              {"Sequence": {"id": "A", "type_id": 0}}],
     "special_tokens": {bos["content"]: {"id": bos["content"], "ids": [bos["id"]], "tokens": [bos["content"]]}}}]}
t["added_tokens"][1].update({"lstrip": True, "rstrip": True, "single_word": True, "special": False})
t["model"]["ignore_merges"] = True
json.dump(t, open(sys.argv[2], "w"), ensure_ascii=False, separators=(",", ":"))
PY

# A SentencePiece-style (Mistral legacy) tokenizer cut to its specials, the
# 256 byte-fallback tokens and the pieces its first merges need, and its
# Metaspace form.
"$py" - "$tmp/mixtral-tiny/tokenizer.json" fuzz/corpus/tokenizer/mistral-legacy.json \
  fuzz/corpus/tokenizer/mistral-metaspace.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
vocab = t["model"]["vocab"]
merges = [m if isinstance(m, list) else m.split(" ") for m in t["model"]["merges"]][:40]
keep = {k for k, v in vocab.items() if v < 259}
for a, b in merges:
    keep.update((a, b, a + b))
ids = sorted(vocab[k] for k in keep)
remap = {old: new for new, old in enumerate(ids)}
t["model"]["vocab"] = {k: remap[v] for k, v in vocab.items() if k in keep}
t["model"]["merges"] = [" ".join(m) for m in merges]
json.dump(t, open(sys.argv[2], "w"), ensure_ascii=False, separators=(",", ":"))
t["normalizer"] = None
t["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
t["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
json.dump(t, open(sys.argv[3], "w"), ensure_ascii=False, separators=(",", ":"))
PY

# trace seeds: a recorded routing trace (3 layers, layer 1 dense: 2 lists per
# token), hand-made lines, and lines only nlohmann reads (escapes, -0).
"$tern" synth --preset tiny --layers 3 --mlp-only-layers 1 -o "$tmp/trace-hf" -q >/dev/null
"$tern" install "$tmp/trace-hf" -o "$tmp/trace.tern" -q >/dev/null 2>&1
"$tern" trace record "$tmp/trace.tern" --tokens 5,9,2,33 -n 4 --ignore-eos --no-usage \
  -o fuzz/corpus/trace/tiny.jsonl 2>/dev/null
printf '%s\n' '{"experts": [[3, 1], [0, 7]]}' \
  '{ "experts" : [ [ 2 ] , [ ] ], "weights": [[1e-05], []], "note": {"a": [true, null, "x"]} }' \
  > fuzz/corpus/trace/hand.jsonl
printf '%s\n' '{"exp\u0065rts": [[4]]}' '{"experts": [[-0]], "weights": [[null]]}' > fuzz/corpus/trace/json-only.jsonl

# usage seeds (fuzz/fuzz_usage.cpp): a flag byte (1: fix the model id, 2:
# append the checksum), then the file: counts for the 2 x 4 experts of the
# qwen3_moe fixture, a file of the wrong shape, and one with no repairs.
"$py" - fuzz/corpus/usage <<'PY'
import struct, sys
def body(layers, experts, counts):
    return (b"TERNUSE1" + struct.pack("<IQII", 1, 0, layers, experts) +
            b"".join(struct.pack("<Q", c) for c in counts))
open(sys.argv[1] + "/counts.bin", "wb").write(b"\x03" + body(2, 4, [5, 0, 9, 1, 0, 3, 3, 7]))
open(sys.argv[1] + "/wrong-shape.bin", "wb").write(b"\x03" + body(3, 4, range(12)))
open(sys.argv[1] + "/unrepaired.bin", "wb").write(b"\x00" + body(2, 4, [1] * 8) + b"\0" * 8)
PY

du -sh fuzz/corpus/* fuzz/data/container
