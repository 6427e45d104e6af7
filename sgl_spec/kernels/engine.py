"""Which engine runs a kernel op. Every engine rule lives here:

* ``use_triton``: the Triton kernels for CUDA tensors, the pure-torch references elsewhere (``SGL_SPEC_FORCE_REF=1``,
  debugging only, forces the references everywhere);
* ``select_engine``: the Triton or the Gluon engine of ``draft_decode`` / ``verify_attention``, resolved once at
  startup (the backend calls it for ``--quantspec-draft-kernel`` / ``--quantspec-verify-kernel``);
* ``verify_launch_gluon``: the verify's per-launch choice (the Gluon tile's rows, the pairs a launch from which Gluon
  is faster), a cheap function called every layer;
* ``gluon_page_size_error``: the startup check of ``--page-size`` against ``... gluon``, before any device exists;
* ``gluon_device_support``: the machine the Gluon kernels run on;
* ``prefill_engine``: the EXTEND attention's engine (FA3, else Triton on CUDA; torch on the CPU).
* ``w4a16_engine``: the 4-bit draft weights' GEMM (SGLang's Marlin on CUDA, the pure-torch twin elsewhere;
  ``SGL_SPEC_W4A16=triton`` takes our split-K Triton kernel instead, benchmarking).
The shapes each Gluon kernel covers stay beside its layouts (draft_decode/launch.py ``gluon_draft_shapes``,
verify_attention/gluon_rules.py ``gluon_verify_shapes``, ``auto_min_pairs``, ``GLUON_MAX_ROWS``).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch

from sgl_spec import knobs

logger = logging.getLogger(__name__)

GLUON_MIN_CAPABILITY = (9, 0)  # the Gluon kernels are built and tested on sm_90 (H100 / H200); PDL needs sm_90+
GLUON_TRITON = ("3.6",)  # Gluon is experimental: its layout API is pinned to the Triton the kernels are written for
GLUON_PAGE_SIZES = (64, 128)  # both Gluon kernels: a 64-token tile, a 128-token page as two sub-pages
OPS = ("draft", "verify")


def use_triton(t: torch.Tensor) -> bool:
    return t.is_cuda and knobs.get("FORCE_REF", "0") != "1"


PREFILL_ENV = knobs.name("PREFILL")  # benchmarking: one of PREFILL_ENGINES, forces the EXTEND attention's engine
PREFILL_ENGINES = ("fa3", "fa3_segments", "triton", "torch")
FA3_MIN_CAPABILITY = (9, 0)  # sgl_kernel's FlashAttention-3 runs on Hopper and later


def _fa3_missing(dev) -> str:
    """'' where sgl_kernel's FlashAttention-3 can run on ``dev``, else why not."""
    if torch.cuda.get_device_capability(dev) < FA3_MIN_CAPABILITY:
        return "FlashAttention-3 needs compute capability 9.0 or newer"
    try:
        from sgl_spec.patches import sglang

        sglang().flash_attention()
    except ImportError as e:
        return f"SGLang's FlashAttention-3 does not import ({e})"
    return ""


def prefill_engine(device, batch_invariant: bool = False) -> str:
    """The EXTEND attention's engine, decided once at startup. On CUDA: "fa3" where sgl_kernel's FlashAttention-3
    runs (extend_attention/fa3.py: the INT8 pages dequantized once a layer, FA3 twice, merged; 1.2-1.3x stock
    SGLang's BF16 prefill attention at 32k tokens on the Llama-3-8B layer shape, H200), else "triton"
    (extend_attention/triton.py). On the CPU, and with ``batch_invariant`` (--enable-deterministic-inference, whose
    page-aligned key layout only it has), "torch" (per request, dequantized pages through SDPA:
    sgl_spec/kvcache/prefill.py, the reference). ``SGL_SPEC_PREFILL`` forces an engine (benchmarking), e.g.
    "fa3_segments" (extend_attention/fa3_segments.py: the same view in one FA3 call a layer, no merge)."""
    want = knobs.get("PREFILL")
    if want and want not in PREFILL_ENGINES:
        raise ValueError(f"{PREFILL_ENV} must be one of {', '.join(PREFILL_ENGINES)}, got {want!r}")
    dev = torch.device(device)
    if dev.type != "cuda" or batch_invariant:
        got = "torch"
    else:
        got = want or "fa3"
        missing = _fa3_missing(dev) if got.startswith("fa3") else ""
        if missing:
            logger.info("quantspec prefill attention: triton (%s)", missing)
            got = "triton"
    if want:
        logger.warning("%s=%s (benchmarking knob): EXTEND attention engine %s", PREFILL_ENV, want, got)
    return got


MARLIN_MIN_CAPABILITY = (8, 0)  # SGLang's Marlin W4A16 GEMM: Ampere and later


W4A16_ENV = knobs.name("W4A16")  # benchmarking: "marlin" | "triton" | "torch", forces the draft weights' GEMM
W4A16_ENGINES = ("marlin", "triton", "torch")


