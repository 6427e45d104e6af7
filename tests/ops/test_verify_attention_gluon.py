"""verify_attention's Gluon engine (sgl_spec/kernels/verify_attention/gluon_*.py).

Without a GPU: the page programs, their copy-warp form and the ring launch compile for sm_90 with every operand
conversion a register rename (``assert_trivial``), in the budget two programs an SM need (shared memory, registers),
with the tensor-core work, barriers and copies the design says (tests/support/verify_sass.py, in a process of its own:
compiled, not interpreted); the launch rules; the launcher refuses what it does not cover.
On the GPU (``gpu``): against the reference over odd shapes, both page sizes, both partitions and both score kinds,
the copy-warp form bit-equal to the cp.async form, both ring launches, and each row of a batch-invariant window
bit-equal to a one-row call at its position. Shapes, poisoning and tolerances: tests/support/gpu_cases.py.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from sgl_spec.kernels import engine

ROOT = Path(__file__).resolve().parents[2]
SMEM_PER_SM = 228 * 1024  # sm_90; two programs an SM (gluon_rules.PROGRAMS_PER_SM) must fit


def _sass(what, *args):
    """tests/support/verify_sass.py's report (stdout) of one kernel form."""
    pytest.importorskip("triton.experimental.gluon")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compiled, not interpreted
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)  # the tree, installed or not
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "verify_sass.py"), what, *args],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]  # a layout conversion asserted trivial that is not fails here
    return res.stdout


def _num(out, key):
    m = re.search(rf"\b{key}=(\d+)", out)
    assert m, (key, out[-2000:])
    return int(m.group(1))


# ---- sm_90 SASS of the page programs ----------------------------------------------------------------------------
# slim None: the launcher's form for G (slim_form); 0 / 1: the other form compiles too (it is another G's form).
# N2 = 8: the 16 + 8 column split of 17..24 rows (row_tiles), with lse scores too. P = 128: each page as two 64-token
# sub-pages. cw=0: the cp.async form (the copy-warp form where the planes do not allow TMA, and every G but 4)
@pytest.mark.parametrize("G,N,lse,slim,N2,P", [
    (4, 32, 0, None, 0, 64), (2, 32, 1, None, 0, 64), (4, 8, 0, None, 0, 64), (2, 32, 0, None, 0, 64),
    (4, 32, 1, None, 0, 64), (2, 32, 0, 1, 0, 64), (4, 32, 1, 0, 0, 64), (4, 16, 0, None, 8, 64),
    (2, 16, 0, None, 8, 64), (4, 16, 1, None, 8, 64), (8, 16, 0, None, 8, 64), (4, 16, 0, None, 8, 128),
    (4, 16, 1, None, 8, 128), (2, 32, 0, None, 0, 128), (4, 8, 0, None, 0, 128)])
def test_compiles_for_sm90(G, N, lse, slim, N2, P):
    from sgl_spec.kernels.verify_attention.gluon_rules import slim_form

    _check_compiles(G, N, lse, slim, N2, P, slim_form(G) if slim is None else slim)


# each form with the value-page branches the other way than its rule (gluon_rules.value_branches)
@pytest.mark.parametrize("G,N,N2,P,br", [(4, 16, 8, 64, 0), (4, 32, 0, 64, 1)])
def test_value_branch_forms_compile_for_sm90(G, N, N2, P, br):
    from sgl_spec.kernels.verify_attention.gluon_rules import slim_form, value_branches

    assert value_branches(G, N, N2, True) != bool(br)
    _check_compiles(G, N, 0, None, N2, P, slim_form(G), br)


def _check_compiles(G, N, lse, slim, N2, P, want_slim, br=None):
    from sgl_spec.kernels.verify_attention.gluon_rules import PROGRAMS_PER_SM

    extra = ([] if slim is None else [f"slim={slim}"]) + ([] if br is None else [f"br={br}"])
    out = _sass("pages", f"G={G}", f"N={N}", f"N2={N2}", f"lse={lse}", f"P={P}", "cw=0", *extra)
    assert f"slim={int(want_slim)}" in out and f"P={P}:" in out, out[-2000:]
    assert br is None or f"br={br}" in out, out[-2000:]
    m = re.search(r"regs=(\d+) stack=(\d+) local=(\d+) smem=(\d+)", out)
    assert m, out
    regs, _, _, smem = (int(x) for x in m.groups())
    assert regs <= 255 and PROGRAMS_PER_SM * (smem + 1024) <= SMEM_PER_SM, out
    # a group of 4 pages: scores 4 row tiles x 8 k-steps x N/8, values 4 pages x 2 x 4 x N/8 (one warp's share);
    # tile B adds its N2 columns on the same converted keys and values
    assert _num(out, "loop_hmma") == 64 * (N + N2) // 8, out
    # keys ready, page maxima, values ready, values consumed; lse scores at P = 128 add the sum of a page's two
    # sub-pages, which two warps hold (a cross-warp reduction: two barriers)
    assert _num(out, "loop_bar_sync") <= (6 if lse and P == 128 else 4), out


