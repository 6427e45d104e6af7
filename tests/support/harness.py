"""Start a real SGLang server on a CPU-only machine for tests, talk to it, and always clean it up.

    with launch_server(model_dir, ["--dtype", "float32"]) as srv:
        out = srv.generate("def f(x):", max_new_tokens=8)

How the server is run, and why:
- `python -m sglang.launch_server --device cpu` with env `SGLANG_USE_CPU_ENGINE=1`: SGLang only takes its CPU code
  paths (is_cpu()) when that variable is set; `--device cpu` alone is not enough.
- `PYTHONPATH` starts with tests/shims: a pure-torch `sgl_kernel` stand-in (SGLang's CPU engine imports a few
  `*_cpu` ops from it and PyPI has no CPU build), a `sitecustomize` that makes the CUDA-built PyPI torchvision
  importable, and an SGLang plugin (cpu_verify_attention.py) that, only with `verify_attention=True`
  (env SGL_CPU_TEST_VERIFY_ATTENTION=1), gives torch_native the TARGET_VERIFY path speculative decoding needs.
  Spawned scheduler/detokenizer processes inherit all of it.
- cwd is the log directory, never the repo root: `python -m` puts cwd on sys.path, and the repo's top-level
  `sgl_spec/kernels/` directory would shadow PyPI's `kernels` package that transformers imports.
- A fresh free port (a startup that dies because another process took it first is started again on a new one:
  start_ready); the server runs in its own session (process group), so on exit the whole group (HTTP server,
  scheduler, detokenizer) gets SIGTERM, then SIGKILL after a grace period.
- stdout+stderr go to a log file; any startup failure or timeout raises with the log's first error lines and its tail.
- Env also: the venv's bin/ first on PATH (SGLang JIT builds call `ninja`), CXX=tests/support/cxx-with-cstddef
  (c++ -include cstddef: 0.5.17's NGRAM corpus C++ misses that include and fails to JIT-build with GCC 12),
  HF_HUB_OFFLINE=1, and TRITON_INTERPRET removed (SGLang's own CPU path must not pick Triton up; pass
  env={"TRITON_INTERPRET": "1"} to run Triton kernels in the server under the interpreter on purpose).

Default server args (DEFAULT_ARGS), chosen for 2 cores and little memory:
- `--attention-backend torch_native`: the only CPU attention backend that needs no native kernels (`intel_amx`
  needs torch.ops.sgl_kernel.*). It also makes SGLang disable CUDA graphs by itself ("Cuda graph is disabled because
  of using torch native attention backend"), so no graph flag is needed (`--disable-cuda-graph` is deprecated).
- `--max-total-tokens 4096`: a fixed KV pool. On CPU the pool is otherwise sized from free *host* RAM.
- `--max-running-requests 16`: the request->token table is max_running_requests x context_len; tests never need
  more concurrent requests.
- `--skip-server-warmup`: the warmup request only costs time; readiness is checked by /health_generate, which runs a
  real one-token generation through the scheduler.
- `--random-seed 0`: deterministic sampling when a test samples.
- `--sleep-on-idle`: an idle SGLang scheduler otherwise busy-polls a whole core, slowing any server or test beside it
  on 2 cores.
On the GPU machine the same tests run against a CUDA server: set SGL_SPEC_TEST_DEVICE=cuda (a test-only knob).
Then the command uses `--device cuda` and SGLang's own attention backend choice (no torch_native, CUDA graphs on),
and the environment keeps the caller's PYTHONPATH (the gpu-kit install in /tmp/site) without the CPU shims.
Tests add `--dtype float32` for exact comparisons: with `--dtype auto` SGLang serves a float32 checkpoint in
float16 (model_config.py downcasts float32, "following common practice").
"""
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

SHIMS_DIR = Path(__file__).resolve().parents[1] / "shims"
CXX_WITH_CSTDDEF = Path(__file__).resolve().parent / "cxx-with-cstddef"  # $CXX of the CPU servers (server_env)
DEFAULT_ARGS = (
    "--attention-backend", "torch_native",
    "--max-total-tokens", "4096",
    "--max-running-requests", "16",
    "--skip-server-warmup",
    "--random-seed", "0",
    "--sleep-on-idle",
)
LOG_TAIL_LINES = 80
FIRST_ERROR_LINES = 12
ERROR_MARK = re.compile(r"Traceback|error|Killed|sigquit|address already in use", re.IGNORECASE)
PORT_IN_USE = "address already in use"  # uvicorn / torch.distributed: "[Errno 98] ... address already in use"
PORT_TRIES = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_device() -> str:
    """"cpu" (default) or "cuda" (SGL_SPEC_TEST_DEVICE=cuda on the GPU machine)."""
    return os.environ.get("SGL_SPEC_TEST_DEVICE", "cpu")


