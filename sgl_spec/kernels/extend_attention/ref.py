"""Pure-torch twin of the Triton ``extend_attention`` (same signature): each request through
sgl_spec/kvcache/prefill.py's ``extend_attention`` in fp32, one at a time."""
from __future__ import annotations

import torch

from sgl_spec.kvcache.prefill import extend_attention as extend_one


def extend_attention(q, k, v, prev_k, prev_v, store, page_table, plan, sm_scale: float, out=None):
    P = store.k_upper.shape[2]
    if out is None:
        out = torch.empty_like(q)
    for b, (s, n, r0) in enumerate(zip(plan.starts_host, plan.lens_host, plan.row0_host)):
        off = s % P
        extend_one(q[r0:r0 + n], k[r0:r0 + n], v[r0:r0 + n], prev_k[b, :off], prev_v[b, :off], store,
                   page_table[b], s, sm_scale, out=out[r0:r0 + n], impl="einsum")
    return out
