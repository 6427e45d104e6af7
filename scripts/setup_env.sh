#!/usr/bin/env bash
# Build the CPU environment: a venv in .venv with torch 2.13.0 (CPU), triton 3.6.0 (the GPU machine's version; used
# here under TRITON_INTERPRET=1), SGLang 0.5.17 and the modules its server imports, then sgl-spec in editable mode.
# Idempotent: a second run only re-checks. Usage: bash scripts/setup_env.sh [VENV_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-$ROOT/.venv}
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"

pip_install() {
  # This machine's pip config lists a local index directory that may not exist; pip then prints one warning per
  # package. Drop only those lines (pipefail keeps pip's exit status).
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file://.*' is ignored" || true; }
}

pip_install "torch==2.13.0"
pip_install -r "$ROOT/scripts/requirements-cpu.txt"
# No deps for these: sglang would pull a CUDA torch and pins we replace; torchvision/xgrammar would too.
pip_install --no-deps "sglang==0.5.17" "torchvision==0.28.0" "xgrammar==0.2.8"
pip_install --no-deps -e "$ROOT"

# Smoke check. SGLang imports torchvision at import time, and the PyPI torchvision is a CUDA build that only imports
# on CPU torch with the test-only shim (tests/shims/torchvision_fix.py), so the check runs the way the tests
# run SGLang (cwd /, as a user's would be).
(cd / && PYTHONPATH="$ROOT/tests/shims" SGLANG_USE_CPU_ENGINE=1 "$VENV/bin/python" -c "
import torch, triton, sglang, sgl_spec, sgl_kernel, tvm_ffi
import sglang.srt.entrypoints.http_server, sglang.srt.speculative.ngram_worker
assert sgl_kernel.__version__.endswith('cpu-test-shim'), sgl_kernel.__file__
print('env ok: torch', torch.__version__, 'triton', triton.__version__, 'sglang', sglang.__version__)
")
