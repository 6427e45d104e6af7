"""The one frozen config built from SGLang's server args and quantspec's command-line flags (the flags, their
choices and the checks of their values: sgl_spec/flags.py).

Two ways to turn quantspec on (both use the same KV pool and attention backend):

* ``--speculative-algorithm QUANTSPEC`` (or ``--spec-algo quantspec``): self-speculative decoding. γ is SGLang's
  ``--speculative-num-steps`` (default: ``default_num_draft_steps``, 12 for G <= 2 query heads per KV head, 7 for
  G = 4); each round verifies γ+1 tokens.
* ``--attention-backend quantspec`` alone: the INT8-only, non-speculative mode (the INT8 KV cache and its attention
  view, no drafting) - the baseline, and the model that the speculative mode reproduces token for token.

SGLang builds ``ServerArgs`` from its own fields only, so our flags travel beside it: the installed SGLang's adapter
(sgl_spec/patches/) stashes them on the record (``_quantspec_flags``) before SGLang resolves it, and ``configure``
(called during that resolution) validates everything, declares its adjustments of SGLang's settings and stores the
frozen ``QuantSpecConfig`` as ``server_args._quantspec``. That attribute is pickled with ``server_args`` into every
scheduler process, so the pool and the backend read the very object that was validated here. Every wrong setting
raises ``ValueError`` with one line naming the flag to change.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from sgl_spec.flags import FLAGS, check_draft_options
from sgl_spec.kvcache.format import SUPPORTED_PAGE_SIZES, KVFormat
from sgl_spec.patches import sglang

logger = logging.getLogger(__name__)

ALGO_NAME = "QUANTSPEC"
BACKEND_NAME = "quantspec"
HOT_RING_PAGES = 2  # R in docs/CONTRACTS.md: a γ+1 <= P window touches at most two pages
DEFAULT_PAGE_SIZE = 64
# γ when --speculative-num-steps is not given (default_num_draft_steps): the longest window up to this whose γ+1 rows
# (times G query heads per KV head) fit one row tile of the verify kernel; a longer window needs a second row block,
# which reads every page again (sgl_spec/kernels/verify_attention/triton.py block_rows). On an H200 (pycode-30m,
# G = 2, 4k-15k tokens x batch 32-128) γ = 12 was the fastest or within 6% of the fastest of γ = 6/8/10/12/15.
DEFAULT_NUM_DRAFT_STEPS = 12
MIN_DEFAULT_DRAFT_STEPS = 4  # wide groups (G >= 16) would fit almost no window: take a second row block instead
# The hot ring costs 2*R*P*Hkv*D model-dtype elements per request slot and layer, so SGLang's memory-derived default
# (thousands of request slots) would spend more memory on rings than on pages. Users can raise it explicitly.
DEFAULT_MAX_RUNNING_REQUESTS = 128
@dataclass(frozen=True)
class QuantSpecConfig:
    speculative: bool  # False: INT8-only mode (--attention-backend quantspec)
    page_size: int  # P: SGLang page size = quantization group
    num_draft_steps: int  # γ (0 in INT8-only mode)
    topk_ratio: float
    min_pages: int
    sink_pages: int
    dense_draft: bool
    hot_ring_pages: int = HOT_RING_PAGES
    draft_pages: str = "topk-head"  # one of flags.DRAFT_PAGE_POLICIES (ignored when dense_draft)
    speculate: str = "always"  # one of flags.SPECULATE_CHOICES
    cost_model: Optional[str] = None  # path of a fitted CostModel JSON (auto mode's prior)
    recent_share: float = 0.0  # score-driven policies: share of k - sinks given to the newest pages
    score_smoothing: str = "none"  # one of flags.SCORE_SMOOTHING
    score_ema: float = 0.5  # history weight of the "ema" smoothing
    page_score: str = "max"  # one of flags.PAGE_SCORES: what verify_attention's page scores measure
    fused_draft: bool = True  # draft passes with fused norm / linear / epilogue launches where supported
    draft_kernel: str = "auto"  # one of flags.DRAFT_KERNELS: the draft attention's page programs
    verify_kernel: str = "auto"  # one of flags.VERIFY_KERNELS: the verify attention's INT8 page programs
    draft_weights: str = "auto"  # one of flags.DRAFT_WEIGHTS: the draft passes' linear weights

    @property
    def num_verify_tokens(self) -> int:
        return self.num_draft_steps + 1

    @property
    def needs_page_scores(self) -> bool:
        """Whether TARGET_VERIFY produces page scores (the backend's ``page_scores`` buffer): score-driven drafts."""
        return self.speculative and not self.dense_draft and self.draft_pages != "streaming"

    def describe(self) -> str:
        if not self.speculative:
            return f"quantspec INT8 KV cache (no speculation), page size {self.page_size}"
        draft = "dense" if self.dense_draft else (
            f"{self.draft_pages} pages, ratio {self.topk_ratio}, min {self.min_pages} pages, "
            f"{self.sink_pages} sink page(s)")
        if not self.dense_draft and self.draft_pages != "streaming":
            draft += f", recent share {self.recent_share}, score smoothing {self.score_smoothing}"
            if self.score_smoothing == "ema":
                draft += f" (history weight {self.score_ema})"
            if self.page_score != "max":
                draft += f", page score {self.page_score}"
        return (f"quantspec speculative decoding, γ={self.num_draft_steps}, page size {self.page_size}, draft: {draft}, "
                f"fused draft layers: {'on' if self.fused_draft else 'off'}, draft kernel: {self.draft_kernel}, "
                f"verify kernel: {self.verify_kernel}, draft weights: {self.draft_weights}, speculate: {self.speculate}")


def get_config(server_args) -> Optional[QuantSpecConfig]:
    """The config ``configure`` stored on ``server_args`` (None: quantspec is off)."""
    return getattr(server_args, "_quantspec", None)


def configure(server_args) -> Optional[QuantSpecConfig]:
    """Validate, adjust ``server_args`` for quantspec and store the config. Idempotent (runs during SGLang's
    argument resolution, from the spec algorithm's hooks and from a hook after speculative handling); a stand-in
    record (SGLang 0.5.23 hands one to a custom algorithm's callbacks) is left to the hook on the record itself."""
    sa = sglang()
    if not sa.is_record(server_args):
        return None
    if "_quantspec" in vars(server_args):  # bookkeeping, beside the fields: set below
        return server_args._quantspec
    flags = dict(getattr(server_args, "_quantspec_flags", None) or {})
    view = sa.view(server_args)
    speculative = (view.speculative_algorithm or "").upper() == ALGO_NAME
    enabled = speculative or bool(flags.pop("attention_backend", False))
    given = {k: v for k, v in flags.items() if k in FLAGS and v is not None}
    if not enabled:
        if given:
            flag = "--" + next(iter(given)).replace("_", "-")
            raise ValueError(f"{flag} only applies with --speculative-algorithm {ALGO_NAME}")
        sa.set_private(server_args, "_quantspec", None)
        return None

    _check_deployment(view)
    page_size = _resolve_page_size(server_args, view)
    _check_model(server_args)
    opts = {k: (given[k] if k in given else default) for k, (default, _) in FLAGS.items()}
    if speculative:
        gamma = _configure_speculation(server_args, view, page_size)
        check_draft_options(opts, given)
    else:
        if given:
            raise ValueError(f"--{next(iter(given)).replace('_', '-')} only applies with "
                             f"--speculative-algorithm {ALGO_NAME}, not --attention-backend {BACKEND_NAME} alone")
        gamma = 0
    if speculative:
        from sgl_spec.kernels.engine import gluon_page_size_error

        for which in ("draft", "verify"):
            why = gluon_page_size_error(which, opts[f"quantspec_{which}_kernel"], page_size)
            if why:
                raise ValueError(why)
    _configure_runtime(server_args, view)
    cfg = QuantSpecConfig(
        speculative=speculative, page_size=page_size, num_draft_steps=gamma,
        topk_ratio=float(opts["quantspec_topk_ratio"]), min_pages=int(opts["quantspec_min_pages"]),
        sink_pages=int(opts["quantspec_sink_pages"]), dense_draft=bool(opts["quantspec_dense_draft"]),
        draft_pages=str(opts["quantspec_draft_pages"]), recent_share=float(opts["quantspec_recent_share"]),
        score_smoothing=str(opts["quantspec_score_smoothing"]), score_ema=float(opts["quantspec_score_ema"]),
        page_score=str(opts["quantspec_page_score"]), fused_draft=opts["quantspec_fused_draft"] == "on",
        draft_kernel=str(opts["quantspec_draft_kernel"]), verify_kernel=str(opts["quantspec_verify_kernel"]),
        speculate=str(opts["quantspec_speculate"]), cost_model=opts["quantspec_cost_model"],
        draft_weights=str(opts["quantspec_draft_weights"]),
    )
    sa.set_private(server_args, "_quantspec", cfg)
    logger.info("%s", cfg.describe())
    return cfg


# ---- checks and adjustments ----------------------------------------------------------------------------------------
def _declare(server_args, **fields) -> None:
    """Set resolvable fields through SGLang's declarations (the adapter of the installed SGLang)."""
    sglang().declare(server_args, **fields)


def _check_deployment(view) -> None:
    if view.device not in ("cuda", "cpu"):
        raise ValueError(f"quantspec runs on CUDA or CPU devices, not --device {view.device}")
    for flag in ("prefill_attention_backend", "decode_attention_backend"):
        if getattr(view, flag, None) == BACKEND_NAME:
            raise ValueError(f"use --attention-backend {BACKEND_NAME} (for all phases) instead of "
                             f"--{flag.replace('_', '-')} {BACKEND_NAME}")
    unsupported = [
        (view.disaggregation_mode != "null", "--disaggregation-mode (quantized pages cannot be transferred)"),
        (view.enable_hierarchical_cache, "--enable-hierarchical-cache (HiCache)"),
        (view.enable_hisparse, "--enable-hisparse"),
        ((view.dcp_size or 1) > 1, "--dcp-size > 1 (decode context parallelism)"),
        ((getattr(view, "attn_cp_size", 1) or 1) > 1 or getattr(view, "enable_prefill_cp", False),
         "context-parallel attention"),
        (getattr(view, "enable_dp_attention", False) or (getattr(view, "attn_dp_size", 1) or 1) > 1,
         "data-parallel attention"),
        (view.enable_two_batch_overlap, "--enable-two-batch-overlap"),
        (view.enable_pdmux, "--enable-pdmux"),
        (view.enable_torch_compile, "--enable-torch-compile"),
        (view.kv_cache_dtype not in ("auto", "bfloat16", "bf16", "float16", "fp16", "float32"),
         f"--kv-cache-dtype {view.kv_cache_dtype} (quantspec quantizes the KV cache itself)"),
    ]
    for bad, what in unsupported:
        if bad:
            raise ValueError(f"quantspec does not support {what}; remove it")


def _resolve_page_size(server_args, view) -> int:
    """The SGLang page size is the quantization group: default 64 when the user gave none."""
    page_size = server_args.page_size  # the user's value: declarations never mutate the field mid-resolution
    if page_size is None:
        _declare(server_args, page_size=DEFAULT_PAGE_SIZE)
        return DEFAULT_PAGE_SIZE
    if page_size not in SUPPORTED_PAGE_SIZES:
        sizes = ", ".join(map(str, SUPPORTED_PAGE_SIZES[:-1])) + f" or {SUPPORTED_PAGE_SIZES[-1]}"
        raise ValueError(f"quantspec needs --page-size {sizes} (its quantization group), got --page-size {page_size}")
    if view.page_size != page_size:
        raise ValueError(f"this model forces page size {view.page_size}, but quantspec needs --page-size {page_size}")
    return page_size


def _check_model(server_args) -> None:
    from sglang.srt.configs.hybrid_arch import mambaish_config
    from sglang.srt.configs.model_config import AttentionArch

    mc = sglang().model_config(server_args)
    cfg = mc.hf_text_config
    arch = (mc.hf_config.architectures or ["?"])[0]
    layer_types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    reasons = [
        (mc.attention_arch == AttentionArch.MLA, "uses MLA attention"),
        (mc.is_hybrid_swa or layer_types != {"full_attention"}
         or (getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True) is not False),
         "uses sliding-window or hybrid attention layers"),
        (mambaish_config(mc) is not None, "is a hybrid linear-attention/Mamba model"),
        (mc.is_multimodal, "is multimodal"),
        (getattr(mc, "is_encoder_decoder", False), "is an encoder-decoder model"),
        (bool(getattr(cfg, "attn_logit_softcapping", None)), "uses attention logit soft-capping"),
        (mc.v_head_dim != mc.head_dim, "has different key and value head dims"),
    ]
    for bad, why in reasons:
        if bad:
            raise ValueError(f"quantspec supports standard MHA/GQA decoder models; {arch} {why}")
    try:
        KVFormat(DEFAULT_PAGE_SIZE, 1, mc.head_dim)
    except ValueError as e:
        raise ValueError(f"{arch}: {e}") from None


