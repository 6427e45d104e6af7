"""draft_decode: Triton (interpreter on CPU, native on CUDA) against the pure-torch reference, and the reference
against a per-request dense fp32 attention over the dequantized draft view."""
import math

import pytest
import torch

from sgl_spec.kernels.draft_decode.launch import DraftLaunch
from sgl_spec.kernels.draft_decode.ref import draft_decode as draft_decode_ref
from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref, quantize_pages_ref
from sgl_spec.kvcache.format import KVFormat

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def make_case(B, Hq, Hkv, D, P, n_pages, hot, dtype, device, pool_pages=None, seed=0, q_scale=2.0):
    """Quantized pool with realistic codes (quantize_pages_ref of per-channel-scaled K, so some channels are outliers),
    random lower planes, page lists in random order sharing ids across requests, garbage ids past num_pages, and a
    hot ring. ``hot`` = list of (offset in page, hot_len) per request."""
    g = torch.Generator().manual_seed(seed)
    NP = pool_pages or max(4, sum(n_pages) // 2 + 1)
    chan = torch.exp(torch.randn(Hkv, 1, D, generator=g))  # per-channel key magnitudes (RoPE'd keys have outliers)
    k = torch.randn(NP, Hkv, P, D, generator=g) * chan + 0.5 * torch.randn(Hkv, 1, D, generator=g)
    v = torch.randn(NP, Hkv, P, D, generator=g)
    store = KVFormat(P, Hkv, D).alloc(NP)
    for name, t in quantize_pages_ref(k, v).items():
        getattr(store, name).copy_(t)
    store.k_lower.copy_(torch.randint(0, 256, store.k_lower.shape, generator=g, dtype=torch.uint8))
    store.v_lower.copy_(torch.randint(0, 256, store.v_lower.shape, generator=g, dtype=torch.uint8))

    maxp = max(n_pages) + 2 if n_pages else 0
    page_ids = torch.full((B, maxp), 10**6, dtype=torch.int32)  # out of range: must never be read
    for b, n in enumerate(n_pages):
        page_ids[b, :n] = torch.randint(0, NP, (n,), generator=g).to(torch.int32)  # repeats, any order
    num_slots = B + 2
    hot_k = (torch.randn(num_slots, 2, P, Hkv, D, generator=g) * chan.squeeze(1)[None, None, None]).to(dtype)
    hot_v = torch.randn(num_slots, 2, P, Hkv, D, generator=g).to(dtype)
    hot_slot = torch.randperm(num_slots, generator=g)[:B].to(torch.int32)
    page_no = torch.tensor(n_pages) + torch.randint(0, 3, (B,), generator=g)  # odd ring parity too
    hot_start = (page_no * P + torch.tensor([o for o, _ in hot])).to(torch.int32)
    hot_len = torch.tensor([n for _, n in hot], dtype=torch.int32)
    q = (torch.randn(B, Hq, D, generator=g) * q_scale).to(dtype)
    args = dict(q=q, store=store, page_ids=page_ids, num_pages=torch.tensor(n_pages, dtype=torch.int32),
                hot_k=hot_k, hot_v=hot_v, hot_slot=hot_slot, hot_start=hot_start, hot_len=hot_len,
                sm_scale=1.0 / math.sqrt(D))
    return _to(args, device)


def _to(args, device):
    out = {}
    for key, val in args.items():
        if isinstance(val, torch.Tensor):
            val = val.to(device)
        elif hasattr(val, "k_upper"):
            val = type(val)(**{f: getattr(val, f).to(device) for f in val.__dataclass_fields__})
        out[key] = val
    return out


def dense_oracle(args):
    """Per request, page by page: dequantized draft view + hot tokens, fp32 softmax attention (no batching tricks)."""
    q, st = args["q"].cpu().float(), _to({"s": args["store"]}, "cpu")["s"]
    B, Hq, D = q.shape
    _, Hkv, P, _ = st.k_upper.shape
    out = torch.empty(B, Hq, D)
    for b in range(B):
        ks, vs = [], []
        for i in range(int(args["num_pages"][b])):
            pg = int(args["page_ids"][b, i])
            ks.append(dequant_keys_ref(st.k_upper[pg], st.k_lower[pg], st.k_scale[pg], st.k_zero[pg], draft=True))
            vs.append(dequant_values_ref(st.v_upper[pg], st.v_lower[pg], st.v_scale[pg], st.v_zero[pg], draft=True))
        slot, s0 = int(args["hot_slot"][b]), int(args["hot_start"][b])
        for pos in range(s0, s0 + int(args["hot_len"][b])):
            ks.append(args["hot_k"][slot, (pos // P) % 2, pos % P].cpu().float()[:, None])  # [Hkv, 1, D]
            vs.append(args["hot_v"][slot, (pos // P) % 2, pos % P].cpu().float()[:, None])
        kk, vv = torch.cat(ks, 1), torch.cat(vs, 1)  # [Hkv, N, D]
        for hq in range(Hq):
            h = hq // (Hq // Hkv)
            w = torch.softmax(kk[h] @ q[b, hq] * args["sm_scale"], 0)
            out[b, hq] = w @ vv[h]
    return out


# Tolerances vs the unrounded fp32 reference. Page scores: q*s is rounded to fp16 once per page (rel. 2^-11) and
# multiplies centred codes |u - 8| <= 8, so a score moves by ~2^-11 of sqrt(Σ_j (q_j s_j 8)^2) (~1e-3 log2-units here,
# the keys have outlier channels); p*s_v is rounded to fp16 (2^-11). Hot tokens: fp16 operands as stored, p rounded to
# fp16 (2^-11), or fp32 operands (bf16 under the interpreter, fp32 models: 16-bit inputs are exact in tf32; p is
# rounded to tf32, 2^-11, on the GPU; the GPU's bf16 p, 2^-9, is checked by the gpu-marked tests at
# 1e-2). Rounding the output to the q dtype adds half an ulp: 2^-9 (bf16), 2^-11 (fp16) relative. Outputs are O(1)
# (|out| <= ~3.5); measured errors stay below 1/4 of these bounds (max 1.5e-2 for bf16, of which 7.6e-3 is the output
# rounding; 3e-3 for fp16/fp32), so a wrong scale, zero term or ring index (errors >= 1) cannot pass.
TOL = {torch.float32: 1e-2, torch.float16: 1e-2, torch.bfloat16: 2e-2}

CASES = [
    # B, Hq, Hkv, D, P, num_pages, hot (offset in page, hot_len), dtype, num_splits
    (1, 4, 2, 64, 32, [0], [(0, 1)], "fp16", None),
    (1, 4, 2, 64, 32, [1], [(5, 1)], "bf16", 2),
    (3, 8, 8, 64, 32, [0, 1, 7], [(0, 1), (20, 40), (31, 1)], "fp32", None),
    (5, 4, 2, 128, 64, [0, 1, 3, 9, 2], [(0, 1), (3, 64), (63, 2), (10, 100), (1, 1)], "bf16", 3),
    (3, 32, 8, 64, 32, [5, 0, 2], [(30, 33), (0, 1), (7, 9)], "fp16", None),
    (2, 4, 2, 96, 32, [3, 4], [(0, 63), (16, 1)], "fp32", 8),  # D/2 = 48: padded channel tile
    (1, 4, 2, 64, 128, [3], [(100, 30)], "fp16", 2),  # P = 128: key scales copied per thread, Triton's pipeline
    # groups of the families users serve, not powers of two
    (2, 9, 3, 64, 64, [2, 5], [(3, 10), (60, 4)], "bf16", None),  # G = 3, D = 64: SmolLM2, Llama-3.2-3B
    (2, 10, 2, 128, 64, [4, 1], [(0, 1), (30, 40)], "bf16", 2),  # G = 5: Qwen3-14B
    (1, 7, 1, 64, 32, [3], [(10, 20)], "fp16", None),  # G = 7: Qwen2.5-7B
]


@pytest.mark.parametrize("B,Hq,Hkv,D,P,n_pages,hot,dt,ns", CASES)
def test_triton_matches_ref(B, Hq, Hkv, D, P, n_pages, hot, dt, ns, device):
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    dtype = DTYPES[dt]
    args = make_case(B, Hq, Hkv, D, P, n_pages, hot, dtype, device, seed=B * 100 + D + P)
    out = torch.full((B, Hq, D), float("nan"), dtype=dtype, device=device)
    res = draft_decode(**args, out=out, launch=DraftLaunch(num_splits=ns))
    assert res is out
    ref = draft_decode_ref(**_to(args, "cpu"), out=torch.empty(B, Hq, D))  # fp32 out: unrounded reference
    torch.testing.assert_close(out.float().cpu(), ref, atol=TOL[dtype], rtol=TOL[dtype])


def test_triton_many_pages_and_split_counts(device):
    """A long list (odd length) over 1, few and more splits than pages (empty splits must merge as nothing)."""
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    args = make_case(2, 4, 2, 64, 32, [23, 4], [(12, 40), (0, 1)], torch.float16, device, seed=7, q_scale=4.0)
    ref = draft_decode_ref(**_to(args, "cpu"), out=torch.empty(2, 4, 64))
    for ns in (None, 1, 5, 40):
        out = torch.full((2, 4, 64), float("nan"), dtype=torch.float16, device=device)
        draft_decode(**args, out=out, launch=DraftLaunch(num_splits=ns))
        torch.testing.assert_close(out.float().cpu(), ref, atol=1e-2, rtol=1e-2, msg=f"num_splits={ns}")


# fixed launch parameters (DraftLaunch): no prefetch, the small-list split rule, the merge step, the hot-token step;
# each must match the reference
VARIANTS = [
    dict(maxnreg=168, programs_per_sm=3, min_pages_per_split=4, merge_chunk=16),
    dict(prefetch=0),
    dict(min_pages_per_split=1, merge_chunk=64),
    dict(maxnreg=128, programs_per_sm=4, min_pages_per_split=1),  # 4 programs an SM (GPU)
    dict(hot_block=16),  # the hot-token program's step (64 by default for 16-bit models on the GPU, else 32)
    dict(hot_block=64),
]


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
@pytest.mark.parametrize("case", [3, 5])
def test_triton_variants_match_ref(kw, case, device):
    """Cases 3 (D=128, P=64: the Llama tile) and 5 (D/2=48: padded word tile, masked scale words), 1..9 pages."""
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    B, Hq, Hkv, D, P, n_pages, hot, dt, ns = CASES[case]
    dtype = DTYPES[dt]
    args = make_case(B, Hq, Hkv, D, P, n_pages, hot, dtype, device, seed=B * 100 + D + P)
    ref = draft_decode_ref(**_to(args, "cpu"), out=torch.empty(B, Hq, D))
    for splits in (ns, None):  # the case's split count (several pages a split) and the heuristic
        out = torch.full((B, Hq, D), float("nan"), dtype=dtype, device=device)
        draft_decode(**args, out=out, launch=DraftLaunch(num_splits=splits, **kw))
        torch.testing.assert_close(out.float().cpu(), ref, atol=TOL[dtype], rtol=TOL[dtype], msg=f"ns={splits}")


@pytest.mark.parametrize("hb", [16, 64])
def test_triton_hot_native_fp16(hb, device):
    """fp16: the hot dots on the fp16 operands as stored (p rounded to fp16, 2^-11: within TOL), case 4's
    hot lengths 33 / 1 / 9 in one or several steps."""
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    B, Hq, Hkv, D, P, n_pages, hot, dt, ns = CASES[4]
    args = make_case(B, Hq, Hkv, D, P, n_pages, hot, torch.float16, device, seed=11)
    ref = draft_decode_ref(**_to(args, "cpu"), out=torch.empty(B, Hq, D))
    out = torch.full((B, Hq, D), float("nan"), dtype=torch.float16, device=device)
    draft_decode(**args, out=out, launch=DraftLaunch(hot_block=hb))
    torch.testing.assert_close(out.float().cpu(), ref, atol=TOL[torch.float16], rtol=TOL[torch.float16])


def test_triton_variants_long_list(device):
    """A long odd list and splits with 0, 1, 2 and many pages (prefetch masks at the end)."""
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    args = make_case(2, 4, 2, 64, 32, [23, 4], [(12, 40), (0, 1)], torch.float16, device, seed=7, q_scale=4.0)
    ref = draft_decode_ref(**_to(args, "cpu"), out=torch.empty(2, 4, 64))
    for ns in (1, 5, 12, 40):
        out = torch.full((2, 4, 64), float("nan"), dtype=torch.float16, device=device)
        draft_decode(**args, out=out, launch=DraftLaunch(num_splits=ns, prefetch=1))
        torch.testing.assert_close(out.float().cpu(), ref, atol=1e-2, rtol=1e-2, msg=f"num_splits={ns}")


def test_triton_strided_q_and_lower_planes_unread(device):
    """q with a padded head stride; garbage in the lower planes must not change the output."""
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    args = make_case(3, 8, 2, 64, 32, [2, 5, 1], [(3, 1), (30, 34), (0, 17)], torch.bfloat16, device, seed=3)
    wide = torch.randn(3, 8, 80, device=device).to(torch.bfloat16)
    wide[:, :, :64] = args["q"]
    args["q"] = wide[:, :, :64]
    out1 = draft_decode(**args)
    args["store"].k_lower.fill_(0xFF)
    args["store"].v_lower.fill_(0x5A)
    out2 = draft_decode(**args)
    assert torch.equal(out1, out2)
    ref = draft_decode_ref(**_to(args, "cpu"), out=torch.empty(3, 8, 64))
    torch.testing.assert_close(out1.float().cpu(), ref, atol=TOL[torch.bfloat16], rtol=TOL[torch.bfloat16])


def test_triton_empty_page_table(device):
    """MAXP = 0: the page splits have nothing to read, the hot tokens alone make the output."""
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    args = make_case(2, 4, 2, 64, 32, [0, 0], [(0, 1), (5, 20)], torch.float32, device, seed=5)
    args["page_ids"] = torch.zeros((2, 0), dtype=torch.int32, device=device)
    args["num_pages"] = torch.zeros(2, dtype=torch.int32, device=device)
    out = draft_decode(**args)
    ref = draft_decode_ref(**_to(args, "cpu"))
    torch.testing.assert_close(out.cpu(), ref, atol=1e-2, rtol=1e-2)


def _new_token_case(case, device, seed):
    """A CASES case plus the query's own K/V as SGLang hands them over (slices of the fused qkv output), and its ring
    row poisoned with NaN: a launch that reads the ring before writing it returns NaN."""
    B, Hq, Hkv, D, P, n_pages, hot, dt, ns = CASES[case]
    dtype = DTYPES[dt]
    args = make_case(B, Hq, Hkv, D, P, n_pages, hot, dtype, device, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    qkv = torch.randn(B, Hq + 2 * Hkv, D, generator=g).to(dtype).to(device)
    new_k, new_v = qkv[:, Hq:Hq + Hkv], qkv[:, Hq + Hkv:]
    pos = (args["hot_start"] + args["hot_len"] - 1).long().cpu()
    slot = args["hot_slot"].long().cpu()
    for t in (args["hot_k"], args["hot_v"]):
        t[slot, (pos // P) % 2, pos % P] = float("nan")
    return args, new_k, new_v, ns, dtype


@pytest.mark.parametrize("case", range(len(CASES)))
def test_triton_writes_the_new_token_into_the_ring(case, device):
    """new_k / new_v: the launch writes the query's own K/V into the ring (the hot-token program, before it reads it)
    instead of a ring_write launch: the ring afterwards equals the reference's (bit-exact, a copy) and the output
    matches the reference's, which writes the ring and then attends."""
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    args, new_k, new_v, ns, dtype = _new_token_case(case, device, seed=40 + case)
    ref_args = dict(_to(args, "cpu"), hot_k=args["hot_k"].cpu().clone(), hot_v=args["hot_v"].cpu().clone())
    ref = draft_decode_ref(**ref_args, out=torch.empty(args["q"].shape), new_k=new_k.cpu(), new_v=new_v.cpu())
    out = torch.full(args["q"].shape, float("nan"), dtype=dtype, device=device)
    draft_decode(**args, out=out, new_k=new_k, new_v=new_v, launch=DraftLaunch(num_splits=ns))
    for name in ("hot_k", "hot_v"):  # the poisoned rows were written, nothing else changed
        assert torch.equal(args[name].cpu(), ref_args[name]) and not ref_args[name].isnan().any()
    assert not ref.isnan().any()
    torch.testing.assert_close(out.float().cpu(), ref, atol=TOL[dtype], rtol=TOL[dtype])
    # and the same as a separate ring write followed by the plain launch, exactly
    again = torch.full_like(out, float("nan"))
    draft_decode(**args, out=again, launch=DraftLaunch(num_splits=ns))
    assert torch.equal(again, out)


def test_new_token_arguments_are_checked(device):
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    args, new_k, new_v, ns, dtype = _new_token_case(1, device, seed=3)
    with pytest.raises(ValueError, match="both new_k and new_v"):
        draft_decode(**args, new_k=new_k)
    with pytest.raises(ValueError, match="new_v has shape"):
        draft_decode(**args, new_k=new_k, new_v=new_v[:, :1])


# ---- reference-only checks (CPU) -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["bf16", "fp32"])
def test_ref_matches_dense_oracle(dt):
    args = make_case(4, 8, 2, 64, 32, [3, 0, 6, 1], [(0, 1), (31, 2), (4, 60), (10, 5)], DTYPES[dt], "cpu", seed=11)
    ref = draft_decode_ref(**args, out=torch.empty(4, 8, 64, dtype=torch.float32))  # fp32 out: no output rounding
    torch.testing.assert_close(ref, dense_oracle(args), atol=1e-5, rtol=1e-5)


def test_ref_chunked_batch_matches_oracle(monkeypatch):
    """Force several batch chunks (the server path for large B) and uneven lists."""
    import sgl_spec.kernels.draft_decode.ref as mod

    monkeypatch.setattr(mod, "_CHUNK_ELEMS", 3 * 4 * 32 * 2 * 64)
    args = make_case(7, 4, 2, 64, 32, [4, 1, 0, 3, 2, 4, 1], [(0, 1)] * 3 + [(30, 3)] * 4, torch.float32, "cpu",
                     seed=13)
    ref = draft_decode_ref(**args)
    torch.testing.assert_close(ref, dense_oracle(args), atol=1e-5, rtol=1e-5)


def test_ref_ignores_lower_planes():
    args = make_case(3, 4, 2, 64, 32, [2, 3, 1], [(0, 1), (2, 40), (31, 1)], torch.float16, "cpu", seed=17)
    a = draft_decode_ref(**args)
    args["store"].k_lower.random_(0, 256)
    args["store"].v_lower.random_(0, 256)
    b = draft_decode_ref(**args)
    assert torch.equal(a, b)


# ---- per-kv-head page lists: page_ids [B, Hkv, KCAP] ----------------------------------------------------------------
def _per_head(args, seed):
    """Each kv head gets its own page list (same count per request): a permutation of the pool's pages, padded with
    out-of-range garbage past num_pages."""
    g = torch.Generator().manual_seed(seed)
    pid = args["page_ids"].cpu()
    B, maxp = pid.shape
    Hkv, NP = args["store"].k_upper.shape[1], args["store"].k_upper.shape[0]
    heads = torch.full((B, Hkv, maxp), 10**6, dtype=torch.int32)
    for b in range(B):
        n = int(args["num_pages"][b])
        for h in range(Hkv):
            heads[b, h, :n] = torch.randint(0, NP, (n,), generator=g).to(torch.int32)
    return heads


@pytest.mark.parametrize("case", [0, 3, 4])
def test_per_head_lists_ref_is_one_list_per_head(case):
    """The reference with [B, Hkv, KCAP] equals, head by head, the reference run with that head's list alone."""
    B, Hq, Hkv, D, P, n_pages, hot, dt, _ = CASES[case]
    args = make_case(B, Hq, Hkv, D, P, n_pages, hot, torch.float32, "cpu", seed=21 + case)
    heads = _per_head(args, seed=case)
    got = draft_decode_ref(**dict(args, page_ids=heads))
    G = Hq // Hkv
    for h in range(Hkv):
        one = draft_decode_ref(**dict(args, page_ids=heads[:, h].contiguous()))
        torch.testing.assert_close(got[:, h * G:(h + 1) * G], one[:, h * G:(h + 1) * G], atol=1e-5, rtol=1e-5)
    # a broadcast table (every head the same list) is the per-layer table
    same = args["page_ids"][:, None, :].expand(B, Hkv, -1)
    torch.testing.assert_close(draft_decode_ref(**dict(args, page_ids=same)), draft_decode_ref(**args))


@pytest.mark.parametrize("case", [1, 3, 4, 5])
def test_per_head_lists_triton_matches_ref(case, device):
    from sgl_spec.kernels.draft_decode.triton import draft_decode

    B, Hq, Hkv, D, P, n_pages, hot, dt, ns = CASES[case]
    dtype = DTYPES[dt]
    args = make_case(B, Hq, Hkv, D, P, n_pages, hot, dtype, device, seed=31 + case)
    args["page_ids"] = _per_head(args, seed=case).to(device)
    out = draft_decode(**args, launch=DraftLaunch(num_splits=ns))
    ref = draft_decode_ref(**_to(args, "cpu"), out=torch.empty(B, Hq, D))
    torch.testing.assert_close(out.float().cpu(), ref, atol=TOL[dtype], rtol=TOL[dtype])
    # a stride-0 head dimension (expand of a per-layer list) runs the same path as the per-layer layout
    flat = args["page_ids"][:, 0].contiguous()
    a = draft_decode(**dict(args, page_ids=flat[:, None, :].expand(B, Hkv, -1)), launch=DraftLaunch(num_splits=ns))
    b = draft_decode(**dict(args, page_ids=flat), launch=DraftLaunch(num_splits=ns))
    assert torch.equal(a, b)


# ---- on the GPU: real shapes against the reference (tests/support/gpu_cases.py) -------------------------------------
def _gpu_case(B, ctx, P, mode):
    from gpu_cases import HKV, HQ, D, SM, Batch, _lens

    gen = torch.Generator().manual_seed(B * 100003 + ctx * 7 + P)
    bt = Batch(_lens(B, ctx, 1, gen), P, gen)
    p = [n - 1 for n in bt.lens]
    nq = [x // P for x in p]
    if mode == "dense_2hot":  # the hot window starts one page early (that page is in the ring, not in the list)
        nq = [max(0, m - 1) for m in nq]
    hot_start = [m * P for m in nq]
    hot_len = [x - s + 1 for x, s in zip(p, hot_start)]
    ids = bt.page_table
    if mode.startswith("sparse"):  # sink page 0 + a random subset in random order: the kernel must not assume sorted ids
        heads = HKV if mode == "sparse_head" else 1  # sparse_head: one list per kv head, [B, Hkv, KCAP]
        rows = torch.zeros((B, heads, bt.page_table.shape[1]), dtype=bt.page_table.dtype)
        for b, m in enumerate(nq):
            if m == 0:
                rows[b] = bt.page_table[b, -1].item()
                continue
            k = min(m, max(1, math.ceil(0.3 * m)))
            for h in range(heads):
                pick = torch.cat([torch.zeros(1, dtype=torch.long),
                                  torch.randperm(m - 1, generator=gen)[: k - 1] + 1])[:k]
                pick = pick[torch.randperm(len(pick), generator=gen)]
                rows[b, h, :k] = bt.page_table[b, pick.to("cuda")].cpu()
                rows[b, h, k:] = bt.page_table[b, -1].item()  # past the list: the poison page
            nq[b] = k
        ids = (rows if heads > 1 else rows[:, 0]).contiguous().to("cuda")
    q = torch.randn(B, HQ, D, generator=gen).to("cuda", torch.bfloat16)
    return (q, bt.store, ids, bt.i32(nq), bt.hot_k, bt.hot_v, bt.hot_slot, bt.i32(hot_start), bt.i32(hot_len), SM)


@pytest.mark.gpu
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
@pytest.mark.parametrize("mode", ["dense", "dense_2hot", "sparse", "sparse_head"])
def test_gpu_matches_ref(B, ctx, P, mode):
    """Triton and Gluon engines against the reference, outputs poisoned with NaN. Gluon (P = 128 as two 64-token
    sub-pages): the rules' launch, one split (every page in one program), the pages through a shared-memory ring of
    2 / 3 slots or prefetched in registers."""
    from gpu_cases import _close, _kernels

    tri, ref = _kernels("draft_decode")
    args = _gpu_case(B, ctx, P, mode)
    q = args[0]
    out = torch.full_like(q, float("nan"))
    tri(*args, out=out)
    want = ref(*args)
    _close(out, want)
    for kw in (dict(), dict(num_splits=1), dict(stages=0), dict(stages=2), dict(stages=3, num_splits=1)):
        out = torch.full_like(q, float("nan"))
        tri(*args, out=out, engine="gluon", launch=DraftLaunch(merge_blocks=4, **kw))
        _close(out, want)


@pytest.mark.gpu
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_gpu_gluon_hot_programs_write_the_new_token(B, ctx, P):
    """engine="gluon": the hot-token programs run in the page launch (fused_hot, gluon_hot.py) or as the Triton
    launch beside it. With new_k / new_v each writes the query's own K/V into its (NaN-poisoned) ring row before
    reading it: the ring afterwards equals the reference's bit for bit, the output matches the reference's; the
    2-hot-page window (the ring's older page read too) and one split included."""
    from gpu_cases import NewTokenCase, _close, _kernels

    tri, _ = _kernels("draft_decode")
    case = NewTokenCase(B, ctx, P, B * 31 + ctx * 5 + P)
    for kw in (dict(fused_hot=True), dict(fused_hot=True, num_splits=1), dict(fused_hot=False),
               dict(fused_hot=True, stages=2)):
        case.poison()
        out = torch.full_like(case.args[0], float("nan"))
        tri(*case.args, out=out, engine="gluon", new_k=case.new_k, new_v=case.new_v, launch=DraftLaunch(**kw))
        assert case.ring_written(), kw
        _close(out, case.want)


@pytest.mark.gpu
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_gpu_tma_ring_equals_cp_async_ring(B, ctx, P):
    """The ring's TMA copies (gluon_stream.py ``TMA``) give the same outputs, bit for bit, as the cp.async ring (the
    form for tensors TMA cannot address: the same math on the same bytes), within tolerance of the reference, over
    2 and 3 slots and with the scales and zeros as views of one buffer (common/tma_rows.py)."""
    import sys
    from pathlib import Path

    from gpu_cases import HQ, SM, D, Batch, _close, _kernels, _lens

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from kernel_cases import relayout_scales

    tri, ref = _kernels("draft_decode")
    gen = torch.Generator().manual_seed(B * 7907 + ctx * 11 + P)
    bt = Batch(_lens(B, ctx, 1, gen), P, gen)
    p = [n - 1 for n in bt.lens]
    nq = [x // P for x in p]
    hot_start = [m * P for m in nq]
    hot_len = [x - s + 1 for x, s in zip(p, hot_start)]
    q = torch.randn(B, HQ, D, generator=gen).to("cuda", torch.bfloat16)
    rest = (bt.page_table, bt.i32(nq), bt.hot_k, bt.hot_v, bt.hot_slot, bt.i32(hot_start), bt.i32(hot_len), SM)
    want = ref(q, bt.store, *rest)
    for store in (bt.store, relayout_scales(bt.store, "packed")):
        for kw in (dict(stages=2), dict(stages=3, num_splits=1), dict(stages=2, num_splits=1)):
            got = {}
            for tma in (False, True):
                out = torch.full_like(q, float("nan"))
                tri(q, store, *rest, out=out, engine="gluon", launch=DraftLaunch(stream_tma=tma, **kw))
                got[tma] = out
            _close(got[True], want)
            assert torch.equal(got[True], got[False]), kw  # the same math on the same bytes: the same bits


@pytest.mark.gpu
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_gpu_hot_last_equals_hot_first(B, ctx, P):
    """The hot-token launch after the Gluon page launch (launch.gluon_hot_last) gives the same outputs, bit for bit,
    as with the launch before it (the same partials, merged the same way), within tolerance of the reference, and
    the query's own K/V written into its NaN-poisoned ring row either way; over the ring (2 and 3 slots) and the
    register form, one split and the rule's."""
    from gpu_cases import NewTokenCase, _close, _kernels

    tri, _ = _kernels("draft_decode")
    case = NewTokenCase(B, ctx, P, B * 6151 + ctx * 13 + P)
    for kw in (dict(stages=2), dict(stages=3), dict(stages=2, num_splits=1), dict(stages=0)):
        got = {}
        for last in (False, True):
            case.poison()
            out = torch.full_like(case.args[0], float("nan"))
            tri(*case.args, out=out, engine="gluon", new_k=case.new_k, new_v=case.new_v,
                launch=DraftLaunch(fused_hot=False, hot_last=last, **kw))
            assert case.ring_written(), (kw, last)
            got[last] = out
        _close(got[True], case.want)
        assert torch.equal(got[True], got[False]), kw  # the same partials merged the same way: the same bits
