"""quantspec's ``--quantspec-*`` command-line flags: their choices, defaults and help (``FLAGS``), the help of the two
ways to turn quantspec on (``--spec-algo quantspec``, ``--attention-backend quantspec``), how they join SGLang's
parser (``add_cli_args``, from plugin.py's hook on ``ServerArgs.add_cli_args``), and the checks of their values
(``check_draft_options``; sgl_spec/config.py's ``configure`` calls it with the user's flags and the defaults filled
in, because ``Engine(**kwargs)`` bypasses argparse's own ``choices``)."""
from __future__ import annotations

import argparse
import os
from typing import Any

# Sparse-draft page policies (sgl_spec/pages/policies.py); dense drafting is --quantspec-dense-draft.
DRAFT_PAGE_POLICIES = ("topk", "streaming", "topk-last", "per-request", "topk-head")
# When the worker speculates (sgl_spec/speculative/auto_off.py).
SPECULATE_CHOICES = ("auto", "always", "never")
# How score-driven policies combine the scores of successive verifies (sgl_spec/pages/policies.py).
SCORE_SMOOTHING = ("none", "ema", "max")
# What a verify's page score measures (sgl_spec/kernels/verify_attention/ref.py SCORE_KINDS): the max logit or the log-sum-exp.
PAGE_SCORES = ("max", "lse")
# Draft passes with norm + linear + RoPE / SiLU-and-mul fused (sgl_spec/speculative/draft_layers.py, sgl_spec/kernels/norm_pair_linear/triton.py).
FUSED_DRAFT_CHOICES = ("on", "off")
DRAFT_KERNELS = ("auto", "triton", "gluon")
# The draft passes' linear weights (sgl_spec/speculative/draft_weights.py).
DRAFT_WEIGHTS = ("auto", "int4", "model")
VERIFY_KERNELS = ("auto", "triton", "gluon")

# The two ways to turn quantspec on, as --help (add_cli_args) and the README's flag table (scripts/flag_table.py)
# describe them.
SPEC_ALGO_QUANTSPEC = (
    "self-speculative decoding over quantspec's INT8 KV cache: each round the target model drafts γ tokens from the "
    "4-bit upper plane of its top-k KV pages, and one INT8 verify of the γ+1 tokens accepts them losslessly (the "
    "output is that of --attention-backend quantspec alone).")
ATTENTION_BACKEND_QUANTSPEC = (
    "alone (without --spec-algo quantspec): the INT8-only, non-speculative mode (quantspec's INT8 KV pages and "
    "attention, no drafting), whose output --spec-algo quantspec reproduces; --spec-algo quantspec implies it.")

