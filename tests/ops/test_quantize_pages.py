"""Triton quantize_pages vs its reference (codes, scales, zeros), error bounds of what it writes, extreme inputs,
the ring-shaped source, and untouched / fully written pages. Runs under TRITON_INTERPRET=1 on CPU (tests/conftest.py)
and natively on a GPU."""
import pytest
import torch

from sgl_spec.kernels.quantize_pages.triton import QuantizeLaunch, quantize_pages
from sgl_spec.kernels.quantize_pages.ref import (
    dequant_keys_ref, dequant_values_ref, quantize_pages as quantize_pages_cpu, quantize_pages_ref)
from sgl_spec.kvcache.format import KVFormat, unpack_nibbles

pytestmark = pytest.mark.interp

PLANES = ("k_upper", "k_lower", "v_upper", "v_lower")
SCALES = ("k_scale", "k_zero", "v_scale", "v_zero")


def poisoned_store(fmt, num_pages, byte, device):
    """Planes filled with ``byte``, scales/zeros with NaN: an element the kernel forgets keeps its poison."""
    st = fmt.alloc(num_pages, device)
    for name in PLANES:
        getattr(st, name).fill_(byte)
    for name in SCALES:
        getattr(st, name).fill_(float("nan"))
    return st


def gather_pages(src, src_row, P):
    """[T, H, D] rows -> [n, H, P, D] pages (the contract's gather, written independently of both implementations)."""
    return torch.stack([src[int(r): int(r) + P].transpose(0, 1) for r in src_row.tolist()])


def assert_codes_match(got_planes, ref_planes, x, s, z):
    """Equal packed codes, except where q = (x - z)/s lies within 1e-5 of a quantization boundary. All boundaries (upper
    at m + 1/2, lower at u + t/16) are multiples of 1/16 in q; fp32 q carries a few ulp of error at |q| <= 16, i.e.
    < 1e-5, so only there can a GPU that rounds one operation differently flip a code, and then by one INT8 step.
    (Under the interpreter the arithmetic is the reference's, and no mismatch occurs at all.)"""
    u_g, l_g = unpack_nibbles(got_planes[0]).int(), unpack_nibbles(got_planes[1]).int()
    u_r, l_r = unpack_nibbles(ref_planes[0]).int(), unpack_nibbles(ref_planes[1]).int()
    bad = (u_g != u_r) | (l_g != l_r)
    if not bad.any():
        return
    c_diff = ((16 * u_g + l_g) - (16 * u_r + l_r)).abs()
    q16 = 16 * (x.double() - z.double()) / torch.where(s > 0, s.double(), torch.ones_like(s.double()))
    near = (q16 - q16.round()).abs() < 16e-5
    assert bool((near & (c_diff <= 1))[bad].all()), f"{int(bad.sum())} codes differ away from a rounding boundary"


def check_against_ref(st, ref, pages, xk, xv):
    """st: PageStore written by the kernel; ref: dict from quantize_pages_ref for the same pages (CPU)."""
    idx = pages.long()
    for name in SCALES:  # scales/zeros are exact: same fp32 ops, then a directed fp16 rounding
        assert torch.equal(getattr(st, name)[idx].cpu(), ref[name]), name
    ks, kz = ref["k_scale"].float().unsqueeze(2), ref["k_zero"].float().unsqueeze(2)
    vs, vz = ref["v_scale"].float().unsqueeze(3), ref["v_zero"].float().unsqueeze(3)
    assert_codes_match([st.k_upper[idx].cpu(), st.k_lower[idx].cpu()], [ref["k_upper"], ref["k_lower"]], xk, ks, kz)
    assert_codes_match([st.v_upper[idx].cpu(), st.v_lower[idx].cpu()], [ref["v_upper"], ref["v_lower"]], xv, vs, vz)


