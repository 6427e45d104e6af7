"""Pure-torch reference of ``verify_attention`` (the INT8-view attention of γ+1 query rows, with page scores).

The attention view (docs/CONTRACTS.md): row ``i`` of request ``b`` sits at position ``p = q_start[b] + i`` and reads
* logical pages ``j < p // P`` through the INT8 view (both planes, ``dequant_*_ref(draft=False)``), and
* ring positions ``(p // P) * P … p`` in full precision (``hot[slot, (pos // P) % 2, pos % P]``).

Everything is fp32: dequantize the needed pages, gather the (≤ 2) ring pages of the window, compute each row's logits
over the INT8 tokens (page-major) then the ring tokens, mask them per row, and take the softmax. Requests are processed in
contiguous chunks so the dequantized K/V stay within a memory budget (this is also the server's CPU path).
"""
from __future__ import annotations

import torch

from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref

RING = 2
# Page score kinds: "max" (the max of the page's logits over the score rows) or "lse" (the log-sum-exp of the page's
# logits per score row, log-add-exp'ed over the two rows); both summed over the query heads of a KV head.
SCORE_KINDS = ("max", "lse")
# Per chunk of requests: dequantized K/V (+ logits) elements kept alive at once, fp32. 2^24 floats = 64 MiB each.
_CHUNK_ELEMS = 1 << 24


def default_score_rows(nq: int, score_rows=None) -> tuple[int, int]:
    """(ra, rb): the contract's default is the first draft row and the bonus (last) row."""
    ra, rb = score_rows if score_rows is not None else (min(1, nq - 1), nq - 1)
    ra, rb = int(ra), int(rb)
    if not (0 <= ra < nq and 0 <= rb < nq):
        raise ValueError(f"score_rows {score_rows} out of range for NQ={nq}")
    return ra, rb


