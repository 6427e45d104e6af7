"""``extend_attention`` (the batched EXTEND attention, sgl_spec/kernels/extend_attention/) against its pure-torch twin,
Triton kernel under the interpreter: mixed prompt lengths, prefix hits that start mid-page, new tokens spanning
several pages, head groups 1 / 2 / 3 / 5, NaN-poisoned outputs and unread prev slots.

Tolerance: the kernel's dot operands are fp16 (11-bit significands; the twin is fp32 throughout), so outputs of
size ~1 agree to a few 1e-3; 1e-2 leaves room for the sums over a few hundred keys."""
import math

import pytest
import torch

from sgl_spec.kernels.extend_attention import extend_plan
from sgl_spec.kernels.extend_attention import ref as xr
from sgl_spec.kernels.extend_attention import triton as xt
from sgl_spec.kernels.quantize_pages.ref import quantize_pages_ref
from sgl_spec.kvcache.format import KVFormat

pytestmark = pytest.mark.interp


def make_batch(starts, lens, Hq, Hkv, D, P, dtype, seed=0):
    """Full-precision K/V of every position; the complete pages of each request quantized into a shared store at
    shuffled physical ids; q/k/v of the new tokens; prev = the start page's earlier part (the rest NaN)."""
    g = torch.Generator().manual_seed(seed)
    B = len(starts)
    ends = [s + n for s, n in zip(starts, lens)]
    maxp = max(-(-e // P) for e in ends) + 1
    fmt = KVFormat(P, Hkv, D)
    npages = sum(e // P for e in ends) + 3
    store = fmt.alloc(npages, "cpu")
    perm = torch.randperm(npages - 1, generator=g) + 1
    page_table = torch.zeros(B, maxp, dtype=torch.int32)
    q, k, v = [], [], []
    prev_k = torch.full((B, P, Hkv, D), float("nan"), dtype=dtype)
    prev_v = prev_k.clone()
    nxt = 0
    for b, (s, e) in enumerate(zip(starts, ends)):
        kf = torch.randn(e, Hkv, D, generator=g) * 2 + torch.randn(1, Hkv, D, generator=g)
        vf = torch.randn(e, Hkv, D, generator=g)
        for j in range(e // P):
            pid = int(perm[nxt]); nxt += 1
            page_table[b, j] = pid
            pk = kf[j * P:(j + 1) * P].permute(1, 0, 2)[None]
            pv = vf[j * P:(j + 1) * P].permute(1, 0, 2)[None]
            for name, t in quantize_pages_ref(pk.to(dtype), pv.to(dtype)).items():
                getattr(store, name)[pid] = t[0]
        base = (s // P) * P
        prev_k[b, :s - base] = kf[base:s].to(dtype)
        prev_v[b, :s - base] = vf[base:s].to(dtype)
        q.append(torch.randn(e - s, Hq, D, generator=g))
        k.append(kf[s:e])
        v.append(vf[s:e])
    q, k, v = (torch.cat(x).to(dtype) for x in (q, k, v))
    return q, k, v, prev_k, prev_v, store, page_table


CASES = [
    # starts, lens, Hq, Hkv, D, P
    ([0], [37], 2, 2, 32, 32),
    ([0, 40, 5, 32], [70, 9, 60, 1], 4, 2, 32, 32),
    ([33, 0, 64], [50, 21, 17], 3, 1, 32, 32),
    ([7, 90], [100, 38], 5, 1, 64, 32),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_extend_attention_matches_reference(case, dtype):
    starts, lens, Hq, Hkv, D, P = CASES[case]
    q, k, v, pk, pv, store, pt = make_batch(starts, lens, Hq, Hkv, D, P, dtype, seed=case)
    plan = extend_plan(starts, lens, Hq // Hkv, P, "cpu", D)
    scale = 1 / math.sqrt(D)
    want = xr.extend_attention(q, k, v, pk, pv, store, pt, plan, scale, out=torch.full_like(q, float("nan")))
    out = torch.full_like(q, float("nan"))
    got = xt.extend_attention(q, k, v, pk, pv, store, pt, plan, scale, out=out)
    assert got is out
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got.float(), want.float(), atol=1e-2, rtol=1e-2)


def test_plan_blocks_stay_in_their_page():
    plan = extend_plan([5, 0, 130], [200, 64, 3], 8, 32, "cpu")  # group 8: 16-token blocks
    assert plan.block_t == 16
    b, p0, p1 = plan.blocks.long().unbind(1)
    assert (p1 > p0).all() and ((p1 - 1) // 16 == p0 // 16).all()
    for r, (s, n) in enumerate([(5, 200), (0, 64), (130, 3)]):
        mine = b == r
        assert int((p1 - p0)[mine].sum()) == n and int(p0[mine].min()) == s and int(p1[mine].max()) == s + n
    assert plan.row0.tolist() == [0, 200, 264]


def test_rejects_bad_shapes():
    starts, lens, Hq, Hkv, D, P = CASES[1]
    q, k, v, pk, pv, store, pt = make_batch(starts, lens, Hq, Hkv, D, P, torch.float32)
    plan = extend_plan(starts, lens, Hq // Hkv, P, "cpu", D)
    with pytest.raises(ValueError, match="prev_k"):
        xt.extend_attention(q, k, v, pk[:, :3], pv, store, pt, plan, 1.0)
    with pytest.raises(ValueError, match="k/v"):
        xt.extend_attention(q, k[:, :1], v, pk, pv, store, pt, plan, 1.0)
    wide_v = torch.cat([v, v], dim=-1)[..., :D]  # v's values with other strides than k's
    with pytest.raises(ValueError, match="laid out like k"):
        xt.extend_attention(q, k, wide_v, pk, pv, store, pt, plan, 1.0)
    with pytest.raises(ValueError, match="page_table int32"):
        xt.extend_attention(q, k, v, pk, pv, store, pt.long(), plan, 1.0)


@pytest.mark.gpu
@pytest.mark.parametrize("G,D,P", [(4, 128, 64), (3, 64, 32), (2, 64, 128)])
def test_extend_attention_on_gpu(G, D, P):
    """The compiled kernel on CUDA against the twin (fp32 on the same inputs), bf16 model tensors."""
    starts, lens = [0, 77, 3 * P + 5, 1000], [300, 2 * P + 9, 1, 517]
    q, k, v, pk, pv, store, pt = make_batch(starts, lens, 2 * G, 2, D, P, torch.bfloat16, seed=G)
    cuda = [t.cuda() for t in (q, k, v, pk, pv, pt)]
    for name in ("k_upper", "k_lower", "k_scale", "k_zero", "v_upper", "v_lower", "v_scale", "v_zero"):
        setattr(store, name, getattr(store, name).cuda())
    plan = extend_plan(starts, lens, G, P, "cuda", D)
    out = torch.full_like(cuda[0], float("nan"))
    got = xt.extend_attention(*cuda[:5], store, cuda[5], plan, D ** -0.5, out=out)
    want = xr.extend_attention(*cuda[:5], store, cuda[5], plan, D ** -0.5)
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)


# ---- FA3 engine (fa3.py): the layout and the merge on the CPU through a stand-in, the real FA3 on the GPU ----------
from sgl_spec.kernels.extend_attention import fa3 as xf  # noqa: E402
from sgl_spec.kernels.extend_attention import paged_plan  # noqa: E402


def _fa3_engines():
    from sgl_spec.kernels.extend_attention import fa3_segments, segment_plan

    return {"fa3": (xf, paged_plan), "fa3_segments": (fa3_segments, segment_plan)}


@pytest.mark.parametrize("engine", ["fa3", "fa3_segments"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_fa3_engine_layout_and_merge_match_reference(case, engine):
    """Both FA3 engines (fa3.py: two calls merged; fa3_segments.py: one call), fp16 operands (as FA3 takes them)
    against the fp32 twin: 1e-2 as for the Triton engine."""
    import fa3_standin

    mod, make_plan = _fa3_engines()[engine]
    starts, lens, Hq, Hkv, D, P = CASES[case]
    q, k, v, pk, pv, store, pt = make_batch(starts, lens, Hq, Hkv, D, P, torch.bfloat16, seed=case)
    scale = 1 / math.sqrt(D)
    want = xr.extend_attention(q, k, v, pk, pv, store, pt, extend_plan(starts, lens, Hq // Hkv, P, "cpu", D), scale)
    plan = make_plan(starts, lens, pt, P)
    out = torch.full_like(q, float("nan"))
    got = mod.extend_attention(q, k, v, pk, pv, store, plan, scale, out=out, flash=fa3_standin)
    assert got is out and not torch.isnan(got).any()
    torch.testing.assert_close(got.float(), want.float(), atol=1e-2, rtol=1e-2)


def _random_batch(seed):
    import random

    rng = random.Random(seed)
    P = rng.choice([16, 32])
    B = rng.randint(1, 5)
    starts = [rng.choice([0, rng.randint(1, 200), P * rng.randint(1, 4)]) for _ in range(B)]
    lens = [rng.choice([0, 1, P, rng.randint(2, 150)]) for _ in range(B)]
    return starts, lens, P


def test_paged_plan_fields():
    starts, lens, P = [5, 0, 130, 64], [200, 64, 3, 0], 32
    plan = paged_plan(starts, lens, torch.arange(4 * 12, dtype=torch.int32).reshape(4, 12), P)
    assert plan.cu_q.tolist() == [0, 200, 264, 267, 267] and plan.a_len.tolist() == [205 - P, 64 - P, 133 - P, 0]
    assert plan.n8 == (204 // 32) + (63 // 32) + (132 // 32)
    assert plan.a_table[0, :6].tolist() == list(range(6)) and plan.a_table[1, 0].item() == 6
    assert plan.dq_pages.tolist() == list(range(6)) + [12] + [24, 25, 26, 27]  # page_table[b, j], j < pages read


@pytest.mark.parametrize("batch", [([5, 0, 130, 64], [200, 64, 3, 0], 32)] + [_random_batch(i) for i in range(6)])
def test_paged_plan_splits_the_view_into_disjoint_parts(batch):
    """Part A (INT8 keys at least a page behind, one causal segment a request) and part B (the last two pages,
    window P) together give each row exactly the view: INT8 keys of the pages before its own, own page up to it."""
    starts, lens, P = batch
    pt = torch.arange(len(lens) * 16, dtype=torch.int32).reshape(len(lens), 16)
    plan = paged_plan(starts, lens, pt, P)
    T = sum(lens)
    need = [(s + n - 1) // P if n else 0 for s, n in zip(starts, lens)]
    assert plan.n8 == sum(need) and plan.a_len.tolist() == [max(s + n - P, 0) if n else 0 for s, n in zip(starts, lens)]
    b_cu, k_cu = plan.b_cu_q.tolist(), plan.b_cu_k.tolist()
    pos = [s + i for s, n in zip(starts, lens) for i in range(n)]
    req = [b for b, n in enumerate(lens) for _ in range(n)]
    # key of buffer row -> (kind, request-relative position): own rows from [k ; prev_k], INT8 rows from the copy
    key = {}
    own_src = plan.b_own_src.tolist()
    for p_, src in zip(plan.b_own_pos.tolist(), own_src):
        key[p_] = ("fp", pos[src] if src < T else None, src)
    base = [sum(need[:b]) for b in range(len(need))]
    for p_, src in zip(plan.b_int8_pos.tolist(), plan.b_int8_src.tolist()):
        key[p_] = ("int8", src // P, src % P)
    assert sorted(key) == list(range(plan.b_keys))
    for a, b in zip(b_cu, b_cu[1:]):
        assert b > a and pos[a] // P == pos[b - 1] // P and b - a <= P  # one page a segment
    for si, (a, b) in enumerate(zip(b_cu, b_cu[1:])):
        seg_keys = [key[x] for x in range(k_cu[si], k_cu[si + 1])]
        r_, j = req[a], pos[a] // P
        for row in range(a, b):
            t = pos[row]
            lk, lq = len(seg_keys), b - a
            diag = row - a + lk - lq
            seen = seg_keys[max(0, diag - (P - 1)):diag + 1]  # causal, window P
            part_a = set(range(max(0, t - P + 1)))  # INT8 positions 0 … t-P (request-relative)
            int8_b = {(pg - base[r_]) * P + off for kind, pg, off in seen if kind == "int8"}
            assert all(kind == "fp" for kind, *_ in seen[len(int8_b):])
            assert part_a.isdisjoint(int8_b) and part_a | int8_b == set(range(j * P))  # the INT8 pages before
            fp = [x for kind, x, _ in seen if kind == "fp"]
            assert len(fp) == t - j * P + 1  # own page up to the row


# ---- FA3 engine in one call (fa3_segments.py): its layout ------------------------------------------------------------
from sgl_spec.kernels.extend_attention import segment_plan  # noqa: E402


@pytest.mark.parametrize("batch", [([5, 0, 130, 64], [200, 64, 3, 0], 32)] + [_random_batch(i) for i in range(6)])
def test_segment_plan_gives_each_row_exactly_the_view(batch):
    """Row t of page j reads its segment's first seqlens keys: the INT8 copy of the request's pages 0 … j-1, then
    its own page (ring part, then new rows) up to t; every own slot written once, from the right source row."""
    starts, lens, P = batch
    pt = torch.arange(len(lens) * 16, dtype=torch.int32).reshape(len(lens), 16)
    plan = segment_plan(starts, lens, pt, P)
    T = sum(lens)
    need = [(s + n - 1) // P if n else 0 for s, n in zip(starts, lens)]
    base = [sum(need[:b]) for b in range(len(need))]
    assert plan.n8 == sum(need) and plan.dq_pages.tolist() == [b * 16 + j for b in range(len(lens))
                                                                for j in range(need[b])]
    pos = [s + i for s, n in zip(starts, lens) for i in range(n)]
    req = [b for b, n in enumerate(lens) for _ in range(n)]
    own = dict(zip(plan.own_pos.tolist(), plan.own_src.tolist()))
    assert len(own) == plan.own_pos.numel()  # no slot written twice
    cu = plan.cu_q.tolist()
    assert cu[-1] == T and plan.segments == len(cu) - 1
    for si, (a, b) in enumerate(zip(cu, cu[1:])):
        r, j = req[a], pos[a] // P
        assert b > a and pos[b - 1] // P == j and all(req[x] == r for x in range(a, b))
        L = plan.seqlens[si].item()
        assert L == pos[b - 1] + 1
        row_pages = plan.table[si, :j + 1].tolist()
        assert row_pages[:j] == [base[r] + i for i in range(j)] and row_pages[j] == plan.n8 + si
        for x in range(a, b):  # causal, bottom right: row x sees keys 0 … L - (b - x)
            seen = L - (b - x) + 1
            assert seen == pos[x] + 1  # j·P INT8 keys, then own offsets 0 … pos[x] - j·P
            for off in range(pos[x] - j * P + 1):
                src = own[(plan.n8 + si) * P + off]
                p_abs = j * P + off
                if p_abs < starts[r]:  # the ring part: request r's prev rows
                    assert src == T + r * P + off
                else:
                    assert src < T and req[src] == r and pos[src] == p_abs


@pytest.mark.gpu
@pytest.mark.parametrize("G,D,P", [(4, 128, 64), (3, 64, 32), (2, 64, 128), (5, 128, 64), (6, 64, 64), (7, 128, 64),
                                   (8, 128, 64), (1, 128, 64)])
@pytest.mark.parametrize("engine", ["fa3", "fa3_segments"])
def test_fa3_engine_on_gpu(G, D, P, engine):
    """sgl_kernel's FA3 on CUDA (both engines) against the twin (fp32 on the same inputs), bf16 model tensors."""
    mod, make_plan = _fa3_engines()[engine]
    starts, lens = [0, 77, 3 * P + 5, 1000], [300, 2 * P + 9, 1, 517]
    q, k, v, pk, pv, store, pt = make_batch(starts, lens, 2 * G, 2, D, P, torch.bfloat16, seed=G)
    cuda = [t.cuda() for t in (q, k, v, pk, pv, pt)]
    for name in ("k_upper", "k_lower", "k_scale", "k_zero", "v_upper", "v_lower", "v_scale", "v_zero"):
        setattr(store, name, getattr(store, name).cuda())
    want = xr.extend_attention(*cuda[:5], store, cuda[5], extend_plan(starts, lens, G, P, "cuda", D), D ** -0.5)
    out = torch.full_like(cuda[0], float("nan"))
    got = mod.extend_attention(*cuda[:5], store, make_plan(starts, lens, cuda[5], P), D ** -0.5, out=out)
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)
