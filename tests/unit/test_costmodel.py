"""sgl_spec.speculative.cost_model: τ(α, γ), its inverse, KV byte accounting, the speedup formula and the fit (the worker's
switch built on it: tests/unit/test_autooff.py). Pure CPU arithmetic; the fit tests use data generated from a known
model, so they must recover it (up to the NNLS solver's floating-point error, hence rel=1e-6)."""
import itertools
import json
import random

import pytest
import torch

from sgl_spec.speculative import cost_model as cm
from sgl_spec.kernels.select_topk_pages.ref import page_counts
from sgl_spec.kvcache.format import KVFormat

PYCODE = {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 8192}
LLAMA8B = {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256}


@pytest.mark.parametrize("gamma", [1, 2, 4, 7])
def test_expected_tokens_closed_form_and_limits(gamma):
    assert cm.expected_tokens(0.0, gamma) == 1.0
    assert cm.expected_tokens(1.0, gamma) == gamma + 1
    for a in (0.1, 0.5, 0.9, 0.999):
        # eq. 1 of Leviathan et al. is the geometric series Σ_{i=0..γ} α^i
        assert cm.expected_tokens(a, gamma) == pytest.approx(sum(a ** i for i in range(gamma + 1)), rel=1e-12)
    xs = [cm.expected_tokens(a / 100, gamma) for a in range(101)]
    assert xs == sorted(xs)


def test_expected_tokens_matches_iid_acceptance_simulation():
    """A round accepts drafts while i.i.d. coins with P(accept)=α come up heads (at most γ), plus one token."""
    rng = random.Random(0)
    alpha, gamma, n = 0.7, 4, 200_000
    total = 0
    for _ in range(n):
        k = 0
        while k < gamma and rng.random() < alpha:
            k += 1
        total += k + 1
    # standard error of the mean ≈ 1.3/sqrt(n) ≈ 0.003; 0.015 is ~5 sigma
    assert total / n == pytest.approx(cm.expected_tokens(alpha, gamma), abs=0.015)


@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_alpha_from_tokens_inverts(gamma):
    for a in (0.0, 0.05, 0.3, 0.62, 0.9, 0.99):
        assert cm.alpha_from_tokens(cm.expected_tokens(a, gamma), gamma) == pytest.approx(a, abs=1e-9)
    assert cm.alpha_from_tokens(0.5, gamma) == pytest.approx(0.0, abs=1e-12)  # clipped to τ >= 1
    assert cm.alpha_from_tokens(gamma + 3, gamma) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("page", [32, 64, 128])
def test_kv_bytes_match_kvformat(page):
    shape = cm.ModelShape.from_hf_config(LLAMA8B, page_size=page)
    fmt = KVFormat(page, 8, 128)
    for draft in (False, True):
        assert shape.quant_bytes_per_token(draft) == pytest.approx(fmt.bytes_per_token_per_layer(draft) * 32)
    assert shape.bf16_bytes_per_token() == 2 * 32 * 8 * 128 * 2


def test_model_shape_from_config():
    s = cm.ModelShape.from_hf_config(PYCODE)
    assert (s.num_layers, s.num_kv_heads, s.head_dim) == (8, 2, 128)
    assert 25e6 < s.num_params < 35e6  # "pycode-30m"
    assert 7.0e9 < cm.ModelShape.from_hf_config(LLAMA8B).num_params < 8.2e9


