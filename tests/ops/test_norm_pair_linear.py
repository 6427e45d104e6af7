"""norm_pair_linear (the draft pass's add-RMSNorm + linear + RoPE / SiLU-and-mul kernel): Triton (interpreter on CPU,
native on CUDA) against its fp32 reference over odd shapes, dtypes, with and without a residual, several row blocks,
poisoned outputs, and bad arguments."""
import pytest
import torch

from sgl_spec.kernels.norm_pair_linear import ref

# Kernel and reference compute the same fp32 quantities (only summation orders differ) and round the output once, so
# they differ by at most one output ulp where a value sits near a rounding boundary: bf16 2^-8, fp16 2^-11 relative (x2
# for margin); fp32 by summation order over K <= 512 terms of magnitude <= 1. Triton's interpreter converts fp32 to
# bf16 by truncation (one more ulp, always towards zero), hence 2^-6 there.
_RTOL = {torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10, torch.float32: 1e-5}
_INTERP_BF16_RTOL = 2 ** -6


def _close(got, want, dt, device):
    tol = _INTERP_BF16_RTOL if dt == torch.bfloat16 and str(device) == "cpu" else _RTOL[dt]
    want = want.float()
    return bool(((got.float().cpu() - want).abs() <= tol * want.abs().clamp_min(1.0)).all())