# Llama-3-8B's γ+1 = 5 (16 + 8 columns) at both page sizes, and γ+1 = 1 (8 columns)
@pytest.mark.parametrize("G,N,N2,P", [(4, 16, 8, 64), (4, 16, 8, 128), (4, 8, 0, 64)])
def test_copy_warp_form_compiles_for_sm90(G, N, N2, P):
    from sgl_spec.kernels.verify_attention import gluon_copy_warp as ws

    out = _sass("pages", f"G={G}", f"N={N}", f"N2={N2}", f"P={P}", "cw=1")
    assert f"cw=1 P={P}:" in out, out[-2000:]
    # launched at WS_MAXNREG over 8 warps, so two programs an SM by registers and by shared memory
    assert _num(out, "regs") == ws.WS_MAXNREG and 2 * 8 * 32 * ws.WS_MAXNREG <= 65536, out[-2000:]
    assert 2 * (_num(out, "smem") + 1024) <= SMEM_PER_SM, out[-2000:]
    # setmaxnreg: the copy warp's group down to COPY_WARP_REGS, the compute warps up to what is left of the pool
    want = {ws.COPY_WARP_REGS.value, (8 * ws.WS_MAXNREG - 4 * ws.COPY_WARP_REGS.value) // 4 // 8 * 8}
    assert set(map(int, re.search(r"setmaxnreg=([\d,]+)", out).group(1).split(","))) == want, out[-2000:]
    # the page loop: the cp.async form's MMAs, no per-thread copies, no spill loads; a barrier more (the value
    # buffers' release) than the cp.async form's four
    assert _num(out, "loop_hmma") == 64 * (N + N2) // 8, out[-2000:]
    assert _num(out, "loop_ldgsts") == 0, out[-2000:]
    # spill-free in the Triton the engine launches Gluon with (engine.GLUON_TRITON); Triton 3.8 lowers this loop to
    # scalar code that reloads a spilled value every pass at P = 128, and the engine keeps the Triton engine there
    if triton.__version__.startswith(engine.GLUON_TRITON):
        assert _num(out, "loop_ldl") == 0, out[-2000:]
    assert _num(out, "loop_bar_sync") <= 5, out[-2000:]
    # per group: key and value planes of 4 pages and 4 scale rows of each kind, in both copy loops of the kernel
    # (the copy warp's loop is compiled once, its 8 + 16 + 8 copies a group)
    assert _num(out, "utmaldg") == 4 * (2 + 4 + 2), out[-2000:]


def test_copy_warp_loop_is_shorter_than_the_cp_async_loop():
    """Llama-3-8B's γ+1 = 5 at P = 64: the compute warps' loop without the copies and their address math."""
    ws_loop = _num(_sass("pages", "G=4", "N=16", "N2=8", "P=64", "cw=1"), "loop_instr")
    cp_loop = _num(_sass("pages", "G=4", "N=16", "N2=8", "P=64", "cw=0"), "loop_instr")
    assert ws_loop < 0.9 * cp_loop, (ws_loop, cp_loop)


# the running sums per lane: Llama-3-8B's γ+1 = 5 in the copy-warp form, and pycode-30m's cp.async form (G = 2, one
# 32-column tile)
@pytest.mark.parametrize("G,N,N2,cw", [(4, 16, 8, 1), (2, 32, 0, 0)])
def test_page_loop_keeps_only_the_page_maxima_shuffles(G, N, N2, cw):
    """The running sums l and z stay per lane through the page loop (reduced once after it), so the loop's shuffles
    are the page maxima's: fewer than the 6 (N + N2) / 4 that reducing l and z over 8 lanes every group would add."""
    out = _sass("pages", f"G={G}", f"N={N}", f"N2={N2}", "P=64", f"cw={cw}")
    assert _num(out, "loop_shfl") < 6 * (N + N2) // 4, out[-2000:]


# the Gluon ring launch: Llama-3-8B (G = 4, 32 columns) at both page sizes, pycode-30m (G = 2), and γ+1 = 1 (8
# columns); at batch 1 a ring program shares an SM with one page program (the page launch leaves 8 slots free), so a
# ring program and a page program must fit one SM together
@pytest.mark.parametrize("G,NT,P", [(4, 32, 64), (4, 32, 128), (2, 32, 64), (4, 8, 64)])
def test_ring_launch_compiles_for_sm90(G, NT, P):
    out = _sass("ring", f"G={G}", f"NT={NT}", f"P={P}")
    m = re.search(r"regs=(\d+) stack=(\d+) local=(\d+) smem=(\d+)", out)
    assert m, out
    regs, stack, _, smem = (int(x) for x in m.groups())
    page_smem = 93696  # the page kernel's largest form (32 columns at P = 64: test_compiles_for_sm90 prints it)
    assert regs <= 255 and stack == 0 and smem + page_smem + 2 * 1024 <= SMEM_PER_SM, out


# ---- launch rules --------------------------------------------------------------------------------------------------
def test_form_and_auto_rule_follow_the_group():
    """SLIM (rows recomputed where used) at G >= 4; auto takes Gluon at every batch at G >= 4 and from 32 pairs
    below."""
    from sgl_spec.kernels.verify_attention.gluon_rules import auto_min_pairs, slim_form

    assert [slim_form(g) for g in (1, 2, 4, 8)] == [False, False, True, True]
    assert [auto_min_pairs(g) for g in (1, 2, 4, 8)] == [32, 32, 1, 1]


def test_row_tiles():
    """17..24 rows go as 16 + 8 MMA columns while the score rows (columns < 2G) fit tile A; every other window is
    one power-of-two tile."""
    from sgl_spec.kernels.verify_attention.gluon_rules import row_tiles

    assert row_tiles(20, 4) == (16, 8) and row_tiles(24, 4) == (16, 8) and row_tiles(18, 2) == (16, 8)
    assert row_tiles(24, 8) == (16, 8)
    assert row_tiles(16, 4) == (16, 0) and row_tiles(25, 4) == (32, 0) and row_tiles(32, 4) == (32, 0)
    assert row_tiles(4, 4) == (8, 0) and row_tiles(1, 1) == (8, 0)
    assert row_tiles(24, 12) == (32, 0)  # score rows would span 24 columns: one tile


def test_value_branches_only_in_the_measured_forms():
    """The value-page branches where they measured faster: Llama-3-8B's nq 5 (16 + 8 columns) and pycode-30m's nq
    13 with scores; not Llama-3-8B's nq 8, not pycode-30m without scores, not unmeasured forms."""
    from sgl_spec.kernels.verify_attention.gluon_rules import row_tiles, value_branches

    assert value_branches(4, *row_tiles(5 * 4, 4), True) and value_branches(4, *row_tiles(5 * 4, 4), False)
    assert value_branches(2, *row_tiles(13 * 2, 2), True) and not value_branches(2, *row_tiles(13 * 2, 2), False)
    assert not value_branches(4, *row_tiles(8 * 4, 4), True) and not value_branches(4, *row_tiles(8 * 4, 4), False)
    assert not value_branches(8, *row_tiles(3 * 8, 8), True) and not value_branches(4, *row_tiles(1 * 4, 4), True)


def test_copy_warp_and_score_rules():
    from sgl_spec.kernels.verify_attention import gluon_rules as vgr

    assert vgr.copy_warp_form(4) and not vgr.copy_warp_form(2) and not vgr.copy_warp_form(8)
    assert vgr.direct_scores(False) and not vgr.direct_scores(True)  # "max": the page programs; "lse": the merge


def test_copy_warp_needs_contiguous_planes_and_scales_in_whole_rows():
    pytest.importorskip("triton.experimental.gluon")
    from sgl_spec.kernels.verify_attention.gluon_copy_warp import copy_warp_supported
    from sgl_spec.kvcache.format import KVFormat

    st = KVFormat(64, 2, 128).alloc(5)
    words = [t.view(torch.int32) for t in (st.k_upper, st.k_lower, st.v_upper, st.v_lower)]
    ks32, kz32 = st.k_scale.view(torch.int32), st.k_zero.view(torch.int32)
    assert copy_warp_supported(words, ks32, kz32, st.v_scale, st.v_zero)
    big = KVFormat(64, 2, 128).alloc(10)  # every other page: a strided view
    odd = [t.view(torch.int32)[::2] for t in (big.k_upper, big.k_lower, big.v_upper, big.v_lower)]
    assert not copy_warp_supported(odd, ks32, kz32, st.v_scale, st.v_zero)  # planes: contiguous only
    # scales: any view whose pages and heads start at whole rows of 64 (sgl_spec/kernels/common/tma_rows.py), e.g.
    # every other page or four views of one buffer
    assert copy_warp_supported(words, ks32, kz32, big.v_scale[::2], big.v_zero[::2])
    odd_heads = torch.zeros(5, 2, 96, dtype=torch.float16)[..., :64]
    assert not copy_warp_supported(words, ks32, kz32, odd_heads, odd_heads)


def test_shapes_and_device_are_checked():
    from sgl_spec.kernels.verify_attention.gluon_rules import GLUON_MAX_ROWS, gluon_verify_shapes, gluon_verify_support

    assert gluon_verify_shapes(64, 64, 4, 8) == ""
    assert "page size 64" in gluon_verify_shapes(32, 64, 4, 5)
    assert "head_dim 128" in gluon_verify_shapes(64, 32, 4, 5)
    assert f"up to {GLUON_MAX_ROWS} rows" in gluon_verify_shapes(64, 64, 4, 9)
    assert "CUDA device" in gluon_verify_support("cpu", 64, 128, 4, 5)
    assert "page size" in gluon_verify_support("cpu", 32, 128, 4, 5)  # shapes first
    assert gluon_verify_shapes(128, 64, 4, 5) == ""  # a 128-token page as two 64-token sub-pages


def test_engine_is_checked():
    from sgl_spec.kernels.verify_attention.triton import verify_attention
    from sgl_spec.kvcache.format import KVFormat

    store = KVFormat(page_size=64, num_kv_heads=2, head_dim=128).alloc(2)
    q = torch.zeros(1, 2, 4, 128, dtype=torch.bfloat16)
    hot = torch.zeros(1, 2, 64, 2, 128, dtype=torch.bfloat16)
    i32 = lambda *v: torch.tensor(v, dtype=torch.int32)  # noqa: E731
    args = (q, store, i32(0, 1)[None], i32(70), hot, hot.clone(), i32(0), 0.1)
    with pytest.raises(ValueError, match="engine='gluon'.*does not run on cpu"):
        verify_attention(*args, engine="gluon")
    with pytest.raises(ValueError, match="engine must be"):
        verify_attention(*args, engine="cuda")
    q9 = torch.zeros(1, 9, 8, 128, dtype=torch.bfloat16)  # 9 rows of 4 heads: wider than the Gluon tile
    store4 = KVFormat(page_size=64, num_kv_heads=2, head_dim=128).alloc(2)
    with pytest.raises(ValueError, match="up to 32 rows"):
        verify_attention(q9, store4, *args[2:], engine="gluon")


# ---- on the GPU ----------------------------------------------------------------------------------------------------
def _kernels():
    from sgl_spec.kernels.verify_attention import verify_attention as tri
    from sgl_spec.kernels.verify_attention.ref import verify_attention as ref

    return tri, ref


def _nan_scores(B, bt):
    from gpu_cases import HKV

    return torch.full((B, HKV, bt.maxp), float("nan"), device="cuda")


def _close_scores(sc, sc_ref, q_start, P):
    from gpu_cases import _close

    for b, s0 in enumerate((q_start // P).tolist()):  # entries j >= q_start // P stay unwritten (contract)
        _close(sc[b, :, :s0], sc_ref[b, :, :s0], atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("nq", [1, 5, 8])
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_gpu_copy_warp_form_equals_cp_async_form(B, ctx, P, nq, monkeypatch):
    """The copy-warp form (G = 4) against the reference, and bit for bit the cp.async form (the same math on the
    same bytes), both partitions, both score kinds."""
    from gpu_cases import _close, verify_window
    from sgl_spec.kernels.verify_attention import gluon_rules as vgr

    tri, ref = _kernels()
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq + 37)
    nq = min(nq, ctx)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen)
    for kind in ("max", "lse"):
        sc_ref = _nan_scores(B, bt)
        want = ref(*args, scores=sc_ref, score_kind=kind)
        for invariant in (False, True):
            got = {}
            for cw in (False, True):
                monkeypatch.setattr(vgr, "COPY_WARP_GROUPS", (4,) if cw else ())
                sc, out = _nan_scores(B, bt), torch.full_like(q, float("nan"))
                tri(*args, scores=sc, out=out, engine="gluon", batch_invariant=invariant, score_kind=kind)
                got[cw] = out, sc
            out, sc = got[True]
            _close(out, want)
            _close_scores(sc, sc_ref, q_start, P)
            assert torch.equal(out, got[False][0])
            assert torch.equal(sc.nan_to_num(-7.0), got[False][1].nan_to_num(-7.0))


@pytest.mark.gpu
@pytest.mark.parametrize("cw", [False, True])
@pytest.mark.parametrize("nq", [1, 5, 8])
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_gpu_rows_match_one_row_calls(B, ctx, P, nq, cw, monkeypatch):
    """In both the cp.async and the copy-warp forms: against the reference with both partitions, and under
    batch_invariant each row of a window bit-equal to a one-row call at its position (the per-lane running sums of
    a column depend on that column alone)."""
    from gpu_cases import _close, verify_window
    from sgl_spec.kernels.verify_attention import gluon_rules as vgr

    tri, ref = _kernels()
    monkeypatch.setattr(vgr, "COPY_WARP_GROUPS", (4,) if cw else ())
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq + 41)
    nq = min(nq, ctx)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen)
    sc_ref = _nan_scores(B, bt)
    want = ref(*args, scores=sc_ref)
    for invariant in (False, True):
        sc, out = _nan_scores(B, bt), torch.full_like(q, float("nan"))
        tri(*args, scores=sc, out=out, engine="gluon", batch_invariant=invariant)
        _close(out, want)
        _close_scores(sc, sc_ref, q_start, P)
        if invariant:
            for i in range(nq):
                one = torch.full_like(q[:, i:i + 1], float("nan"))
                tri(q[:, i:i + 1].contiguous(), *args[1:3], q_start + i, *args[4:], out=one, engine="gluon",
                    batch_invariant=True)
                assert torch.equal(one[:, 0], out[:, i])