# name -> (default, argparse kwargs). Defaults are applied in configure() (argparse keeps None) so that
# "flag given without quantspec on" can be told apart from "flag left at its default".
FLAGS: dict[str, tuple[Any, dict]] = {
    "quantspec_topk_ratio": (0.07, dict(type=float, help=(
        "quantspec draft: fraction of a request's complete KV pages each layer drafts with (top-k by the previous "
        "verify's attention scores). Default: 0.07."))),
    "quantspec_min_pages": (8, dict(type=int, help=(
        "quantspec draft: at least this many pages per layer (or all, if fewer). Default: 8."))),
    "quantspec_sink_pages": (1, dict(type=int, help=(
        "quantspec draft: the first N pages of every request are always drafted with (attention sinks). "
        "Default: 1."))),
    "quantspec_dense_draft": (False, dict(action="store_true", default=None, help=(
        "quantspec draft: read every complete page (upper 4-bit plane) instead of the top-k pages."))),
    # Default topk-head: the best acceptance of the policies, e.g. on pycode-30m (H100, 20 prompts 4k-15k, γ=4, 7% of
    # pages) τ 4.34 vs 4.25 for per-layer topk and 3.76 for streaming.
    "quantspec_draft_pages": ("topk-head", dict(choices=DRAFT_PAGE_POLICIES, help=(
        "quantspec draft: which pages a sparse draft reads, same budget for all: 'topk' by the previous verify's "
        "scores (first draft row + bonus row), 'topk-head' the same per KV head (each KV head of each layer its "
        "own top-k pages by its own scores), 'topk-last' by the score of the last accepted token only, "
        "'streaming' the sink pages + the most recent pages (no scores), 'per-request' (acceptance study): each "
        "request's sampling_params.custom_params['quantspec_draft'] names its policy (sgl_spec/experimental/page_study.py). "
        "Default: topk-head."))),
    "quantspec_speculate": ("always", dict(choices=SPECULATE_CHOICES, help=(
        "quantspec: which decode steps speculate. 'always': every step is a speculative round (γ drafts, one INT8 "
        "verify of γ+1 tokens); 'auto': a step speculates only where the cost model (step times measured on this "
        "server, α from the accept lengths) predicts that a round is faster than plain INT8 decode steps, and is "
        "one plain INT8 decode step elsewhere (experimental: measured on an H200 GPU it was still slower than "
        "'always' at batch 1); 'never': every step is a plain INT8 decode step, without drafts (debugging). The "
        "output is the same with each. Default: always."))),
    "quantspec_cost_model": (None, dict(help=(
        "quantspec: a fitted cost model JSON (bench/bench_e2e.py writes costmodel_<model>.json) as the starting "
        "point of --quantspec-speculate auto instead of the datasheet defaults."))),
    "quantspec_recent_share": (0.0, dict(type=float, help=(
        "quantspec draft, score-driven pages (topk, topk-head, topk-last): this share of the non-sink budget (k - sinks) goes "
        "to the newest complete pages (floor(share*(k - sinks)) pages), the rest to the best-scored pages. "
        "Default: 0."))),
    "quantspec_score_smoothing": ("none", dict(choices=SCORE_SMOOTHING, help=(
        "quantspec draft, score-driven pages: rank pages by this verify's scores ('none'), by an exponential moving "
        "average over rounds ('ema', weight --quantspec-score-ema on the history), or by the max of this and the "
        "previous verify's scores ('max'). Default: none."))),
    "quantspec_score_ema": (0.5, dict(type=float, help=(
        "quantspec draft: weight of the history in --quantspec-score-smoothing ema, in [0, 1). Default: 0.5."))),
    "quantspec_fused_draft": ("on", dict(choices=FUSED_DRAFT_CHOICES, help=(
        "quantspec draft: 'on' runs the draft passes of small Llama-layer models (unquantized, bias-free, tensor "
        "parallel 1, batch <= 64) as norm + qkv + RoPE and norm + gate_up + SiLU-and-mul launches (4 kernels fewer a "
        "layer; the verify keeps SGLang's layers, so output is unchanged); 'off' drafts with SGLang's layers. "
        "Default: on."))),
    "quantspec_draft_weights": ("auto", dict(choices=DRAFT_WEIGHTS, help=(
        "quantspec draft: the linear weights the draft passes read. 'int4': a 4-bit copy of each decoder layer's "
        "qkv / o / gate_up / down projections (groups of 128 input channels, SGLang's Marlin W4A16 GEMM on the GPU; "
        "its bytes come out of the KV cache budget, the startup log says how many); 'model': the checkpoint's "
        "weights; 'auto': int4 where the Marlin GEMM runs and those weights are at least 1 GiB, else model. The "
        "verify keeps the checkpoint's weights, so output is unchanged either way. Default: auto."))),
    "quantspec_draft_kernel": ("auto", dict(choices=DRAFT_KERNELS, help=(
        "quantspec draft: the page programs of the draft attention. 'gluon': one warp a page, tensor-core operands "
        "built in registers (sgl_spec/kernels/draft_decode/gluon_pages.py; page size 64 or 128, head_dim 128, up to 8 query heads a KV "
        "head, sm_90+, Triton 3.6); 'triton': the Triton kernel; 'auto': gluon where it runs, else triton. Drafts "
        "only propose tokens: output is unchanged either way. Default: auto."))),
    "quantspec_verify_kernel": ("auto", dict(choices=VERIFY_KERNELS, help=(
        "quantspec verify: the INT8 page programs of the verify attention (and of INT8 decode). 'gluon': four warps "
        "and four pages a step, keys converted straight into tensor-core operands, values through cp.async "
        "(sgl_spec/kernels/verify_attention/gluon_pages.py; page size 64 or 128, head_dim 128, up to 32 rows of γ+1 positions times "
        "the query heads of a KV head, sm_90+, Triton 3.6; wider windows use triton) for every launch; 'triton': "
        "the Triton kernel; 'auto': gluon where it runs, for every launch with >= 4 query heads a KV head and for "
        "launches of at least 32 request x KV-head pairs with fewer (the Triton kernel below, where it was faster on "
        "an H100 GPU), and for every launch with --enable-deterministic-inference. Both compute the same INT8 "
        "attention (fp32 sums in another order). Default: auto."))),
    "quantspec_page_score": ("max", dict(choices=PAGE_SCORES, help=(
        "quantspec draft, score-driven pages: a page's verify score per query head is the max of its logits over "
        "the two score rows ('max'), or the log-sum-exp of its logits per row, log-add-exp'ed over the two rows "
        "('lse': the page's attention mass, not its single best token). Default: max."))),
}


