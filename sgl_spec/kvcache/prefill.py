"""EXTEND (prefill) attention under quantspec's view, in pure torch (CPU and GPU).

The view (docs/CONTRACTS.md): a query at position ``p`` reads the INT8 view of every logical page ``j < p // P`` and
its own page's keys ``(p // P) * P … p`` in full precision. For one request whose new tokens are positions
``start … start+n-1`` that means: the INT8 view of pages ``0 … (start+n-1)//P - 1`` (cached radix-prefix pages, pages
of earlier chunks, and pages completed by this very forward, which the backend quantizes first), plus full-precision
keys of the new tokens and of the part of ``start``'s page computed earlier (``prev_k``, read from the hot ring).

On the CPU (and with ``page_aligned``) everything is fp32, like the ``*_ref`` twins of the DECODE / TARGET_VERIFY
kernels, so the CPU paths compute one function and chunked prefill, prefix hits, decode and speculation agree token
for token. Queries are processed in chunks so the logits stay within a memory budget.

On CUDA the default path hands the same keys, values and mask to ``scaled_dot_product_attention`` in fp16 (the
memory-efficient kernel: no logits in memory, tensor cores), the precision class of the DECODE / TARGET_VERIFY
kernels, which also dequantize to fp16. The fp32 einsum path keeps the whole [rows, keys] logits and copies the
dequantized prefix once per 64-row chunk, too slow for long GPU prompts.
"""
from __future__ import annotations

import contextlib

import torch

from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref

_LOGIT_BUDGET = 1 << 24  # fp32 logits elements per query chunk (64 MiB)
_MASK_BUDGET = 1 << 27  # mask elements per query chunk of the SDPA path (128 MiB as bool, 256 MiB as fp16)


