"""The copy-warp form of the Gluon verify page programs (sgl_spec/kernels/verify_attention/gluon_copy_warp.py) on a machine without a GPU:
it compiles for sm_90 with the page loop free of per-thread copies and spills, shorter than the cp.async form's, the
copies as TMA from the copy warp, and the register split that keeps two programs an SM; the rule that enables it and
the planes it can address. Its numbers are checked on the GPU (tests/ops/test_verify_copy_warp_gpu.py)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SMEM_PER_SM = 228 * 1024


def _report(G, N, N2, P, cw, ls=None):
    """sass_report.py's verify_gluon report of one form (ls None: the running sums as the rule says)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compiled, not interpreted
    extra = [] if ls is None else [f"ls={ls}"]
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "sass_report.py"), "verify_gluon", f"G={G}", f"N={N}",
                          f"N2={N2}", f"P={P}", f"cw={cw}", *extra], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"{'' if ls is None else f'ls={ls} '}cw={cw} P={P}:" in res.stdout, res.stdout[-2000:]
    return res.stdout


def _num(out, key):
    m = re.search(rf"\b{key}=(\d+)", out)
    assert m, (key, out[-2000:])
    return int(m.group(1))


# Llama-3-8B's γ+1 = 5 (16 + 8 columns) at both page sizes, and γ+1 = 1 (8 columns)
@pytest.mark.parametrize("G,N,N2,P", [(4, 16, 8, 64), (4, 16, 8, 128), (4, 8, 0, 64)])
def test_copy_warp_form_compiles_for_sm90(G, N, N2, P):
    pytest.importorskip("triton.experimental.gluon")
    from sgl_spec.kernels.verify_attention import gluon_copy_warp as ws

    out = _report(G, N, N2, P, 1)
    # launched at WS_MAXNREG over 8 warps, so two programs an SM by registers and by shared memory
    assert _num(out, "regs") == ws.WS_MAXNREG and 2 * 8 * 32 * ws.WS_MAXNREG <= 65536, out[-2000:]
    assert 2 * (_num(out, "smem") + 1024) <= SMEM_PER_SM, out[-2000:]
    # setmaxnreg: the copy warp's group down to COPY_WARP_REGS, the compute warps up to what is left of the pool
    want = {ws.COPY_WARP_REGS.value, (8 * ws.WS_MAXNREG - 4 * ws.COPY_WARP_REGS.value) // 4 // 8 * 8}
    assert set(map(int, re.search(r"setmaxnreg=([\d,]+)", out).group(1).split(","))) == want, out[-2000:]
    # the page loop: the cp.async form's MMAs, no per-thread copies, no spill loads; a barrier more (the value
    # buffers' release) than the cp.async form's four
    assert _num(out, "loop_hmma") == 64 * (N + N2) // 8, out[-2000:]
    assert _num(out, "loop_ldgsts") == 0 and _num(out, "loop_ldl") == 0, out[-2000:]
    assert _num(out, "loop_bar_sync") <= 5, out[-2000:]
    # per group: key and value planes of 4 pages and 4 scale rows of each kind, in both copy loops of the kernel
    # (the copy warp's loop is compiled once, its 8 + 16 + 8 copies a group)
    assert _num(out, "utmaldg") == 4 * (2 + 4 + 2), out[-2000:]


def test_copy_warp_loop_is_shorter_than_the_cp_async_loop():
    """Llama-3-8B's γ+1 = 5 at P = 64: the compute warps' loop without the copies and their address math (sm_90:
    1921 against 2198 instructions a group in Triton 3.6)."""
    pytest.importorskip("triton.experimental.gluon")
    ws_loop = _num(_report(4, 16, 8, 64, 1), "loop_instr")
    cp_loop = _num(_report(4, 16, 8, 64, 0), "loop_instr")
    assert ws_loop < 0.9 * cp_loop, (ws_loop, cp_loop)


def test_copy_warp_rule(monkeypatch):
    from sgl_spec.kernels.verify_attention import gluon_rules as vgr

    assert vgr.COPY_WARP is True  # on since session 38 (the GPU suites with it on: bench/results/s38/tests)
    assert vgr.copy_warp_form(4) and not vgr.copy_warp_form(2) and not vgr.copy_warp_form(8)
    monkeypatch.setattr(vgr, "COPY_WARP", False)  # the switch turns every group back to the cp.async form
    assert not vgr.copy_warp_form(4)


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
    # scales: any view whose pages and heads start at whole rows of 64 (sgl_spec/kernels/common/tma_rows.py), e.g. every other page
    # or four views of one buffer (bit-equal outputs on the GPU: bench/results/s39/scale_layout)
    assert copy_warp_supported(words, ks32, kz32, big.v_scale[::2], big.v_zero[::2])
    odd_heads = torch.zeros(5, 2, 96, dtype=torch.float16)[..., :64]
    assert not copy_warp_supported(words, ks32, kz32, odd_heads, odd_heads)


# the running sums per lane (verify_gluon_rules.LANE_SUMS): Llama-3-8B's γ+1 = 5 in the copy-warp form, and
# pycode-30m's cp.async form (G = 2, one 32-column tile)
@pytest.mark.parametrize("G,N,N2,cw", [(4, 16, 8, 1), (2, 32, 0, 0)])
def test_lane_sums_take_the_shuffles_out_of_the_page_loop(G, N, N2, cw):
    """Per lane, the page loop keeps only the page maxima's shuffles (sm_90, Triton 3.6: 21 against 57 at 16 + 8
    columns, the loop 1850 against 1921 instructions); the MMAs and the registers' budget stay as they were."""
    pytest.importorskip("triton.experimental.gluon")
    lane, warp = _report(G, N, N2, 64, cw, ls=1), _report(G, N, N2, 64, cw, ls=0)
    assert _num(lane, "loop_hmma") == _num(warp, "loop_hmma") == 64 * (N + N2) // 8, lane[-2000:]
    # the per-warp sums reduce l and z over 8 lanes every group: 3 shuffle levels x (N + N2) / 4 columns a lane x 2
    assert _num(warp, "loop_shfl") - _num(lane, "loop_shfl") >= 6 * (N + N2) // 4, (lane[-2000:], warp[-2000:])
    assert _num(lane, "loop_instr") < _num(warp, "loop_instr"), (lane[-2000:], warp[-2000:])
    assert _num(lane, "regs") == _num(warp, "regs") and _num(lane, "loop_ldl") <= _num(warp, "loop_ldl") + 1


def test_lane_sums_rule():
    from sgl_spec.kernels.verify_attention import gluon_rules as vgr

    assert vgr.LANE_SUMS is True and vgr.lane_sums()  # on since session 42 (bench/results/s42)