def _gpu_env(extra_env=None) -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("SGLANG_USE_SGL_FA3_KERNEL", "1")  # gpu-kit: sgl_kernel's FA3 for the stock backend on Hopper
    if extra_env:
        env.update(extra_env)
    return env


def server_env(extra_env=None, verify_attention=False) -> dict:
    """Environment for a CPU SGLang process: CPU engine on, shims first on PYTHONPATH."""
    if test_device() == "cuda":
        return _gpu_env(extra_env)
    env = dict(os.environ)
    env.pop("SGL_CPU_TEST_VERIFY_ATTENTION", None)
    if verify_attention:
        env["SGL_CPU_TEST_VERIFY_ATTENTION"] = "1"
        if env.get("SGLANG_PLUGINS"):  # a plugin whitelist is set: keep ours on it (name: shims/*.dist-info)
            env["SGLANG_PLUGINS"] += ",cpu_test_verify_attention"
    env["SGLANG_USE_CPU_ENGINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SHIMS_DIR), env.get("PYTHONPATH")) if p)
    # As if the venv were activated: SGLang's JIT builds look for `ninja` on PATH.
    env["PATH"] = os.pathsep.join((os.path.dirname(sys.executable), env.get("PATH", "")))
    # The pytest process may run Triton kernels under the interpreter; the server must not inherit that choice.
    env.pop("TRITON_INTERPRET", None)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("HF_HUB_OFFLINE", "1")  # no hub here; fail fast instead of retrying the network
    # SGLang JIT-builds its NGRAM corpus (kernels/jit/csrc/ngram_corpus) with $CXX; 0.5.17's result.h uses size_t
    # without including <cstddef>, which GCC 12's libstdc++ headers do not provide transitively: a compiler that
    # force-includes it (a program path, which both releases' JIT builders take; see the script).
    env.setdefault("CXX", str(CXX_WITH_CSTDDEF))
    if extra_env:
        env.update(extra_env)
    return env


def server_command(model_path, port, extra_args=()) -> list:
    device = test_device()
    defaults = list(DEFAULT_ARGS)
    if device == "cuda":  # SGLang picks the attention backend (quantspec's own, or fa3 for stock servers)
        i = defaults.index("--attention-backend")
        del defaults[i:i + 2]
    return [
        sys.executable, "-m", "sglang.launch_server",
        "--model-path", str(model_path),
        "--device", device,
        "--host", "127.0.0.1",
        "--port", str(port),
        *defaults,
        *[str(a) for a in extra_args],
    ]


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return ["<no log>"]


def _tail(path: Path, n: int = LOG_TAIL_LINES) -> str:
    return "\n".join(_lines(path)[-n:])


def _report(path: Path) -> str:
    """A failed server's log for an exception message: its first error lines, then its tail. The first error is
    often far above the tail: uvicorn's bind error is followed by a 90-line traceback of the warmup thread's
    /freeze_gc request, which SGLang 0.5.23 sends on without the port."""
    lines = _lines(path)
    first = [line for line in lines[:-LOG_TAIL_LINES] if ERROR_MARK.search(line)][:FIRST_ERROR_LINES]
    head = "first error lines:\n" + "\n".join(first) + "\n" if first else ""
    return f"{head}log tail:\n" + "\n".join(lines[-LOG_TAIL_LINES:])


def _kill_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    if proc.poll() is None or _group_alive(proc.pid):
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _group_alive(proc.pid):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.2)
            if not _group_alive(proc.pid):
                break
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies still count for killpg(0); treat a group whose only member is our reaped leader as gone.
    return _has_live_members(pgid)


