"""Real SGLang servers on this CPU machine (tests/support/harness.py), serving a tiny random Llama in float32.

Stock server: greedy /generate must equal Hugging Face transformers' greedy generate token for token, and the
OpenAI endpoints, streaming, the prefix cache and error handling must behave. NGRAM server: SGLang's own
speculative worker (draft tree, TARGET_VERIFY, greedy tree verification, KV moves: the path our worker plugs into)
must stay lossless, i.e. give the same tokens as HF while accepting drafts.
"""
import pytest
import requests

from harness import launch_server, run_server_expect_failure

pytestmark = [pytest.mark.server, pytest.mark.timeout(1200)]

MAX_NEW = 32
FP32 = ["--dtype", "float32"]  # --dtype auto would serve the float32 checkpoint in float16
PROMPTS = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "import os\nimport sys\n\nclass Config:",
    "x",
    # A long prompt (~400 tokens): prefill over many KV slots, not just a handful.
    "\n".join(f"def f{i}(a, b):\n    return a * {i} + b" for i in range(40)),
]
# Repetitive text: NGRAM finds its continuation in the prompt, so drafts get proposed and accepted.
REPEAT_PROMPT = "for i in range(10):\n    print(i)\n" * 6


@pytest.fixture(scope="module")
def hf(tiny_llama_fp32):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_llama_fp32)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_fp32, dtype=torch.float32).eval()

    def greedy(text, max_new=MAX_NEW):
        ids = tok(text, return_tensors="pt").input_ids
        with torch.no_grad():
            # eos_token_id=None: never stop early, like SGLang's ignore_eos.
            out = model.generate(ids, max_new_tokens=max_new, do_sample=False, eos_token_id=None,
                                 pad_token_id=0)
        new = out[0, ids.shape[1]:].tolist()
        assert len(new) == max_new
        return ids[0].tolist(), new

    return tok, greedy


@pytest.fixture(scope="module")
def stock(tiny_llama_fp32):
    with launch_server(tiny_llama_fp32, FP32, timeout=600) as srv:
        print(f"stock server startup: {srv.startup_s:.1f}s")
        yield srv


def test_generate_matches_hf_greedy(stock, hf):
    tok, greedy = hf
    for text in PROMPTS:
        prompt_ids, expected = greedy(text)
        out = stock.generate(text, max_new_tokens=MAX_NEW)
        assert out["meta_info"]["prompt_tokens"] == len(prompt_ids)  # same tokenization, no BOS added
        assert out["output_ids"] == expected, text[:40]
        assert out["text"] == tok.decode(expected)


def test_batched_generate_matches_hf(stock, hf):
    # One request with several prompts: they are scheduled together, so batched prefill/decode is covered.
    _, greedy = hf
    outs = stock.generate(PROMPTS, max_new_tokens=MAX_NEW)
    assert [o["output_ids"] for o in outs] == [greedy(t)[1] for t in PROMPTS]


def test_input_ids_and_prefix_cache(stock, hf):
    _, greedy = hf
    prompt_ids, expected = greedy(PROMPTS[3])
    stock.flush_cache()
    first = stock.generate(input_ids=prompt_ids, max_new_tokens=MAX_NEW)
    second = stock.generate(input_ids=prompt_ids, max_new_tokens=MAX_NEW)
    assert first["meta_info"]["cached_tokens"] == 0
    assert second["meta_info"]["cached_tokens"] > len(prompt_ids) // 2  # served from the radix cache
    assert first["output_ids"] == second["output_ids"] == expected
    stock.flush_cache()
    third = stock.generate(input_ids=prompt_ids, max_new_tokens=MAX_NEW)
    assert third["meta_info"]["cached_tokens"] == 0 and third["output_ids"] == expected


def test_openai_completions(stock):
    native = stock.generate(PROMPTS[0], max_new_tokens=16)
    out = stock.completions(PROMPTS[0], max_tokens=16, ignore_eos=True)
    assert out["choices"][0]["text"] == native["text"]
    assert out["usage"]["completion_tokens"] == 16
    assert out["choices"][0]["finish_reason"] == "length"


