"""What ``--enable-deterministic-inference`` needs from quantspec's own attention (SGLang makes its GEMMs
batch-invariant; sgl_spec/kvcache/backend.py ``batch_invariant``):

* ``verify_attention``: a request's rows are bit-identical whatever else is in the batch (its split geometry follows
  the page-table width only);
* ``extend_attention(page_aligned=True)``: every query of a page attends over one key layout whatever the chunking,
  and agrees with the default layout up to fp32 rounding.
"""
import math

import pytest
import torch

from sgl_spec.kernels.verify_attention import triton as va
from sgl_spec.kvcache.prefill import extend_attention
from sgl_spec.kvcache.format import KVFormat
from sgl_spec.kernels.quantize_pages.ref import quantize_pages_ref

from test_verify_attention import make_case, run


def _rows(case, idx):
    q, store, pt, qs, hk, hv, hs = case
    return (q[idx].contiguous(), store, pt[idx].contiguous(), qs[idx].contiguous(), hk, hv, hs[idx].contiguous())


@pytest.mark.interp  # CPU tensors, the kernel under the interpreter
def test_verify_rows_are_batch_invariant():
    # The split geometry depends on the page-table width only, so a request's rows are bit-identical whatever else
    # is in the batch (the merge order cannot change with B).
    B, NQ, Hq, Hkv, D, P = 6, 5, 4, 2, 64, 32
    case = make_case(B, NQ, Hq, Hkv, D, P, [300, 94, 3, 250, 130, 61], torch.bfloat16, maxp=12, seed=11)
    full, _ = run(va.verify_attention, case, 1 / math.sqrt(D), True)
    for idx in ([0], [3, 0], [5, 1, 2]):
        part, _ = run(va.verify_attention, _rows(case, torch.tensor(idx)), 1 / math.sqrt(D), True)
        assert torch.equal(part, full[idx]), idx


def _prefill_case(n, P=32, Hq=4, Hkv=2, D=64, seed=3):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(n, h, D, generator=g) for h in (Hq, Hkv, Hkv))
    npg = n // P
    store = KVFormat(P, Hkv, D).alloc(npg + 1)
    pk = k[:npg * P].view(npg, P, Hkv, D).transpose(1, 2)
    pv = v[:npg * P].view(npg, P, Hkv, D).transpose(1, 2)
    for name, t in quantize_pages_ref(pk, pv).items():
        getattr(store, name)[:npg].copy_(t)
    return q, k, v, store, torch.arange(npg + 1, dtype=torch.int32)


def _chunked(q, k, v, store, ids, cuts, P, **kw):
    out = torch.empty_like(q)
    for s, e in zip(cuts[:-1], cuts[1:]):
        base = (s // P) * P
        extend_attention(q[s:e], k[s:e], v[s:e], k[base:s], v[base:s], store, ids, s, 0.125, out=out[s:e], **kw)
    return out


def test_page_aligned_prefill_is_chunking_invariant_and_agrees_with_default():
    P, n = 32, 200
    q, k, v, store, ids = _prefill_case(n, P)
    one = _chunked(q, k, v, store, ids, [0, n], P, page_aligned=True)
    for cuts in ([0, 70, 200], [0, 64, 128, 199, 200], [0, 1, 33, 150, 200]):
        got = _chunked(q, k, v, store, ids, cuts, P, page_aligned=True)
        # same key layout for every row; CPU matmuls of other row counts may still round differently
        torch.testing.assert_close(got, one, atol=1e-6, rtol=0, msg=lambda m: f"{cuts}: {m}")
    default = _chunked(q, k, v, store, ids, [0, n], P)
    torch.testing.assert_close(default, one, atol=2e-5, rtol=0)


def test_sdpa_prefill_path_matches_the_fp32_path():
    """The CUDA default (scaled_dot_product_attention over the same keys, values and mask) against the fp32 einsum
    path, run here on the CPU: in fp32 only the summation order differs (1e-5); in bf16 the inputs are rounded to
    8 bits of mantissa (a few 1e-2 on outputs of size ~1)."""
    P, n = 32, 200
    q, k, v, store, ids = _prefill_case(n, P)
    for cuts in ([0, n], [0, 70, 200], [0, 1, 33, 150, 200]):
        ref = _chunked(q, k, v, store, ids, cuts, P)
        got = _chunked(q, k, v, store, ids, cuts, P, impl="sdpa", sdpa_dtype=torch.float32)
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=0, msg=lambda m: f"{cuts}: {m}")
        low = _chunked(q, k, v, store, ids, cuts, P, impl="sdpa", sdpa_dtype=torch.bfloat16)
        torch.testing.assert_close(low, ref, atol=5e-2, rtol=0, msg=lambda m: f"{cuts}: {m}")


def test_sdpa_prefill_chunks_by_mask_budget(monkeypatch):
    """Several query chunks per call (a small mask budget) give the same rows as one chunk."""
    import sgl_spec.kvcache.prefill as pr

    P, n = 32, 200
    q, k, v, store, ids = _prefill_case(n, P)
    one = _chunked(q, k, v, store, ids, [0, n], P, impl="sdpa", sdpa_dtype=torch.float32)
    monkeypatch.setattr(pr, "_MASK_BUDGET", 1)
    many = _chunked(q, k, v, store, ids, [0, n], P, impl="sdpa", sdpa_dtype=torch.float32)
    torch.testing.assert_close(many, one, atol=1e-5, rtol=0)
