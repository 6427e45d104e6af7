"""The harness every benchmark in bench/ shares: run metadata, result files, plots, and SGLang server launch/teardown.

* ``run_meta(device)``: what each result JSON records about its run: the device's name, the date, the versions of
  the stack (torch, triton, sglang, sgl-kernel, flashinfer, sgl-spec's git commit) and the command that produced it.
  Numbers without these cannot be compared with anything, so every benchmark writes them.
* ``write_json``: atomic (a temporary file, then a rename), so a run killed mid-write never leaves half a file.
* ``pyplot`` / ``save_fig``: matplotlib without a display (Agg), figures saved at one resolution.
* ``launch_server``: ``python -m sglang.launch_server`` in its own process group, its output in a log file, waited
  for until it generates, killed as a group on exit. On the GPU the server's PYTHONPATH starts with an overlay that
  makes this working tree importable as the installed sgl-spec (with the plugin's entry point), so what is measured
  is always the tree being benchmarked, with no pip install; ``overlay=False`` uses the installed package. On the CPU
  (smoke runs) it is tests/support/harness.py's command and environment. cwd is the log folder, never the repo root
  (``python -m`` puts cwd first on sys.path).
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENTRY_POINTS = "[sglang.srt.plugins]\nquantspec = sgl_spec.plugin:register\n"
PACKAGES = ("torch", "triton", "sglang", "sgl-kernel", "sglang-kernel", "flashinfer-python", "transformers")  # sgl-kernel: its name up to sglang 0.5.17


# ---- run metadata ------------------------------------------------------------------------------------------------
def device_name(device: str = "cuda") -> str:
    """The accelerator's marketing name (``NVIDIA H200``), ``cpu`` for CPU runs."""
    if device == "cpu":
        return "cpu"
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    try:  # the bench's own Python may lack torch on a GPU machine: ask the driver
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.strip().splitlines()
        if out:
            return out[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "cuda"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "unknown (no git)"
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"


def versions() -> dict:
    """Installed versions of the stack as this Python sees it (None where a package is absent) + sgl-spec's commit."""
    import importlib.metadata as md

    out = {}
    for p in PACKAGES:
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    out["sgl-spec"] = git_commit()
    return out


def command(argv=None) -> str:
    """The command line of this run as a user would type it: ``python bench/<script>.py <args>``."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]) if argv else Path("?")
    with contextlib.suppress(ValueError):
        script = script.resolve().relative_to(REPO)
    return " ".join(["python", str(script), *argv[1:]])


def run_meta(device: str, **extra) -> dict:
    return {"device": device_name(device), "date": time.strftime("%Y-%m-%d"), "versions": versions(),
            "command": command(), **extra}


# ---- result files and plots --------------------------------------------------------------------------------------
def load_json(path, default=None):
    p = Path(path)
    return json.loads(p.read_text()) if p.exists() else default


def write_json(path, doc) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    os.replace(tmp, p)
    return p


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_fig(fig, path, dpi: int = 110) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(p, dpi=dpi)
    pyplot().close(fig)
    return p


# ---- SGLang servers ----------------------------------------------------------------------------------------------
def support():
    if str(REPO / "tests" / "support") not in sys.path:
        sys.path.insert(0, str(REPO / "tests" / "support"))
    import harness  # tests/support/harness.py: CPU command/env, readiness wait, process-group kill

    return harness


def make_overlay(folder: Path) -> Path:
    """``folder/sgl_spec`` -> this tree's sgl_spec/, plus a dist-info whose entry point registers the plugin."""
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        (folder / "sgl_spec").symlink_to(REPO / "sgl_spec")
    info = folder / "sgl_spec-0.1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sgl-spec\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return folder


def gpu_env(site="/tmp/site", overlay=True) -> dict:
    """The GPU server's environment: overlay (True: a fresh one; a folder: that one; False: none), ``site`` (an offline
    SGLang install, if it exists), the caller's path."""
    env = dict(os.environ)
    paths = [str(site) if site and Path(site).is_dir() else None, env.get("PYTHONPATH")]
    if overlay is True:
        overlay = make_overlay(Path(tempfile.mkdtemp(prefix="sgl-spec-overlay-")))
    if overlay:
        paths.insert(0, str(overlay))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.pop("TRITON_INTERPRET", None)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("SGLANG_USE_SGL_FA3_KERNEL", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # SGLang (0.5.23) logs a Triton compilation after startup only from 1 s on; a benchmark wants every one that can
    # stall a measured cell (bench/e2e_server.py serving_compiles)
    env.setdefault("SGLANG_TRITON_SLOW_COMPILE_THRESHOLD_SECS", "0.05")
    return env


def server_command(device: str, model_dir, port: int, args, site="/tmp/site", overlay=True, python=None):
    """(command, environment) of one server; ``args`` come after the model, host and port and win over them."""
    args = [str(x) for x in args]
    if device == "cpu":
        h = support()
        if h.test_device() != "cpu":
            raise RuntimeError("CPU servers use tests/support/harness.py's CPU setup: unset SGL_SPEC_TEST_DEVICE")
        return h.server_command(model_dir, port, args), h.server_env()
    cmd = [python or sys.executable, "-m", "sglang.launch_server", "--model-path", str(model_dir),
           "--host", "127.0.0.1", "--port", str(port), *args]
    return cmd, gpu_env(site, overlay)


@contextlib.contextmanager
def launch_server(device: str, model_dir, args, log_dir, timeout: float = 900, port=None, **kw):
    """Start a server, wait until it generates, yield (proc, port, log_path, startup_s), kill its process group.

    ``port=None``: a free port, and a start that loses its port to another process is retried on a new one; a fixed
    ``port`` (servers started in parallel) is used as is."""
    h = support()
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)

    def spawn(p):
        cmd, env = server_command(device, model_dir, p, args, **kw)
        log_path = log_dir / f"server-{time.strftime('%H%M%S')}-{p}.log"
        with open(log_path, "wb") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            proc = subprocess.Popen(cmd, cwd=log_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        return proc, log_path

    if port is None:
        proc, port, log_path, startup_s = h.start_ready(spawn, timeout)
    else:
        t0 = time.monotonic()
        proc, log_path = spawn(port)
        try:
            h._wait_ready(proc, f"http://127.0.0.1:{port}", log_path, timeout)
        except BaseException:
            h._kill_group(proc)
            raise
        startup_s = time.monotonic() - t0
    try:
        yield proc, port, log_path, startup_s
    finally:
        h._kill_group(proc)
