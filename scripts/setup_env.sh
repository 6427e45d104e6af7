#!/usr/bin/env bash
# Build the CPU environment: a venv with SGLang ($SGLANG_VERSION: 0.5.23 by default, or 0.5.17), its torch and
# triton (used here under TRITON_INTERPRET=1), the modules its server imports, then sgl-spec in editable mode.
# Idempotent: a second run only re-checks.
# Usage: bash scripts/setup_env.sh [VENV_DIR]   (default .venv; SGLANG_VERSION=0.5.17: .venv-0.5.17)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SGLANG_VERSION=${SGLANG_VERSION:-0.5.23}
case "$SGLANG_VERSION" in
  0.5.23) DEFAULT_VENV=$ROOT/.venv; XGRAMMAR=0.2.7 ;;
  0.5.17) DEFAULT_VENV=$ROOT/.venv-0.5.17; XGRAMMAR=0.2.8; TORCHVISION=0.28.0 ;;
  *) echo "setup_env: SGLANG_VERSION must be 0.5.23 or 0.5.17 (the releases sgl-spec supports), got $SGLANG_VERSION" >&2
     exit 2 ;;
esac
VENV=${1:-$DEFAULT_VENV}
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
HAVE=$("$VENV/bin/python" -c "from importlib.metadata import version as v; print(v('sglang'))" 2>/dev/null || true)
if [ -n "$HAVE" ] && [ "$HAVE" != "$SGLANG_VERSION" ]; then
  echo "setup_env: $VENV holds sglang $HAVE, not $SGLANG_VERSION: remove it, or pass another VENV_DIR" >&2
  exit 2
fi

pip_install() {
  # This machine's pip config lists a local index directory that may not exist; pip then prints one warning per
  # package. Drop only those lines (pipefail keeps pip's exit status).
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file://.*' is ignored" || true; }
}

REQ="$ROOT/scripts/requirements-sglang-$SGLANG_VERSION.txt"
pip_install -r "$REQ"
pip_install -r "$ROOT/scripts/requirements-cpu.txt" -c "$REQ"
# No deps for these: sglang would pull a CUDA stack (flashinfer, sglang-kernel, ...) and pins we replace.
pip_install --no-deps "sglang==$SGLANG_VERSION" "xgrammar==$XGRAMMAR" ${TORCHVISION:+"torchvision==$TORCHVISION"}
pip_install --no-deps -e "$ROOT"

# Smoke check, from / as a user's would run. 0.5.23's torch 2.14.1 + torchvision 0.29.1 import on CPU as they are;
# 0.5.17's PyPI torchvision (a CUDA build beside the CPU torch 2.13.0) imports only with the tests' shim
# (tests/shims/torchvision_fix.py), and neither release ships a CPU sgl_kernel: the tests' stand-in provides it.
(cd / && SGLANG_USE_CPU_ENGINE=1 "$VENV/bin/python" -c "
import sys
if '$SGLANG_VERSION' != '0.5.17':  # a user's client program, with no shims on the path
    from sglang import RuntimeEndpoint, function, gen
sys.path.insert(0, '$ROOT/tests/shims')
import torchvision_fix; torchvision_fix.install()
import torch, triton, sglang, sgl_spec, sgl_kernel, tvm_ffi, prometheus_client
import sglang.srt.entrypoints.http_server, sglang.srt.speculative.ngram_worker
from sgl_spec.patches import sglang as adapter
assert adapter().NAME == sglang.__version__, (adapter().NAME, sglang.__version__)
assert sgl_kernel.__version__.endswith('cpu-test-shim'), sgl_kernel.__file__
print('env ok: torch', torch.__version__, 'triton', triton.__version__, 'sglang', sglang.__version__)
")