def add_cli_args(parser) -> None:
    """quantspec's flags, the ``--spec-algo`` alias, and what ``--attention-backend quantspec`` means in the help of
    SGLang's ``--attention-backend`` (when the parser has it)."""
    parser.add_argument(
        "--spec-algo", dest="speculative_algorithm", type=str, default=argparse.SUPPRESS,
        help=f"Alias of --speculative-algorithm. --spec-algo quantspec: {SPEC_ALGO_QUANTSPEC}")
    for action in parser._actions:
        if "--attention-backend" in action.option_strings and ATTENTION_BACKEND_QUANTSPEC not in (action.help or ""):
            action.help = f"{action.help or ''} 'quantspec' {ATTENTION_BACKEND_QUANTSPEC}".strip()
    for name, (default, kw) in FLAGS.items():
        kw = dict(kw)
        kw.setdefault("default", None)
        parser.add_argument("--" + name.replace("_", "-"), dest=name, **kw)


def _check_choice(opts: dict, name: str, choices: tuple) -> None:
    """``Engine(**kwargs)`` bypasses argparse's ``choices``: check them here."""
    if opts[name] not in choices:
        raise ValueError(f"--{name.replace('_', '-')} must be one of {', '.join(choices)}, got {opts[name]}")


def check_draft_options(opts: dict, given: dict) -> None:
    _check_choice(opts, "quantspec_draft_pages", DRAFT_PAGE_POLICIES)
    _check_choice(opts, "quantspec_speculate", SPECULATE_CHOICES)
    path = opts["quantspec_cost_model"]
    if path is not None and not os.path.isfile(path):
        raise ValueError(f"--quantspec-cost-model {path}: no such file")
    if opts["quantspec_dense_draft"] and "quantspec_draft_pages" in given:
        raise ValueError("--quantspec-draft-pages chooses sparse draft pages; it does not apply with "
                         "--quantspec-dense-draft (remove one of them)")
    if not 0.0 < float(opts["quantspec_topk_ratio"]) <= 1.0:
        raise ValueError(f"--quantspec-topk-ratio must be in (0, 1], got {opts['quantspec_topk_ratio']}")
    if int(opts["quantspec_min_pages"]) < 1:
        raise ValueError(f"--quantspec-min-pages must be >= 1, got {opts['quantspec_min_pages']}")
    if int(opts["quantspec_sink_pages"]) < 0:
        raise ValueError(f"--quantspec-sink-pages must be >= 0, got {opts['quantspec_sink_pages']}")
    scored = ("quantspec_recent_share", "quantspec_score_smoothing", "quantspec_score_ema", "quantspec_page_score")
    if (opts["quantspec_dense_draft"] or opts["quantspec_draft_pages"] == "streaming") and set(scored) & set(given):
        flag = "--" + next(k for k in scored if k in given).replace("_", "-")
        raise ValueError(f"{flag} tunes the score-driven draft pages (topk, topk-head, topk-last); it does not apply with "
                         "--quantspec-dense-draft or --quantspec-draft-pages streaming")
    _check_choice(opts, "quantspec_score_smoothing", SCORE_SMOOTHING)
    _check_choice(opts, "quantspec_fused_draft", FUSED_DRAFT_CHOICES)
    _check_choice(opts, "quantspec_draft_kernel", DRAFT_KERNELS)
    _check_choice(opts, "quantspec_draft_weights", DRAFT_WEIGHTS)
    _check_choice(opts, "quantspec_verify_kernel", VERIFY_KERNELS)
    _check_choice(opts, "quantspec_page_score", PAGE_SCORES)
    if not 0.0 <= float(opts["quantspec_recent_share"]) <= 1.0:
        raise ValueError(f"--quantspec-recent-share must be in [0, 1], got {opts['quantspec_recent_share']}")
    if not 0.0 <= float(opts["quantspec_score_ema"]) < 1.0:
        raise ValueError(f"--quantspec-score-ema must be in [0, 1), got {opts['quantspec_score_ema']}")
