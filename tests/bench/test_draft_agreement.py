"""bench/draft_agreement.py (CPU study of per-layer draft page budgets): its one-row draft forward, given every page
in full precision, reproduces the target forward's logits; the selection keeps sinks and the budget's page count."""
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import attention_mass as am  # noqa: E402
import draft_agreement as da  # noqa: E402
from tinymodel import make_tiny_llama  # noqa: E402


def test_full_precision_dense_draft_row_equals_the_target(tmp_path):
    cfg, w = am.load_model(make_tiny_llama(tmp_path / "m", num_layers=2))
    page, rows = 16, 6
    ids = torch.randint(1, 8192, (5 * page + 3 + rows,), generator=torch.Generator().manual_seed(3)).tolist()
    T = len(ids)
    ks, vs, qs, tlog = da.target_forward(cfg, w, ids, rows)
    n_all = T // page
    views = [(k[:, : n_all * page], v[:, : n_all * page]) for k, v in zip(ks, vs)]  # no quantization
    for j in range(rows):
        t = T - rows + j
        sel = [torch.arange(t // page)] * len(ks)
        got = da.draft_logits(cfg, w, ids, t, T, ks, vs, views, sel, page)
        # fp32 both ways, different summation order (SDPA over T vs. one row over the gathered keys)
        assert torch.allclose(got, tlog[j], atol=1e-4 * tlog[j].abs().max().item(), rtol=0)
    # the 4-bit view changes the keys but keeps their shape
    k4, v4 = da.draft_view(ks[0], vs[0], page)
    assert k4.shape == (ks[0].shape[0], n_all * page, ks[0].shape[2]) and not torch.equal(k4, ks[0][:, : n_all * page])


def test_select_keeps_sinks_and_the_budget():
    scores = torch.tensor([0.0, 5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0])
    assert da.select(scores, 10, None, 2, 1).tolist() == list(range(10))
    assert da.select(scores, 10, 0.3, 2, 1).tolist() == [0, 3, 7]  # sink page 0 + the two best
    assert da.select(scores, 10, 0.01, 4, 1).tolist() == [0, 3, 5, 7]  # the min-pages floor
