#!/usr/bin/env bash
# The README's test command: CPU tests + Triton kernels under the interpreter (GPU tests skip themselves without CUDA).
# Arguments replace the default target (tests): e.g. bash scripts/test.sh tests/server/test_quantspec_server.py
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# A fresh clone has no environment yet: build it first (scripts/setup_env.sh is idempotent).
[ -x "$VENV/bin/python" ] || bash scripts/setup_env.sh "$VENV"
# Two workers (one a core), each file's tests on one worker (its module-scoped servers stay shared); --durations:
# the slowest tests are listed in every log.
[ $# -gt 0 ] || set -- tests
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=15 "$@"
