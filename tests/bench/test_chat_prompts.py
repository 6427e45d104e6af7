"""bench/data/acceptance_prompts_chat.json (bench/chat_prompts.py, SmolLM2's chat template): the committed set is
the shape bench_acceptance.py reads - 12 questions and 8 documents spread over 1k-7.4k tokens that fit SmolLM2's
8k context with the study's new tokens - and every prompt ends as its chat template's generation prompt does."""
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import chat_prompts  # noqa: E402
import prompts  # noqa: E402


def test_committed_chat_prompt_set():
    data = json.loads(chat_prompts.DEFAULT_OUT.read_text())
    assert data["model"] == "smollm2-135m-instruct"
    got = prompts.load(chat_prompts.DEFAULT_OUT)
    assert len(got) == 20 and len({p["source"] for p in got}) == 20
    assert all(p["n_tokens"] == len(p["input_ids"]) for p in got)
    long = sorted(p["n_tokens"] for p in got if p["source"].startswith("pydoc"))
    assert len(long) == 8 and long[0] >= 1000 and long[-1] + 128 <= 8192
    tail = got[0]["input_ids"][-3:]  # "<|im_start|>assistant\n"
    assert all(p["input_ids"][-3:] == tail for p in got)
