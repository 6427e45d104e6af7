"""bench/demo.py's comparison (the last step of scripts/demo.sh): identical outputs pass, any difference fails with
the prompt's name; chat runs compare answer text and token counts, code runs token ids. The chat prompts are our
own and the long one really is long."""
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import demo  # noqa: E402


def _write(tmp_path, name, label, results, **extra):
    path = tmp_path / name
    path.write_text(json.dumps({"label": label, "results": results, **extra}))
    return str(path)


def _chat(text, n=3):
    return {"name": "capital", "text": text, "completion_tokens": n, "seconds": 1.0}


def _code(ids):
    return {"name": "fib", "output_ids": ids, "meta_info": {"spec_accept_length": 3.0}, "seconds": 1.0}


def test_identical_chat_runs_pass(tmp_path, capsys):
    a = _write(tmp_path, "a.json", "quantspec", [_chat("Paris.")], accept_length=2.5)
    b = _write(tmp_path, "b.json", "int8-only", [_chat("Paris.")], accept_length=None)
    demo.compare(SimpleNamespace(first=a, second=b))
    out = capsys.readouterr().out
    assert "identical outputs for all 1 prompts" in out and "spec accept length 2.50" in out


@pytest.mark.parametrize("first,second", [([_chat("Paris.")], [_chat("Lyon.")]),
                                          ([_chat("Paris.", 3)], [_chat("Paris.", 4)]),
                                          ([_code([1, 2, 3])], [_code([1, 2, 4])])])
def test_any_difference_fails_naming_the_prompt(tmp_path, first, second):
    a = _write(tmp_path, "a.json", "quantspec", first)
    b = _write(tmp_path, "b.json", "int8-only", second)
    with pytest.raises(SystemExit, match="differ on: (capital|fib)"):
        demo.compare(SimpleNamespace(first=a, second=b))


def test_chat_prompts_are_messages_with_one_long_document():
    prompts = demo.chat_prompts()
    assert len({name for name, _ in prompts}) == len(prompts) >= 4
    for _, messages in prompts:
        assert messages[-1]["role"] == "user" and all(m["content"] for m in messages)
    assert max(len(m[-1]["content"]) for _, m in prompts) > 4000  # ~1.2k tokens: several KV pages of 64
