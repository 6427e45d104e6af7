"""ring_write: the reference against an index_put oracle (what the backend did before), and the Triton kernel
against the reference, bit-exact (a copy with one dtype conversion). NaN-poisoned rings show that every row the
contract writes is written and nothing else is touched. Under TRITON_INTERPRET=1 on CPU, natively on GPU."""
import pytest
import torch

from sgl_spec.kernels.ring_write.triton import ring_write
from sgl_spec.kernels.ring_write.ref import ring_write as ring_write_ref

pytestmark = pytest.mark.interp
R = 2


def _case(S, P, H, D, T, dtype, src_dtype, seed, strided):
    gen = torch.Generator().manual_seed(seed)
    hot_k = torch.full((S, R, P, H, D), float("nan"), dtype=dtype)
    hot_v = torch.full((S, R, P, H, D), float("nan"), dtype=dtype)
    # distinct rows in slots >= 1 (live requests), plus repeated writes to trash slot 0 only
    live = torch.randperm((S - 1) * R * P, generator=gen)[:T] + R * P
    rows = live.clone()
    rows[::3] = torch.randint(0, R * P, (rows[::3].numel(),), generator=gen)  # trash slot 0, possibly repeated
    if strided:  # K/V as SGLang hands them over: slices of the fused qkv projection
        qkv = torch.randn(T, 3 * H, D, generator=gen).to(src_dtype)
        k, v = qkv[:, H:2 * H], qkv[:, 2 * H:]
    else:
        k, v = (torch.randn(T, H, D, generator=gen).to(src_dtype) for _ in range(2))
    return hot_k, hot_v, rows, k, v


def _oracle(hot_k, hot_v, rows, k, v, P):
    slot, rest = rows // (R * P), rows % (R * P)
    ring, off = rest // P, rest % P
    hot_k[slot, ring, off] = k.to(hot_k.dtype)
    hot_v[slot, ring, off] = v.to(hot_v.dtype)


@pytest.mark.parametrize("S,P,H,D,T", [(4, 32, 2, 128, 1), (9, 64, 8, 128, 17), (6, 64, 3, 80, 63)])
@pytest.mark.parametrize("dtype,src", [(torch.bfloat16, torch.bfloat16), (torch.float32, torch.float32),
                                       (torch.float16, torch.float32)])
@pytest.mark.parametrize("strided", [False, True])
def test_kernel_equals_reference_equals_index_put(S, P, H, D, T, dtype, src, strided, device):
    hot_k, hot_v, rows, k, v = _case(S, P, H, D, T, dtype, src, seed=S * 100 + T, strided=strided)
    want_k, want_v = hot_k.clone(), hot_v.clone()
    _oracle(want_k, want_v, rows, k, v, P)
    ref_k, ref_v = hot_k.clone(), hot_v.clone()
    ring_write_ref(ref_k, ref_v, rows, k, v)
    got_k, got_v = hot_k.to(device), hot_v.to(device)
    ring_write(got_k, got_v, rows.to(device), k.to(device), v.to(device))
    got_k, got_v = got_k.cpu(), got_v.cpu()
    live = rows >= R * P  # slot 0 rows may be written several times: which write wins there is not specified
    for want, ref, got in ((want_k, ref_k, got_k), (want_v, ref_v, got_v)):
        w, r, g = (x.view(-1, H, D) for x in (want, ref, got))
        assert torch.equal(r[rows[live]], w[rows[live]]) and torch.equal(g[rows[live]], w[rows[live]])
        untouched = torch.ones(w.shape[0], dtype=torch.bool)
        untouched[rows] = False
        assert g[untouched].isnan().all() and r[untouched].isnan().all()  # nothing else written
        assert not g[rows].isnan().any()


def test_shape_checks():
    hot = torch.zeros(2, R, 4, 2, 8)
    k = torch.zeros(3, 2, 8)
    with pytest.raises(AssertionError):
        ring_write_ref(hot, hot.clone(), torch.zeros(3, dtype=torch.int32), k, k)
    with pytest.raises(AssertionError):
        ring_write_ref(hot, hot.clone(), torch.zeros(2, dtype=torch.int64), k, k)
