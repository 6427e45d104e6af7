"""The nibble-plane page format (sgl_spec/kvcache/format.py) and its reference quantizer (sgl_spec/kernels/quantize_pages/ref.py):
bit-exact packing, directed fp16 rounding, error bounds of both views, extreme inputs and the CPU store path
(the coexistence of ``sgl_spec.kernels`` with PyPI's ``kernels``: test_packaging.py)."""

import pytest
import torch

from sgl_spec.kernels.quantize_pages.ref import (
    dequant_keys_ref, dequant_values_ref, quantize_groups_ref, quantize_pages, quantize_pages_ref)
from sgl_spec.kvcache.format import KVFormat, fp16_round_down, fp16_round_up, pack_nibbles, unpack_nibbles

DTYPES = [torch.bfloat16, torch.float16, torch.float32]


# ---- packing ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("D", [16, 64, 128])
def test_pack_layout_and_roundtrip(D):
    gen = torch.Generator().manual_seed(D)
    codes = torch.randint(0, 16, (3, 5, D), generator=gen, dtype=torch.uint8)
    packed = pack_nibbles(codes)
    assert packed.shape == (3, 5, D // 2) and packed.dtype == torch.uint8
    h = D // 2
    assert torch.equal(packed, codes[..., :h] + 16 * codes[..., h:])  # channel j low nibble, j + D/2 high nibble
    assert torch.equal(unpack_nibbles(packed), codes)


def test_every_byte_unpacks_and_repacks():
    every = torch.arange(256, dtype=torch.uint8).view(1, 256)
    assert torch.equal(pack_nibbles(unpack_nibbles(every)), every)
    lo, hi = unpack_nibbles(every).split(256, dim=-1)
    assert torch.equal(lo.flatten().long(), torch.arange(256) % 16)
    assert torch.equal(hi.flatten().long(), torch.arange(256) // 16)


# ---- directed fp16 rounding ------------------------------------------------------------------------------------------
def test_fp16_directed_rounding():
    gen = torch.Generator().manual_seed(0)
    mags = torch.exp2(torch.empty(4000).uniform_(-30, 17, generator=gen))  # fp16 subnormals … beyond 65504
    x = torch.cat([mags, -mags, torch.tensor([0.0, -0.0, 65504.0, -65504.0, 1e30, -1e30, 2.0 ** -25, -(2.0 ** -25)])])
    dn, up = fp16_round_down(x), fp16_round_up(x)
    assert dn.dtype == up.dtype == torch.float16
    assert bool(torch.isfinite(dn).all()) and bool(torch.isfinite(up).all())  # saturates at the fp16 range
    xc = x.clamp(-65504, 65504).double()
    assert bool((dn.double() <= xc).all()) and bool((up.double() >= xc).all())
    # tightest: one fp16 step further would cross x
    inf = torch.full_like(dn, float("inf"))
    assert bool((torch.nextafter(dn, inf).double() > xc).all())
    assert bool((torch.nextafter(up, -inf).double() < xc).all())
    exact = torch.tensor([1.0, -0.5, 0.0, 2.0 ** -24])
    assert torch.equal(fp16_round_down(exact).float(), exact) and torch.equal(fp16_round_up(exact).float(), exact)


# ---- quantizer -------------------------------------------------------------------------------------------------------
def _pages(n, H, P, D, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    spread, offset = 0.1 + 4 * torch.rand(D, generator=gen), torch.randn(D, generator=gen)
    x = torch.randn(n, H, P, D, generator=gen) * spread + offset
    return x.to(dtype)


def _assert_bounds(x, up, lo, s, z, dequant, dim):
    """Draft |err| <= s/2 and INT8 |err| <= s/32 against the stored fp16 s. Slack: q = (x - z) * (1/s) and the
    dequant are fp32, which costs a few ulp of the magnitudes involved (2^-20 relative) and ~1e-5 of s in q."""
    xf = x.float()
    sb = s.float().unsqueeze(dim)
    slack = 1e-5 * sb + 2.0 ** -20 * (xf.abs() + z.float().unsqueeze(dim).abs() + 16 * sb)
    draft, full = dequant(up, lo, s, z, draft=True), dequant(up, lo, s, z, draft=False)
    assert bool(((draft - xf).abs() <= sb / 2 + slack).all())
    assert bool(((full - xf).abs() <= sb / 32 + slack).all())
    return draft, full


@pytest.mark.parametrize("P", [32, 64, 128])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_bounds(P, D, dtype):
    k, v = _pages(2, 2, P, D, dtype, seed=P + D), _pages(2, 2, P, D, dtype, seed=P + D + 1)
    out = quantize_pages_ref(k, v)
    fmt = KVFormat(P, 2, D)
    assert out["k_upper"].shape == fmt.plane_shape(2) and out["k_scale"].shape == fmt.k_scale_shape(2)
    assert out["v_lower"].shape == fmt.plane_shape(2) and out["v_zero"].shape == fmt.v_scale_shape(2)
    # scales/zeros bracket each group (fp64 check): z <= min exactly; z + 15 s >= max up to the fp32 rounding of
    # (max - z) / 15 before it is rounded up to fp16 (2 ulp of fp32: 2^-22 relative; exact for bf16/fp16 sources)
    for x, s, z, dim in ((k, out["k_scale"], out["k_zero"], 2), (v, out["v_scale"], out["v_zero"], 3)):
        xd, zd = x.double(), z.double()
        mx = xd.amax(dim)
        assert bool((zd <= xd.amin(dim)).all())
        slack = 2.0 ** -22 * (mx.abs() + zd.abs()) if dtype == torch.float32 else 0.0
        assert bool((zd + 15 * s.double() >= mx - slack).all())
    _assert_bounds(k, out["k_upper"], out["k_lower"], out["k_scale"], out["k_zero"], dequant_keys_ref, 2)
    _assert_bounds(v, out["v_upper"], out["v_lower"], out["v_scale"], out["v_zero"], dequant_values_ref, 3)


def test_views_are_the_two_planes():
    """Draft view = z + s*u reads the upper plane only; INT8 view = z + (s/16)(16u + l' - 7.5), l' = l + 8."""
    k = _pages(1, 1, 32, 64, torch.float32, seed=4)
    u, l8, s, z = quantize_groups_ref(k, dim=2)
    assert int(u.max()) <= 15 and int(l8.max()) <= 15
    up, lo = pack_nibbles(u), pack_nibbles(l8)
    sb, zb = s.float().unsqueeze(2), z.float().unsqueeze(2)
    assert torch.equal(dequant_keys_ref(up, lo, s, z, draft=True), zb + sb * u.float())
    assert torch.equal(dequant_keys_ref(up, torch.zeros_like(lo), s, z, draft=True), zb + sb * u.float())
    c = 16 * u.float() + l8.float()
    assert torch.allclose(dequant_keys_ref(up, lo, s, z, draft=False), zb + sb * (u.float() + (l8.float() - 7.5) / 16),
                          rtol=0, atol=1e-6 * float(sb.max() * 16 + zb.abs().max()))
    assert int(c.max()) <= 255


@pytest.mark.parametrize("dtype", DTYPES)
def test_extreme_inputs(dtype):
    """Constant groups (s = 0, exact), ±1e4 outliers, signed zeros, values beyond fp16: all finite."""
    P, D = 32, 64
    x = _pages(4, 2, P, D, torch.float32, seed=11)
    x[0] = 0.75
    x[1, 0, :, 3] = -2.5  # a constant key group (channel)
    x[1, 1, 6, :] = 4.0  # a constant value group (token)
    x[1, 0, 2, 2], x[1, 1, 9, 0] = 1e4, -1e4
    x[2] = 0.0
    x[2, :, 1::2] = -0.0
    x[3, 0, 0, 0], x[3, 1, 1, 1] = (6e4, -6e4) if dtype == torch.float16 else (1e5, -1e5)
    x = x.to(dtype)
    out = quantize_pages_ref(x, x)
    for t in out.values():
        assert bool(torch.isfinite(t.float()).all())
    kd, kf = _assert_bounds(x[:3], out["k_upper"][:3], out["k_lower"][:3], out["k_scale"][:3], out["k_zero"][:3],
                            dequant_keys_ref, 2)
    vd, vf = _assert_bounds(x[:3], out["v_upper"][:3], out["v_lower"][:3], out["v_scale"][:3], out["v_zero"][:3],
                            dequant_values_ref, 3)
    for view in (kd, kf, vd, vf):
        assert torch.equal(view[0], x[0].float()) and torch.equal(view[2], x[2].float())
    for view in (kd, kf):
        assert bool((view[1, 0, :, 3] == -2.5).all())
    for view in (vd, vf):
        assert bool((view[1, 1, 6, :] == 4.0).all())
    for name in ("k_upper", "k_lower", "v_upper", "v_lower"):  # beyond fp16: still well-formed, finite views
        assert out[name].dtype == torch.uint8
    full = dequant_keys_ref(out["k_upper"], out["k_lower"], out["k_scale"], out["k_zero"], draft=False)
    assert bool(torch.isfinite(full).all())


def test_cpu_store_path_gathers_rows_and_touches_only_its_pages():
    P, H, D = 32, 2, 64
    fmt = KVFormat(P, H, D)
    src = _pages(1, 1, 4 * P, H * D, torch.bfloat16, seed=2).view(4 * P, H, D)
    src_v = -src
    store = fmt.alloc(5)
    for t in (store.k_upper, store.k_lower, store.v_upper, store.v_lower):
        t.fill_(0xFF)
    for t in (store.k_scale, store.k_zero, store.v_scale, store.v_zero):
        t.fill_(float("nan"))
    src_row = torch.tensor([P + 3, 0], dtype=torch.int64)
    page_ids = torch.tensor([4, 1], dtype=torch.int32)
    assert quantize_pages(src, src_v, src_row, page_ids, store) is store
    k = torch.stack([src[P + 3: 2 * P + 3].transpose(0, 1), src[:P].transpose(0, 1)])
    ref = quantize_pages_ref(k, -k)
    for name, t in ref.items():
        assert torch.equal(getattr(store, name)[[4, 1]], t), name
        rest = getattr(store, name)[[0, 2, 3]]
        assert bool(rest.isnan().all()) if rest.is_floating_point() else bool((rest == 0xFF).all()), name


def test_format_validation_and_accounting():
    with pytest.raises(ValueError):
        KVFormat(16, 2, 128)
    with pytest.raises(ValueError):
        KVFormat(64, 2, 63)
    fmt = KVFormat(64, 8, 128)
    assert fmt.bits_per_element() == (8.5, 8.25) and fmt.bits_per_element(draft=True) == (4.5, 4.25)
    assert fmt.bytes_per_token_per_layer() == (8.5 + 8.25) * 8 * 128 / 8