def verify_attention(q, store, page_table, q_start, hot_k, hot_v, hot_slot, sm_scale, scores=None, score_rows=None,
                     out=None, score_kind="max", batch_invariant=True, engine=None, launch=None):
    # batch_invariant, engine and launch (the GPU kernels' partition, engine and geometry) change nothing here: one
    # exact pass over all pages
    B, NQ, Hq, D = q.shape
    _, Hkv, P, _ = store.k_upper.shape
    G = Hq // Hkv
    assert Hq == G * Hkv and store.k_upper.shape[-1] * 2 == D and NQ <= P
    assert page_table.shape[0] == B and q_start.shape == (B,) and hot_slot.shape == (B,)
    ra, rb = default_score_rows(NQ, score_rows)
    assert score_kind in SCORE_KINDS, score_kind
    if out is None:
        out = torch.empty_like(q)
    assert out.shape == q.shape
    if B == 0:
        return out

    q_start = q_start.long()
    n_pages = (q_start + NQ - 1) // P  # INT8 pages the last row needs (the most any row needs)
    per_req = Hkv * (int(n_pages.max()) + RING) * P * (2 * D + NQ * G)
    chunk = max(1, _CHUNK_ELEMS // max(per_req, 1))
    for b0 in range(0, B, chunk):
        b1 = min(B, b0 + chunk)
        o = _attend_chunk(q[b0:b1], store, page_table[b0:b1], q_start[b0:b1], hot_k, hot_v, hot_slot[b0:b1].long(),
                          sm_scale, ra, rb, None if scores is None else scores[b0:b1], score_kind)
        out[b0:b1] = o.to(out.dtype)
    return out


def _attend_chunk(q, store, page_table, q_start, hot_k, hot_v, hot_slot, sm_scale, ra, rb, scores, score_kind):
    b, NQ, Hq, D = q.shape
    _, Hkv, P, _ = store.k_upper.shape
    G = Hq // Hkv
    dev = q.device
    rows = torch.arange(NQ, device=dev)
    pos = q_start[:, None] + rows  # [b, NQ]
    npg = int(((q_start + NQ - 1) // P).max())  # host int: this is the CPU/debug path

    # ---- INT8 view of logical pages 0 … npg-1 ---------------------------------------------------------------------
    # Pages a request does not need read page 0 with scale = zero = 0, so they dequantize to exact zeros (page 0 may be
    # unwritten memory) and are masked below.
    j = torch.arange(npg, device=dev)
    page_ok = j[None, :] < ((q_start + NQ - 1) // P)[:, None]  # [b, npg]
    ids = torch.where(page_ok, page_table[:, :npg].long(), torch.zeros_like(page_table[:, :npg].long()))
    ok3 = page_ok[:, :, None, None]

    def scl(t):
        return torch.where(ok3, t[ids], torch.zeros((), dtype=t.dtype, device=dev))

    k8 = dequant_keys_ref(store.k_upper[ids], store.k_lower[ids], scl(store.k_scale), scl(store.k_zero), False)
    v8 = dequant_values_ref(store.v_upper[ids], store.v_lower[ids], scl(store.v_scale), scl(store.v_zero), False)
    # k8, v8: [b, npg, Hkv, P, D]

    # ---- ring: 2P positions starting at the window's first page; positions past the last row are never attended -----
    base = (q_start // P) * P
    t = torch.arange(RING * P, device=dev)
    hot_pos = base[:, None] + t  # [b, 2P]
    ring = (hot_pos // P) % RING
    used = (hot_pos <= (q_start + NQ - 1)[:, None])[:, :, None, None]  # stale ring entries may hold anything
    hk = torch.where(used, hot_k[hot_slot[:, None], ring, t % P].float(), 0.0)  # [b, 2P, Hkv, D]
    hv = torch.where(used, hot_v[hot_slot[:, None], ring, t % P].float(), 0.0)

    # ---- per-row masks (the contract's rule, literally); keys = INT8 tokens (page-major), then the ring ------------
    own = (pos // P)[:, :, None]  # [b, NQ, 1]
    tok_page = torch.arange(npg * P, device=dev) // P
    mask8 = tok_page[None, None, :] < own  # [b, NQ, npg*P]
    maskh = (hot_pos[:, None, :] >= own * P) & (hot_pos[:, None, :] <= pos[:, :, None])  # [b, NQ, 2P]
    mask = torch.cat([mask8, maskh], dim=-1)[:, None, :, None, :]  # [b, 1, NQ, 1, T]

    qf = q.float().view(b, NQ, Hkv, G, D).permute(0, 2, 1, 3, 4)  # [b, Hkv, NQ, G, D]
    lg8 = torch.einsum("bhigd,bjhpd->bhigjp", qf, k8).reshape(b, Hkv, NQ, G, npg * P)
    lgh = torch.einsum("bhigd,bthd->bhigt", qf, hk)
    logits = torch.cat([lg8, lgh], dim=-1) * sm_scale  # [b, Hkv, NQ, G, T]
    probs = torch.softmax(torch.where(mask, logits, float("-inf")), dim=-1)  # own token always visible: no NaN
    p8 = probs[..., : npg * P].reshape(b, Hkv, NQ, G, npg, P)
    o = torch.einsum("bhigjp,bjhpd->bhigd", p8, v8) + torch.einsum("bhigt,bthd->bhigd", probs[..., npg * P:], hv)

    if scores is not None and npg > 0:
        # max over the two score rows and the page's tokens, per query head; summed over the G heads of a KV head
        lg = logits[..., : npg * P].reshape(b, Hkv, NQ, G, npg, P)
        if score_kind == "lse":  # per row log-sum-exp over the page's tokens, log-add-exp over the two rows
            lg = torch.logsumexp(lg, dim=-1)  # [b, Hkv, NQ, G, npg]
            sc = (lg[:, :, ra] if ra == rb else torch.logaddexp(lg[:, :, ra], lg[:, :, rb])).sum(dim=2)
        else:
            lg = lg.amax(dim=-1)  # [b, Hkv, NQ, G, npg]
            sc = torch.maximum(lg[:, :, ra], lg[:, :, rb]).sum(dim=2)  # [b, Hkv, npg]
        write = (j[None, :] < (q_start // P)[:, None])[:, None, :]  # pages j >= q_start // P stay unwritten
        scores[:, :, :npg] = torch.where(write, sc, scores[:, :, :npg])
    return o.permute(0, 2, 1, 3, 4).reshape(b, NQ, Hq, D)
