"""When does quantspec's speculation pay off? A step-cost model, its fit from benchmark rows, and the per-batch switch.

Expected tokens per round (Leviathan et al. 2023, eq. 1; i.i.d. acceptance with rate α, γ drafts per round)::

    τ(α, γ) = (1 − α^{γ+1}) / (1 − α)          (τ = γ + 1 at α = 1)

A round costs γ draft forwards plus one verify forward over γ+1 tokens; plain decoding costs one step per token, so::

    speedup(b, ctx, γ) = τ(α, γ) · t_ar(b, ctx) / (γ · t_draft(b, ctx) + t_verify(b, ctx, γ))

Each step kind's time is ``fixed + per_token · tokens + per_kv_byte · kv_bytes`` (a decode step is launch/weight
bound at small batch, compute bound in the tokens at large batch, and KV-bandwidth bound at long contexts):

    ar_bf16 / ar_int8 / ar_int8_eager   tokens = b          kv_bytes = Σ ctx · (BF16 | INT8-view) bytes per token
    draft                               tokens = b          kv_bytes = draft pages (upper plane) + hot tokens
    verify                              tokens = b·(γ+1)    kv_bytes = Σ ctx · INT8-view bytes per token

A step's fixed cost holds the weights it reads: the checkpoint's, except a draft with the 4-bit copy of the decoder
linears (``DraftConfig.weight_bits``; sgl_spec/speculative/draft_weights.py), about 0.3 of the BF16 bytes on Llama-3-8B.

Coefficients come from ``fit`` on measured steps (bench/bench_e2e.py saves them as JSON) or, for a GPU without a
fit, from ``default_cost_model``: datasheet bandwidth/FLOPs with pessimistic efficiencies and generous fixed costs
(drafts run eagerly, outside CUDA graphs), so an uncalibrated GPU speculates only where the case is clear.

The worker's per-batch switch built on this model (online step-time corrections, α from accept lengths, probes)
is ``sgl_spec.speculative.auto_off.AutoOff``.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Iterable, Optional

STEP_KINDS = ("ar_bf16", "ar_int8", "ar_int8_eager", "draft", "verify")
GAMMAS = tuple(range(1, 9))
DEFAULT_MARGIN = 0.05


# ---- acceptance ------------------------------------------------------------------------------------------------------
def expected_tokens(alpha: float, gamma: int) -> float:
    """τ(α, γ): expected tokens emitted per round (accepted drafts + the correction/bonus token)."""
    alpha = min(max(float(alpha), 0.0), 1.0)
    return math.fsum(alpha ** i for i in range(gamma + 1))  # the series itself: no 0/0 as α → 1


def alpha_from_tokens(tau: float, gamma: int) -> float:
    """Inverse of τ(·, γ) by bisection (τ is increasing in α); τ is clipped to [1, γ+1]."""
    tau = float(tau)
    if tau <= 1.0:
        return 0.0
    if tau >= gamma + 1.0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if expected_tokens(mid, gamma) < tau:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ---- shapes ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelShape:
    num_layers: int
    num_kv_heads: int
    head_dim: int
    num_params: int  # weights read by every forward (embedding rows are gathered, but the LM head is read whole)
    page_size: int = 64
    dtype_bytes: int = 2
    linear_params: int = 0  # of those, the decoder layers' linears (what a 4-bit draft copy replaces); 0: unknown

    @classmethod
    def from_hf_config(cls, cfg: dict, page_size: int = 64, dtype_bytes: int = 2) -> "ModelShape":
        h, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
        hq = cfg["num_attention_heads"]
        hkv = cfg.get("num_key_value_heads") or hq
        d = cfg.get("head_dim") or h // hq
        per_layer = h * hq * d * 2 + h * hkv * d * 2 + 3 * h * cfg["intermediate_size"]
        lm_head = vocab * h
        return cls(layers, hkv, d, layers * per_layer + lm_head, page_size, dtype_bytes, layers * per_layer)

    def weight_bytes(self, linear_bits: Optional[int] = None) -> float:
        """Weight bytes one forward reads: the checkpoint's, or with the decoder linears at ``linear_bits`` per
        weight plus one fp16 scale per 128 (sgl_spec/speculative/draft_weights.py's copy) and the rest as is."""
        if linear_bits is None:
            return float(self.num_params * self.dtype_bytes)
        rest = self.num_params - self.linear_params
        return rest * self.dtype_bytes + self.linear_params * (linear_bits + 16 / 128) / 8

    def bf16_bytes_per_token(self) -> float:
        return 2.0 * self.num_layers * self.num_kv_heads * self.head_dim * self.dtype_bytes

    def quant_bytes_per_token(self, draft: bool) -> float:
        """Bytes per token of the page store over all layers: both planes (INT8 view) or the upper plane (draft);
        scales/zeros included (kvformat.KVFormat's accounting, repeated so this module needs no torch)."""
        plane_bits = 4 if draft else 8
        bits = (plane_bits + 32 / self.page_size) + (plane_bits + 32 / self.head_dim)
        return bits * self.num_kv_heads * self.head_dim / 8 * self.num_layers


@dataclass(frozen=True)
class DraftConfig:
    """Which pages a draft reads (config.py's defaults)."""
    dense: bool = False
    topk_ratio: float = 0.07
    min_pages: int = 8
    sink_pages: int = 1
    weight_bits: Optional[int] = None  # bits of a linear weight a draft reads: None the checkpoint's, 4 the int4 copy

    def pages(self, ctx: float, page_size: int) -> float:
        """Complete pages a draft reads for one request with ``ctx`` tokens (select_topk_pages' k rule)."""
        n = max(0, int(ctx) // page_size)
        if self.dense:
            return float(n)
        k = min(n, max(self.min_pages, math.ceil(self.topk_ratio * n)))
        return float(max(k, min(self.sink_pages, n)))


# ---- step costs ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepCost:
    fixed_s: float
    per_token_s: float
    per_kv_byte_s: float

    def time(self, tokens: float, kv_bytes: float) -> float:
        return self.fixed_s + self.per_token_s * tokens + self.per_kv_byte_s * kv_bytes


@dataclass(frozen=True)
class Hardware:
    name: str
    mem_bw: float  # bytes/s (datasheet)
    flops: float  # dense BF16 FLOP/s (datasheet)
    graph_layer_s: float  # per layer of a CUDA-graph replay (launch gaps between captured kernels)
    eager_layer_s: float  # per layer of an eager forward (Python dispatch + launches)
    step_overhead_s: float  # scheduler/worker host work per forward (batch prep, sampling, acceptance)


# Efficiencies are deliberately pessimistic: a default must never talk the worker into a losing speculation.
HARDWARE = {
    "H200": Hardware("H200", 4.8e12, 989e12, 8e-6, 60e-6, 150e-6),
    "H100": Hardware("H100", 3.35e12, 989e12, 8e-6, 60e-6, 150e-6),
    "A100": Hardware("A100", 2.0e12, 312e12, 10e-6, 70e-6, 200e-6),
}
UNKNOWN_HARDWARE = Hardware("unknown", 1.0e12, 150e12, 15e-6, 100e-6, 300e-6)
_EFF = {"fa3_bw": 0.8, "int8_bw": 0.6, "draft_bw": 0.5, "weights_bw": 0.7, "flops": 0.35}
_VERIFY_HOST_S = 350e-6  # acceptance + top-k page selection + the round's tensor bookkeeping, on top of a step


def hardware_for(device_name: Optional[str]) -> Hardware:
    name = (device_name or "").upper()
    for key, hw in HARDWARE.items():
        if key in name:
            return hw
    return UNKNOWN_HARDWARE


@dataclass(frozen=True)
class CostModel:
    shape: ModelShape
    steps: dict  # kind -> StepCost
    draft: DraftConfig = field(default_factory=DraftConfig)
    source: str = "default"
    fit_info: dict = field(default_factory=dict)

    # -- per-step times (b requests, kv_tokens = Σ of their context lengths) --
    def _ctx(self, b: int, kv_tokens: float) -> float:
        return kv_tokens / max(b, 1)

    def kv_bytes(self, kind: str, b: int, kv_tokens: float) -> float:
        s, P = self.shape, self.shape.page_size
        hot = b * (P / 2.0) * s.bf16_bytes_per_token()  # the current page, read in full precision (P/2 on average)
        if kind == "ar_bf16":
            return kv_tokens * s.bf16_bytes_per_token()
        if kind == "draft":
            pages = self.draft.pages(self._ctx(b, kv_tokens), P)
            return b * pages * P * s.quant_bytes_per_token(draft=True) + hot
        return max(kv_tokens - b * P / 2.0, 0.0) * s.quant_bytes_per_token(draft=False) + hot

    def step_time(self, kind: str, b: int, kv_tokens: float, gamma: int = 0) -> float:
        tokens = b * (gamma + 1) if kind == "verify" else b
        return self.steps[kind].time(tokens, self.kv_bytes(kind, b, kv_tokens))

    def round_time(self, b: int, kv_tokens: float, gamma: int) -> float:
        return gamma * self.step_time("draft", b, kv_tokens) + self.step_time("verify", b, kv_tokens, gamma)

    def speedup(self, b: int, kv_tokens: float, gamma: int, alpha: float, baseline: str = "ar_int8") -> float:
        """Decode tokens/s of speculation over ``baseline`` (one of the ar_* kinds) for this batch."""
        t_ar = self.step_time(baseline, b, kv_tokens)
        return expected_tokens(alpha, gamma) * t_ar / self.round_time(b, kv_tokens, gamma)

    def best_gamma(self, b: int, kv_tokens: float, alpha: float, gammas: Iterable[int] = GAMMAS,
                   baseline: str = "ar_int8") -> tuple[int, float]:
        best = max(gammas, key=lambda g: (self.speedup(b, kv_tokens, g, alpha, baseline), -g))
        return best, self.speedup(b, kv_tokens, best, alpha, baseline)

    def should_speculate(self, b: int, kv_tokens: float, alpha: float, gamma: int, margin: float = DEFAULT_MARGIN,
                         baseline: str = "ar_int8") -> bool:
        return self.speedup(b, kv_tokens, gamma, alpha, baseline) >= 1.0 + margin

    # -- persistence --
    def to_json(self) -> dict:
        return {"version": 1, "source": self.source, "shape": asdict(self.shape), "draft": asdict(self.draft),
                "steps": {k: asdict(v) for k, v in self.steps.items()}, "fit": self.fit_info}

    @classmethod
    def from_json(cls, d: dict) -> "CostModel":
        steps = {k: StepCost(**v) for k, v in d["steps"].items()}
        return cls(ModelShape(**d["shape"]), steps, DraftConfig(**d.get("draft", {})), d.get("source", "json"),
                   d.get("fit", {}))

    def save(self, path) -> None:
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=1)

    @classmethod
    def load(cls, path) -> "CostModel":
        with open(path) as f:
            return cls.from_json(json.load(f))


def default_cost_model(shape: ModelShape, device_name: Optional[str] = None,
                       draft: DraftConfig = DraftConfig()) -> CostModel:
    """Datasheet-derived, pessimistic coefficients (see _EFF and HARDWARE) for a GPU without a fitted model."""
    hw = hardware_for(device_name)
    bw = hw.mem_bw * _EFF["weights_bw"]
    weights = shape.weight_bytes() / bw
    per_token = 2.0 * shape.num_params / (hw.flops * _EFF["flops"])
    graph = hw.graph_layer_s * shape.num_layers + weights + hw.step_overhead_s
    eager = hw.eager_layer_s * shape.num_layers + weights + hw.step_overhead_s
    draft_fixed = hw.eager_layer_s * shape.num_layers + shape.weight_bytes(draft.weight_bits) / bw + hw.step_overhead_s
    steps = {
        "ar_bf16": StepCost(graph, per_token, 1.0 / (hw.mem_bw * _EFF["fa3_bw"])),
        "ar_int8": StepCost(graph, per_token, 1.0 / (hw.mem_bw * _EFF["int8_bw"])),
        "ar_int8_eager": StepCost(eager, per_token, 1.0 / (hw.mem_bw * _EFF["int8_bw"])),
        "draft": StepCost(draft_fixed, per_token, 1.0 / (hw.mem_bw * _EFF["draft_bw"])),
        "verify": StepCost(graph + _VERIFY_HOST_S, per_token, 1.0 / (hw.mem_bw * _EFF["int8_bw"])),
    }
    return CostModel(shape, steps, draft, f"default:{hw.name}")


# ---- fitting ---------------------------------------------------------------------------------------------------------
def nnls(A, y, iters: int = 200):
    """Lawson–Hanson non-negative least squares: argmin_{x >= 0} |A x − y|₂ (numpy; small dense problems)."""
    import numpy as np

    A, y = np.asarray(A, dtype=float), np.asarray(y, dtype=float)
    n = A.shape[1]
    x, passive = np.zeros(n), np.zeros(n, dtype=bool)
    w = A.T @ (y - A @ x)
    tol = 1e-12 * max(1.0, float(np.abs(A).max()) * float(np.abs(y).max() if y.size else 1.0))
    for _ in range(iters):
        if passive.all() or w[~passive].max(initial=-np.inf) <= tol:
            break
        passive[np.argmax(np.where(passive, -np.inf, w))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], y, rcond=None)[0]
            if (z[passive] > 0).all():
                break
            neg = passive & (z <= 0)
            den = x[neg] - z[neg]
            step = float(np.min(np.where(den > 0, x[neg] / np.where(den > 0, den, 1.0), 0.0)))
            x = x + step * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
        x = z
        w = A.T @ (y - A @ x)
    return x


