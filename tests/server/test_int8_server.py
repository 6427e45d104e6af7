"""quantspec's non-speculative INT8 mode (``--attention-backend quantspec``) in a real SGLang server on CPU.

The oracle is teacher forcing with the attention view of docs/CONTRACTS.md, computed independently of sgl_spec's
backend: Hugging Face's Llama with a custom attention function that quantizes every complete page of the (post-rope)
keys/values with the reference quantizer and lets query ``p`` read pages ``j < p // P`` through the INT8 view and its
own page in full precision. Greedy decoding in the server must reproduce the oracle's argmax token for token, and the
server re-scoring its own output in one EXTEND (its prefill path) must agree with its decode path.
"""
import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from harness import launch_server, run_server_expect_failure, server_env
from oracle import register_view
from sgl_spec.config import DEFAULT_NUM_DRAFT_STEPS, default_num_draft_steps

pytestmark = pytest.mark.server

P = 64  # quantspec's default page size
SERVER_ARGS = ["--dtype", "float32", "--attention-backend", "quantspec", "--chunked-prefill-size", "64"]


def prompt(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 8000, (n,), generator=g).tolist()


# ---- oracle (tests/support/oracle.py) ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def oracle(tiny_llama_fp32):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_llama_fp32, dtype=torch.float32, attn_implementation=register_view(P))
    model.eval()

    def logits(ids):
        with torch.no_grad():
            return model(torch.tensor([ids])).logits[0]

    return logits


@pytest.fixture(scope="module")
def server(tiny_llama_fp32):
    with launch_server(tiny_llama_fp32, SERVER_ARGS) as srv:
        yield srv


def assert_matches_oracle(oracle, ids, r):
    """Greedy tokens equal the oracle's argmax, and their logprobs agree to 1e-4: both are fp32 (observed gap ~2e-6),
    while plain attention instead of the view moves these logprobs by ~1e-2 on this model (greedy tokens alone
    would not notice: its logits are too well separated)."""
    out = r["output_ids"]
    logits = oracle(ids + out[:-1])[len(ids) - 1:]
    want = logits.argmax(-1).tolist()
    bad = [i for i, (a, b) in enumerate(zip(out, want)) if a != b]
    assert not bad, f"first mismatch at output {bad[0]}: server {out[bad[0]]}, oracle {want[bad[0]]}"
    got = torch.tensor([x[0] for x in r["meta_info"]["output_token_logprobs"]])
    ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(out)[:, None])[:, 0]
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=0)



# ---- tests ---------------------------------------------------------------------------------------------------------
def test_view_oracle_is_not_plain_attention(oracle, tiny_llama_fp32):
    """Sanity: the oracle really quantizes (else the comparisons below would not test the view)."""
    from transformers import LlamaForCausalLM

    plain = LlamaForCausalLM.from_pretrained(tiny_llama_fp32, dtype=torch.float32, attn_implementation="eager")
    ids = prompt(150, seed=9)
    with torch.no_grad():
        ref = plain(torch.tensor([ids])).logits[0]
    got = oracle(ids)
    torch.testing.assert_close(got[:P], ref[:P], atol=1e-4, rtol=0)  # first page: no INT8 page is read
    assert (got[P:] - ref[P:]).abs().max() > 1e-2  # later pages read INT8 pages


def test_batched_greedy_equals_teacher_forcing_oracle(server, oracle):
    # prompts end before / on / after page boundaries; 48 new tokens complete pages during decoding
    prompts = [prompt(n, seed=n) for n in (5, 50, 64, 120, 150)]
    with ThreadPoolExecutor(len(prompts)) as ex:  # concurrent requests decode in one batch
        outs = list(ex.map(lambda ids: server.generate(input_ids=ids, max_new_tokens=48, return_logprob=True),
                           prompts))
    for ids, out in zip(prompts, outs):
        assert len(out["output_ids"]) == 48
        assert_matches_oracle(oracle, ids, out)


def test_decode_path_equals_the_servers_own_prefill_rescoring(server):
    ids = prompt(150, seed=1)
    out = server.generate(input_ids=ids, max_new_tokens=40)["output_ids"]
    server.flush_cache()  # re-score cold, in one EXTEND (chunked by 64)
    r = server.generate(input_ids=ids + out[:-1], max_new_tokens=1, return_logprob=True, logprob_start_len=0,
                        top_logprobs_num=1)
    top = [x[0][1] for x in r["meta_info"]["input_top_logprobs"][len(ids):]]
    assert top == out[:-1]
    assert r["output_ids"] == out[-1:]