def test_openai_chat_completions(stock, hf):
    tok, _ = hf
    messages = [{"role": "user", "content": "Write a function that adds two numbers."}]
    out = stock.chat(messages, max_tokens=16, ignore_eos=True)
    # The server applies the tokenizer's chat template; the same templated prompt on /generate gives the same text.
    templated = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    native = stock.generate(templated, max_new_tokens=16)
    assert out["choices"][0]["message"]["role"] == "assistant"
    assert out["choices"][0]["message"]["content"] == native["text"]
    assert out["usage"]["completion_tokens"] == 16


def test_streaming(stock):
    sp = {"max_new_tokens": 16, "temperature": 0, "ignore_eos": True}
    native = stock.generate(PROMPTS[1], max_new_tokens=16)
    events = list(stock.stream("/generate", {"text": PROMPTS[1], "sampling_params": sp}))
    assert len(events) > 1  # really incremental
    assert events[-1]["text"] == native["text"] and events[-1]["output_ids"] == native["output_ids"]

    chunks = list(stock.stream("/v1/completions", {"model": "default", "prompt": PROMPTS[1], "max_tokens": 16,
                                                   "temperature": 0, "ignore_eos": True}))
    assert "".join(c["choices"][0]["text"] for c in chunks if c.get("choices")) == native["text"]

    chunks = list(stock.stream("/v1/chat/completions", {"model": "default", "max_tokens": 8, "temperature": 0,
                                                        "messages": [{"role": "user", "content": "hi"}]}))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert text == stock.chat([{"role": "user", "content": "hi"}], max_tokens=8)["choices"][0]["message"]["content"]


@pytest.mark.parametrize("path,payload", [
    ("/generate", {"text": 5}),  # wrong type
    ("/generate", {"text": "x", "sampling_params": {"max_new_tokens": -1}}),
    ("/v1/completions", {"model": "default"}),  # no prompt
    ("/v1/chat/completions", {"model": "default", "messages": "not a list"}),
])
def test_malformed_requests_get_4xx(stock, path, payload):
    resp = stock.post(path, payload)
    assert 400 <= resp.status_code < 500, resp.text[:300]
    assert requests.get(stock.url + "/health_generate", timeout=60).status_code == 200  # still serving


def test_server_info(stock):
    info = stock.server_info()
    assert info["device"] == "cpu" and info["attention_backend"] == "torch_native"
    assert info["speculative_algorithm"] is None


def test_bad_server_args_fail_fast(tiny_llama_fp32):
    rc, tail = run_server_expect_failure(tiny_llama_fp32, ["--attention-backend", "no_such_backend"], timeout=300)
    assert rc != 0 and "no_such_backend" in tail


def test_ngram_speculative_matches_hf(tiny_llama_fp32, hf):
    _, greedy = hf
    args = [*FP32, "--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4"]
    with launch_server(tiny_llama_fp32, args, timeout=900, verify_attention=True) as srv:
        print(f"NGRAM server startup: {srv.startup_s:.1f}s")
        assert srv.server_info()["speculative_algorithm"] == "NGRAM"
        out = srv.generate(REPEAT_PROMPT, max_new_tokens=MAX_NEW)
        assert out["output_ids"] == greedy(REPEAT_PROMPT)[1]
        meta = out["meta_info"]
        # spec_num_correct_drafts: the count both releases report (spec_accepted_drafts is an alias 0.5.17 adds and
        # 0.5.23 does not)
        assert meta["spec_verify_ct"] > 0 and meta["spec_num_correct_drafts"] > 0, meta
        assert meta["spec_verify_ct"] < MAX_NEW  # fewer verify passes than tokens: multi-token steps happened
        # A batch: several requests verified together, with ragged prefixes.
        batch = [REPEAT_PROMPT, PROMPTS[0], PROMPTS[2]]
        outs = srv.generate(batch, max_new_tokens=MAX_NEW)
        assert [o["output_ids"] for o in outs] == [greedy(t)[1] for t in batch]