def fit(observations: list[dict], shape: ModelShape, draft: DraftConfig = DraftConfig(),
        prior: Optional[CostModel] = None, source: str = "fitted") -> CostModel:
    """Fit step costs to measured steps. Each observation: ``{"kind": "ar_bf16"|"ar_int8"|"ar_int8_eager"|"round",
    "batch": b, "kv_tokens": Σ ctx, "gamma": γ (rounds), "dense": bool (rounds), "t_s": seconds per step/round}``.

    Relative least squares (times span 0.1 ms … 100 ms), non-negative coefficients. AR kinds are fitted on their
    own rows; draft and verify jointly on round rows, ``t = γ·draft + verify`` (separable because rows differ in γ,
    batch and context; with one γ only, their split is not identified but round times still are). A kind without
    rows keeps the ``prior`` (default: ``default_cost_model``) coefficients."""
    import numpy as np

    prior = prior or default_cost_model(shape, None, draft)
    base = CostModel(shape, dict(prior.steps), draft)
    steps, info = dict(prior.steps), {}

    def features(kind, o, dense):
        m = replace(base, draft=replace(draft, dense=dense))
        b, kv = o["batch"], o["kv_tokens"]
        if kind == "round":
            g = o["gamma"]
            return [g, g * b, g * m.kv_bytes("draft", b, kv), 1.0, b * (g + 1), m.kv_bytes("verify", b, kv)]
        return [1.0, b, m.kv_bytes(kind, b, kv)]

    for kind in ("ar_bf16", "ar_int8", "ar_int8_eager", "round"):
        rows = [o for o in observations if o["kind"] == kind and o.get("t_s", 0) > 0]
        if not rows:
            continue
        A = np.array([features(kind, o, bool(o.get("dense", draft.dense))) for o in rows], dtype=float)
        t = np.array([o["t_s"] for o in rows], dtype=float)
        Ar, scale = A / t[:, None], np.maximum(np.abs(A / t[:, None]).max(axis=0), 1e-30)
        x = nnls(Ar / scale, np.ones(len(rows))) / scale
        rel = A @ x / t - 1.0
        if kind == "round":
            steps["draft"], steps["verify"] = StepCost(*x[:3]), StepCost(*x[3:])
        else:
            steps[kind] = StepCost(*x)
        info[kind] = {"n": len(rows), "rms_rel_err": float(np.sqrt(np.mean(rel ** 2))),
                      "max_rel_err": float(np.abs(rel).max())}
        if kind == "round":
            info[kind]["gammas"] = sorted({int(o["gamma"]) for o in rows})
    return CostModel(shape, steps, draft, source, info)
