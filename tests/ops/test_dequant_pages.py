"""dequant_pages: the Triton engine against the pure-torch twin, bit for bit (same fp32 operations, no contraction),
over odd page counts, head dims whose half is not a power of two, and NaN-poisoned outputs. bf16 outputs are
compared on the GPU only: the interpreter does not round fp32 -> bf16 to nearest as the GPU and torch do."""
import pytest
import torch

from sgl_spec.kernels.dequant_pages import ref as dr
from sgl_spec.kvcache.format import KVFormat
from sgl_spec.kernels.quantize_pages.ref import quantize_pages_ref

pytestmark = pytest.mark.interp


def _store(n_pages, H, P, D, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    store = KVFormat(P, H, D).alloc(n_pages, device=device)
    k = torch.randn(n_pages, H, P, D, generator=g) * 3 + 1
    v = torch.randn(n_pages, H, P, D, generator=g)
    for name, t in quantize_pages_ref(k, v).items():
        getattr(store, name).copy_(t.to(device))
    return store


@pytest.mark.parametrize("H,P,D,pages,dtype", [(2, 32, 32, [3, 0, 5], torch.float16),
                                               (1, 32, 48, [1], torch.float16),
                                               (3, 64, 64, [6, 2, 2, 7, 0], torch.float16)])
def test_triton_matches_twin_bit_for_bit(H, P, D, pages, dtype):
    from sgl_spec.kernels.dequant_pages import triton as dt

    store = _store(8, H, P, D, "cpu", seed=H + D)
    idx = torch.tensor(pages, dtype=torch.int64)
    want_k, want_v = dr.dequant_pages(store, idx, dtype=dtype)
    ok = torch.full((len(pages), P, H, D), float("nan"), dtype=dtype)
    ov = torch.full_like(ok, float("nan"))
    got_k, got_v = dt.dequant_pages(store, idx, out_k=ok, out_v=ov, dtype=dtype)
    assert got_k is ok and got_v is ov and not torch.isnan(ok).any() and not torch.isnan(ov).any()
    assert torch.equal(got_k, want_k) and torch.equal(got_v, want_v)


def test_twin_is_the_int8_view():
    """The twin against the format's own decode: K[t, c] = zero[c] + scale[c] / 16 * (code - 7.5)."""
    store = _store(2, 1, 32, 32, "cpu")
    k, v = dr.dequant_pages(store, torch.tensor([1]), dtype=torch.float16)
    code = (store.k_upper[1, 0].long() & 0xF) * 16 + (store.k_lower[1, 0].long() & 0xF)  # channel 0 of every token
    want = store.k_zero[1, 0, 0].float() + store.k_scale[1, 0, 0].float() / 16 * (code[:, 0].float() - 7.5)
    torch.testing.assert_close(k[0, :, 0, 0].float(), want, atol=2e-3 * want.abs().max().item(), rtol=0)


def test_launcher_checks():
    store = _store(2, 1, 32, 32, "cpu")
    with pytest.raises(ValueError, match="dtype"):
        dr.dequant_pages(store, torch.tensor([0]), dtype=torch.float32)
    with pytest.raises(ValueError, match="out_k"):
        dr.dequant_pages(store, torch.tensor([0]), out_k=torch.empty(1, 32, 1, 31, dtype=torch.float16))
    with pytest.raises(ValueError, match="pages"):
        dr.dequant_pages(store, torch.tensor([[0]]))


@pytest.mark.gpu
@pytest.mark.parametrize("H,P,D,dtype", [(8, 64, 128, torch.float16), (2, 128, 64, torch.bfloat16)])
def test_triton_matches_twin_on_gpu(H, P, D, dtype):
    from sgl_spec.kernels.dequant_pages import triton as dt

    store = _store(40, H, P, D, "cuda", seed=D)
    idx = torch.tensor([39, 0, 17, 17, 5], dtype=torch.int64, device="cuda")
    want_k, want_v = dr.dequant_pages(store, idx, dtype=dtype)
    got_k, got_v = dt.dequant_pages(store, idx, dtype=dtype)
    assert torch.equal(got_k, want_k) and torch.equal(got_v, want_v)
