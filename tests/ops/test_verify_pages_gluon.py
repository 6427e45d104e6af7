"""The Gluon verify page programs (sgl_spec/kernels/verify_attention/gluon_pages.py) on a machine without a GPU: they compile for sm_90
with every operand conversion a register rename (``assert_trivial``), in the budget two programs an SM need (shared
memory, registers), with the tensor-core work and the barriers the design says; the launcher and the server's
engine resolution refuse what they do not cover. Their numbers are checked against the reference on the GPU
(tests/ops/test_verify_gpu.py::test_verify_attention / test_verify_long_window)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SMEM_PER_SM = 228 * 1024  # sm_90; two programs an SM (verify_gluon_rules.PROGRAMS_PER_SM) must fit


# slim None: the launcher's form for G (slim_form); 0 / 1: the other form compiles too. N2 = 8: the 16 + 8 column
# split of 17..24 rows (row_tiles), in both forms and with lse scores. P = 128: each page as two 64-token sub-pages
@pytest.mark.parametrize("G,N,lse,slim,N2,P", [
    (4, 32, 0, None, 0, 64), (2, 32, 1, None, 0, 64), (4, 8, 0, None, 0, 64), (2, 32, 0, None, 0, 64),
    (4, 32, 1, None, 0, 64), (2, 32, 0, 1, 0, 64), (4, 32, 1, 0, 0, 64), (4, 16, 0, None, 8, 64),
    (2, 16, 0, None, 8, 64), (4, 16, 1, None, 8, 64), (8, 16, 0, None, 8, 64), (4, 16, 0, None, 8, 128),
    (4, 16, 1, None, 8, 128), (2, 32, 0, None, 0, 128), (4, 8, 0, None, 0, 128)])
def test_compiles_for_sm90(G, N, lse, slim, N2, P):
    pytest.importorskip("triton.experimental.gluon")
    from sgl_spec.kernels.verify_attention.gluon_rules import slim_form

    _check_compiles(G, N, lse, slim, N2, P, slim_form(G) if slim is None else slim)


# each form with the value-page branches the other way than its rule (verify_gluon_rules.value_branches)
@pytest.mark.parametrize("G,N,N2,P,br", [(4, 16, 8, 64, 0), (4, 32, 0, 64, 1)])
def test_value_branch_forms_compile_for_sm90(G, N, N2, P, br):
    pytest.importorskip("triton.experimental.gluon")
    from sgl_spec.kernels.verify_attention.gluon_rules import slim_form, value_branches

    assert value_branches(G, N, N2, True) != bool(br)
    _check_compiles(G, N, 0, None, N2, P, slim_form(G), br)


def _check_compiles(G, N, lse, slim, N2, P, want_slim, br=None):
    from sgl_spec.kernels.verify_attention.gluon_rules import PROGRAMS_PER_SM

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compiled, not interpreted
    extra = ([] if slim is None else [f"slim={slim}"]) + ([] if br is None else [f"br={br}"])
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "sass_report.py"), "verify_gluon", f"G={G}", f"N={N}",
                          f"N2={N2}", f"lse={lse}", f"P={P}", *extra], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=900)
    assert f"slim={int(want_slim)}" in res.stdout, res.stdout[-2000:]
    assert br is None or f"br={br}" in res.stdout, res.stdout[-2000:]
    assert f"P={P}:" in res.stdout, res.stdout[-2000:]
    assert res.returncode == 0, res.stderr[-3000:]  # a layout conversion asserted trivial that is not fails here
    m = re.search(r"regs=(\d+) stack=(\d+) local=(\d+) smem=(\d+)", res.stdout)
    assert m, res.stdout
    regs, _, _, smem = (int(x) for x in m.groups())
    assert regs <= 255 and PROGRAMS_PER_SM * (smem + 1024) <= SMEM_PER_SM, res.stdout
    h = re.search(r"loop_hmma=(\d+) loop_bar_sync=(\d+)", res.stdout)
    # a group of 4 pages: scores 4 row tiles x 8 k-steps x N/8, values 4 pages x 2 x 4 x N/8 (one warp's share);
    # tile B adds its N2 columns on the same converted keys and values
    assert int(h.group(1)) == 64 * (N + N2) // 8, res.stdout
    # keys ready, page maxima, values ready, values consumed; lse scores at P = 128 add the sum of a page's two
    # sub-pages, which two warps hold (a cross-warp reduction: two barriers)
    assert int(h.group(2)) <= (6 if lse and P == 128 else 4), res.stdout


# the Gluon ring launch (sgl_spec/kernels/verify_attention/gluon_ring.py): Llama-3-8B (G = 4, 32 columns) at both page sizes, pycode-30m
# (G = 2), and γ+1 = 1 (8 columns); at batch 1 a ring program shares an SM with one page program (the page launch
# leaves 8 slots free), so a ring program and a page program must fit one SM together
@pytest.mark.parametrize("G,NT,P", [(4, 32, 64), (4, 32, 128), (2, 32, 64), (4, 8, 64)])
def test_ring_launch_compiles_for_sm90(G, NT, P):
    pytest.importorskip("triton.experimental.gluon")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "sass_report.py"), "verify_ring_gluon", f"G={G}",
                          f"NT={NT}", f"P={P}"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    m = re.search(r"regs=(\d+) stack=(\d+) local=(\d+) smem=(\d+)", res.stdout)
    assert m, res.stdout
    regs, stack, _, smem = (int(x) for x in m.groups())
    page_smem = 93696  # the page kernel's largest form (32 columns at P = 64: test_compiles_for_sm90 prints it)
    assert regs <= 255 and stack == 0 and smem + page_smem + 2 * 1024 <= SMEM_PER_SM, res.stdout


def test_form_and_auto_rule_follow_the_group():
    """SLIM (rows recomputed where used, RAW scores stored from shared memory) measured faster at G = 4 and slower at
    G = 2; auto takes Gluon at every batch at G >= 4 and from 32 pairs below (H100, bench/NOTES_kernels.md sessions
    25-26)."""
    from sgl_spec.kernels.verify_attention.gluon_rules import auto_min_pairs, slim_form

    assert [slim_form(g) for g in (1, 2, 4, 8)] == [False, False, True, True]
    assert [auto_min_pairs(g) for g in (1, 2, 4, 8)] == [32, 32, 1, 1]


def test_row_tiles():
    """17..24 rows go as 16 + 8 MMA columns (a quarter less MMA and softmax work than 32; H100: 128k x 8 with scores
    903 -> 833 µs in the same run, bench/NOTES_kernels.md session 24) while the score rows (columns < 2G) fit tile
    A; every other window is one power-of-two tile."""
    from sgl_spec.kernels.verify_attention.gluon_rules import row_tiles

    assert row_tiles(20, 4) == (16, 8) and row_tiles(24, 4) == (16, 8) and row_tiles(18, 2) == (16, 8)
    assert row_tiles(24, 8) == (16, 8)
    assert row_tiles(16, 4) == (16, 0) and row_tiles(25, 4) == (32, 0) and row_tiles(32, 4) == (32, 0)
    assert row_tiles(4, 4) == (8, 0) and row_tiles(1, 1) == (8, 0)
    assert row_tiles(24, 12) == (32, 0)  # score rows would span 24 columns: one tile


def test_value_branches_only_in_the_measured_forms():
    """The value-page branches where they measured faster (H100, bench/NOTES_kernels.md session 36): Llama-3-8B's
    nq 5 (16 + 8 columns) and pycode-30m's nq 13 with scores; not Llama-3-8B's nq 8 (slower from batch 8 at P = 64),
    not pycode-30m without scores, not unmeasured forms."""
    from sgl_spec.kernels.verify_attention.gluon_rules import row_tiles, value_branches

    assert value_branches(4, *row_tiles(5 * 4, 4), True) and value_branches(4, *row_tiles(5 * 4, 4), False)
    assert value_branches(2, *row_tiles(13 * 2, 2), True) and not value_branches(2, *row_tiles(13 * 2, 2), False)
    assert not value_branches(4, *row_tiles(8 * 4, 4), True) and not value_branches(4, *row_tiles(8 * 4, 4), False)
    assert not value_branches(8, *row_tiles(3 * 8, 8), True) and not value_branches(4, *row_tiles(1 * 4, 4), True)


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
