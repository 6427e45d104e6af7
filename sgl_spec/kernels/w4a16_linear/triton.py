"""``w4a16_linear``, Triton engine: ``x [M, K] @ W.T`` for small M (draft passes: M = batch rows ≤ 64), streaming the
4-bit codes from a layout of its own.

Layout (``prepare``): ref.py's codes ``[K/8, N] int32`` cut into column blocks of ``block_n`` and stored block after
block, ``tiles [ceil(N/block_n), K/8, block_n]`` (the last block zero-padded), so the codes a program reads form one
contiguous run of ``K/2 · block_n`` bytes instead of ``K/8`` rows ``4 · N`` bytes apart. Scales stay ``[K/GROUP, N]``.

Two kernels, one grid shape ``(column blocks, K splits, row blocks)``; a program owns ``block_n`` output columns and
``K / split_k`` input channels:

* ``_gemv_kernel`` (M ≤ ``GEMV_MAX_M``): CUDA cores. Each 32-bit word holds eight codes of consecutive K; code ``i`` of
  every word is turned into ``q - 8`` exactly by OR-ing it into the mantissa of 2^23 and subtracting 2^23 + 8 (no
  integer-to-float conversion, the slow instruction), multiplied by the activation of its channel and summed over the
  eight; the group's scale multiplies the sum once per word. The accumulator keeps the tile's shape so the only
  cross-thread reduction is one at the end.
* ``_dot_kernel``: tensor cores. The codes are unpacked into a ``[block_k, block_n]`` fp16 / bf16 tile and fed to
  ``tl.dot`` with the activations' ``[BLOCK_M, block_k]`` tile (fp32 accumulation).

Split over K, deterministically: every split stores its fp32 partial in a workspace, then bumps a per-tile counter;
the split that finds the others done sums the partials in split order (so the result does not depend on which split
finished last: draft graphs and eager drafts agree), adds the bias, stores the output and resets the counter for the
next launch. The workspace and counters are per device, allocated by ``prepare`` (never during a graph capture) and
shared by every launch on that device, which the one forward stream serializes. ``split_k`` is chosen so the grid
covers the device several times over: a column block alone (N / block_n programs) leaves most of HBM idle.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from sgl_spec.kernels.w4a16_linear.ref import GROUP, PACK, ZERO

BLOCK_N = 32  # 64 columns with 512 channels spill registers in the GEMV (ptxas, sm_90; tested)
BLOCK_K = 512
GEMV_MAX_M = 4
GEMV_WARPS = 4
GEMV_TILE = 1 << 10  # BLOCK_M · BLOCK_K of the GEMV at most: 4 rows x 512 channels spill on Triton 3.8 (ptxas, sm_90)
DOT_WARPS = 8
DOT_TILE = 1 << 14  # BLOCK_M · BLOCK_K of the dot path at most: 64 rows x 512 channels spill on 8 warps (ptxas, sm_90)
WORKSPACE_FLOATS = 1 << 22  # 16 MiB of fp32 partials: split_k · M · N never exceeds it (split_k shrinks instead)
COUNTERS = 1 << 16
PROGRAMS_PER_SM = 8  # the grid the split targets: enough loads in flight to stream HBM
SMEM_BYTES = 160 * 1024  # the dot kernel's staged tiles stay under Hopper's / Ampere's shared memory

_scratch: dict = {}


@dataclass
class TritonWeight:
    tiles: torch.Tensor  # [ceil(N / block_n), K / 8, block_n] int32
    scales: torch.Tensor  # [K / GROUP, N]
    n: int
    k: int
    block_n: int

    @property
    def nbytes(self) -> int:
        return self.tiles.nbytes + self.scales.nbytes


def scratch(device) -> tuple[torch.Tensor, torch.Tensor]:
    """(fp32 workspace, int32 counters at zero) of ``device``, allocated once."""
    dev = torch.device(device)
    key = (dev.type, dev.index)
    if key not in _scratch:
        _scratch[key] = (torch.empty(WORKSPACE_FLOATS, dtype=torch.float32, device=dev),
                         torch.zeros(COUNTERS, dtype=torch.int32, device=dev))
    return _scratch[key]


def prepare(qweight: torch.Tensor, scales: torch.Tensor, block_n: int = BLOCK_N) -> TritonWeight:
    """ref.py's (qweight [K/8, N] int32, scales [K/GROUP, N]) -> the column-block layout."""
    K8, N = qweight.shape
    if qweight.dtype != torch.int32 or scales.shape != (K8 * PACK // GROUP, N):
        raise ValueError(f"qweight [K/8, N] int32 and scales [K/{GROUP}, N], got {tuple(qweight.shape)} "
                         f"{qweight.dtype}, {tuple(scales.shape)}")
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"block_n must be a power of two ≥ 16, got {block_n}")
    nb = triton.cdiv(N, block_n)
    padded = torch.zeros(K8, nb * block_n, dtype=torch.int32, device=qweight.device)
    padded[:, :N] = qweight
    tiles = padded.view(K8, nb, block_n).transpose(0, 1).contiguous()
    scratch(qweight.device)
    return TritonWeight(tiles, scales.contiguous(), N, K8 * PACK, block_n)