def _has_live_members(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


class ServerFailed(RuntimeError):
    pass


class PortInUse(ServerFailed):
    """The server died at startup because its port (HTTP or torch.distributed) was taken meanwhile."""


class Server:
    """A running server: base URL, log path and small request helpers (each returns parsed JSON)."""

    def __init__(self, proc, port, log_path, startup_s):
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.startup_s = startup_s

    def log_tail(self, n: int = LOG_TAIL_LINES) -> str:
        return _tail(self.log_path, n)

    def post(self, path, payload, timeout=120, **kw):
        return requests.post(self.url + path, json=payload, timeout=timeout, **kw)

    def _json(self, resp):
        if resp.status_code != 200:
            raise ServerFailed(f"{resp.request.method} {resp.url} -> {resp.status_code}: {resp.text[:2000]}")
        return resp.json()

    def generate(self, text=None, *, input_ids=None, max_new_tokens=16, temperature=0.0, ignore_eos=True, **extra):
        """POST /generate (native API). Greedy and EOS-ignoring by default so lengths are predictable."""
        payload = {"sampling_params": {"max_new_tokens": max_new_tokens, "temperature": temperature,
                                       "ignore_eos": ignore_eos}, **extra}
        if input_ids is not None:
            payload["input_ids"] = list(input_ids)
        else:
            payload["text"] = text
        return self._json(self.post("/generate", payload))

    def completions(self, prompt, *, max_tokens=16, temperature=0.0, **extra):
        payload = {"model": "default", "prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
                   **extra}
        return self._json(self.post("/v1/completions", payload))

    def chat(self, messages, *, max_tokens=16, temperature=0.0, **extra):
        payload = {"model": "default", "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                   **extra}
        return self._json(self.post("/v1/chat/completions", payload))

    def stream(self, path, payload, timeout=120):
        """POST with stream=true; yield the parsed JSON of each `data:` event (stops at [DONE])."""
        with requests.post(self.url + path, json={**payload, "stream": True}, timeout=timeout, stream=True) as resp:
            if resp.status_code != 200:
                raise ServerFailed(f"POST {path} (stream) -> {resp.status_code}: {resp.text[:2000]}")
            for line in resp.iter_lines(decode_unicode=True):
                if not line or not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    return
                yield json.loads(data)

    def flush_cache(self, tries=40):
        """/flush_cache is refused while the scheduler still holds a request, which it may briefly do after that
        request's HTTP response went out: retry for ~10 s before failing."""
        for attempt in range(tries):
            resp = requests.post(self.url + "/flush_cache", timeout=60)
            if resp.status_code == 200:
                return
            if attempt + 1 < tries:
                time.sleep(0.25)
        raise ServerFailed(f"/flush_cache -> {resp.status_code}: {resp.text[:500]}")

    def server_info(self):
        return self._json(requests.get(self.url + "/server_info", timeout=60))

    def load(self):
        """The latest /v1/loads snapshot of the (single) scheduler."""
        return self._json(requests.get(self.url + "/v1/loads", timeout=60))["loads"][0]

    def idle_load(self, timeout=60, flush=False):
        """A /v1/loads snapshot taken while the server is idle. The scheduler publishes one whenever it goes idle,
        so after a request it answers (/server_info) the first snapshot stamped later that shows no request is an
        idle one. flush=True pokes it with /flush_cache instead, accepted only while it holds no request: the radix
        cache is then empty, and SGLang's lifetime metrics (the speculative block) start over."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if flush:
                    self.flush_cache()
                else:
                    self.server_info()
                poked = time.time()
                load = self.load()
                while load["timestamp"] <= poked and time.monotonic() < deadline:
                    time.sleep(0.2)
                    load = self.load()
                if load["num_running_reqs"] == 0 and load["num_waiting_reqs"] == 0 and load["timestamp"] > poked:
                    return load
            except ServerFailed:
                pass
            if time.monotonic() > deadline:
                raise ServerFailed(f"server not idle within {timeout}s: {self.load()}")
            time.sleep(0.25)

    def metric(self, name):
        """The sum of a metric's samples (over their label sets) on /metrics (--enable-metrics)."""
        text = requests.get(self.url + "/metrics", timeout=60).text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name + "{") or line.startswith(name + " "))


