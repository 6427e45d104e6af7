#!/usr/bin/env bash
# The README's test command: CPU tests + Triton kernels under the interpreter (GPU tests skip themselves without CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests "$@"