def w4a16_engine(device) -> tuple[str, str]:
    """(engine, why not Marlin) of ``w4a16_linear`` on ``device``: "marlin" (SGLang's own W4A16 GEMM) on a CUDA
    device of compute capability 8.0+ where SGLang's Marlin imports, else "torch" (dequantize + matmul: the CPU path,
    correct but no faster than the model's own weights). ``SGL_SPEC_W4A16`` forces "triton" (w4a16_linear/triton.py)
    or another engine on CUDA (benchmarking)."""
    want = knobs.get("W4A16")
    if want and want not in W4A16_ENGINES:
        raise ValueError(f"{W4A16_ENV} must be one of {', '.join(W4A16_ENGINES)}, got {want!r}")
    dev = torch.device(device)
    if dev.type != "cuda":
        return "torch", "not a CUDA device"
    if want and want != "marlin":
        logger.warning("%s=%s (benchmarking knob): draft weights' GEMM %s", W4A16_ENV, want, want)
        return want, "" if want == "triton" else f"{W4A16_ENV}={want}"
    if torch.cuda.get_device_capability(dev) < MARLIN_MIN_CAPABILITY:
        return "torch", "Marlin needs compute capability 8.0 or newer"
    try:
        from sglang.kernels.ops.quantization.gptq_marlin_repack import gptq_marlin_repack  # noqa: F401
        from sglang.srt.layers.quantization.marlin_utils import apply_gptq_marlin_linear  # noqa: F401
    except ImportError as e:
        return "torch", f"SGLang's Marlin does not import ({e})"
    return "marlin", ""


@dataclass(frozen=True)
class EngineChoice:
    """``engine``: "triton" or "gluon"; ``reason``: why not gluon ('' where it runs); for the verify, the per-launch
    rule's inputs: Gluon for windows of at most ``max_rows`` rows (γ+1 times G) and launches of at least
    ``min_pairs`` (request, KV head) pairs."""
    engine: str
    reason: str = ""
    min_pairs: int = 0
    max_rows: int = 0


def gluon_device_support(device, which: str) -> str:
    """'' where the Gluon kernels run on ``device``, else why not: a CUDA device of compute capability 9.0+ with the
    Triton they are written for (and its Gluon)."""
    import triton

    if torch.device(device).type != "cuda" or os.environ.get("TRITON_INTERPRET", "0") == "1":
        return f"the Gluon {which} kernel needs a CUDA device (not the CPU or the Triton interpreter)"
    if torch.cuda.get_device_capability(torch.device(device)) < GLUON_MIN_CAPABILITY:
        return f"the Gluon {which} kernel needs compute capability 9.0 or newer"
    if not triton.__version__.startswith(GLUON_TRITON):
        return f"the Gluon {which} kernel is written for Triton {'/'.join(GLUON_TRITON)}, not {triton.__version__}"
    try:
        import triton.experimental.gluon.language.nvidia.ampere  # noqa: F401
    except ImportError as e:  # a Triton build without Gluon
        return f"this Triton has no Gluon ({e})"
    return ""


def gluon_support(op: str, device, *, page_size: int, head_dim: int, group: int, nq: int = 1) -> str:
    """'' where ``op`` ("draft" / "verify") runs on the Gluon engine for these shapes on ``device``, else the reason
    (one line): the shapes first, then the machine."""
    if not group:
        return "unknown head group"
    if op == "draft":
        from sgl_spec.kernels.draft_decode import launch as dl

        return dl.gluon_draft_support(device, page_size, head_dim, group)
    if op == "verify":
        from sgl_spec.kernels.verify_attention import gluon_rules as vgr

        return vgr.gluon_verify_support(device, page_size, head_dim, group, nq)
    raise ValueError(f"select_engine: op must be one of {OPS}, got {op!r}")


def select_engine(op: str, device, *, page_size: int, head_dim: int, group: int, nq: int = 1, want: str = "auto",
                  batch_invariant: bool = False) -> EngineChoice:
    """The engine of ``op`` for the server's run: ``want`` "triton" takes Triton; "gluon" takes Gluon or raises
    ValueError with one line naming the reason and what to use instead; "auto" takes Gluon where it runs. The
    verify's auto engine keeps Triton for launches of fewer than ``auto_min_pairs(G)`` pairs, where it is faster;
    ``want="gluon"`` and ``batch_invariant`` (--enable-deterministic-inference: the two engines sum a request's pages
    in different orders, so the engine must not follow the batch) take Gluon at every batch size."""
    if want not in ("auto", "triton", "gluon"):
        raise ValueError(f"--quantspec-{op}-kernel must be auto, triton or gluon, got {want!r}")
    max_rows = min_pairs = 0
    if op == "verify":
        from sgl_spec.kernels.verify_attention.gluon_rules import GLUON_MAX_ROWS, auto_min_pairs

        max_rows, min_pairs = GLUON_MAX_ROWS, auto_min_pairs(group)
    if want == "triton":
        return EngineChoice("triton", "", min_pairs, max_rows)
    why = gluon_support(op, device, page_size=page_size, head_dim=head_dim, group=group, nq=nq)
    if want == "gluon" and why:
        raise ValueError(f"--quantspec-{op}-kernel gluon: {why}; use --quantspec-{op}-kernel triton (or auto)")
    if why:
        return EngineChoice("triton", why, min_pairs, max_rows)
    if want == "gluon" or batch_invariant:
        min_pairs = 0
    return EngineChoice("gluon", "", min_pairs, max_rows)


def verify_launch_gluon(engine: str, nq: int, group: int, pairs: int, max_rows: int, min_pairs: int) -> bool:
    """Per verify launch: Gluon where the startup choice is Gluon, the window fits its tile (``nq`` rows of G) and
    the launch holds at least ``min_pairs`` (request, KV head) pairs."""
    return engine == "gluon" and nq * group <= max_rows and pairs >= min_pairs


def gluon_page_size_error(op: str, want: str, page_size: int) -> str:
    """'' unless ``--quantspec-<op>-kernel gluon`` is asked for with a page size no Gluon kernel covers (checked at
    configure time, before the model or the device)."""
    if want != "gluon" or page_size in GLUON_PAGE_SIZES:
        return ""
    return (f"--quantspec-{op}-kernel gluon needs --page-size {' or '.join(map(str, GLUON_PAGE_SIZES))}, got "
            f"{page_size}: use --quantspec-{op}-kernel auto or triton")
