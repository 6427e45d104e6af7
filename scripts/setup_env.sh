#!/usr/bin/env bash
# Build the CPU environment: a venv in .venv with torch 2.13.0 (CPU), triton 3.6.0 (the GPU machine's version; used
# here under TRITON_INTERPRET=1), SGLang 0.5.17 and the modules its server imports, then sgl-spec in editable mode.
# Idempotent: a second run only re-checks. Usage: bash scripts/setup_env.sh [VENV_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-$ROOT/.venv}
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" -r "$ROOT/scripts/requirements-cpu.txt"
# No deps for these: sglang would pull a CUDA torch and pins we replace; torchvision/xgrammar would too.
"${PIP[@]}" --no-deps "sglang==0.5.17" "torchvision==0.28.0" "xgrammar==0.2.8"
"${PIP[@]}" --no-deps -e "$ROOT"
"$VENV/bin/python" -c "import torch, triton, sglang, sgl_spec; print('env ok: torch', torch.__version__, 'triton', triton.__version__, 'sglang', sglang.__version__)"