@triton.jit
def _finish(acc, offs_m, offs_n, m_ok, n_ok, b_ptr, out_ptr, ws_ptr, cnt_ptr, M, N, stride_om, tile, pid_k,
            HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr):
    """acc [BLOCK_M, BLOCK_N] fp32, this split's part -> the output (module docstring: the split-K reduction)."""
    mask = m_ok[:, None] & n_ok[None, :]
    o_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    if SPLIT_K == 1:
        if HAS_BIAS:
            acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        tl.store(o_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        part = offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
        MN = N.to(tl.int64) * M  # M may be the constant 1 (Triton specializes an integer argument of 1)
        tl.store(ws_ptr + pid_k * MN + part, acc, mask=mask)
        tl.debug_barrier()  # every thread's partial is written before the counter says so
        done = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if done == SPLIT_K - 1:
            total = tl.zeros_like(acc)
            for s in range(SPLIT_K):  # split order, whoever came last
                total += tl.load(ws_ptr + s * MN + part, mask=mask, other=0.0, cache_modifier=".cg")
            if HAS_BIAS:
                total += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
            tl.store(o_ptrs, total.to(out_ptr.dtype.element_ty), mask=mask)
            tl.atomic_xchg(cnt_ptr + tile, 0, sem="relaxed", scope="gpu")


@triton.jit(do_not_specialize=["M"])  # rows = the batch: its tile (BLOCK_M) is the only variant it picks
def _gemv_kernel(x_ptr, t_ptr, s_ptr, b_ptr, out_ptr, ws_ptr, cnt_ptr, M, N, K, K_SPLIT,
                 stride_xm, stride_tb, stride_sk, stride_om,
                 HAS_BIAS: tl.constexpr, GROUP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)
    WORDS: tl.constexpr = BLOCK_K // 8
    WPG: tl.constexpr = GROUP_K // 8  # words of one group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_j = tl.arange(0, BLOCK_N)
    offs_n = pid_n * BLOCK_N + offs_j
    offs_w = tl.arange(0, WORDS)
    m_ok = offs_m < M
    n_ok = offs_n < N
    tile = t_ptr + pid_n.to(tl.int64) * stride_tb  # this program's codes: [K/8, BLOCK_N], contiguous
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm  # [BLOCK_M, 1]
    acc = tl.zeros((BLOCK_M, WORDS, BLOCK_N), dtype=tl.float32)
    k_lo = pid_k * K_SPLIT
    for k0 in range(k_lo, k_lo + K_SPLIT, BLOCK_K):
        w0 = k0 // 8 + offs_w  # [WORDS]: word rows of this iteration
        words = tl.load(tile + (w0 * BLOCK_N)[:, None] + offs_j[None, :])  # padded: no mask
        scale = tl.load(s_ptr + (w0 // WPG)[:, None].to(tl.int64) * stride_sk + offs_n[None, :],
                        mask=n_ok[None, :], other=0.0).to(tl.float32)  # [WORDS, BLOCK_N], a group's row repeated
        part = tl.zeros((BLOCK_M, WORDS, BLOCK_N), dtype=tl.float32)
        for i in tl.static_range(8):
            code = ((words >> (4 * i)) & 0xF) | 0x4B000000  # 2^23 + q as fp32 bits
            wq = code.to(tl.float32, bitcast=True) - 8388616.0  # q - 8, exact
            xi = tl.load(x_rows + (k0 + offs_w * 8 + i)[None, :], mask=m_ok[:, None], other=0.0).to(tl.float32)
            part += xi[:, :, None] * wq[None, :, :]
        acc += part * scale[None, :, :]
    _finish(tl.sum(acc, axis=1), offs_m, offs_n, m_ok, n_ok, b_ptr, out_ptr, ws_ptr, cnt_ptr, M, N, stride_om,
            pid_m * tl.num_programs(0) + pid_n, pid_k, HAS_BIAS, SPLIT_K)


@triton.jit(do_not_specialize=["M"])
def _dot_kernel(x_ptr, t_ptr, s_ptr, b_ptr, out_ptr, ws_ptr, cnt_ptr, M, N, K, K_SPLIT,
                stride_xm, stride_tb, stride_sk, stride_om,
                HAS_BIAS: tl.constexpr, GROUP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)
    WORDS: tl.constexpr = BLOCK_K // 8
    GROUPS: tl.constexpr = BLOCK_K // GROUP_K
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_j = tl.arange(0, BLOCK_N)
    offs_n = pid_n * BLOCK_N + offs_j
    offs_w = tl.arange(0, WORDS)
    offs_k = tl.arange(0, BLOCK_K)
    offs_g = tl.arange(0, GROUPS)
    shifts = (tl.arange(0, 8) * 4).to(tl.int32)
    m_ok = offs_m < M
    n_ok = offs_n < N
    tile = t_ptr + pid_n.to(tl.int64) * stride_tb
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_lo = pid_k * K_SPLIT
    for k0 in range(k_lo, k_lo + K_SPLIT, BLOCK_K):
        xs = tl.load(x_rows + (k0 + offs_k)[None, :], mask=m_ok[:, None], other=0.0)
        words = tl.load(tile + ((k0 // 8 + offs_w) * BLOCK_N)[:, None] + offs_j[None, :])
        codes = (words[:, None, :] >> shifts[None, :, None]) & 0xF  # [WORDS, 8, BLOCK_N]: k = word * 8 + nibble
        codes = tl.reshape(codes, (GROUPS, GROUP_K, BLOCK_N))
        scale = tl.load(s_ptr + (k0 // GROUP_K + offs_g)[:, None].to(tl.int64) * stride_sk + offs_n[None, :],
                        mask=n_ok[None, :], other=0.0).to(tl.float32)  # [GROUPS, BLOCK_N]
        w = (codes.to(tl.float32) - 8.0) * scale[:, None, :]
        acc += tl.dot(xs, tl.reshape(w, (BLOCK_K, BLOCK_N)).to(xs.dtype))
    _finish(acc, offs_m, offs_n, m_ok, n_ok, b_ptr, out_ptr, ws_ptr, cnt_ptr, M, N, stride_om,
            pid_m * tl.num_programs(0) + pid_n, pid_k, HAS_BIAS, SPLIT_K)


def block_m(M: int, gemv: bool) -> int:
    """Rows of x a program multiplies: all of them on the GEMV path (≤ GEMV_MAX_M), else the dot's minimum 16 up
    to 64 (a draft batch)."""
    if gemv:
        return triton.next_power_of_2(M)
    return max(16, min(64, triton.next_power_of_2(M)))


def block_k(K: int, largest: int = BLOCK_K) -> int:
    """Input channels an iteration: the largest power-of-two multiple of GROUP up to ``largest`` that divides K."""
    bk = GROUP
    while bk * 2 <= largest and K % (bk * 2) == 0:
        bk *= 2
    return bk


def split_k(K: int, bk: int, programs: int, rows: int, N: int, sms: int) -> int:
    """The fewest K splits (whole ``bk`` iterations each) that give ``PROGRAMS_PER_SM · sms`` programs, within the
    workspace and at most 16."""
    iters = K // bk
    want = PROGRAMS_PER_SM * sms
    best = 1
    for s in range(1, min(iters, 16) + 1):
        if iters % s or s * rows * N > WORKSPACE_FLOATS:
            continue
        best = s
        if programs * s >= want:
            break
    return best


def dot_stages(bm: int, bk: int, bn: int, num_stages: int) -> int:
    """Stages whose tiles (activations, codes, unpacked weights) fit in ``SMEM_BYTES``, at least 1."""
    per_stage = bm * bk * 2 + bk // 8 * bn * 4 + bk * bn * 2
    return max(1, min(num_stages, SMEM_BYTES // per_stage))


def _sm_count(device) -> int:
    if device.type != "cuda":
        return 4  # the interpreter: a few programs per split keep the tests' grids small
    return torch.cuda.get_device_properties(device).multi_processor_count


@dataclass(frozen=True)
class LaunchConfig:
    gemv: bool
    block_m: int
    block_k: int
    num_stages: int
    num_warps: int


def launch_config(M: int, K: int, block_n: int, path: str = "auto", block_k_max: int = BLOCK_K, num_stages: int = 3,
                  num_warps: int | None = None) -> LaunchConfig:
    """The kernel and tile of an ``[M, K]`` launch: the GEMV up to ``GEMV_MAX_M`` rows (``path="auto"``), else the
    dot kernel; at most ``GEMV_TILE`` / ``DOT_TILE`` activations a tile (no register spills), the dot's stages
    capped by shared memory."""
    if path not in ("auto", "gemv", "dot"):
        raise ValueError(f"path must be auto, gemv or dot, got {path!r}")
    gemv = path == "gemv" or (path == "auto" and M <= GEMV_MAX_M)
    if gemv and M > 16:
        raise ValueError(f"the GEMV path takes at most 16 rows, got {M}")
    bm = block_m(M, gemv)
    bk = block_k(K, max(GROUP, min(block_k_max, (GEMV_TILE if gemv else DOT_TILE) // bm)))
    if gemv:
        return LaunchConfig(True, bm, bk, num_stages, num_warps or GEMV_WARPS)
    return LaunchConfig(False, bm, bk, dot_stages(bm, bk, block_n, num_stages), num_warps or DOT_WARPS)


def w4a16_linear(x: torch.Tensor, w: TritonWeight, bias=None, out=None, block_k_max: int = BLOCK_K,
                 num_stages: int = 3, num_warps: int | None = None, path: str = "auto", splits: int | None = None
                 ) -> torch.Tensor:
    """x [..., K] (fp16 / bf16) -> [..., N] in x's dtype, with w from ``prepare``. ``path``: "gemv" / "dot" /
    "auto" (``launch_config``); ``num_warps``: default per path; ``splits``: K splits (default: ``split_k``)."""
    N, K = w.n, w.k
    if x.shape[-1] != K or x.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"x must be [..., {K}] fp16 / bf16, got {tuple(x.shape)} {x.dtype}")
    if w.tiles.shape != (triton.cdiv(N, w.block_n), K // PACK, w.block_n) or not w.tiles.is_contiguous():
        raise ValueError(f"tiles must be a contiguous [{triton.cdiv(N, w.block_n)}, {K // PACK}, {w.block_n}] "
                         f"(prepare's layout), got {tuple(w.tiles.shape)}")
    if bias is not None and bias.shape != (N,):
        raise ValueError(f"bias must be [{N}], got {tuple(bias.shape)}")
    x2 = x.reshape(-1, K)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    M = x2.shape[0]
    if out is None:
        out = torch.empty((*x.shape[:-1], N), dtype=x.dtype, device=x.device)
    if out.shape != (*x.shape[:-1], N) or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {(*x.shape[:-1], N)} {x.dtype}")
    o2 = out.view(-1, N)
    if M == 0:
        return out
    cfg = launch_config(M, K, w.block_n, path, block_k_max, num_stages, num_warps)
    BM, bk = cfg.block_m, cfg.block_k
    nb, mb = w.tiles.shape[0], triton.cdiv(M, BM)
    if nb * mb > COUNTERS:
        raise ValueError(f"{nb} column blocks × {mb} row blocks exceed the {COUNTERS} split-K counters")
    rows = mb * BM
    sk = splits or split_k(K, bk, nb * mb, rows, N, _sm_count(x.device))
    if (K // bk) % sk or sk * M * N > WORKSPACE_FLOATS:
        raise ValueError(f"splits = {sk} must divide the {K // bk} iterations and fit the workspace")
    ws, cnt = scratch(x.device)
    kernel = _gemv_kernel if cfg.gemv else _dot_kernel
    kernel[(nb, sk, mb)](x2, w.tiles, w.scales, bias if bias is not None else w.scales, o2, ws, cnt, M, N, K,
                         K // sk, x2.stride(0), w.tiles.stride(0), w.scales.stride(0), o2.stride(0),
                         HAS_BIAS=bias is not None, GROUP_K=GROUP, BLOCK_M=BM, BLOCK_N=w.block_n, BLOCK_K=bk,
                         SPLIT_K=sk, num_stages=cfg.num_stages, num_warps=cfg.num_warps)
    return out


assert ZERO == 8  # the kernels' "- 8" is ref.py's zero code
