"""The acceptance study's SGLang servers: fixed port pairs for servers started in parallel, and the client.

Launch and teardown are bench/common.py's ``launch_server`` (CPU: tests/support/harness.py's command and environment;
CUDA: ``--device cuda`` with this working tree as sgl-spec through an overlay, HF offline). The client uses the
standard library only (urllib): on a GPU machine the bench itself may run without SGLang's install on its path.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

import common

REPO = common.REPO


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


def _tail(path: Path, n: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


ServerFailed = common.support().ServerFailed


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


@contextlib.contextmanager
def launch(device, model, args, log_dir, timeout=600, ports=None, python=None, site="/tmp/site", overlay=True):
    """Start a server with ``args``, wait until it serves, yield a Server, then kill its process group.

    ``ports``: (HTTP, torch.distributed) from ``server_ports`` when servers start in parallel; default: a pair for
    index 0 of this process."""
    port, nccl_port = ports or server_ports(0, os.getpid())
    args = [*args, "--nccl-port", nccl_port]
    if device != "cpu":
        args = ["--device", "cuda", "--skip-server-warmup", "--random-seed", "0", *args]
    with common.launch_server(device, model, args, log_dir, timeout=timeout, port=port, python=python, site=site,
                              overlay=overlay) as (proc, port, log_path, startup_s):
        yield Server(proc, port, Path(log_path), startup_s)


def command_and_env(device, model, port, args, python=None, site="/tmp/site", overlay=True):
    return common.server_command(device, model, port, args, site=site, overlay=overlay, python=python)


def overlay_dir() -> Path:
    import tempfile

    return common.make_overlay(Path(tempfile.mkdtemp(prefix="sgl-spec-overlay-")))