def test_int4_draft_weights_cut_the_draft_step_only():
    """The 4-bit copy (draft_weights.py: 4 bits + one fp16 scale per 128 weights) replaces the decoder linears a
    draft reads; the embedding-free rest (the LM head) stays in the checkpoint's dtype. The prior's draft step reads
    those bytes, every other step the checkpoint's, so at 32k x 1 on the 8B shape the round gets cheaper."""
    s = cm.ModelShape.from_hf_config(LLAMA8B)
    assert s.linear_params == 32 * (4096 * 32 * 128 * 2 + 4096 * 8 * 128 * 2 + 3 * 4096 * 14336)
    assert s.weight_bytes() == s.num_params * 2
    lm_head = 128256 * 4096
    assert s.weight_bytes(4) == pytest.approx(lm_head * 2 + s.linear_params * (4 + 16 / 128) / 8)
    assert 0.28 < s.weight_bytes(4) / s.weight_bytes() < 0.32
    bf16 = cm.default_cost_model(s, "NVIDIA H200")
    int4 = cm.default_cost_model(s, "NVIDIA H200", cm.DraftConfig(weight_bits=4))
    saved = (s.weight_bytes() - s.weight_bytes(4)) / (4.8e12 * 0.7)
    assert bf16.steps["draft"].fixed_s - int4.steps["draft"].fixed_s == pytest.approx(saved)
    assert {k: v for k, v in int4.steps.items() if k != "draft"} == {k: v for k, v in bf16.steps.items() if k != "draft"}
    assert int4.speedup(1, 32768, 4, 0.9) > 1.3 * bf16.speedup(1, 32768, 4, 0.9)
    old = cm.CostModel.from_json({**bf16.to_json(), "shape": {k: v for k, v in bf16.to_json()["shape"].items()
                                                              if k != "linear_params"}})
    assert old.shape.linear_params == 0 and old.shape.weight_bytes(4) == old.shape.weight_bytes()  # unknown: as is


def test_draft_pages_follow_select_topk_rule():
    for ratio, min_pages, sinks in [(0.07, 8, 1), (0.1, 1, 1), (0.5, 2, 4), (0.07, 1, 0)]:
        d = cm.DraftConfig(False, ratio, min_pages, sinks)
        ns = list(range(0, 300, 7)) + [1024, 4096]
        _, _, k = page_counts(torch.tensor(ns), 1 << 20, ratio, min_pages, sinks, 1 << 20)
        assert [d.pages(n * 64 + 5, 64) for n in ns] == [float(x) for x in k.tolist()]
    assert cm.DraftConfig(dense=True).pages(64 * 37 + 3, 64) == 37.0


def _hand_model():
    shape = cm.ModelShape.from_hf_config(PYCODE)
    steps = {"ar_bf16": cm.StepCost(2e-4, 1e-7, 1 / 3e12), "ar_int8": cm.StepCost(2.2e-4, 1e-7, 1 / 2.5e12),
             "draft": cm.StepCost(5e-4, 1e-7, 1 / 2e12), "verify": cm.StepCost(6e-4, 2e-7, 1 / 2.5e12)}
    return cm.CostModel(shape, steps)


def test_speedup_is_the_formula():
    m = _hand_model()
    b, ctx, g, a = 32, 8192, 3, 0.8
    kv = b * ctx
    t_ar = m.steps["ar_int8"].time(b, m.kv_bytes("ar_int8", b, kv))
    t_d = m.steps["draft"].time(b, m.kv_bytes("draft", b, kv))
    t_v = m.steps["verify"].time(b * (g + 1), m.kv_bytes("verify", b, kv))
    assert m.speedup(b, kv, g, a) == pytest.approx(cm.expected_tokens(a, g) * t_ar / (g * t_d + t_v), rel=1e-12)
    # the draft reads the upper plane of its pages + the hot page; the verify every page's INT8 view + the hot page
    pages = m.draft.pages(ctx, 64)
    hot = b * 32 * m.shape.bf16_bytes_per_token()
    assert m.kv_bytes("draft", b, kv) == pytest.approx(b * pages * 64 * m.shape.quant_bytes_per_token(True) + hot)
    assert m.kv_bytes("verify", b, kv) == pytest.approx((kv - b * 32) * m.shape.quant_bytes_per_token(False) + hot)


def test_best_gamma_is_the_argmax_and_margin_switches():
    m = _hand_model()
    for b, ctx, a in itertools.product([1, 16, 128], [1024, 16384], [0.3, 0.9]):
        g, s = m.best_gamma(b, b * ctx, a)
        assert s == max(m.speedup(b, b * ctx, x, a) for x in cm.GAMMAS)
        assert m.speedup(b, b * ctx, g, a) == s
        assert m.should_speculate(b, b * ctx, a, g, margin=s - 1 - 1e-9)
        assert not m.should_speculate(b, b * ctx, a, g, margin=s - 1 + 1e-9)


