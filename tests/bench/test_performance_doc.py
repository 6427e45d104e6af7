"""docs/PERFORMANCE.md is generated from bench/results by bench/performance_doc.py: the committed document must be
exactly what the committed results give, and every committed result must carry its provenance."""
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import performance_doc  # noqa: E402

RESULTS = REPO / "bench" / "results"


def test_committed_doc_is_current():
    assert (REPO / "docs" / "PERFORMANCE.md").read_text() == performance_doc.render(), \
        "run: python bench/performance_doc.py --write"


def test_every_section_is_there_with_its_provenance():
    text = performance_doc.render()
    for title in ("## End to end", "## Attention kernels against FA3", "## Draft acceptance"):
        assert title in text
    assert text.count("Device: ") >= 3 and text.count("Command:") >= 3 and "random weights accept every draft" in text
    assert "session" not in text.lower()


def test_committed_e2e_rows_carry_kind_model_ctx_batch_speedup_device():
    doc = json.loads((RESULTS / "e2e.json").read_text())
    assert doc["meta"]["device"] and doc["meta"]["date"] and doc["meta"]["commands"]
    for r in doc["rows"]:
        assert r["kind"] == "e2e" and r["sglang"] == "0.5.17"
        assert all(r.get(k) is not None for k in ("model", "ctx", "batch", "speedup", "device")), r


def test_results_stay_small():
    assert sum(f.stat().st_size for f in RESULTS.rglob("*") if f.is_file()) < 3 * 2**20
