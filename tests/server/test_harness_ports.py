"""The test harness starts a server again on a new port when its startup died because the port was taken.

Fake servers, no SGLang: a process that prints uvicorn's bind error and exits, then one that answers
/health_generate. free_port() can only promise a port that is free when it looks; this is the race a CI run met.
"""
import subprocess
import sys
import textwrap

import pytest

import harness

CLASH = "ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): address already in use"
SERVE = textwrap.dedent("""
    import http.server, sys
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health_generate" else 404)
            self.end_headers()
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")


def _spawner(tmp_path, plan):
    """spawn(port) that runs the next entry of plan: "clash" (bind error, exit 1), "late-clash" (the bind error, then
    more log lines than the harness's tail, as SGLang 0.5.23 writes, exit 3), "fail" (another error) or "serve" (a
    real HTTP server on that port)."""
    ports = []

    def spawn(port):
        ports.append(port)
        kind = plan[len(ports) - 1]
        log_path = tmp_path / f"server-{port}.log"
        if kind == "serve":
            code = SERVE
        else:
            msg = CLASH.format(port=port) if kind.endswith("clash") else "ValueError: bad flag"
            code = f"print({msg!r}); raise SystemExit(1)"
            if kind == "late-clash":
                noise = "  File 'http_server.py', line 2561, in _freeze_gc_after_server_warmup"
                code = f"print({msg!r}); print(*[{noise!r}] * {2 * harness.LOG_TAIL_LINES}, sep='\\n'); raise SystemExit(3)"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-c", code, str(port)], stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        return proc, log_path

    return spawn, ports


def test_startup_that_lost_its_port_is_started_again(tmp_path):
    spawn, ports = _spawner(tmp_path, ["clash", "clash", "serve"])
    proc, port, log_path, _ = harness.start_ready(spawn, timeout=30)
    try:
        assert len(ports) == 3 and port == ports[-1]
        assert log_path.name == f"server-{port}.log"
        assert proc.poll() is None  # the serving one is returned alive; the caller owns it
    finally:
        harness._kill_group(proc)


def test_port_clash_above_the_log_tail_is_still_a_port_clash(tmp_path):
    spawn, ports = _spawner(tmp_path, ["late-clash", "serve"])
    proc, port, _, _ = harness.start_ready(spawn, timeout=30)
    try:
        assert len(ports) == 2 and port == ports[-1]
    finally:
        harness._kill_group(proc)


def test_failure_message_names_the_first_error_above_the_tail(tmp_path):
    spawn, _ = _spawner(tmp_path, ["late-clash"] * harness.PORT_TRIES)
    with pytest.raises(harness.PortInUse) as info:
        harness.start_ready(spawn, timeout=30)
    head = str(info.value).split("log tail:")[0]
    assert "first error lines:" in head and "address already in use" in head


def test_port_clash_on_every_try_raises_with_the_log(tmp_path):
    spawn, ports = _spawner(tmp_path, ["clash"] * harness.PORT_TRIES)
    with pytest.raises(harness.PortInUse, match="address already in use"):
        harness.start_ready(spawn, timeout=30)
    assert len(ports) == harness.PORT_TRIES


def test_other_startup_failures_are_not_retried(tmp_path):
    spawn, ports = _spawner(tmp_path, ["fail", "serve"])
    with pytest.raises(harness.ServerFailed, match="bad flag") as info:
        harness.start_ready(spawn, timeout=30)
    assert not isinstance(info.value, harness.PortInUse)
    assert len(ports) == 1