def dequant_pages(store, page_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """INT8 view of physical pages ``page_ids`` [n] -> K, V fp32 ``[Hkv, n*P, D]`` in logical order."""
    ids = page_ids.long()
    k = dequant_keys_ref(store.k_upper[ids], store.k_lower[ids], store.k_scale[ids], store.k_zero[ids], False)
    v = dequant_values_ref(store.v_upper[ids], store.v_lower[ids], store.v_scale[ids], store.v_zero[ids], False)
    n, H, P, D = k.shape
    return k.permute(1, 0, 2, 3).reshape(H, n * P, D), v.permute(1, 0, 2, 3).reshape(H, n * P, D)


def extend_attention(q, k, v, prev_k, prev_v, store, page_ids, start: int, sm_scale: float, out=None,
                     page_aligned: bool = False, impl: str = "auto", sdpa_dtype=torch.float16):
    """Attention of one request's new tokens.

    q [n, Hq, D] at positions ``start … start+n-1``; k, v [n, Hkv, D] their keys/values (model dtype); prev_k, prev_v
    [start % P, Hkv, D]: full-precision K/V of positions ``(start//P)*P … start-1``; store: the layer's PageStore;
    page_ids: physical page id of logical page j at [j], at least ``(start+n-1)//P`` entries (those pages must already
    be quantized). ``start`` and ``n`` are host ints (the EXTEND path is host-driven). Returns out [n, Hq, D].

    ``page_aligned`` (deterministic inference): every query of page ``j`` attends over the same key layout whatever
    the chunking - the INT8 view of pages ``0 … j-1`` then the P slots of page ``j`` (not yet computed ones zero and
    masked) - so with batch-invariant matmuls a row's result does not depend on how the scheduler chunked the prompt.
    By default query chunks span several pages (fewer, larger matmuls), so the key layout follows the chunking.

    ``impl`` of the default path: "einsum" (fp32), "sdpa" (``scaled_dot_product_attention`` in ``sdpa_dtype`` over
    the same keys, values and mask) or "auto" (sdpa on CUDA, einsum on the CPU).
    """
    n, Hq, D = q.shape
    Hkv, P = store.k_upper.shape[1], store.k_upper.shape[2]
    G = Hq // Hkv
    if out is None:
        out = torch.empty_like(q)
    if n == 0:
        return out
    end = start + n
    base = (start // P) * P
    assert prev_k.shape[0] == start - base, "prev_k must hold the earlier part of start's page"
    n8 = (end - 1) // P  # INT8 pages the last query needs
    k8, v8 = dequant_pages(store, page_ids[:n8]) if n8 > 0 else (q.new_zeros((Hkv, 0, D), dtype=torch.float32),) * 2
    kf = torch.cat([prev_k, k]).float().permute(1, 0, 2)  # [Hkv, end-base, D], positions base … end-1
    vf = torch.cat([prev_v, v]).float().permute(1, 0, 2)
    qf = q.float()

    def attend(p0, p1, keys, vals, mask):
        qc = qf[p0 - start:p1 - start].view(-1, Hkv, G, D).permute(1, 0, 2, 3)  # [Hkv, C, G, D]
        logits = torch.einsum("hcgd,htd->hcgt", qc, keys) * sm_scale
        logits = logits.masked_fill(~mask[None, :, None, :], float("-inf"))  # own token always visible: no NaN
        o = torch.einsum("hcgt,htd->hcgd", torch.softmax(logits, dim=-1), vals)
        out[p0 - start:p1 - start] = o.permute(1, 0, 2, 3).reshape(-1, Hq, D).to(out.dtype)

    if page_aligned:
        pad = -(-(end - base) // P) * P - (end - base)
        kf, vf = torch.nn.functional.pad(kf, (0, 0, 0, pad)), torch.nn.functional.pad(vf, (0, 0, 0, pad))
        for j in range(start // P, n8 + 1):
            f0 = j * P
            keys = torch.cat([k8[:, :f0], kf[:, f0 - base:f0 - base + P]], dim=1)  # [Hkv, (j+1)*P, D]
            vals = torch.cat([v8[:, :f0], vf[:, f0 - base:f0 - base + P]], dim=1)
            rows = max(1, _LOGIT_BUDGET // (Hq * (j + 1) * P))  # row sub-chunks: the layout stays the same
            p0 = max(start, f0)
            while p0 < min(end, f0 + P):
                p1 = min(end, f0 + P, p0 + rows)
                pos = torch.arange(p0, p1, device=q.device)
                tf = torch.arange(f0, f0 + P, device=q.device)
                mask = torch.cat([torch.ones((p1 - p0, f0), dtype=torch.bool, device=q.device),
                                  tf[None, :] <= pos[:, None]], 1)
                attend(p0, p1, keys, vals, mask)
                p0 = p1
        return out

    if impl not in ("auto", "einsum", "sdpa"):
        raise ValueError(f"impl must be auto, einsum or sdpa, got {impl!r}")
    if impl == "sdpa" or (impl == "auto" and q.is_cuda):
        return _extend_sdpa(qf, kf, vf, k8, v8, out, start, base, P, G, sm_scale, sdpa_dtype)

    # Query chunks of whole pages: a chunk's full-precision keys are its own pages only.
    rows_per_chunk = max(1, _LOGIT_BUDGET // max(1, Hq * (n8 * P + 2 * P)))
    for p0, p1, keys, vals, mask in _page_chunks(k8, v8, kf, vf, start, end, base, P, max(1, rows_per_chunk // P)):
        attend(p0, p1, keys, vals, mask)
    return out


def _page_chunks(k8, v8, kf, vf, start: int, end: int, base: int, P: int, pages_per_chunk: int):
    """Query chunks p0 … p1-1 of whole pages with their keys and values [Hkv, T, D]: the INT8 view of the pages
    before the chunk's last page, then the full-precision keys of the chunk's own pages (from the first one's start);
    and the [p1-p0, T] mask (an INT8 key of an earlier page, or a full-precision key of the query's own page at or
    before it)."""
    dev = kf.device
    p0 = start
    while p0 < end:
        p1 = min(end, ((p0 // P) + pages_per_chunk) * P)
        pos = torch.arange(p0, p1, device=dev)
        j_hi = (p1 - 1) // P  # INT8 pages this chunk can see
        f0 = (p0 // P) * P  # first full-precision key position this chunk can see
        keys = torch.cat([k8[:, : j_hi * P], kf[:, f0 - base:p1 - base]], dim=1)
        vals = torch.cat([v8[:, : j_hi * P], vf[:, f0 - base:p1 - base]], dim=1)
        t8 = torch.arange(j_hi * P, device=dev)
        tf = torch.arange(f0, p1, device=dev)
        own = (pos // P)[:, None]
        mask = torch.cat([(t8 // P)[None, :] < own, ((tf // P)[None, :] == own) & (tf[None, :] <= pos[:, None])], 1)
        yield p0, p1, keys, vals, mask
        p0 = p1


def _efficient_only(t):
    if not t.is_cuda:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION])


def _extend_sdpa(qf, kf, vf, k8, v8, out, start, base, P, G, sm_scale, dtype):
    """The default path through ``scaled_dot_product_attention``: query rows (token, group member) of one KV head
    share that head's keys, so a chunk is one call over [1, Hkv, rows*G, D] with the mask repeated G times."""
    n, Hq, D = qf.shape
    Hkv = Hq // G
    end = start + n
    T_max = k8.shape[1] + (end - base)
    pages_per_chunk = max(1, _MASK_BUDGET // max(1, G * P * T_max))
    # converted once per forward: the INT8 prefix is the bulk of the keys
    cast = [t.to(dtype) for t in (k8, v8, kf, vf)]
    for p0, p1, keys, vals, mask in _page_chunks(*cast, start, end, base, P, pages_per_chunk):
        qc = qf[p0 - start:p1 - start].view(-1, Hkv, G, D).permute(1, 0, 2, 3).reshape(1, Hkv, -1, D).to(dtype)
        with _efficient_only(qc):  # never the math fallback: it would hold [Hkv, rows*G, T] logits
            o = torch.nn.functional.scaled_dot_product_attention(
                qc, keys[None], vals[None], attn_mask=mask.repeat_interleave(G, dim=0), scale=sm_scale)
        out[p0 - start:p1 - start] = o.view(Hkv, p1 - p0, G, D).permute(1, 0, 2, 3).reshape(-1, Hq, D).to(out.dtype)
    return out
