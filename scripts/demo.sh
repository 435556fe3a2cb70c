#!/usr/bin/env bash
# make demo: synthesize (once) a random-weight demo model of a few GiB in the
# real Hugging Face layout, install it as .tern, verify it, show its sizes.
set -euo pipefail
TERN=${1:-build/release/bin/tern}
DIR=${TERN_DEMO_DIR:-demo-models}
mkdir -p "$DIR"
echo "== Tern demo. NOTE: the demo model has RANDOM weights (no model can be downloaded here);"
echo "   its text output is meaningless, but every byte flows through the real loaders."
if [ ! -f "$DIR/demo-hf/config.json" ]; then
  echo "== tern synth --preset demo (once; ~3.3 GiB)"
  "$TERN" synth --arch qwen3_moe --preset demo --seed 1 -o "$DIR/demo-hf" --force
fi
if [ ! -f "$DIR/demo.tern/manifest.json" ]; then
  echo "== tern install (experts quantized to q4_k, trunk to q8_0: the defaults)"
  "$TERN" install "$DIR/demo-hf" -o "$DIR/demo.tern" --force
fi
echo "== tern verify"
"$TERN" verify "$DIR/demo.tern"
echo "== tern info"
"$TERN" info "$DIR/demo.tern"
echo "== tern chat (one shot): experts streamed from disk through a 320 MiB cache (the model's experts take 864 MiB)"
"$TERN" chat "$DIR/demo.tern" --ram 320M --stats --no-think -n 48 --seed 1 \
  --prompt "Explain in one sentence why mixture-of-experts models can run from disk."
echo "== (random weights: the text above is noise; the statistics are real)"