def test_radix_prefix_hit_reuses_quantized_pages(server, oracle):
    server.flush_cache()
    ids = prompt(150, seed=2)
    cold = server.generate(input_ids=ids, max_new_tokens=32)
    hot = server.generate(input_ids=ids, max_new_tokens=32)
    assert cold["meta_info"]["cached_tokens"] == 0
    assert hot["meta_info"]["cached_tokens"] == 2 * P  # the complete pages of the prompt
    assert hot["output_ids"] == cold["output_ids"]
    # a different request sharing the first 130 tokens: hits 2 pages, recomputes the rest
    other = ids[:130] + prompt(30, seed=3)
    r = server.generate(input_ids=other, max_new_tokens=32, return_logprob=True)
    assert r["meta_info"]["cached_tokens"] == 2 * P
    assert_matches_oracle(oracle, other, r)


BAD_FLAGS = {
    "--attention-backend quantspec --page-size 16": "quantspec needs --page-size 32, 64 or 128",
    "--speculative-algorithm QUANTSPEC --speculative-num-steps 64": "--speculative-num-steps (γ) in 1..63",
    "--spec-algo quantspec --speculative-num-steps 4 --speculative-num-draft-tokens 3":
        "set --speculative-num-draft-tokens 5",
    "--spec-algo quantspec --speculative-eagle-topk 4": "set --speculative-eagle-topk 1",
    "--quantspec-min-pages 3": "--quantspec-min-pages only applies with --speculative-algorithm QUANTSPEC",
    "--attention-backend quantspec --enable-hierarchical-cache": "does not support --enable-hierarchical-cache",
    "--spec-algo quantspec --quantspec-topk-ratio 1.5": "--quantspec-topk-ratio must be in (0, 1]",
    "--attention-backend quantspec --decode-attention-backend quantspec": "instead of --decode-attention-backend",
    "--quantspec-speculate never": "--quantspec-speculate only applies with --speculative-algorithm QUANTSPEC",
    "--spec-algo quantspec --quantspec-cost-model /nonexistent.json": "--quantspec-cost-model /nonexistent.json: no",
    "--quantspec-draft-kernel triton": "--quantspec-draft-kernel only applies with --speculative-algorithm QUANTSPEC",
    "--spec-algo quantspec --page-size 32 --quantspec-draft-kernel gluon":
        "--quantspec-draft-kernel gluon needs --page-size 64 or 128, got 32",
    "--quantspec-verify-kernel gluon": "--quantspec-verify-kernel only applies with --speculative-algorithm QUANTSPEC",
    "--spec-algo quantspec --page-size 32 --quantspec-verify-kernel gluon":
        "--quantspec-verify-kernel gluon needs --page-size 64 or 128, got 32",
}


def test_default_gamma_fits_one_verify_row_tile():
    """The default γ: the longest window up to 12 whose (γ+1) x G rows fit one verify row tile (32 rows, or the
    G-only tile where that is wider), at least 4, at most page size - 1."""
    from sgl_spec.kernels.verify_attention.triton import MAX_BLOCK_ROWS, block_rows

    want = {1: 12, 2: 12, 3: 9, 4: 7, 6: 9, 8: 7, 16: 4, 32: 4}
    assert {g: default_num_draft_steps(g) for g in want} == want
    for g in (1, 2, 3, 4, 6, 8):  # below the floor of 4 the window still fits: one row block
        gamma = default_num_draft_steps(g)
        assert (gamma + 1) * g <= max(MAX_BLOCK_ROWS, block_rows(g)) and block_rows(g, gamma + 1) >= (gamma + 1) * g
    assert default_num_draft_steps(1, page_size=8) == 7