@pytest.mark.gpu
@pytest.mark.parametrize("nq,G,dtype", [(1, 4, torch.bfloat16), (5, 4, torch.bfloat16), (8, 4, torch.bfloat16),
                                        (13, 2, torch.bfloat16), (5, 4, torch.float16)])
@pytest.mark.parametrize("P", [64, 128])
@pytest.mark.parametrize("ctx", [1, 63, 4097])
@pytest.mark.parametrize("B", [1, 3, 17])
def test_gpu_both_ring_launches(B, ctx, P, nq, G, dtype):
    """The ring split as the Gluon launch (batch_invariant=False) and as the Triton launch after the page launch
    (batch_invariant=True): both against the reference, with stale ring rows past the window poisoned (never
    loaded), and the page scores (per page, not per program) the same bits."""
    from gpu_cases import HKV, _close, verify_window

    tri, ref = _kernels()
    gen = torch.Generator().manual_seed(B * 7919 + ctx * 13 + P + nq + G)
    nq = min(nq, ctx)
    bt, q, q_start, args = verify_window(B, ctx, P, nq, gen, hq=G * HKV, dtype=dtype)
    sc_ref = _nan_scores(B, bt)
    want = ref(*args, scores=sc_ref)
    scores = []
    for invariant in (False, True):
        sc, out = _nan_scores(B, bt), torch.full_like(q, float("nan"))
        tri(*args, scores=sc, out=out, engine="gluon", batch_invariant=invariant)
        _close(out, want)
        _close_scores(sc, sc_ref, q_start, P)
        scores.append(sc.nan_to_num(-7.0))
    assert torch.equal(scores[0], scores[1])


