"""Start a real SGLang server for the acceptance study, on CPU (this repo's test setup) or on a CUDA machine.

* CPU: exactly tests/support/harness.py's command and environment (shims, ``--device cpu``, torch_native helpers,
  ``SGLANG_USE_CPU_ENGINE=1``, its DEFAULT_ARGS); our arguments come after them and win.
* CUDA: ``<python> -m sglang.launch_server --device cuda`` with ``PYTHONPATH=<overlay>:<site>`` (site: the GPU kit's
  offline install, /tmp/site), HF offline, no shims. The overlay is a temporary folder that makes *this working
  tree* importable as the installed package would be (``sgl_spec`` with ``sgl_spec.kernels`` = sgl_spec/kernels/,
  ``sgl_spec.patches`` = sgl_spec/patches/, and a dist-info whose entry point registers the SGLang plugin), so the GPU machine
  needs no pip install and always runs the tree being benchmarked.

The client side uses the standard library only (urllib): on the GPU machine the bench itself runs without the site
folder on its path. The server runs in its own session; on exit its process group gets SIGTERM, then SIGKILL.
cwd is the log folder, never the repo root (``python -m`` puts cwd first on sys.path, and the repo's sgl_spec/kernels/ would
shadow PyPI's ``kernels``).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENTRY_POINTS = "[sglang.srt.plugins]\nquantspec = sgl_spec.plugin:register\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# Ports below Linux's ephemeral range (32768-60999 by default): the kernel never hands them out for bind(0) or
# outgoing connections, so servers started in parallel cannot take each other's ports.
PORT_BASE = 20000
PORT_SPAN = 4000


def server_ports(index: int, seed: int) -> tuple[int, int]:
    """(HTTP port, torch.distributed port) for the ``index``-th server of one bench run (``seed``: e.g. its pid).

    Why both: SGLang picks its distributed-init port with bind(0) then closes it, and with several servers starting at
    once another one could take it (EADDRINUSE in init_process_group, seen with 4 parallel servers). Each index owns
    two fixed ports in a block chosen by ``seed``, so concurrent bench runs are unlikely to share a block; a pair that
    is in use anyway is skipped for the next block."""
    for t in range(PORT_SPAN // 2):
        base = PORT_BASE + (2 * (seed * 97 + index + 53 * t)) % PORT_SPAN
        if _bindable(base) and _bindable(base + 1):
            return base, base + 1
    raise RuntimeError(f"no free port pair in {PORT_BASE}..{PORT_BASE + PORT_SPAN}")


def make_overlay(folder: Path) -> Path:
    """``folder/sgl_spec`` -> this tree's sgl_spec/ files + sgl_spec/kernels/ + sgl_spec/patches/, plus the plugin's dist-info."""
    pkg = folder / "sgl_spec"
    pkg.mkdir(parents=True, exist_ok=True)
    for f in (REPO / "sgl_spec").iterdir():
        if f.name not in ("__pycache__", "kernels", "patches"):  # a dev checkout may link those two in sgl_spec/
            (pkg / f.name).symlink_to(f)
    (pkg / "kernels").symlink_to(REPO / "kernels")
    (pkg / "patches").symlink_to(REPO / "patches")
    info = folder / "sgl_spec-0.1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sgl-spec\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return folder


def command_and_env(device, model, port, args, python=None, site="/tmp/site", overlay=None):
    args = [str(a) for a in args]
    if device == "cpu":
        sys.path.insert(0, str(REPO / "tests" / "support"))
        import harness

        if harness.test_device() != "cpu":
            raise RuntimeError("--device cpu uses tests/support/harness.py's CPU setup: unset SGL_SPEC_TEST_DEVICE")
        return harness.server_command(model, port, args), harness.server_env()
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (overlay, site, env.get("PYTHONPATH")) if p)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.setdefault("SGLANG_USE_SGL_FA3_KERNEL", "1")  # the GPU kit's setting
    cmd = [python or sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--device", "cuda",
           "--host", "127.0.0.1", "--port", str(port), "--skip-server-warmup", "--random-seed", "0", *args]
    return cmd, env


def _tail(path: Path, n: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


class ServerFailed(RuntimeError):
    pass


class Server:
    def __init__(self, proc, port, log_path, startup_s):
        self.proc, self.port, self.log_path, self.startup_s = proc, port, log_path, startup_s
        self.url = f"http://127.0.0.1:{port}"

    def generate(self, input_ids, max_new_tokens, timeout=1800, custom_params=None):
        params = {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}
        if custom_params:
            params["custom_params"] = custom_params  # e.g. the per-request draft policy (sgl_spec/experimental/page_study.py)
        payload = {"input_ids": list(input_ids), "sampling_params": params}
        req = urllib.request.Request(self.url + "/generate", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise ServerFailed(f"/generate -> {e.code}: {e.read()[:2000]!r}\n{_tail(self.log_path)}") from None

    def alive(self) -> bool:
        return self.proc.poll() is None


def _wait_ready(proc, url, log_path, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerFailed(f"server exited with {proc.returncode} during startup; log tail:\n{_tail(log_path)}")
        # /health_generate runs a one-token generation: 200 means the scheduler really serves.
        with contextlib.suppress(OSError, urllib.error.URLError):
            with urllib.request.urlopen(url + "/health_generate", timeout=30) as resp:
                if resp.status == 200:
                    return
        time.sleep(0.5)
    raise ServerFailed(f"server not ready after {timeout}s; log tail:\n{_tail(log_path)}")


def _kill_group(proc, grace=15.0):
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)
        else:
            continue
        break
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1)


@contextlib.contextmanager
def launch(device, model, args, log_dir, timeout=600, ports=None, **kw):
    """Start a server with ``args``, wait until it serves, yield a Server, then kill its process group.

    ``ports``: (HTTP, torch.distributed) from ``server_ports`` when servers start in parallel; default: free ports."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    port, nccl_port = ports or server_ports(0, os.getpid())
    args = [*args, "--nccl-port", nccl_port]
    log_path = log_dir / f"server-{port}.log"
    cmd, env = command_and_env(device, model, port, args, **kw)
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        log.write((" ".join(cmd) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(cmd, cwd=log_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_ready(proc, f"http://127.0.0.1:{port}", log_path, timeout)
        yield Server(proc, port, log_path, time.monotonic() - t0)
    finally:
        _kill_group(proc)


def overlay_dir() -> Path:
    return make_overlay(Path(tempfile.mkdtemp(prefix="sgl-spec-overlay-")))
