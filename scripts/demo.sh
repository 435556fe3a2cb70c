#!/usr/bin/env bash
# make demo: synthesize (once) a random-weight demo model of a few GiB in the
# real Hugging Face layout, install it as .tern, verify it, inspect it, and
# chat with it while its experts stream from disk through a cache smaller
# than they are. Every step says what it shows.
set -euo pipefail
TERN=${1:-build/release/bin/tern}
DIR=${TERN_DEMO_DIR:-demo-models}
mkdir -p "$DIR"
start=$(date +%s)
cat <<'MSG'
== Tern demo
   Tern runs mixture-of-experts models bigger than RAM: the trunk (attention,
   routers, embeddings) stays in memory, the routed experts stay on disk and
   are read into a bounded cache as the router picks them.
   No model can be downloaded here, so the demo model has RANDOM weights in the
   real Hugging Face layout (config.json + safetensors + tokenizer): its text
   is noise, but every byte goes through the loaders a real download uses, and
   the speed and memory numbers are real.
MSG
if [ ! -f "$DIR/demo-hf/config.json" ]; then
  echo "== 1. tern synth: writing the demo checkpoint (Qwen3-MoE shape, 16 layers x 64 experts, 3.1 GiB BF16; once)"
  "$TERN" synth --arch qwen3_moe --preset demo --seed 1 -o "$DIR/demo-hf" --force
else
  echo "== 1. tern synth: reusing $DIR/demo-hf"
fi
if [ ! -f "$DIR/demo.tern/manifest.json" ]; then
  echo "== 2. tern install: repacking into .tern, experts quantized to Q4_K and the trunk to Q8_0 (the defaults),"
  echo "      on every core; the rate below is the checkpoint read from disk"
  "$TERN" install "$DIR/demo-hf" -o "$DIR/demo.tern" --force
else
  echo "== 2. tern install: reusing $DIR/demo.tern"
fi
echo "== 3. tern verify: re-reads every byte of the install and checks every checksum"
"$TERN" verify "$DIR/demo.tern"
echo "== 4. tern info: what is resident (trunk) and what streams (experts)"
"$TERN" info "$DIR/demo.tern"
echo "== 5. tern chat: one reply, experts streamed from disk through a 320 MiB cache; the experts take 864 MiB,"
echo "      so every token reads the experts it picks that are not cached. Statistics after the reply:"
echo "      hit rate = expert lookups served from the cache; read = expert bytes read from disk; peak RSS = memory used."
"$TERN" chat "$DIR/demo.tern" --ram 320M --stats --no-think -n 48 --seed 1 \
  --prompt "Explain in one sentence why mixture-of-experts models can run from disk."
echo "== done in $(( $(date +%s) - start )) s. (Random weights: the reply above is noise; the statistics are real.)"