def _wait_ready(proc, url, log_path, timeout):
    deadline = time.monotonic() + timeout
    last_err = "no answer yet"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            kind = PortInUse if _port_clash(log_path) else ServerFailed
            raise kind(f"server exited with {proc.returncode} during startup; {_report(log_path)}")
        try:
            # /health_generate runs a one-token generation, so 200 means the scheduler really serves.
            resp = requests.get(url + "/health_generate", timeout=30)
            if resp.status_code == 200:
                return
            last_err = f"/health_generate -> {resp.status_code}"
        except requests.RequestException as exc:
            last_err = type(exc).__name__
        time.sleep(0.5)
    raise ServerFailed(f"server not ready after {timeout}s ({last_err}); {_report(log_path)}")


def _port_clash(log_path) -> bool:
    """The whole log, not its tail: SGLang keeps logging after uvicorn's bind error (see _report)."""
    return any(PORT_IN_USE in line.lower() for line in _lines(log_path))


def start_ready(spawn, timeout, tries=PORT_TRIES):
    """Start a server with ``spawn(port) -> (proc, log_path)`` on a fresh port and wait until it serves; returns
    (proc, port, log_path, startup seconds). free_port() only finds a port that is free at that instant, and SGLang
    binds it (and its torch.distributed port) ~20 s later, when another process may hold it: a startup that dies
    with "address already in use" is started again on a new port, up to ``tries`` times. Other failures raise."""
    for attempt in range(tries):
        port = free_port()
        t0 = time.monotonic()
        proc, log_path = spawn(port)
        try:
            _wait_ready(proc, f"http://127.0.0.1:{port}", log_path, timeout)
            return proc, port, log_path, time.monotonic() - t0
        except PortInUse:
            _kill_group(proc)
            if attempt + 1 == tries:
                raise
            print(f"[harness] port {port} was taken during startup; starting again on another", file=sys.stderr)
        except BaseException:
            _kill_group(proc)
            raise


def _spawn(log_dir, port, model_path, extra_args, env, verify_attention):
    """Start the CPU server command on ``port`` in its own process group, its output in log_dir/server-PORT.log."""
    log_path = log_dir / f"server-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            server_command(model_path, port, extra_args), cwd=log_dir, env=server_env(env, verify_attention),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    return proc, log_path


@contextlib.contextmanager
def launch_server(model_path, extra_args=(), env=None, timeout=300, log_dir=None, verify_attention=False):
    """Start a CPU SGLang server, wait until it serves, yield a Server, then kill its process group.

    extra_args are appended after DEFAULT_ARGS (argparse: the last occurrence of an option wins, so they override).
    env entries are added to the server environment. The log is kept in log_dir (a temp dir if None).
    verify_attention: enable the test-only TARGET_VERIFY path of torch_native (needed by any speculative algorithm).
    """
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="sglang-cpu-"))
    log_dir.mkdir(parents=True, exist_ok=True)

    proc, port, log_path, startup_s = start_ready(
        lambda port: _spawn(log_dir, port, model_path, extra_args, env, verify_attention), timeout)
    try:
        yield Server(proc, port, log_path, startup_s)
        if proc.poll() is not None:
            raise ServerFailed(f"server died during the test (rc={proc.returncode}); {_report(log_path)}")
    finally:
        _kill_group(proc)


def run_server_expect_failure(model_path, extra_args=(), env=None, timeout=300, verify_attention=False):
    """Run a server whose startup should fail. Returns (returncode, last log lines as one string).

    Raises ServerFailed if it becomes ready instead (it is then killed) or does not exit within timeout. A failure
    because the port was taken meanwhile is not the one expected: that startup is run again on another port.
    """
    for attempt in range(PORT_TRIES):
        rc, tail = _run_until_exit(model_path, extra_args, env, timeout, verify_attention)
        if PORT_IN_USE not in tail.lower() or attempt + 1 == PORT_TRIES:
            return rc, tail


def _run_until_exit(model_path, extra_args, env, timeout, verify_attention):
    port = free_port()
    proc, log_path = _spawn(Path(tempfile.mkdtemp(prefix="sglang-cpu-fail-")), port, model_path, extra_args, env,
                            verify_attention)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                # Startup errors can leave spawned children behind; the finally still reaps the group.
                return proc.returncode, _tail(log_path, 40)
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    raise ServerFailed(f"server started although failure was expected; log tail:\n{_tail(log_path)}")
            time.sleep(0.5)
        raise ServerFailed(f"server neither failed nor became ready in {timeout}s; log tail:\n{_tail(log_path)}")
    finally:
        _kill_group(proc)
