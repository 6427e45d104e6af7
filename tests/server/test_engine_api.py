"""``sgl.Engine(...)``, SGLang's offline API, takes quantspec's options as keywords like the command line's flags:
``speculative_algorithm="QUANTSPEC"`` and ``quantspec_*=`` reach the config, and its greedy output equals the INT8
mode's (the shared tiny-Llama INT8 server of conftest.py, one request at a time)."""
import json
import subprocess
import sys

import pytest

from harness import server_env
from test_quantspec_server import GAMMA, N_NEW, P, PROMPTS

pytestmark = [pytest.mark.server, pytest.mark.timeout(900)]

# The same settings as test_quantspec_server.py's SPEC_ARGS, as Engine keywords.
ENGINE_KWARGS = {
    "device": "cpu", "attention_backend": "torch_native", "dtype": "float32", "page_size": P,
    "chunked_prefill_size": 64, "max_total_tokens": 4096, "max_running_requests": 16, "random_seed": 0,
    "skip_server_warmup": True, "speculative_algorithm": "QUANTSPEC", "speculative_num_steps": GAMMA,
    "quantspec_speculate": "always", "quantspec_topk_ratio": 0.1, "quantspec_min_pages": 1,
    "quantspec_sink_pages": 1,
}
CASES = [0, 4, 5, 9, 13, 19, 20]  # one token, a page edge, several pages, a radix-cache hit of an earlier prompt

SCRIPT = r"""
import json, sys
import sglang as sgl
kwargs, prompts, n_new = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
llm = sgl.Engine(**kwargs)
from sgl_spec.config import get_config
cfg = get_config(llm.server_args)
outs = []
for ids in prompts:
    r = llm.generate(input_ids=ids, sampling_params={"max_new_tokens": n_new, "temperature": 0.0, "ignore_eos": True})
    outs.append({"output_ids": r["output_ids"], "verify_ct": r["meta_info"].get("spec_verify_ct", 0)})
llm.shutdown()
print("RESULT " + json.dumps({"config": [cfg.speculative, cfg.num_draft_steps, cfg.topk_ratio, cfg.speculate],
                              "outputs": outs}))
"""


def test_engine_with_quantspec_keywords_equals_int8_mode(tiny_llama_fp32, tiny_int8_outputs, tmp_path):
    kwargs = {"model_path": str(tiny_llama_fp32), **ENGINE_KWARGS}
    prompts = [PROMPTS[i] for i in CASES]
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(kwargs), json.dumps(prompts), str(N_NEW)],
                          env=server_env(), cwd=tmp_path, capture_output=True, text=True, timeout=840)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    got = json.loads(lines[-1][len("RESULT "):])
    assert got["config"] == [True, GAMMA, 0.1, "always"]
    want = tiny_int8_outputs[0]
    diff = [len(PROMPTS[i]) for i, o in zip(CASES, got["outputs"]) if o["output_ids"] != want[i]]
    assert not diff, f"prompt lengths whose Engine output differs from the INT8 mode: {diff}"
    assert all(o["verify_ct"] >= 1 for o in got["outputs"])  # speculative rounds ran


def test_engine_rejects_a_quantspec_option_without_quantspec(tiny_llama_fp32, tmp_path):
    kwargs = {"model_path": str(tiny_llama_fp32), "device": "cpu", "attention_backend": "torch_native",
              "quantspec_topk_ratio": 0.1}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(kwargs), "[]", "1"], env=server_env(),
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "--quantspec-topk-ratio only applies with --speculative-algorithm QUANTSPEC" in proc.stderr