def assert_bounds(st, pages, xk, xv):
    """Draft view |err| <= s/2, INT8 view |err| <= s/32, against the *stored* fp16 scale. Slack: q and the dequant
    FMA are fp32, so allow a few ulp of the magnitudes involved (2^-20 relative) plus 1e-5 of s for q's rounding."""
    idx = pages.long()
    for x, deq, up, lo, sc, zp, dim in (
        (xk, dequant_keys_ref, st.k_upper, st.k_lower, st.k_scale, st.k_zero, 2),
        (xv, dequant_values_ref, st.v_upper, st.v_lower, st.v_scale, st.v_zero, 3),
    ):
        up, lo, sc, zp = up[idx].cpu(), lo[idx].cpu(), sc[idx].cpu(), zp[idx].cpu()
        xf = x.float()
        s = sc.float().unsqueeze(dim)
        slack = 1e-5 * s + 2.0 ** -20 * (xf.abs() + zp.float().unsqueeze(dim).abs() + 16 * s)
        draft = deq(up, lo, sc, zp, draft=True)
        full = deq(up, lo, sc, zp, draft=False)
        assert torch.isfinite(draft).all() and torch.isfinite(full).all()
        assert bool(((draft - xf).abs() <= s / 2 + slack).all())
        assert bool(((full - xf).abs() <= s / 32 + slack).all())


def make_source(T, H, D, dtype, layout, device, gen):
    spread, offset = 0.5 + 3 * torch.rand(D, generator=gen), torch.randn(D, generator=gen)
    base = torch.randn(T, H, D, generator=gen) * spread + offset
    base = base.to(dtype)
    if layout == "padded":  # rows of a bigger buffer (e.g. a pool with more heads): row stride > H*D
        buf = torch.zeros(T, H + 2, D, dtype=dtype)
        buf[:, 1:H + 1] = base
        return base, buf.to(device)[:, 1:H + 1]
    if layout == "transposed":  # head_dim not innermost: exercises the d stride
        return base, base.transpose(1, 2).contiguous().to(device).transpose(1, 2)
    return base, base.to(device)


@pytest.mark.parametrize(
    "P,D,H,n,dtype,layout",
    [
        (64, 128, 2, 3, torch.bfloat16, "contiguous"),
        (32, 64, 1, 1, torch.float16, "padded"),
        (128, 128, 1, 2, torch.float32, "contiguous"),
        (128, 64, 3, 2, torch.bfloat16, "transposed"),
        (32, 128, 2, 17, torch.float16, "contiguous"),
        (64, 96, 1, 3, torch.float32, "padded"),  # D/2 = 48: a masked, non-power-of-2 half
    ],
)
def test_matches_ref_and_writes_exactly_its_pages(P, D, H, n, dtype, layout, device):
    gen = torch.Generator().manual_seed(P * 1000 + D + n)
    fmt = KVFormat(P, H, D)
    T = (n + 2) * P + 5
    xk_src, k = make_source(T, H, D, dtype, layout, device, gen)
    xv_src, v = make_source(T, H, D, dtype, layout, device, gen)
    num_pages = n + 3
    src_row = torch.randint(0, T - P + 1, (n,), generator=gen)  # rows need not be page aligned in the source
    pages = torch.randperm(num_pages, generator=gen)[:n].to(torch.int32)
    xk, xv = gather_pages(xk_src, src_row, P), gather_pages(xv_src, src_row, P)
    ref = quantize_pages_ref(xk, xv)

    # Two poisons: a byte that a forgotten element keeps would differ between the runs; each run must equal the ref.
    for byte in (0x00, 0xFF):
        st = poisoned_store(fmt, num_pages, byte, device)
        out = quantize_pages(k, v, src_row.to(device), pages.to(device), st)
        assert out is st
        check_against_ref(st, ref, pages, xk, xv)
        assert_bounds(st, pages, xk, xv)
        untouched = torch.ones(num_pages, dtype=torch.bool)
        untouched[pages.long()] = False
        for name in PLANES:
            assert bool((getattr(st, name)[untouched.to(device)] == byte).all()), name
        for name in SCALES:
            assert bool(getattr(st, name)[untouched.to(device)].isnan().all()), name