def _inputs(M, K, N, dt, res, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(dt)
    r = torch.randn(M, K, generator=g).to(dt) if res else None
    w = (torch.randn(N, K, generator=g) / K ** 0.5).to(dt)
    return g, x, r, w


def _check_residual(r_new, x_d, x, r, r_out, dt, device):
    if r is None:
        assert r_new is x_d  # a first layer's residual is its input
        return
    assert r_new.data_ptr() == r_out.data_ptr()
    want = (x.float() + r.float()).to(dt)
    if dt == torch.bfloat16 and str(device) == "cpu":  # truncated instead of rounded: within one bf16 ulp
        assert ((r_new.float().cpu() - want.float()).abs() <= 2 ** -7 * want.float().abs()).all()
    else:
        assert torch.equal(r_new.cpu(), want)  # x + residual rounded once: exact


@pytest.mark.parametrize("M,K,heads,D,rot,dt", [(1, 40, 3, 16, 2, torch.float32), (3, 130, 4, 32, 3, torch.float16),
                                               (17, 64, 8, 128, 6, torch.bfloat16), (40, 96, 2, 64, 2, torch.bfloat16)])
@pytest.mark.parametrize("res", [False, True])
def test_rope(M, K, heads, D, rot, dt, res, device):
    from sgl_spec.kernels.norm_pair_linear.triton import NormPairLaunch, norm_pair_linear

    g, x, r, w = _inputs(M, K, heads * D, dt, res, M * K + D)
    positions = torch.randint(0, 500, (M,), generator=g, dtype=torch.int32)
    ang = torch.arange(500)[:, None] * torch.rand(D // 2, generator=g)[None, :]
    cos_sin = torch.cat([ang.cos(), ang.sin()], 1).to(dt if dt != torch.float16 else torch.float32)
    want, _ = ref.norm_pair_linear(x, r, w, 1e-6, "rope", positions=positions, cos_sin=cos_sin, head_dim=D,
                                   rot_heads=rot)
    d = (lambda t: None if t is None else t.to(device))
    out = torch.full((M, heads * D), float("nan"), dtype=dt, device=device)
    r_out = torch.full((M, K), float("nan"), dtype=dt, device=device) if res else None
    x_d = x.to(device)
    # block_m 16 at M = 17 / 40: several row blocks
    got, r_new = norm_pair_linear(x_d, d(r), d(w), 1e-6, "rope", out=out, residual_out=r_out, positions=d(positions),
                                  cos_sin=d(cos_sin), head_dim=D, rot_heads=rot,
                                  launch=NormPairLaunch(block_m=16 if M > 16 else None))
    assert got.data_ptr() == out.data_ptr() and not torch.isnan(got).any()
    assert _close(got, want, dt, device)
    _check_residual(r_new, x_d, x, r, r_out, dt, device)


@pytest.mark.parametrize("M,K,I,dt", [(1, 40, 40, torch.float32), (3, 130, 100, torch.float16),
                                      (17, 64, 384, torch.bfloat16), (33, 512, 48, torch.bfloat16)])
@pytest.mark.parametrize("res", [False, True])
def test_silu_mul(M, K, I, dt, res, device):
    from sgl_spec.kernels.norm_pair_linear.triton import NormPairLaunch, norm_pair_linear

    _, x, r, w = _inputs(M, K, 2 * I, dt, res, M * K + I)
    want, _ = ref.norm_pair_linear(x, r, w, 1e-5, "silu_mul")
    d = (lambda t: None if t is None else t.to(device))
    out = torch.full((M, I), float("nan"), dtype=dt, device=device)
    x_d = x.to(device)
    got, r_new = norm_pair_linear(x_d, d(r), d(w), 1e-5, "silu_mul", out=out)  # residual_out allocated
    assert got.data_ptr() == out.data_ptr() and not torch.isnan(got).any()
    assert _close(got, want, dt, device)
    if res:
        assert r_new.data_ptr() not in (x_d.data_ptr(), out.data_ptr())
        assert torch.allclose(r_new.float().cpu(), x.float() + r.float(), rtol=2 ** -6, atol=0)
    else:
        assert r_new is x_d


def test_reference_is_sglang_layer_math():
    """The folded weight is the only change against norm -> linear -> epilogue in fp32."""
    g = torch.Generator().manual_seed(0)
    x, r = torch.randn(5, 64, generator=g, dtype=torch.float32), torch.randn(5, 64, generator=g, dtype=torch.float32)
    nw, w = 1 + 0.1 * torch.randn(64, generator=g), torch.randn(96, 64, generator=g)
    h = x + r
    y = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * nw) @ w.T
    got, res = ref.norm_pair_linear(x, r, w * nw, 1e-6, "silu_mul")
    assert torch.allclose(got, torch.nn.functional.silu(y[:, :48]) * y[:, 48:], rtol=1e-4, atol=1e-5)
    assert torch.allclose(res, h)


def test_bad_arguments(device):
    from sgl_spec.kernels.norm_pair_linear.triton import NormPairLaunch, norm_pair_linear

    x, w = torch.randn(4, 16, device=device), torch.randn(64, 16, device=device)
    r = torch.randn(4, 16, device=device)
    pos, cs = torch.zeros(4, dtype=torch.int32, device=device), torch.randn(10, 32, device=device)
    with pytest.raises(ValueError, match="epilogue"):
        norm_pair_linear(x, r, w, 1e-6, "gelu")
    with pytest.raises(ValueError, match="residual must be"):
        norm_pair_linear(x, r[:, :8], w, 1e-6, "silu_mul")
    with pytest.raises(ValueError, match="alias"):
        norm_pair_linear(x, r, w, 1e-6, "silu_mul", residual_out=r)
    with pytest.raises(ValueError, match="needs a residual"):
        norm_pair_linear(x, None, w, 1e-6, "silu_mul", residual_out=torch.empty_like(x))
    with pytest.raises(ValueError, match="contiguous"):
        norm_pair_linear(torch.randn(16, 4, device=device).T, r, w, 1e-6, "silu_mul")
    with pytest.raises(ValueError, match="head_dim"):
        norm_pair_linear(x, r, w, 1e-6, "rope", positions=pos, cos_sin=cs, head_dim=24)
    with pytest.raises(ValueError, match="positions"):
        norm_pair_linear(x, r, w, 1e-6, "rope", positions=pos[:3], cos_sin=cs, head_dim=32)
    with pytest.raises(ValueError, match="cos_sin"):
        norm_pair_linear(x, r, w, 1e-6, "rope", positions=pos, cos_sin=cs[:, :16], head_dim=32)
    with pytest.raises(ValueError, match="rot_heads"):
        norm_pair_linear(x, r, w, 1e-6, "rope", positions=pos, cos_sin=cs, head_dim=32, rot_heads=3)
    with pytest.raises(ValueError, match="out must be"):
        norm_pair_linear(x, r, w, 1e-6, "silu_mul", out=torch.empty(4, 64, device=device))


# ---- on the GPU: real shapes against the reference (tests/support/gpu_cases.py) -------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 8, 17, 32, 33, 64])
@pytest.mark.parametrize("res", [False, True])
def test_gpu_norm_pair_linear_pycode_shapes(M, res):
    """The fused draft-layer launches at pycode-30m's shapes (hidden 512, 4 + 2 + 2 heads of 128, intermediate 1536),
    bf16, against the fp32 reference: both round the output once from the same fp32 quantities (one bf16 ulp, 2^-8,
    where they fall on either side of a rounding boundary; 2^-7 relative with margin)."""
    from gpu_cases import _kernels
    tri, ref = _kernels("norm_pair_linear")
    gen = torch.Generator().manual_seed(M)
    x = torch.randn(M, 512, generator=gen).to(torch.bfloat16).cuda()
    r = torch.randn(M, 512, generator=gen).to(torch.bfloat16).cuda() if res else None
    pos = torch.randint(0, 16384, (M,), generator=gen).cuda()
    ang = torch.arange(16384)[:, None] * (1e5 ** (-torch.arange(64) / 64))[None, :]
    cs = torch.cat([ang.cos(), ang.sin()], 1).cuda()
    for epi, n, kw in (("rope", 1024, dict(positions=pos, cos_sin=cs, head_dim=128, rot_heads=6)),
                       ("silu_mul", 3072, {})):
        w = (torch.randn(n, 512, generator=gen) / 23).to(torch.bfloat16).cuda()
        want, want_r = ref(x, r, w, 1e-6, epi, **kw)
        out = torch.full(tuple(want.shape), float("nan"), dtype=torch.bfloat16, device="cuda")
        got, got_r = tri(x, r, w, 1e-6, epi, out=out, **kw)
        assert not torch.isnan(got).any()
        assert ((got.float() - want.float()).abs() <= 2 ** -7 * want.float().abs().clamp_min(1.0)).all(), epi
        assert torch.equal(got_r, want_r)
