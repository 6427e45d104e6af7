#!/usr/bin/env python
"""The acceptance study's prompt set for chat models: chat questions and long documents to summarize or question,
with the model's own chat template applied, as token ids (the format of bench/prompts.py's set, so
bench_acceptance.py reads either with ``--prompts``).

    python bench/chat_prompts.py --model models/smollm2-135m-instruct   # writes bench/data/acceptance_prompts_chat.json
    python bench/chat_prompts.py --model ... --check                      # is the committed file what this builds?

Our own text, nothing downloaded: 12 short questions written here, and documents from Python's own documentation
(pydoc's topics, prose about the language, in the stdlib of every Python), cut so the templated prompts spread
evenly over ``--min-tokens`` … ``--max-tokens`` (default 1024 … 7424: with 128 new tokens within SmolLM2's 8k
context), each ending with an instruction. Deterministic for a given Python version and tokenizer (both recorded).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import prompts as code_prompts

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "bench" / "data" / "acceptance_prompts_chat.json"
QUESTIONS = [
    "What is the capital of France? Answer in one sentence.",
    "Explain in two sentences why the sky is blue.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Give three tips for writing clear emails.",
    "What is the difference between a list and a tuple in Python?",
    "Summarize the plot of a fairy tale you know in three sentences.",
    "How do plants make their food?",
    "Write a haiku about the ocean.",
    "What are the main causes of the seasons on Earth?",
    "Explain what a hash table is to a beginner.",
    "List five healthy breakfast ideas.",
    "Why is exercise good for the brain?",
]
INSTRUCTIONS = ["Summarize the text above in three sentences.",
                "What are the three most important rules the text above describes?",
                "Explain the text above to a beginner, briefly."]


def documents() -> str:
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k].strip() for k in sorted(topics))


def build(model_dir: Path, count: int, lo: int, hi: int) -> dict:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)

    def templated(text):
        return tok.apply_chat_template([{"role": "user", "content": text}], tokenize=True,
                                       add_generation_prompt=True, return_dict=False)

    out = [{"source": f"question {i}", "n_tokens": len(ids := templated(q)), "head": q[:40], "tail": q[-40:],
            "input_ids": ids} for i, q in enumerate(QUESTIONS)]
    doc_ids = tok(documents(), add_special_tokens=False).input_ids
    start = 0
    for i, n in enumerate(code_prompts.targets(count, lo, hi)):
        instruction = INSTRUCTIONS[i % len(INSTRUCTIONS)]
        overhead = len(templated("\n\n" + instruction))
        body = tok.decode(doc_ids[start:start + n - overhead])
        ids = templated(body + "\n\n" + instruction)
        out.append({"source": f"pydoc topics tokens {start}-{start + n - overhead}: {instruction}",
                    "n_tokens": len(ids), "head": body[:40], "tail": instruction, "input_ids": ids})
        start += n - overhead
        if start + hi > len(doc_ids):
            start = 0
    return {
        "description": "chat questions and long documents (pydoc topics) with the model's chat template, as token "
                       "ids (bench/chat_prompts.py)",
        "model": model_dir.name, "python": sys.version.split()[0],
        "tokenizer_sha256": hashlib.sha256((model_dir / "tokenizer.json").read_bytes()).hexdigest(),
        "prompts": out,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=REPO / "models" / "smollm2-135m-instruct")
    ap.add_argument("--count", type=int, default=8, help="long documents")
    ap.add_argument("--min-tokens", type=int, default=1024)
    ap.add_argument("--max-tokens", type=int, default=7424)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    a = ap.parse_args(argv)
    body = code_prompts.dump(build(a.model, a.count, a.min_tokens, a.max_tokens))
    if a.check:
        same = a.out.exists() and a.out.read_text() == body
        print(f"{a.out}: {'up to date' if same else 'DIFFERS (other Python version or tokenizer?)'}")
        return 0 if same else 1
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(body)
    data = json.loads(body)
    print(f"wrote {a.out} ({len(body) / 2**20:.2f} MiB): {len(data['prompts'])} prompts, "
          f"{sum(p['n_tokens'] for p in data['prompts'])} tokens, Python {data['python']}")
    for p in data["prompts"]:
        print(f"  {p['n_tokens']:6d}  {p['source']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
