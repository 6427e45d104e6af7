"""The user documents stay current: README.md's flag table is the generator's output, docs/ARCHITECTURE.md names
every module of sgl_spec/, every repository path the documents name exists, and no document narrates development
history."""
from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ARCH = ROOT / "docs" / "ARCHITECTURE.md"
CONTRACTS = ROOT / "docs" / "CONTRACTS.md"
MODELS = ROOT / "models" / "README.md"
# written by other tooling (the bench results, the kernel notes); the README links them
GENERATED_DOCS = ("docs/PERFORMANCE.md", "docs/KERNELS.md")
# built on request, ignored by git: named by the docs, absent from a clone
BUILT_PATHS = ("models/smollm2-135m-instruct", "models/smollm2-135m-instruct/")

# a repository path: starts at a top-level folder of the repository (or is a top-level file)
PATH_RE = re.compile(r"(?<![\w./-])((?:sgl_spec|tests|bench|scripts|docs|models|\.ci)(?:/[\w.+-]+)+/?|README\.md)")


def _flag_table():
    spec = importlib.util.spec_from_file_location("flag_table", ROOT / "scripts" / "flag_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _paths(text: str) -> set[str]:
    out = set()
    for m in PATH_RE.finditer(text):
        p = m.group(1).rstrip(".,;:)")
        if "<" in p or "*" in p:
            continue
        out.add(p)
    return out


def _modules() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "sgl_spec").rglob("*.py")
                  if p.name != "__init__.py" and "__pycache__" not in p.parts)


def test_readme_flag_table_is_generated():
    ft = _flag_table()
    text = README.read_text()
    block = ft.readme_block(text)
    assert block is not None, "README.md lacks the flag-table markers"
    assert block == ft.block(), "README.md's flag table is stale: run python scripts/flag_table.py --write"


def test_flag_table_covers_every_flag():
    from sgl_spec.flags import FLAGS

    table = _flag_table().markdown_table()
    for name in FLAGS:
        assert f"`--{name.replace('_', '-')}`" in table
    for flag in ("--spec-algo quantspec", "--attention-backend quantspec", "--speculative-num-steps", "--page-size"):
        assert f"`{flag}`" in table


def test_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "bash scripts/setup_env.sh && bash scripts/demo.sh" in text
    assert "\nbash scripts/test.sh" in text
    assert "pip install -e ." in text
    for doc in ("docs/ARCHITECTURE.md", "docs/CONTRACTS.md", *GENERATED_DOCS):
        assert f"({doc})" in text, f"README.md does not link {doc}"


def test_architecture_names_every_module():
    text = ARCH.read_text()
    missing = [m for m in _modules() if m not in text]
    assert not missing, f"docs/ARCHITECTURE.md does not name: {missing}"


@pytest.mark.parametrize("doc", [README, ARCH, CONTRACTS, MODELS], ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_exist(doc):
    missing = sorted(p for p in _paths(doc.read_text()) if not (ROOT / p).exists() and p not in GENERATED_DOCS + BUILT_PATHS)
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", GENERATED_DOCS)
def test_linked_generated_docs_exist(doc):
    if not (ROOT / doc).exists():
        pytest.skip(f"{doc} is not written yet")


def test_no_development_history():
    docs = [README, MODELS, *sorted((ROOT / "docs").glob("*.md"))]
    hits = [f"{d.relative_to(ROOT)}:{i}" for d in docs for i, line in enumerate(d.read_text().splitlines(), 1)
            if re.search(r"session [0-9]+", line, re.I)]
    assert not hits, f"development history in the docs: {hits}"
