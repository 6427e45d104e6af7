"""Inputs of the kernel benchmark and of its correctness guard: one batch of requests laid out as a paged BF16 cache
(what FlashInfer / FA3 read) and as quantized nibble-plane pages + the full-precision hot ring (what our kernels
read), plus the per-kernel argument tensors and the byte counts used for GB/s.

Geometry (docs/CONTRACTS.md, "attention view"): a request of ``len`` tokens decodes position ``p = len - 1``; it reads
the complete pages ``j < p // P`` quantized and its own page ``(p//P)*P … p`` from the ring. Every logical page has a
physical page in both pools (the BF16 baseline reads the whole sequence from its own pool).
"""
from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

_ROOT = Path(__file__).resolve().parents[1]


def _bootstrap_sgl_spec():
    """Make ``sgl_spec`` and ``sgl_spec.kernels`` importable from this checkout even where sgl-spec is not
    pip-installed (the package maps the top-level ``sgl_spec/kernels/`` folder to ``sgl_spec.kernels`` only when installed)."""
    if str(_ROOT) not in sys.path:
        sys.path.insert(0, str(_ROOT))
    import sgl_spec

    if importlib.util.find_spec("sgl_spec.kernels") is None:
        spec = importlib.util.spec_from_file_location(
            "sgl_spec.kernels", _ROOT / "kernels" / "__init__.py", submodule_search_locations=[str(_ROOT / "kernels")])
        mod = importlib.util.module_from_spec(spec)
        sys.modules["sgl_spec.kernels"] = mod
        spec.loader.exec_module(mod)
        sgl_spec.kernels = mod


_bootstrap_sgl_spec()

from sgl_spec.kvcache.format import KVFormat, PageStore  # noqa: E402
from sgl_spec.kernels.quantize_pages.ref import quantize_pages_ref  # noqa: E402

HQ, HKV, D = 32, 8, 128  # Llama-3-8B attention layer
RING = 2
DTYPE = torch.bfloat16
SM_SCALE = 1.0 / math.sqrt(D)
# Finite poison for ring slots beyond a request's last token: a kernel that gives them weight produces garbage the
# guard sees, one that loads-but-masks them (harmless in production, where they hold stale finite K/V) still passes.
RING_POISON = 300.0


