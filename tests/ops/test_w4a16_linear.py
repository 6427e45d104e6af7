"""``w4a16_linear`` (sgl_spec/kernels/w4a16_linear/): the 4-bit format's round trip, the twin against a plain matmul
with the dequantized weight, the launcher's checks, and on the GPU SGLang's Marlin engine against the twin.

Tolerances: the twin computes in fp32 from the same dequantized weight as the plain matmul, so only the output
rounding to the activations' dtype differs (bf16: 2^-8 relative). Marlin multiplies bf16 activations by bf16
dequantized weights with fp32 accumulation in another order: 2e-2 relative on outputs of size ~1."""
import pytest
import torch

from sgl_spec.kernels import w4a16_linear as w4
from sgl_spec.kernels.w4a16_linear import ref


@pytest.mark.parametrize("N,K", [(64, 128), (200, 384), (7, 256)])
def test_round_trip_error_is_at_most_half_a_scale(N, K):
    g = torch.Generator().manual_seed(N + K)
    w = torch.randn(N, K, generator=g) * 0.05
    w[0, :128] = 0.0  # an all-zero group: scale 0, codes 8, exact
    q, s = ref.quantize(w)
    assert q.shape == (K // 8, N) and q.dtype == torch.int32 and s.shape == (K // 128, N)
    codes = ref.unpack(q)
    assert int(codes.min()) >= 0 and int(codes.max()) <= 15
    err = (ref.dequantize(q, s, torch.float32) - w).abs()
    bound = s.float().repeat_interleave(128, dim=0).t() / 2
    assert bool((err <= bound * (1 + 1e-5)).all())  # 1e-5: fp32 rounding of max|w| / 7.5 and of 7s
    assert float(err[0, :128].max()) == 0.0


@pytest.mark.parametrize("M", [1, 3, 8, 33])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_twin_equals_matmul_with_the_dequantized_weight(M, dtype):
    g = torch.Generator().manual_seed(M)
    N, K = 192, 256
    w = (torch.randn(N, K, generator=g) * 0.05).to(dtype)
    x = torch.randn(M, K, generator=g).to(dtype)
    bias = torch.randn(N, generator=g).to(dtype)
    wt = w4.prepare(w, "torch")
    out = torch.full((M, N), float("nan"), dtype=dtype)
    got = w4.w4a16_linear(x, wt, bias, out=out)
    assert got is out and not torch.isnan(got).any()
    want = (x.float() @ w4.dequantize(wt.qweight, wt.scales, torch.float32).t() + bias.float()).to(dtype)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    # and close to the unquantized layer: the 4-bit error, ~2% of an output's size here
    rel = (got.float() - (x.float() @ w.float().t() + bias.float())).norm() / got.float().norm()
    assert float(rel) < 0.1


def test_launcher_checks():
    wt = w4.prepare(torch.randn(64, 128), "torch")
    with pytest.raises(ValueError, match="input channels"):
        w4.w4a16_linear(torch.randn(2, 64), wt)
    with pytest.raises(ValueError, match="out must be"):
        w4.w4a16_linear(torch.randn(2, 128), wt, out=torch.empty(2, 63))
    with pytest.raises(ValueError, match="multiple of the group size"):
        w4.prepare(torch.randn(64, 96), "torch")
    assert "Marlin needs" in w4.supported(100, 128, "marlin") and w4.supported(100, 128, "torch") == ""


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 8, 33])
@pytest.mark.parametrize("N,K", [(4096, 4096), (6144, 4096), (1024, 14336)])
def test_marlin_engine_matches_twin(M, N, K):
    g = torch.Generator(device="cuda").manual_seed(M)
    w = (torch.randn(N, K, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    x = torch.randn(M, K, generator=g, device="cuda").to(torch.bfloat16)
    marlin, twin = w4.prepare(w, "marlin"), w4.prepare(w, "torch")
    assert marlin.marlin is not None and marlin.nbytes < w.nbytes / 3
    got = w4.w4a16_linear(x, marlin)
    want = w4.w4a16_linear(x.float(), twin)
    assert got.dtype == torch.bfloat16 and not torch.isnan(got).any()
    torch.testing.assert_close(got.float(), want, atol=2e-2 * float(want.abs().max()), rtol=2e-2)


# ---- Triton engine (triton.py): against the twin under the interpreter (small shapes), compiled on the GPU ------
@pytest.mark.interp
@pytest.mark.parametrize("M,N,K,bias,bn,bk", [(1, 64, 128, False, 32, 512), (3, 100, 256, True, 16, 512),
                                              (17, 64, 384, False, 64, 256), (2, 48, 512, True, 32, 256)])
def test_triton_engine_matches_twin(M, N, K, bias, bn, bk):
    """fp16 operands (the kernel dequantizes to x's dtype), fp32 accumulation: 1e-2 relative to the output scale.
    Odd N pads the last column block; K = 384 takes one group an iteration, 512 at bk = 256 two iterations."""
    from sgl_spec.kernels.w4a16_linear import triton as wt

    g = torch.Generator().manual_seed(M * N)
    w = torch.randn(N, K, generator=g) * 0.05
    q, s = ref.quantize(w.half())
    tw = wt.prepare(q, s, block_n=bn)
    assert tw.tiles.shape == (-(-N // bn), K // 8, bn)
    x = torch.randn(M, K, generator=g).half()
    b = torch.randn(N, generator=g).half() if bias else None
    out = torch.full((M, N), float("nan"), dtype=torch.float16)
    got = wt.w4a16_linear(x, tw, b, out=out, block_k_max=bk)
    assert got is out and not torch.isnan(got).any()
    want = ref.w4a16_linear(x.float(), q, s, None if b is None else b.float())
    torch.testing.assert_close(got.float(), want, atol=1e-2 * float(want.abs().max()), rtol=1e-2)


def test_triton_layout_and_checks():
    from sgl_spec.kernels.w4a16_linear import triton as wt

    q, s = ref.quantize(torch.randn(40, 256))
    tw = wt.prepare(q, s, block_n=16)
    assert torch.equal(tw.tiles[1, :, 3], q[:, 19]) and torch.equal(tw.tiles[2, :, 8:], torch.zeros(32, 8, dtype=torch.int32))
    assert wt.block_k(4096) == 512 and wt.block_k(384) == 128 and wt.block_k(14336) == 512 and wt.block_k(768) == 256
    with pytest.raises(ValueError, match="block_n"):
        wt.prepare(q, s, block_n=24)
    with pytest.raises(ValueError, match="fp16 / bf16"):
        wt.w4a16_linear(torch.randn(1, 256), tw)
    with pytest.raises(ValueError, match="bias"):
        wt.w4a16_linear(torch.randn(1, 256).half(), tw, bias=torch.zeros(41).half())


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 8, 33, 64])
@pytest.mark.parametrize("N,K", [(4096, 4096), (6144, 4096), (1024, 14336), (100, 256)])
@pytest.mark.parametrize("bn", [16, 32, 64])
def test_triton_engine_matches_twin_on_gpu(M, N, K, bn):
    from sgl_spec.kernels.w4a16_linear import triton as wt

    g = torch.Generator(device="cuda").manual_seed(M)
    w = (torch.randn(N, K, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    x = torch.randn(M, K, generator=g, device="cuda").to(torch.bfloat16)
    q, s = ref.quantize(w)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = wt.w4a16_linear(x, wt.prepare(q, s, block_n=bn), out=out)
    want = ref.w4a16_linear(x.float(), q, s)
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got.float(), want, atol=2e-2 * float(want.abs().max()), rtol=2e-2)
