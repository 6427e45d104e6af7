"""bench/attention_mass.py (CPU study of the draft page budget): its Llama forward agrees with Hugging Face, and its
captured-mass rule follows the server's selection (full budget = everything; a stale selection misses a moved
focus; the ring region always counts)."""
import math
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import attention_mass as am  # noqa: E402
from tinymodel import make_tiny_llama  # noqa: E402


def test_forward_matches_hugging_face(tmp_path):
    from transformers import LlamaForCausalLM

    path = make_tiny_llama(tmp_path / "m", num_layers=2)
    cfg, w = am.load_model(path)
    ids = torch.randint(1, 8192, (70,), generator=torch.Generator().manual_seed(1)).tolist()
    ks, qs, logits = am.forward_qk(cfg, w, ids, rows=5)
    ref = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        want = ref(torch.tensor([ids])).logits[0]
    # fp32 both ways, same op order up to the SDPA kernel and the RoPE table: 1e-4 of the logits' scale
    assert torch.allclose(logits, want, atol=1e-4 * want.abs().max().item(), rtol=0)
    assert len(ks) == 2 and ks[0].shape == (2, 70, 16) and qs[0].shape == (4, 5, 16)


def _focused(T=6 * 64 + 8, rows=8, focus_page=3, moved_page=1, move_at=4):
    """K: random unit keys; Q: rows before ``move_at`` point hard at one key of ``focus_page``, later rows at one key
    of ``moved_page`` (every head alike)."""
    g = torch.Generator().manual_seed(0)
    k = torch.nn.functional.normalize(torch.randn(2, T, 16, generator=g), dim=-1)
    q = torch.zeros(4, rows, 16)
    for j in range(rows):
        page = focus_page if j < move_at else moved_page
        q[:, j] = 200.0 * k.repeat_interleave(2, 0)[:, page * 64 + 5]
    return k, q, T, rows


def test_full_budget_captures_everything():
    k, q, T, rows = _focused()
    m = am.captured_mass(k, q, T, rows, ratio=1.0, lag=3, min_pages=1)
    assert m.shape == (rows - 3, 4)
    assert torch.allclose(m, torch.ones_like(m), atol=1e-5)


def test_fresh_selection_finds_the_focus_and_a_stale_one_misses_its_move():
    k, q, T, rows = _focused()
    # budget: the sink page + one page (min_pages 2 of 6 complete pages)
    fresh = am.captured_mass(k, q, T, rows, ratio=0.01, lag=0, min_pages=2)
    assert fresh.min() > 0.99  # every row's focus page is the best-scored page of its own query
    stale = am.captured_mass(k, q, T, rows, ratio=0.01, lag=2, min_pages=2)
    # rows 4-5 are drafted with pages chosen by rows 2-3 (focus on page 3) but attend to page 1
    assert stale[2:4].max() < 0.1 and stale[[0, 1, 4, 5]].min() > 0.99
    # ... unless the moved focus is a sink page, which is always read
    k2, q2, T2, _ = _focused(moved_page=0)
    assert am.captured_mass(k2, q2, T2, rows, ratio=0.01, lag=2, min_pages=2).min() > 0.99


def test_ring_tokens_always_count():
    """Mass on tokens from the selecting row's last complete page on is read by the draft (ring + round pages)."""
    k, q, T, rows = _focused()
    q[:] = 200.0 * k.repeat_interleave(2, 0)[:, T - rows].unsqueeze(1)  # a token after the last complete page
    m = am.captured_mass(k, q, T, rows, ratio=0.01, lag=0, min_pages=1)
    assert m.min() > 0.99
    n = (T - rows) // 64
    assert math.ceil(0.01 * n) == 1  # so only the sink page is selected from the paged part


def test_cli_runs_on_a_tiny_model(tmp_path):
    path = make_tiny_llama(tmp_path / "m", num_layers=2, max_position_embeddings=4096)
    out = tmp_path / "mass.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "attention_mass.py"), "--model", str(path),
                           "--ctx", "200", "--prompts", "1", "--ratios", "0.07,1.0", "--lags", "0,2", "--rows", "6",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    import json

    res = json.loads(out.read_text())
    assert len(res["rows"]) == 4 and len([x for x in proc.stdout.splitlines() if x.startswith("[mass]")]) == 4
    for r in res["rows"]:
        assert 0.0 <= r["mean"] <= 1.0 + 1e-6 and len(r["per_layer"]) == 2
        if r["ratio"] == 1.0:
            assert abs(r["mean"] - 1.0) < 1e-5