def test_bad_flags_fail_with_one_clear_line(tiny_llama_fp32, tmp_path):
    """ServerArgs parsing (with the plugin loaded, as launch_server does) in one subprocess for all cases."""
    swa = tmp_path / "swa"
    from transformers import MistralConfig

    MistralConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, vocab_size=8192, sliding_window=128,
                  architectures=["MistralForCausalLM"]).save_pretrained(swa)
    cases = {k: [tiny_llama_fp32, *k.split()] for k in BAD_FLAGS}
    cases["sliding window model"] = [str(swa), "--attention-backend", "quantspec"]
    cases["good int8"] = [tiny_llama_fp32, "--attention-backend", "quantspec"]
    cases["good spec"] = [tiny_llama_fp32, "--spec-algo", "quantspec", "--speculative-num-steps", "6",
                          "--page-size", "32", "--quantspec-topk-ratio", "0.2"]
    cases["good spec, γ+1 given"] = [tiny_llama_fp32, "--spec-algo", "quantspec", "--speculative-num-draft-tokens", "4"]
    cases["good spec, default γ"] = [tiny_llama_fp32, "--spec-algo", "quantspec"]
    script = textwrap.dedent("""
        import json, sys
        import sglang.srt.entrypoints.engine as engine  # loaded first, as Engine(...) does: it builds its own record
        from sglang.srt.plugins import load_plugins
        from sglang.srt.plugins.hook_registry import HookRegistry
        load_plugins()
        from sgl_spec.plugin import register
        register()  # a second registration must change nothing (else --spec-algo would be added twice)
        HookRegistry.apply_hooks()
        from sglang.srt.server_args import prepare_server_args
        from sgl_spec.patches import sglang as adapter

        def resolve(sa):  # launch_server resolves the record here (0.5.17: already inside __post_init__)
            if hasattr(sa, "resolve_once"):
                sa.resolve_once()
            return sa

        res = {}
        for name, (model, *flags) in json.loads(sys.argv[1]).items():
            try:
                sa = resolve(prepare_server_args(["--model-path", model, "--device", "cpu", *flags]))
                keys = ("page_size", "attention_backend", "disable_overlap_schedule", "speculative_algorithm",
                        "speculative_num_draft_tokens", "speculative_eagle_topk", "max_running_requests")
                res[name] = {"_quantspec": repr(sa._quantspec), **{k: adapter().resolved(sa, k) for k in keys}}
            except Exception as e:
                res[name] = f"{type(e).__name__}: {e}"
        # the Engine(**kwargs) path: flags as keyword arguments of the record Engine builds
        sa = resolve(engine.Engine.server_args_class(model_path=sys.argv[2], device="cpu",
                                                     speculative_algorithm="quantspec", quantspec_min_pages=3))
        res["kwargs"] = repr(sa._quantspec)
        print("RESULT " + json.dumps(res))
    """)
    proc = subprocess.run([sys.executable, "-c", script, json.dumps({k: [str(x) for x in v] for k, v in cases.items()}),
                           str(tiny_llama_fp32)],
                          env=server_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, proc.stdout[-2000:] + proc.stderr[-3000:]
    res = json.loads(line[0][len("RESULT "):])
    want = dict(BAD_FLAGS, **{"sliding window model": "uses sliding-window or hybrid attention layers"})
    for name, text in want.items():
        msg = res[name]
        assert isinstance(msg, str), f"{name}: accepted"
        assert msg.startswith("ValueError: ") and text in msg and "\n" not in msg, f"{name}: {msg}"
    # and the good settings: page size default 64, SGLang's CPU host helpers on torch_native, 128 request slots
    good = res["good int8"]
    assert "speculative=False, page_size=64" in good["_quantspec"], good
    assert (good["page_size"], good["attention_backend"], good["max_running_requests"]) == (64, "torch_native", 128)
    assert good["speculative_algorithm"] is None and good["disable_overlap_schedule"] is False
    spec = res["good spec"]
    assert "speculative=True, page_size=32, num_draft_steps=6, topk_ratio=0.2" in spec["_quantspec"], spec
    assert "speculate='always', cost_model=None" in spec["_quantspec"], spec  # speculation every step by default
    assert "draft_kernel='auto'" in spec["_quantspec"], spec
    assert (spec["speculative_algorithm"], spec["speculative_num_draft_tokens"], spec["speculative_eagle_topk"],
            spec["disable_overlap_schedule"], spec["page_size"]) == ("QUANTSPEC", 7, 1, True, 32)
    want = f"speculative=True, page_size=64, num_draft_steps={DEFAULT_NUM_DRAFT_STEPS}, topk_ratio=0.07, min_pages=3"
    assert want in res["kwargs"]
    # γ from --speculative-num-draft-tokens alone (γ+1), and the default γ of a G = 2 model (one verify row tile)
    assert "num_draft_steps=3," in res["good spec, γ+1 given"]["_quantspec"], res["good spec, γ+1 given"]
    assert default_num_draft_steps(2) == DEFAULT_NUM_DRAFT_STEPS == 12
    assert f"num_draft_steps={DEFAULT_NUM_DRAFT_STEPS}," in res["good spec, default γ"]["_quantspec"]
    assert res["good spec, default γ"]["speculative_num_draft_tokens"] == DEFAULT_NUM_DRAFT_STEPS + 1


def test_bad_flag_stops_the_real_server_at_startup(tiny_llama_fp32):
    rc, tail = run_server_expect_failure(tiny_llama_fp32, ["--attention-backend", "quantspec", "--page-size", "16"])
    assert rc != 0
    assert "ValueError: quantspec needs --page-size 32, 64 or 128 (its quantization group), got --page-size 16" in tail
