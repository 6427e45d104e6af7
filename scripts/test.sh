#!/usr/bin/env bash
# The README's test command: CPU tests + Triton kernels under the interpreter (GPU tests skip themselves without CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# A fresh clone has no environment yet: build it first (scripts/setup_env.sh is idempotent).
[ -x "$VENV/bin/python" ] || bash scripts/setup_env.sh "$VENV"
# --durations: the CI budget is 90 minutes on 2 cores; the slowest tests are listed in every log.
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=10 tests "$@"
