#!/usr/bin/env python
"""The acceptance study's prompt set: long Python files, as pycode-30m token ids of exact lengths.

    python bench/prompts.py                     # rebuild bench/data/acceptance_prompts.json (committed; run once)
    python bench/prompts.py --check             # is the committed file what this machine would build?

Source: the CPython standard library of the Python running this script (real, long, varied code; every machine has
one). Files under test folders and data-like modules (a big literal table tokenizes to < 3 characters per token:
pydoc_data/topics.py, html/entities.py, _sysconfigdata*, locale.py) are left out. Lengths are spread evenly over
[--min-tokens, --max-tokens]; the longest target takes the file that fits it most tightly, then the next, so every
prompt is the *start* of a different file, cut to its exact token count. Token ids (not text) are stored, so the
lengths are exact whatever tokenizer version the server runs; the first/last characters and the file's sha256 say
where each came from. Deterministic for a given Python version and tokenizer (both recorded).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "bench" / "data" / "acceptance_prompts.json"
SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
MIN_CHARS_PER_TOKEN = 3.0  # below: a data table, not code


def default_model() -> Path:
    for p in (REPO / "models" / "pycode-30m", REPO.parent / "shared" / "models" / "pycode-30m"):
        if p.is_dir():
            return p
    return REPO / "models" / "pycode-30m"


def targets(count: int, lo: int, hi: int) -> list[int]:
    return [lo + round(i * (hi - lo) / max(1, count - 1)) for i in range(count)]


def build(tokenizer_json: Path, count: int, lo: int, hi: int) -> dict:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    root = Path(sysconfig.get_paths()["stdlib"])
    cands = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP_DIRS & set(rel.parts[:-1]) or path.stat().st_size < 4 * lo:  # ~4 chars/token: too short anyway
            continue
        text = path.read_text(encoding="utf-8")
        ids = tok.encode(text).ids
        if len(ids) >= lo and len(text) / len(ids) >= MIN_CHARS_PER_TOKEN:
            cands.append((len(ids), str(rel), text, ids))
    prompts = []
    for n in sorted(targets(count, lo, hi), reverse=True):
        fits = [c for c in cands if c[0] >= n]
        if not fits:
            raise SystemExit(f"no unused stdlib file has {n} tokens; lower --max-tokens or --count")
        best = min(fits, key=lambda c: (c[0], c[1]))
        cands.remove(best)
        _, rel, text, ids = best
        ids = ids[:n]
        prompts.append({"source": rel, "file_sha256": hashlib.sha256(text.encode()).hexdigest(), "n_tokens": n,
                        "head": tok.decode(ids[:12]), "tail": tok.decode(ids[-12:]), "input_ids": ids})
    prompts.sort(key=lambda p: p["n_tokens"])
    return {
        "description": "starts of CPython stdlib files as pycode-30m token ids (bench/prompts.py)",
        "python": sys.version.split()[0],
        "tokenizer_sha256": hashlib.sha256(tokenizer_json.read_bytes()).hexdigest(),
        "prompts": prompts,
    }


def dump(data: dict) -> str:
    """One prompt per line: small, diffable, still plain JSON."""
    head = {k: v for k, v in data.items() if k != "prompts"}
    lines = [json.dumps(p, separators=(",", ":")) for p in data["prompts"]]
    body = json.dumps(head, indent=1)[:-2] + ',\n "prompts": [\n' + ",\n".join(lines) + "\n ]\n}\n"
    assert json.loads(body) == data
    return body


def load(path=DEFAULT_OUT, limit=None, cut=None) -> list[dict]:
    """The prompts (``limit`` first ones, ids cut to ``cut`` tokens when given)."""
    prompts = json.loads(Path(path).read_text())["prompts"][:limit]
    if cut:
        prompts = [dict(p, input_ids=p["input_ids"][:cut], n_tokens=min(cut, p["n_tokens"])) for p in prompts]
    return prompts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", type=Path, default=None, help="tokenizer.json (default: pycode-30m's)")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--min-tokens", type=int, default=4096)
    ap.add_argument("--max-tokens", type=int, default=15360)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    a = ap.parse_args(argv)
    tokenizer = a.tokenizer or default_model() / "tokenizer.json"
    body = dump(build(tokenizer, a.count, a.min_tokens, a.max_tokens))
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
