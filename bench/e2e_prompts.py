"""Prompts for bench_e2e.py: token-id prompts of an exact length, a different one for every request.

* ``PythonCorpus``: real Python text (the running interpreter's standard library, files in sorted path order, test
  folders and data-like modules left out: a literal table tokenizes to < 3 characters per token and would distort
  acceptance), tokenized with the model's own tokenizer - what a code model's acceptance should be measured on.
  (bench/prompts.py, the acceptance study's set, takes whole files of spread lengths; a decode benchmark needs up
  to 128 distinct prompts of one exact length, hence windows of a token stream here.) Prompt i
  is a window of the token stream at a random offset; windows may overlap, but no two prompts of a batch start
  with the same token, so the radix cache (page size 1 for stock SGLang) never shares even one token between them.
  (The GPU machine's Python 3.12 stdlib is not this machine's 3.11: prompts differ between machines, by design
  irrelevant for a decode-speed measurement.)
* ``random_prompts``: seeded uniform token ids (distinct first tokens), for models with random weights.
"""
from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import numpy as np

SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
MIN_CHARS_PER_TOKEN = 3.0  # below: a data table, not code


class PythonCorpus:
    def __init__(self, tokenizer_json, min_tokens: int = 1_500_000, root=None):
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_json))
        root = Path(root or sysconfig.get_paths()["stdlib"])
        files = sorted(p for p in root.rglob("*.py") if not SKIP_DIRS & set(p.relative_to(root).parts[:-1]))
        ids, total, batch = [], 0, []
        for path in files:
            try:
                batch.append(path.read_text(errors="replace"))
            except OSError:
                continue
            if len(batch) == 64:
                total += self._encode(tok, batch, ids)
                batch = []
                if total >= min_tokens:
                    break
        if batch and total < min_tokens:
            total += self._encode(tok, batch, ids)
        if total < 1024:
            raise RuntimeError(f"only {total} tokens of Python found under {root}")
        self.ids = np.concatenate(ids).astype(np.int64)
        self.source = f"{root} ({len(self.ids)} tokens)"

    @staticmethod
    def _encode(tok, texts, out) -> int:
        n = 0
        for text, enc in zip(texts, tok.encode_batch(texts)):
            if enc.ids and len(text) / len(enc.ids) >= MIN_CHARS_PER_TOKEN:
                out.append(np.asarray(enc.ids, dtype=np.int64))
                n += len(enc.ids)
        return n

    def prompts(self, n: int, length: int, seed: int) -> list[list[int]]:
        """``n`` windows of ``length`` tokens with pairwise distinct first tokens."""
        if length > len(self.ids):
            raise ValueError(f"prompt length {length} exceeds the corpus ({len(self.ids)} tokens)")
        rng = random.Random(seed)
        out, seen = [], set()
        for _ in range(200 * n):
            if len(out) == n:
                break
            off = rng.randrange(0, len(self.ids) - length + 1)
            window = self.ids[off: off + length]
            key = int(window[0])
            if key in seen:
                continue
            seen.add(key)
            out.append(window.tolist())
        if len(out) < n:
            raise RuntimeError(f"could not draw {n} distinct prompts of {length} tokens")
        return out


def random_prompts(n: int, length: int, vocab_size: int, seed: int) -> list[list[int]]:
    """Seeded uniform ids in [1, vocab) (0 is often EOS/BOS), pairwise distinct first tokens (n < vocab)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab_size, size=(n, length), dtype=np.int64)
    ids[:, 0] = rng.choice(np.arange(1, vocab_size), size=n, replace=False)
    return ids.tolist()