def default_num_draft_steps(group: int, page_size: int = DEFAULT_PAGE_SIZE) -> int:
    """γ for a model with ``group`` query heads per KV head when --speculative-num-steps is not given: the longest
    window up to DEFAULT_NUM_DRAFT_STEPS whose (γ+1) x G rows fit one verify row tile (G = 1, 2: 12; G = 4, 8: 7)."""
    from sgl_spec.kernels.verify_attention.triton import block_rows

    cap = min(DEFAULT_NUM_DRAFT_STEPS, page_size - 1)
    # the kernel's own rule decides the tile a γ+1-row window gets (the server's partition)
    fits = [g for g in range(1, cap + 1) if (g + 1) * group <= block_rows(group, g + 1)]
    return min(cap, max(MIN_DEFAULT_DRAFT_STEPS, max(fits, default=1)))


def _group_size(server_args, view) -> int:
    """Query heads per KV head on one rank, as the attention backend's launches see them."""
    mc, tp = sglang().model_config(server_args), max(1, view.tp_size or 1)
    return max(1, (mc.num_attention_heads // tp) // mc.get_num_kv_heads(tp))


def _configure_speculation(server_args, view, page_size: int) -> int:
    if view.speculative_draft_model_path is not None:
        raise ValueError("quantspec drafts with the target model itself; remove --speculative-draft-model-path")
    gamma = view.speculative_num_steps
    if gamma is None and view.speculative_num_draft_tokens is not None:
        gamma = int(view.speculative_num_draft_tokens) - 1  # γ+1 verified tokens given instead of γ
    gamma = default_num_draft_steps(_group_size(server_args, view), page_size) if gamma is None else int(gamma)
    if not 1 <= gamma <= page_size - 1:
        raise ValueError(f"quantspec needs --speculative-num-steps (γ) in 1..{page_size - 1} for page size "
                         f"{page_size}, got {gamma}")
    if view.speculative_num_draft_tokens not in (None, gamma + 1):
        raise ValueError(f"quantspec verifies γ+1 tokens: set --speculative-num-draft-tokens {gamma + 1} or drop it "
                         f"(got {view.speculative_num_draft_tokens})")
    if getattr(view, "enable_mixed_chunk", False):
        raise ValueError("quantspec speculation does not mix prefill chunks into decode rounds; remove "
                         "--enable-mixed-chunk")
    if view.speculative_eagle_topk not in (None, 1):
        raise ValueError(f"quantspec drafts one chain: set --speculative-eagle-topk 1 or drop it "
                         f"(got {view.speculative_eagle_topk})")
    sglang().assign(server_args, speculative_num_steps=gamma, speculative_num_draft_tokens=gamma + 1,
                    speculative_eagle_topk=1)
    # The worker supports SGLang's overlap scheduler (sgl_spec/speculative/worker.py): on CUDA the user's choice
    # stands (overlap is SGLang's default). SGLang implements overlapped speculation on CUDA only and switches it off
    # for its own algorithms on CPU (arg_groups/speculative_hook.py), so do the same.
    if view.device == "cpu":
        _declare(server_args, disable_overlap_schedule=True)
    return gamma


def _configure_runtime(server_args, view) -> None:
    """Settings that hold in both modes."""
    if view.device == "cpu":
        # The model's attention is ours whatever this says, but SGLang picks host-side helpers from it, and on CPU
        # only "torch_native" keeps them off Triton (e.g. get_last_loc with intel_amx), which has no CPU driver.
        _declare(server_args, attention_backend="torch_native")
    if view.max_running_requests is None:
        sglang().assign(server_args, max_running_requests=DEFAULT_MAX_RUNNING_REQUESTS)
        logger.info("quantspec: --max-running-requests defaults to %d (each request slot owns a full-precision "
                    "hot ring of %d pages per layer)", DEFAULT_MAX_RUNNING_REQUESTS, HOT_RING_PAGES)
    # The EXTEND path is host-driven pure torch (per-request shapes): it cannot be captured in a prefill graph.
    if view.device == "cuda" and not sglang().disable_prefill_cuda_graph(server_args):
        raise ValueError("quantspec's prefill cannot run in a CUDA graph; remove --cuda-graph-backend-prefill")
