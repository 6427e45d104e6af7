"""Pure-torch reference of ``draft_decode`` (same signature as the Triton kernel; see docs/CONTRACTS.md).

Attention of one decode query per request over the *draft view*: the upper plane only of the listed pages plus the
request's hot tokens in full precision from the ring; fp32 throughout.

The CPU server runs this as its draft attention (B up to ~64, thousands of tokens), so it is vectorized over the
batch (requests padded to the longest page list / hot window of a chunk, padding masked out of the softmax; chunks
bound the memory) and it never materializes dequantized K/V, which cost three fp32 passes over every element: with the
draft view ``x = z + s u`` and the packing of kvformat (byte j = channel j low nibble, j + D/2 high nibble),

    q·k_n = Σ_j (q_j s_j) u_nj + q·z          (keys: s, z per channel of the page)
    Σ_n p_n v_n = Σ_n (p_n s_n) u_n + Σ_n p_n z_n   (values: s, z per token)

so only the nibble codes are converted to fp32 and fed to batched matmuls, each half of the head dim separately.
tests/ops/test_draft_decode.py checks this against a per-request dense attention over ``dequant_*_ref(draft=True)``.
"""
from __future__ import annotations

import torch

from sgl_spec.kernels.ring_write.ref import ring_write
from sgl_spec.kernels.window_meta.ref import ring_rows

RING = 2  # hot ring pages per slot (CONTRACTS.md)
_CHUNK_ELEMS = 1 << 24  # K elements gathered per batch chunk (fp32 codes: 64 MiB, values the same)


def draft_decode(q, store, page_ids, num_pages, hot_k, hot_v, hot_slot, hot_start, hot_len, sm_scale, out=None,
                 new_k=None, new_v=None, engine=None, launch=None):  # engine / launch: the GPU engines' (unused)
    B, Hq, D = q.shape
    _, Hkv, P, _ = store.k_upper.shape
    if new_k is not None:  # the query's own K/V into the ring first (position hot_start + hot_len - 1)
        ring_write(hot_k, hot_v, ring_rows(hot_slot, hot_start.long() + hot_len.long() - 1, P, RING), new_k, new_v)
    if out is None:
        out = torch.empty_like(q)
    n = num_pages.long().clamp(0, page_ids.shape[-1])  # page_ids [B, KCAP] or per kv head [B, Hkv, KCAP]
    per_req = max(1, int(n.max()) if B else 1) * P * Hkv * D
    chunk = max(1, _CHUNK_ELEMS // per_req)
    for b0 in range(0, B, chunk):
        b1 = min(B, b0 + chunk)
        qf = q[b0:b1].float().view(b1 - b0, Hkv, Hq // Hkv, D) * sm_scale
        o = _attend(qf, store, page_ids[b0:b1], n[b0:b1], hot_k, hot_v, hot_slot[b0:b1], hot_start[b0:b1],
                    hot_len[b0:b1])
        out[b0:b1] = o.reshape(b1 - b0, Hq, D).to(out.dtype)
    return out


def _attend(qf, store, page_ids, n, hot_k, hot_v, hot_slot, hot_start, hot_len):
    """qf [b, Hkv, G, D] (already scaled by sm_scale) -> fp32 [b, Hkv, G, D]."""
    b, Hkv, G, D = qf.shape
    P = store.k_upper.shape[2]
    half = D // 2
    dev = qf.device

    # ---- pages: ids past num_pages may be garbage, so they are replaced before indexing (and masked below)
    maxp = int(n.max()) if b else 0
    page_ok = torch.arange(maxp, device=dev)[None, :] < n[:, None]  # [b, maxp]
    pids = page_ids[..., :maxp].long()
    pids = pids[:, None, :].expand(b, Hkv, maxp) if pids.dim() == 2 else pids  # one list per kv head
    ids = torch.where(page_ok[:, None, :], pids, torch.zeros((), dtype=torch.long, device=dev))
    heads = torch.arange(Hkv, device=dev)[None, :, None].expand(b, Hkv, maxp)

    def codes(plane):  # upper plane only -> (low, high) nibble codes fp32 [b, Hkv, maxp, P, half]
        x = plane[ids, heads]
        return (x & 0xF).float(), (x >> 4).float()

    ku_lo, ku_hi = codes(store.k_upper)
    ks, kz = store.k_scale[ids, heads].float(), store.k_zero[ids, heads].float()  # [b, Hkv, maxp, D]
    qs = qf[:, :, None] * ks[:, :, :, None, :]  # [b, Hkv, maxp, G, D]
    s_pg = (torch.matmul(qs[..., :half], ku_lo.transpose(-1, -2)) + torch.matmul(qs[..., half:], ku_hi.transpose(-1, -2))
            + (qf[:, :, None] * kz[:, :, :, None, :]).sum(-1, keepdim=True))  # [b, Hkv, maxp, G, P]
    s_pg = s_pg.permute(0, 1, 3, 2, 4).reshape(b, Hkv, G, maxp * P)

    # ---- hot tokens: position pos lives at hot[slot, (pos // P) % RING, pos % P]
    hl = hot_len.long()
    maxh = int(hl.max()) if b else 0
    t = torch.arange(maxh, device=dev)[None, :]
    pos = hot_start.long()[:, None] + t
    slot = hot_slot.long()[:, None].expand_as(pos)
    kh = hot_k[slot, (pos // P) % RING, pos % P].float().permute(0, 2, 1, 3)  # [b, maxh, Hkv, D] -> [b, Hkv, maxh, D]
    vh = hot_v[slot, (pos // P) % RING, pos % P].float().permute(0, 2, 1, 3)
    s_hot = torch.matmul(qf, kh.transpose(-1, -2))  # [b, Hkv, G, maxh]

    # ---- one softmax over (pages ∪ hot)
    ok = torch.cat([page_ok.repeat_interleave(P, dim=1), t < hl[:, None]], 1)  # [b, maxp*P + maxh]
    p = torch.softmax(torch.cat([s_pg, s_hot], -1).masked_fill(~ok[:, None, None, :], float("-inf")), -1)
    p_pg = p[..., : maxp * P].reshape(b, Hkv, G, maxp, P).permute(0, 1, 3, 2, 4)  # [b, Hkv, maxp, G, P]

    vu_lo, vu_hi = codes(store.v_upper)
    vs, vz = store.v_scale[ids, heads].float(), store.v_zero[ids, heads].float()  # [b, Hkv, maxp, P]
    ps = p_pg * vs[:, :, :, None, :]
    o = torch.cat([torch.matmul(ps, vu_lo).sum(2), torch.matmul(ps, vu_hi).sum(2)], -1)  # [b, Hkv, G, D]
    o = o + (p_pg * vz[:, :, :, None, :]).sum((2, 4))[..., None]
    return o + torch.matmul(p[..., maxp * P:], vh)