def test_default_model_switches_off_where_speculation_must_lose():
    """A tiny model at batch 1 / short context is launch-bound: γ eager drafts can never pay for themselves. An
    8B model at 64k is KV-bound and its draft reads ~7% of the pages' upper planes: speculation must win there."""
    small = cm.default_cost_model(cm.ModelShape.from_hf_config(PYCODE), "NVIDIA H200")
    big = cm.default_cost_model(cm.ModelShape.from_hf_config(LLAMA8B), "NVIDIA H200")
    assert small.source == "default:H200"
    for g in cm.GAMMAS:
        assert not small.should_speculate(1, 4096, 0.9, g)
    assert big.should_speculate(8, 8 * 65536, 0.8, 4)
    assert big.speedup(8, 8 * 65536, 4, 0.8, baseline="ar_bf16") > big.speedup(8, 8 * 65536, 4, 0.8)
    assert cm.hardware_for("Some Future GPU") is cm.UNKNOWN_HARDWARE
    assert cm.hardware_for("NVIDIA H100 80GB HBM3").name == "H100"


def _synthetic_obs(model, gammas, dense=False):
    obs = []
    for b, ctx in itertools.product([1, 8, 32, 64, 128], [4096, 8192, 15360]):
        kv = b * ctx
        for kind in ("ar_bf16", "ar_int8"):
            obs.append({"kind": kind, "batch": b, "kv_tokens": kv, "t_s": model.step_time(kind, b, kv)})
        for g in gammas:
            obs.append({"kind": "round", "batch": b, "kv_tokens": kv, "gamma": g, "dense": dense,
                        "t_s": model.round_time(b, kv, g)})
    return obs


def test_fit_recovers_known_coefficients():
    truth = _hand_model()
    fitted = cm.fit(_synthetic_obs(truth, [2, 4, 6]), truth.shape)
    for kind in ("ar_bf16", "ar_int8", "draft", "verify"):
        for f in ("fixed_s", "per_token_s", "per_kv_byte_s"):
            assert getattr(fitted.steps[kind], f) == pytest.approx(getattr(truth.steps[kind], f), rel=1e-6), (kind, f)
    assert fitted.fit_info["round"]["rms_rel_err"] < 1e-9
    assert fitted.fit_info["round"]["gammas"] == [2, 4, 6]


def test_fit_with_one_gamma_still_predicts_round_times():
    truth = _hand_model()
    fitted = cm.fit(_synthetic_obs(truth, [4]), truth.shape)
    for b, ctx in [(1, 4096), (64, 15360), (128, 8192)]:
        assert fitted.round_time(b, b * ctx, 4) == pytest.approx(truth.round_time(b, b * ctx, 4), rel=1e-6)


def test_fit_keeps_the_prior_for_kinds_without_rows_and_json_round_trips(tmp_path):
    truth = _hand_model()
    obs = [o for o in _synthetic_obs(truth, [3]) if o["kind"] == "ar_int8"]
    prior = cm.default_cost_model(truth.shape, "H100")
    fitted = cm.fit(obs, truth.shape, prior=prior)
    assert fitted.steps["draft"] == prior.steps["draft"] and set(fitted.fit_info) == {"ar_int8"}
    p = tmp_path / "cm.json"
    fitted.save(p)
    back = cm.CostModel.load(p)
    assert back.steps == fitted.steps and back.shape == fitted.shape and back.draft == fitted.draft
    assert json.loads(p.read_text())["version"] == 1


def test_nnls_matches_kkt_conditions():
    g = torch.Generator().manual_seed(0)
    for trial in range(20):
        A = torch.rand((12, 5), generator=g, dtype=torch.float64).numpy()
        y = torch.randn(12, generator=g, dtype=torch.float64).numpy()
        x = cm.nnls(A, y)
        w = A.T @ (y - A @ x)  # KKT: x >= 0, w <= 0, and w_i = 0 where x_i > 0
        assert (x >= 0).all()
        assert (w <= 1e-9).all(), (trial, w)
        assert (abs(w[x > 0]) <= 1e-9).all()