@pytest.mark.gpu
@pytest.mark.parametrize("lens", [[40000, 20001], [9000] * 5 + [300, 64 * 70 + 3]])
def test_gpu_long_contexts_both_partitions(lens):
    """Long and uneven contexts: both partitions (and so both ring launches) against the reference, twice, and the
    page scores the same bits every time."""
    from gpu_cases import HKV, HQ, SM, D, Batch, _close

    tri, ref = _kernels()
    gen = torch.Generator().manual_seed(sum(lens))
    P, nq = 64, 5
    bt = Batch(lens, P, gen)
    q = torch.randn(len(lens), nq, HQ, D, generator=gen).to("cuda", torch.bfloat16)
    q_start = bt.i32([n - nq for n in bt.lens])
    args = (q, bt.store, bt.page_table, q_start, bt.hot_k, bt.hot_v, bt.hot_slot, SM)
    want = ref(*args, scores=torch.full((len(lens), HKV, bt.maxp), float("nan"), device="cuda"))
    scores = []
    for invariant in (True, False, False):
        sc = torch.full((len(lens), HKV, bt.maxp), float("nan"), device="cuda")
        out = torch.full_like(q, float("nan"))
        tri(*args, scores=sc, out=out, engine="gluon", batch_invariant=invariant)
        _close(out, want)
        scores.append(sc.nan_to_num(-7.0))
    assert all(torch.equal(scores[0], x) for x in scores[1:])