def extreme_pages(P, D, dtype):
    """[4, 2, P, D] pages: constant, outliers (+ constant channels/tokens), signed zeros, beyond the fp16 range."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(4, 2, P, D, generator=gen)
    x[0] = 0.5
    x[1, 0, :, 5] = 2.0  # head 0: a constant channel (a key group)
    x[1, 1, 3, :] = -1.25  # head 1: a constant token (a value group)
    x[1, 0, 7, 9], x[1, 1, 0, 0], x[1, 0, P - 1, D - 1] = 1e4, -1e4, 1e4
    x[2] = 0.0
    x[2, :, ::2, 1::3] = -0.0
    big = 6e4 if dtype == torch.float16 else 1e5  # fp16 sources cannot hold 1e5
    x[3, 0, 1, 2], x[3, 1, 4, 4] = big, -big
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_extreme_inputs_finite_and_exact(dtype, device):
    P, D, H = 32, 64, 2
    fmt = KVFormat(P, H, D)
    xk = extreme_pages(P, D, dtype)
    xv = xk.flip(2)  # different placement of the same extremes
    src_k = xk.transpose(1, 2).reshape(-1, H, D)  # page i = rows i*P … i*P+P-1
    src_v = xv.transpose(1, 2).reshape(-1, H, D)
    src_row = torch.arange(4) * P
    pages = torch.tensor([3, 0, 2, 1], dtype=torch.int32)
    st = poisoned_store(fmt, 4, 0xFF, device)
    quantize_pages(src_k.to(device), src_v.to(device), src_row.to(device), pages.to(device), st)
    ref = quantize_pages_ref(xk, xv)
    check_against_ref(st, ref, pages, xk, xv)
    for name in SCALES:
        assert bool(torch.isfinite(getattr(st, name)).all()), name
    assert_bounds(st, pages[:3], xk[:3], xv[:3])  # page 3 leaves the fp16 range: finite, but no bound promised
    idx = pages.long().to(device)
    for deq, up, lo, sc, zp, x in ((dequant_keys_ref, "k_upper", "k_lower", "k_scale", "k_zero", xk),
                                   (dequant_values_ref, "v_upper", "v_lower", "v_scale", "v_zero", xv)):
        args = [getattr(st, a)[idx].cpu() for a in (up, lo, sc, zp)]
        for draft in (True, False):
            view = deq(*args, draft=draft)
            assert bool(torch.isfinite(view).all())
            # constant (0.5) and all-zero pages are reproduced exactly, by both views
            assert torch.equal(view[[0, 2]], x[[0, 2]].float().abs())  # -0.0 comes back as +0.0
        assert bool((args[2][0] == 0).all()) and bool((args[2][2] == 0).all())  # s = 0 for constant groups
    # the constant groups inside the outlier page are exact too, in both views
    views = {d: dequant_keys_ref(*[getattr(st, a)[idx].cpu() for a in ("k_upper", "k_lower", "k_scale", "k_zero")],
                                 draft=d) for d in (True, False)}
    assert all(bool((views[d][1, 0, :, 5] == 2.0).all()) for d in views)
    vviews = {d: dequant_values_ref(*[getattr(st, a)[idx].cpu() for a in ("v_upper", "v_lower", "v_scale", "v_zero")],
                                    draft=d) for d in (True, False)}
    assert all(bool((vviews[d][1, 1, P - 4, :] == -1.25).all()) for d in vviews)  # token 3, flipped


def test_ring_source_gather(device):
    """The hot ring is a valid source: hot_k.view(-1, Hkv, D), row (slot*R + (pos//P) % R) * P."""
    P, D, H, slots, R = 32, 64, 2, 3, 2
    gen = torch.Generator().manual_seed(3)
    hot_k = torch.randn(slots, R, P, H, D, generator=gen).to(torch.bfloat16)
    hot_v = torch.randn(slots, R, P, H, D, generator=gen).to(torch.bfloat16)
    # (slot, logical page, destination page): ring entry (page % R) of that slot
    jobs = [(2, 5, 4), (0, 0, 1), (1, 8, 0)]
    src_row = torch.tensor([(s * R + (pos // P) % R) * P for s, pos in ((s, lp * P) for s, lp, _ in jobs)])
    pages = torch.tensor([d for *_, d in jobs], dtype=torch.int32)
    xk = torch.stack([hot_k[s, lp % R].transpose(0, 1) for s, lp, _ in jobs])
    xv = torch.stack([hot_v[s, lp % R].transpose(0, 1) for s, lp, _ in jobs])
    ref = quantize_pages_ref(xk, xv)
    fmt = KVFormat(P, H, D)
    st_cpu = quantize_pages_cpu(hot_k.view(-1, H, D), hot_v.view(-1, H, D), src_row, pages,
                                poisoned_store(fmt, 5, 0xFF, "cpu"))
    st = quantize_pages(hot_k.to(device).view(-1, H, D), hot_v.to(device).view(-1, H, D), src_row.to(device),
                        pages.to(device), poisoned_store(fmt, 5, 0xFF, device))
    idx = pages.long()
    for name in PLANES + SCALES:
        assert torch.equal(getattr(st_cpu, name)[idx], ref[name]), name  # the CPU twin: exact by construction
    check_against_ref(st, ref, pages, xk, xv)


def test_empty_and_shape_checks(device):
    fmt = KVFormat(32, 1, 64)
    st = poisoned_store(fmt, 2, 0xFF, device)
    k = torch.randn(64, 1, 64, device=device)
    none = torch.zeros(0, dtype=torch.int64, device=device)
    quantize_pages(k, k, none, none.int(), st)  # nothing to do: no launch, nothing written
    assert bool((st.k_upper == 0xFF).all()) and bool(st.k_scale.isnan().all())
    with pytest.raises(ValueError):
        quantize_pages(k[:, :, :32], k[:, :, :32], none, none, st)  # head_dim mismatch
    with pytest.raises(ValueError):
        quantize_pages(k, k.half(), none, none, st)  # dtype mismatch


@pytest.mark.parametrize("D", [64, 96])
@pytest.mark.parametrize("key_cols,val_rows,num_warps", [
    (None, None, None),  # launch_config's choice
    (32, 32, 4),  # whole [P, D/2] tiles: grid (n, H, 2)
    (1, 1, 1),  # one channel pair / one token per program
    (16, 4, 2),  # D=96: D/2 = 48 is three full key chunks; D=64: two
    (32, 8, 2),  # D=96: a partial key chunk (48 % 32), masked
])
def test_launch_variants_write_identical_bytes(D, key_cols, val_rows, num_warps, device):
    """Every launch split is a different partition of the same independent groups: the same bytes as the reference
    (check_against_ref: scales exact; codes exact under the interpreter)."""
    P, H, n = 32, 2, 2
    gen = torch.Generator().manual_seed(D + (key_cols or 0))
    fmt = KVFormat(P, H, D)
    T = 3 * P
    xk_src, k = make_source(T, H, D, torch.bfloat16, "contiguous", device, gen)
    xv_src, v = make_source(T, H, D, torch.bfloat16, "padded", device, gen)
    src_row = torch.tensor([P + 3, 0])
    pages = torch.tensor([2, 0], dtype=torch.int32)
    xk, xv = gather_pages(xk_src, src_row, P), gather_pages(xv_src, src_row, P)
    st = poisoned_store(fmt, 3, 0xFF, device)
    quantize_pages(k, v, src_row.to(device), pages.to(device), st,
                   launch=QuantizeLaunch(key_cols=key_cols, val_rows=val_rows, num_warps=num_warps))
    check_against_ref(st, quantize_pages_ref(xk, xv), pages, xk, xv)
    for name in PLANES:
        assert bool((getattr(st, name)[1] == 0xFF).all()), name


def test_launch_variant_checks(device):
    fmt = KVFormat(32, 1, 64)
    st = fmt.alloc(1, device)
    k = torch.randn(32, 1, 64, device=device)
    row, page = torch.zeros(1, dtype=torch.int64, device=device), torch.zeros(1, dtype=torch.int32, device=device)
    for kw in (dict(key_cols=3), dict(key_cols=64), dict(val_rows=64), dict(num_warps=3)):
        with pytest.raises(ValueError):
            quantize_pages(k, k, row, page, st, launch=QuantizeLaunch(**kw))


# ---- on the GPU: real shapes against the reference (tests/support/gpu_cases.py) -------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_gpu_quantize_pages(B, P):
    from gpu_cases import HKV, D, _close, _kernels
    from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref

    tri, ref = _kernels("quantize_pages")
    gen = torch.Generator().manual_seed(B * 31 + P)
    T = (B + 1) * P + 5
    kv = torch.randn(T, 2, HKV, D, generator=gen).to("cuda", torch.bfloat16)  # fused K/V rows: row stride 2*HKV*D
    kv[:, 0] *= 4
    src_k, src_v = kv[:, 0], kv[:, 1]
    src_row = torch.randint(0, T - P + 1, (B,), generator=gen).to("cuda", torch.int64)  # unaligned rows
    npages = 2 * B + 3
    page_ids = torch.randperm(npages, generator=gen)[:B].to("cuda", torch.int32)
    fmt = KVFormat(P, HKV, D)
    got, want = fmt.alloc(npages, "cuda"), fmt.alloc(npages, "cuda")
    planes = ("k_upper", "k_lower", "v_upper", "v_lower")
    scales = ("k_scale", "k_zero", "v_scale", "v_zero")
    for n in planes:
        getattr(got, n).fill_(0xAB)
    for n in scales:
        getattr(got, n).fill_(float("nan"))
    tri(src_k, src_v, src_row, page_ids, got)
    ref(src_k, src_v, src_row, page_ids, want)
    ids = page_ids.long()
    other = torch.ones(npages, dtype=torch.bool, device="cuda")
    other[ids] = False
    for n in planes:
        assert (getattr(got, n)[other] == 0xAB).all(), f"{n}: wrote a page it was not asked to"
    for n in scales:
        assert torch.isnan(getattr(got, n)[other]).all(), f"{n}: wrote a page it was not asked to"
        # scale = fp16 round-up of (max - zero)/15: computing the quotient another way may move it by one fp16 ulp
        _close(getattr(got, n)[ids], getattr(want, n)[ids], atol=1e-6, rtol=2e-3)
    rows = src_row.view(-1, 1) + torch.arange(P, device="cuda")
    for pre, deq, src, sdim in (("k", dequant_keys_ref, src_k, -2), ("v", dequant_values_ref, src_v, -1)):
        g = deq(*(getattr(got, f"{pre}_{n}")[ids] for n in ("upper", "lower", "scale", "zero")), draft=False)
        w = deq(*(getattr(want, f"{pre}_{n}")[ids] for n in ("upper", "lower", "scale", "zero")), draft=False)
        s = getattr(want, f"{pre}_scale")[ids].float().unsqueeze(sdim)
        x = src[rows].float().permute(0, 2, 1, 3)
        # codes may differ by one INT8 step where (x - z)/s lands within float rounding of a rounding boundary
        assert ((g - w).abs() <= s / 16 * 1.01 + 1e-6).all()
        assert ((g - x).abs() <= s / 32 * 1.01 + 1e-5 * (x.abs() + 1)).all(), "outside the format's s/32 bound"
        for n in ("upper", "lower"):
            diff = (getattr(got, f"{pre}_{n}")[ids] != getattr(want, f"{pre}_{n}")[ids]).float().mean().item()
            assert diff <= 1e-3, f"{pre}_{n}: {diff:.3%} of bytes differ from the reference"
