"""SGLang's user-facing APIs in front of ``--spec-algo quantspec`` (tiny random Llama, fp32, default quantspec
settings): native /generate (plain and streaming), the OpenAI completions and chat endpoints (streaming too), an
SGLang frontend program (``sgl.function`` with ``gen`` and ``select`` through ``sgl.RuntimeEndpoint``), and the
speculative metrics of /v1/loads and of ``--enable-metrics``' /metrics.

Each path must give the same greedy text as a direct /generate of the same prompt: speculation may change how
tokens are batched into stream chunks, never which tokens come out. The tokenizer (tests/assets/tokenizer) ships a
chat template, so the chat endpoint needs no --chat-template.
"""
import math

import pytest

from harness import launch_server

pytestmark = [pytest.mark.server, pytest.mark.timeout(900)]

# --decode-log-interval: SGLang writes no decode-batch log line here (the module runs far fewer rounds), so the
# speculative metrics it reports are quantspec's own per-round feed, not what SGLang sets at a log line.
ARGS = ["--dtype", "float32", "--spec-algo", "quantspec", "--sleep-on-idle", "--enable-metrics",
        "--decode-log-interval", "100000"]
N = 24
PROMPT = "import os\nimport sys\n\nclass Config:\n    def __init__(self, path):\n"
GREEDY = {"max_new_tokens": N, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def server(tiny_llama_fp32):
    with launch_server(tiny_llama_fp32, ARGS) as srv:
        assert srv.server_info()["speculative_algorithm"] == "QUANTSPEC"
        yield srv


@pytest.fixture(scope="module")
def native(server):
    out = server.generate(PROMPT, max_new_tokens=N)
    assert len(out["output_ids"]) == N and out["meta_info"]["spec_verify_ct"] > 0
    return out


def test_generate_stream_equals_non_stream(server, native):
    events = list(server.stream("/generate", {"text": PROMPT, "sampling_params": GREEDY}))
    assert len(events) > 1  # really incremental
    texts = [e["text"] for e in events]  # native streaming sends the text so far
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))
    assert texts[-1] == native["text"] and events[-1]["output_ids"] == native["output_ids"]
    # (how many steps speculated is not compared: with --quantspec-speculate auto the policy decides per batch from
    # step times measured on this server, so two identical requests may take rounds and plain steps differently)
    assert events[-1]["meta_info"]["spec_verify_ct"] > 0


def test_openai_completions(server, native):
    out = server.completions(PROMPT, max_tokens=N, ignore_eos=True)
    assert out["choices"][0]["text"] == native["text"]
    assert out["usage"]["completion_tokens"] == N and out["choices"][0]["finish_reason"] == "length"
    chunks = list(server.stream("/v1/completions", {"model": "default", "prompt": PROMPT, "max_tokens": N,
                                                    "temperature": 0, "ignore_eos": True}))
    assert "".join(c["choices"][0]["text"] for c in chunks if c.get("choices")) == native["text"]


def test_openai_chat_completions(server, tiny_llama_fp32):
    from transformers import AutoTokenizer

    messages = [{"role": "user", "content": "Write a function that adds two numbers."}]
    tok = AutoTokenizer.from_pretrained(tiny_llama_fp32)
    templated = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    direct = server.generate(templated, max_new_tokens=N)
    out = server.chat(messages, max_tokens=N, ignore_eos=True)
    msg = out["choices"][0]["message"]
    assert msg["role"] == "assistant" and msg["content"] == direct["text"]
    assert out["usage"]["completion_tokens"] == N
    chunks = list(server.stream("/v1/chat/completions", {"model": "default", "messages": messages, "max_tokens": N,
                                                         "temperature": 0, "ignore_eos": True}))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert text == direct["text"]


def test_frontend_program_gen_and_select(server):
    import sglang as sgl

    choices = ["python", "rust", "go"]

    @sgl.function
    def program(s, question):
        s += "# Q: " + question + "\n"
        s += "lang = " + sgl.select("lang", choices=choices) + "\n"
        s += "def " + sgl.gen("code", max_tokens=12, temperature=0)

    backend = sgl.RuntimeEndpoint(server.url)
    states = program.run_batch([{"question": q} for q in ("which language?", "sum a list")], backend=backend)
    for st in states:
        assert st["lang"] in choices
        scores = st.get_meta_info("lang")["normalized_prompt_logprobs"]
        assert len(scores) == len(choices) and all(math.isfinite(x) for x in scores)
        assert st["lang"] == choices[scores.index(max(scores))]  # select = the best-scoring choice
        text = st.text()
        prefix = text[: len(text) - len(st["code"])]
        assert prefix.endswith(f"lang = {st['lang']}\ndef ")
        direct = server._json(server.post("/generate", {"text": prefix, "sampling_params": {
            "max_new_tokens": 12, "temperature": 0}}))
        assert st["code"] == direct["text"]
        assert st.get_meta_info("code")["spec_verify_ct"] > 0  # the program's gen ran speculatively


def test_loads_and_metrics_count_every_round(server):
    """/v1/loads' speculative block and the accept gauges of --enable-metrics, with no decode-batch log line
    written (ARGS). Over the server's lifetime, request-rounds are SGLang's sglang:spec_verify_calls_total and
    accepted drafts = (accept length - 1) x request-rounds: what three more requests add to each must be what their
    meta_info counted, and accept rate = accepted drafts / (γ per request-round). Without a log line the gauges'
    interval is the lifetime too, so they read the same values."""

    def lifetime():
        spec = server.idle_load().get("speculative")
        rounds = round(server.metric("sglang:spec_verify_calls_total"))
        accepted = 0 if spec is None else round((spec["accept_length"] - 1) * rounds)
        return spec, rounds, accepted

    _, rounds0, accepted0 = lifetime()
    meta = [server.generate(p, max_new_tokens=N)["meta_info"] for p in (PROMPT, "def add(a, b):\n", "x = [1, 2")]
    spec, rounds, accepted = lifetime()
    gamma = meta[0]["spec_num_proposed_drafts"] // meta[0]["spec_verify_ct"]
    assert rounds - rounds0 == sum(m["spec_verify_ct"] for m in meta) > 0
    assert accepted - accepted0 == sum(m["spec_num_correct_drafts"] for m in meta)
    assert 0.0 < spec["accept_rate"] <= 1.0
    assert spec["accept_rate"] == pytest.approx(accepted / (gamma * rounds), rel=1e-9)
    assert spec["accept_length"] == pytest.approx(1 + gamma * spec["accept_rate"], rel=1e-12)
    assert server.metric("sglang:spec_accept_rate") == pytest.approx(spec["accept_rate"], rel=1e-12)
    assert server.metric("sglang:spec_accept_length") == pytest.approx(spec["accept_length"], rel=1e-12)
    assert server.metric("sglang:spec_num_steps") == gamma
