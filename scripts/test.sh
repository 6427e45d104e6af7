#!/usr/bin/env bash
# The README's test command: CPU tests + Triton kernels under the interpreter (GPU tests skip themselves without CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# --durations: the CI budget is 90 minutes on 2 cores; the slowest tests are listed in every log.
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=10 tests "$@"
