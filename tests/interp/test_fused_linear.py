"""add_rmsnorm_linear and silu_mul_linear (the draft pass's fused norm / activation + GEMM kernels): Triton
(interpreter on CPU, native on CUDA) against their fp32 references, over odd shapes, dtypes, with and without a
residual / bias, both prologues, poisoned outputs, and bad arguments."""
import pytest
import torch

from sgl_spec.kernels import act_linear_ref, norm_linear_ref

# Both sides round the same fp32 quantities to the model dtype (the normalized / activated input, then the output);
# only fp32 summation orders differ, so an intermediate may land on the other side of a rounding boundary: allow two
# ulps of the output's magnitude (bf16 2^-7, fp16 2^-10 relative) plus what one flipped intermediate ulp moves a dot
# of K terms of magnitude ~1/sqrt(K) (covered by the clamp at 1).
_RTOL = {torch.bfloat16: 2 ** -6, torch.float16: 2 ** -9, torch.float32: 1e-5}
# Triton's interpreter converts fp32 to bf16 by truncation, not round-to-nearest (checked: 1 + 2^-8 + 2^-12 -> 1.0),
# so on the CPU every rounded bf16 intermediate is biased by up to one ulp towards zero, all in one direction; measured
# worst case 0.027 relative on these shapes. The GPU keeps the bound above.
_INTERP_BF16_RTOL = 2 ** -4


def _interp_bf16(dt, device):
    return dt == torch.bfloat16 and str(device) == "cpu"


def _close(got, want, dt, device):
    want = want.float()
    tol = _INTERP_BF16_RTOL if _interp_bf16(dt, device) else _RTOL[dt]
    return bool(((got.float().cpu() - want).abs() <= tol * want.abs().clamp_min(1.0)).all())


@pytest.mark.parametrize("M,N,K,dt", [(1, 48, 40, torch.float16), (3, 100, 200, torch.float32),
                                      (17, 64, 512, torch.bfloat16), (32, 33, 130, torch.bfloat16)])
@pytest.mark.parametrize("res", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("weights_first", [True, False])
def test_add_rmsnorm_linear(M, N, K, dt, res, bias, weights_first, device):
    from sgl_spec.kernels.norm_linear import add_rmsnorm_linear

    g = torch.Generator().manual_seed(M * N + K)
    x = torch.randn(M, K, generator=g).to(dt)
    r = torch.randn(M, K, generator=g).to(dt) if res else None
    nw = (1 + 0.1 * torch.randn(K, generator=g)).to(dt)
    w = (torch.randn(N, K, generator=g) / K ** 0.5).to(dt)
    b = torch.randn(N, generator=g).to(dt) if bias else None
    y_ref, r_ref = norm_linear_ref.add_rmsnorm_linear(x, r, nw, 1e-6, w, b)
    d = (lambda t: None if t is None else t.to(device))
    out = torch.full((M, N), float("nan"), dtype=dt, device=device)
    r_out = torch.full((M, K), float("nan"), dtype=dt, device=device) if res else None
    x_d = x.to(device)
    y, r_new = add_rmsnorm_linear(x_d, d(r), d(nw), 1e-6, d(w), d(b), out=out, residual_out=r_out,
                                  weights_first=weights_first)
    assert y.data_ptr() == out.data_ptr()
    assert _close(y, y_ref, dt, device)
    if res:
        assert r_new.data_ptr() == r_out.data_ptr()
        if _interp_bf16(dt, device):  # truncated instead of rounded: within one bf16 ulp
            assert ((r_new.float() - r_ref.float()).abs() <= 2 ** -7 * r_ref.float().abs()).all()
        else:
            assert torch.equal(r_new.cpu(), r_ref)  # x + residual rounded once: exact
    else:
        assert r_new is x_d  # a first layer's residual is its input


@pytest.mark.parametrize("M,N,I,dt", [(1, 48, 40, torch.float16), (3, 100, 200, torch.float32),
                                      (17, 64, 384, torch.bfloat16), (32, 33, 130, torch.bfloat16)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("weights_first", [True, False])
def test_silu_mul_linear(M, N, I, dt, bias, weights_first, device):
    from sgl_spec.kernels.act_linear import silu_mul_linear

    g = torch.Generator().manual_seed(M * N + I)
    gu = (2 * torch.randn(M, 2 * I, generator=g)).to(dt)
    w = (torch.randn(N, I, generator=g) / I ** 0.5).to(dt)
    b = torch.randn(N, generator=g).to(dt) if bias else None
    want = act_linear_ref.silu_mul_linear(gu, w, b)
    out = torch.full((M, N), float("nan"), dtype=dt, device=device)
    got = silu_mul_linear(gu.to(device), w.to(device), None if b is None else b.to(device), out=out,
                          weights_first=weights_first)
    assert got.data_ptr() == out.data_ptr()
    assert _close(got, want, dt, device)


def test_bad_arguments(device):
    from sgl_spec.kernels.act_linear import silu_mul_linear
    from sgl_spec.kernels.norm_linear import add_rmsnorm_linear

    x, w, nw = torch.randn(4, 16, device=device), torch.randn(8, 16, device=device), torch.ones(16, device=device)
    r = torch.randn(4, 16, device=device)
    with pytest.raises(ValueError, match="norm_weight"):
        add_rmsnorm_linear(x, r, torch.ones(15, device=device), 1e-6, w)
    with pytest.raises(ValueError, match="residual must be"):
        add_rmsnorm_linear(x, r[:, :8], nw, 1e-6, w)
    with pytest.raises(ValueError, match="alias"):
        add_rmsnorm_linear(x, r, nw, 1e-6, w, residual_out=r)
    with pytest.raises(ValueError, match="needs a residual"):
        add_rmsnorm_linear(x, None, nw, 1e-6, w, residual_out=torch.empty_like(x))
    with pytest.raises(ValueError, match="contiguous"):
        add_rmsnorm_linear(torch.randn(16, 4, device=device).T, r, nw, 1e-6, w)
    with pytest.raises(ValueError, match="\\[M, 2I\\]"):
        silu_mul_linear(torch.randn(4, 15, device=device), w)
    with pytest.raises(ValueError, match="does not match"):
        silu_mul_linear(torch.randn(4, 30, device=device), w)
