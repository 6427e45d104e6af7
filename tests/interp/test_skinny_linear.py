"""skinny_linear: Triton (interpreter on CPU, native on CUDA) against the fp32 reference over odd shapes, dtypes,
bias, the weights-first prologue, every launch configuration, ``out=`` and bad arguments."""
import pytest
import torch

from sgl_spec.kernels import skinny_linear_ref as ref

# Tolerance: both sides accumulate exact products in fp32 and round once to the output dtype; only the summation
# order differs (|error| <= K * eps32 * sum|x w| ~ 1e-5 here), so outputs agree to one rounding of the output dtype:
# half an ulp each side -> 1 ulp at the output's magnitude (bf16: 2^-8 relative, fp16: 2^-11, fp32: ~1e-5).
_RTOL = {torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10, torch.float32: 1e-5}


def _case(M, N, K, dt, bias, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(dt)
    w = (torch.randn(N, K, generator=g) / K ** 0.5).to(dt)
    b = torch.randn(N, generator=g).to(dt) if bias else None
    return x, w, b


@pytest.mark.parametrize("M,N,K,dt", [(1, 48, 40, torch.float16), (3, 100, 200, torch.float32),
                                      (17, 64, 512, torch.bfloat16), (32, 33, 130, torch.bfloat16),
                                      (128, 16, 63, torch.float16)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("weights_first", [True, False])
def test_matches_reference(M, N, K, dt, bias, weights_first, device):
    from sgl_spec.kernels.skinny_linear import skinny_linear

    x, w, b = _case(M, N, K, dt, bias, M * N + K)
    want = ref.skinny_linear(x, w, b).float()
    out = torch.full((M, N), float("nan"), dtype=dt, device=device)  # poisoned: an unwritten element fails
    dev = (lambda t: None if t is None else t.to(device))
    got = skinny_linear(x.to(device), w.to(device), dev(b), out=out, weights_first=weights_first)
    assert got.data_ptr() == out.data_ptr()
    tol = _RTOL[dt] * want.abs().clamp_min(1.0)
    assert ((got.float().cpu() - want).abs() <= tol).all()


@pytest.mark.parametrize("bn,bk,nw", [(16, 32, 4), (32, 64, 4), (64, 16, 2)])
def test_launch_configs_and_3d_input(bn, bk, nw, device):
    from sgl_spec.kernels.skinny_linear import skinny_linear

    x, w, b = _case(6, 70, 96, torch.float16, True, bn + bk)
    x3 = x.view(2, 3, 96)
    got = skinny_linear(x3.to(device), w.to(device), b.to(device), block_n=bn, block_k=bk, num_warps=nw)
    assert got.shape == (2, 3, 70)
    want = ref.skinny_linear(x, w, b).float().view(2, 3, 70)
    assert ((got.float().cpu() - want).abs() <= _RTOL[torch.float16] * want.abs().clamp_min(1.0)).all()


def test_strided_rows(device):
    """x may be a row-strided view (a slice of a wider buffer), as long as its last dim is contiguous."""
    from sgl_spec.kernels.skinny_linear import skinny_linear

    x, w, _ = _case(5, 24, 40, torch.float32, False, 7)
    wide = torch.zeros(5, 64)
    wide[:, 8:48] = x
    got = skinny_linear(wide[:, 8:48].to(device), w.to(device))
    assert torch.allclose(got.cpu(), ref.skinny_linear(x, w), rtol=1e-5, atol=1e-5)


def test_bad_arguments(device):
    from sgl_spec.kernels.skinny_linear import MAX_M, skinny_linear

    w = torch.randn(8, 16, device=device)
    with pytest.raises(ValueError, match="does not match"):
        skinny_linear(torch.randn(2, 15, device=device), w)
    with pytest.raises(ValueError, match="one dtype"):
        skinny_linear(torch.randn(2, 16, device=device).half(), w)
    with pytest.raises(ValueError, match="at most"):
        skinny_linear(torch.randn(MAX_M + 1, 16, device=device), w)
    with pytest.raises(ValueError, match="contiguous last dim"):
        skinny_linear(torch.randn(16, 2, device=device).T, w)
    with pytest.raises(ValueError, match="bias"):
        skinny_linear(torch.randn(2, 16, device=device), w, torch.randn(7, device=device))
    with pytest.raises(ValueError, match="out must be"):
        skinny_linear(torch.randn(2, 16, device=device), w, out=torch.empty(2, 9, device=device))
