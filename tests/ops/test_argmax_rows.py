"""argmax_rows: Triton (interpreter on CPU, native on CUDA) against torch.argmax / the reference: exact indices,
first index among ties (also across chunks of the vocabulary), rows of -inf, NaN, strided outputs, bad arguments."""
import pytest
import torch

from sgl_spec.kernels.argmax_rows.ref import argmax_rows as argmax_rows_ref


@pytest.mark.parametrize("B,V,dt", [(1, 1, torch.float32), (3, 63, torch.bfloat16), (17, 8192, torch.float32),
                                    (2, 20001, torch.float16)])
def test_matches_torch(B, V, dt, device):
    from sgl_spec.kernels.argmax_rows.triton import argmax_rows

    g = torch.Generator().manual_seed(B * V)
    x = (torch.randn(B, V, generator=g) * 5).to(dt)
    want = x.float().argmax(dim=-1)
    got = argmax_rows(x.to(device))
    assert got.dtype == torch.int64
    assert torch.equal(got.cpu(), want)
    assert torch.equal(argmax_rows_ref(x), want)


def test_ties_masks_nan_and_strided_out(device):
    from sgl_spec.kernels.argmax_rows import triton as mod

    V = 2 * mod.MAX_BLOCK + 7  # three chunks
    x = torch.randn(6, V)
    x[0, [5, 9000, V - 1]] = 50.0  # ties across chunks: the first wins
    x[1] = float("-inf")  # a fully masked row: 0, as torch
    x[2, :] = float("-inf")
    x[2, V - 1] = 1.0  # only the last element is allowed
    x[3, 100] = float("nan")  # NaN ranks as +inf
    x[3, 200] = float("inf")
    x[4, :] = 7.0  # all equal: 0
    x[5, mod.MAX_BLOCK] = 60.0  # the max in the second chunk, lane 0
    drafts = torch.full((6, 4), -1, dtype=torch.int64, device=device)
    out = mod.argmax_rows(x.to(device), out=drafts[:, 2])
    assert out.data_ptr() == drafts[:, 2].data_ptr()
    assert drafts[:, 2].tolist() == [5, 0, V - 1, 100, 0, mod.MAX_BLOCK]
    assert (drafts[:, [0, 1, 3]] == -1).all()  # nothing else written
    assert argmax_rows_ref(x).tolist() == [5, 0, V - 1, 100, 0, mod.MAX_BLOCK]


def test_bad_arguments(device):
    from sgl_spec.kernels.argmax_rows.triton import argmax_rows

    x = torch.randn(3, 10, device=device)
    with pytest.raises(ValueError, match="out must be int64"):
        argmax_rows(x, out=torch.empty(3, dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match=r"x must be \[B, V\]"):
        argmax_rows(x[0])
    with pytest.raises(ValueError, match="contiguous rows"):
        argmax_rows(x.t())