def n_pages(length: int, P: int) -> int:
    return -(-length // P)


def sparse_count(n: int, ratio: float, min_pages: int, sink_pages: int = 0) -> int:
    """k_b of select_topk_pages (CONTRACTS.md, before the KCAP clip): sink pages are counted inside the budget."""
    return max(min(n, max(min_pages, math.ceil(ratio * n))), min(sink_pages, n))


# ---- the BF16 paged cache (baselines) ------------------------------------------------------------------------------
@dataclass
class PagedBF16:
    k_cache: torch.Tensor  # [num_pages, P, HKV, D] (NHD: FlashInfer and FA3 layout)
    v_cache: torch.Tensor
    page_table: torch.Tensor  # int32 [B, MAXP]
    lens: torch.Tensor  # int32 [B]
    lens_host: list
    P: int


def bf16_pages(lens, P, device, copies=1, tokens=None, gen=None):
    """``copies`` batches over disjoint pages of one pool, pages in random physical order (as after many
    allocations). ``tokens`` (guard only, copies=1): per request (k [len, HKV, D], v) to store; else random."""
    npl = [n_pages(n, P) for n in lens]
    maxp = max(npl)
    total = copies * sum(npl)
    k_cache = torch.empty(total, P, HKV, D, dtype=DTYPE, device=device)
    v_cache = torch.empty_like(k_cache)
    if tokens is None:
        k_cache.normal_()
        v_cache.normal_()
    else:
        k_cache.fill_(RING_POISON)  # page tails beyond len: never read by a correct baseline call
        v_cache.fill_(RING_POISON)
    perm = torch.randperm(total, generator=gen).to(torch.int32)
    out, at = [], 0
    for _ in range(copies):
        pt = torch.zeros(len(lens), maxp, dtype=torch.int32)
        for b, n in enumerate(npl):
            pt[b, :n] = perm[at:at + n]
            at += n
        pt = pt.to(device)
        if tokens is not None:
            for b, (k, v) in enumerate(tokens):
                rows = (pt[b, :npl[b]].long().view(-1, 1) * P + torch.arange(P, device=device)).flatten()[:len(k)]
                k_cache.view(-1, HKV, D)[rows] = k
                v_cache.view(-1, HKV, D)[rows] = v
        lens_t = torch.tensor(lens, dtype=torch.int32, device=device)
        out.append(PagedBF16(k_cache, v_cache, pt, lens_t, list(lens), P))
    return out


# ---- the quantized pages + hot ring (our kernels) ------------------------------------------------------------------
@dataclass
class QuantBatch:
    store: PageStore
    page_table: torch.Tensor  # int32 [B, MAXP] logical -> physical page
    lens: torch.Tensor  # int32 [B]
    lens_host: list
    hot_k: torch.Tensor  # [slots, RING, P, HKV, D]
    hot_v: torch.Tensor
    hot_slot: torch.Tensor  # int32 [B]
    P: int


def quant_pages(lens, P, device, copies=1, tokens=None, gen=None):
    """Like bf16_pages for the quantized pool. Random fill (timing): random plane bytes and plausible fp16 scales
    (values do not change the work done). ``tokens``: complete pages are quantized with the reference quantizer and
    the ring holds each request's last two pages (positions >= len poisoned)."""
    B = len(lens)
    fmt = KVFormat(P, HKV, D)
    npl = [n_pages(n, P) for n in lens]
    maxp = max(npl)
    total = copies * sum(npl)
    store = fmt.alloc(total, device=device)
    hot_k = torch.empty(copies * B, RING, P, HKV, D, dtype=DTYPE, device=device)
    hot_v = torch.empty_like(hot_k)
    if tokens is None:
        for t in (store.k_upper, store.k_lower, store.v_upper, store.v_lower):
            t.random_(0, 256)
        for s, z in ((store.k_scale, store.k_zero), (store.v_scale, store.v_zero)):
            s.uniform_(0.01, 0.03)
            z.uniform_(-0.3, -0.1)
        hot_k.normal_()
        hot_v.normal_()
    else:
        hot_k.fill_(RING_POISON)
        hot_v.fill_(RING_POISON)
    perm = torch.randperm(total, generator=gen).to(torch.int32)
    out, at = [], 0
    for c in range(copies):
        pt = torch.zeros(B, maxp, dtype=torch.int32)
        for b, n in enumerate(npl):
            pt[b, :n] = perm[at:at + n]
            at += n
        pt = pt.to(device)
        hot_slot = torch.arange(c * B, (c + 1) * B, dtype=torch.int32, device=device)
        if tokens is not None:
            for b, (k, v) in enumerate(tokens):
                _fill_request(store, pt[b], hot_k[c * B + b], hot_v[c * B + b], k, v, P)
        lens_t = torch.tensor(lens, dtype=torch.int32, device=device)
        out.append(QuantBatch(store, pt, lens_t, list(lens), hot_k, hot_v, hot_slot, P))
    return out


def _fill_request(store, pt_row, ring_k, ring_v, k, v, P):
    n = k.shape[0]
    last = (n - 1) // P  # the page of the newest token: ring only
    if last > 0:
        kk = k[: last * P].view(last, P, HKV, D).transpose(1, 2)  # -> [pages, HKV, P, D]
        vv = v[: last * P].view(last, P, HKV, D).transpose(1, 2)
        ids = pt_row[:last].long()
        for name, t in quantize_pages_ref(kk, vv).items():
            getattr(store, name)[ids] = t
    for j in range(max(0, last - 1), last + 1):  # the two newest pages: what any window of <= P tokens reads
        hi = min(n, (j + 1) * P)
        ring_k[j % RING, : hi - j * P] = k[j * P: hi]
        ring_v[j % RING, : hi - j * P] = v[j * P: hi]


# ---- per-kernel arguments ------------------------------------------------------------------------------------------
def draft_args(qb: QuantBatch, sparse=None, gen=None):
    """(page_ids, num_pages, hot_start, hot_len) of draft_decode. ``sparse = (ratio, min_pages, sink_pages)``:
    a random page list of select_topk_pages' size, in ascending logical order as select_topk_pages writes it."""
    P, dev = qb.P, qb.page_table.device
    p = torch.tensor(qb.lens_host) - 1
    nq = p // P
    hot_start, hot_len = nq * P, p % P + 1
    if sparse is None:
        ids, cnt = qb.page_table, nq
    else:
        ratio, min_pages, sink = sparse
        ks = [sparse_count(int(n), ratio, min_pages, sink) for n in nq]
        ids = torch.zeros(len(ks), max(max(ks), 1), dtype=torch.int32)
        pt = qb.page_table.cpu()
        for b, (n, k) in enumerate(zip(nq.tolist(), ks)):
            s = min(sink, n, k)
            rest = torch.randperm(n - s, generator=gen)[: k - s].sort().values + s
            ids[b, :k] = pt[b, torch.cat([torch.arange(s), rest])]
        cnt = torch.tensor(ks)
    i32 = lambda t: t.to(device=dev, dtype=torch.int32).contiguous()  # noqa: E731
    return i32(ids), i32(cnt), i32(hot_start), i32(hot_len)


def verify_q_start(qb: QuantBatch, nq: int) -> torch.Tensor:
    """Rows q_start … len-1 (the window ends at the newest token)."""
    return (qb.lens - nq).to(torch.int32)


# ---- bytes that must move (for GB/s) -------------------------------------------------------------------------------
def page_bytes(P: int, planes: int) -> int:
    """``planes`` nibble planes of one page (all KV heads) + its K and V scales/zeros (fp16)."""
    return planes * HKV * P * D // 2 + 2 * HKV * D * 2 + 2 * HKV * P * 2


def bytes_bf16_attention(lens, P, nq: int) -> int:
    kv = sum(lens) * HKV * D * 2 * 2
    return kv + len(lens) * nq * HQ * D * 2 * 2 + sum(n_pages(n, P) for n in lens) * 4


def bytes_draft(P, num_pages, hot_len) -> int:
    pages = sum(num_pages) * (page_bytes(P, 2) + 4)  # + the int32 page id
    hot = sum(hot_len) * HKV * D * 2 * 2
    return pages + hot + len(num_pages) * HQ * D * 2 * 2


def bytes_verify(P, lens, nq, scores: bool) -> int:
    total = 0
    for n in lens:
        q0, last = n - nq, n - 1
        quant = last // P  # rows read pages j < p // P; the newest row reads the most
        hot = n - (q0 // P) * P  # union of the rows' own-page prefixes
        total += quant * (page_bytes(P, 4) + 4) + hot * HKV * D * 2 * 2 + nq * HQ * D * 2 * 2
        if scores:
            total += HKV * (q0 // P) * 4
    return total


def bytes_quantize(P, n) -> int:
    return n * (P * HKV * D * 2 * 2 + page_bytes(P, 4))


def bytes_select(L, num_eligible, kcap) -> int:
    B = len(num_eligible)
    return L * (sum(num_eligible) * HKV * 4 + B * kcap * (4 + 4) + B * 4)


def relayout_scales(store: PageStore, mode: str) -> PageStore:
    """The same pages with their scales and zeros laid out by ``mode`` (the kernels must read each of them,
    tests/ops/test_draft_decode.py): "split" as allocated (four tensors); "packed": one buffer [pages, H, 2 D + 2 P] fp16 holding, per (page,
    KV head), key scales, key zeros, value scales and value zeros side by side (one 768-byte run at P = 64 instead of
    four runs in four tensors; the four tensors are views of it); "alias": every page reads page 0's scales and zeros
    (page stride 0: the scale bytes come from L2, the kernels' instructions unchanged)."""
    if mode == "split":
        return store
    ks, kz, vs, vz = store.k_scale, store.k_zero, store.v_scale, store.v_zero
    if mode == "alias":
        return PageStore(store.k_upper, store.k_lower, store.v_upper, store.v_lower,
                         *(t[:1].expand_as(t) for t in (ks, kz, vs, vz)))
    if mode != "packed":
        raise ValueError(f"scale layout must be split, packed or alias, got {mode!r}")
    d, p = ks.shape[2], vs.shape[2]
    buf = torch.cat([ks, kz, vs, vz], dim=2).contiguous()
    return PageStore(store.k_upper, store.k_lower, store.v_upper, store.v_lower, buf[..., :d], buf[..., d:2 * d],
                     buf[..., 2 * d:2 * d + p], buf[..., 2 * d + p:])
