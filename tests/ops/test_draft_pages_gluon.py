"""The Gluon draft page programs (sgl_spec/kernels/draft_decode/gluon_pages.py) on a machine without a GPU: they compile for sm_90
with every operand conversion a register rename (``assert_trivial``), no local or shared memory and no barrier (but
the one of the hot-token programs, sgl_spec/kernels/draft_decode/gluon_hot.py) in their register form; the ring form
(sgl_spec/kernels/draft_decode/gluon_stream.py) with its slots, at most 168 registers (12 programs an SM) and no spills; and the
launcher refuses what they do not cover. Their numbers are checked against the reference on the GPU
(tests/ops/test_draft_decode.py::test_gpu_matches_ref)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _sass_report(*args, what="draft_gluon"):
    """tests/support/draft_sass.py ``what`` ``args`` compiled for sm_90 (not interpreted): (stdout, regs, stack,
    local, smem) of the first kernel it reports. A layout conversion asserted trivial that is not fails the compile,
    so the report's exit status."""
    pytest.importorskip("triton.experimental.gluon")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)  # the tree, installed or not
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "draft_sass.py"), what, *args],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    m = re.search(r"regs=(\d+) stack=(\d+) local=(\d+) smem=(\d+)", res.stdout)
    assert m, res.stdout
    return (res.stdout, *(int(x) for x in m.groups()))


@pytest.mark.parametrize("hot", [0, 1])  # 1: with the hot-token programs in the launch (sgl_spec/kernels/draft_decode/gluon_hot.py)
@pytest.mark.parametrize("G,P", [(2, 64), (4, 64), (4, 128)])  # P = 128: each page as two 64-token sub-pages
def test_compiles_for_sm90_without_spills(G, P, hot):
    out, regs, stack, local, smem = _sass_report(f"G={G}", f"P={P}", f"hot={hot}")
    assert f"P={P} " in out, out
    assert regs <= 255 and stack == 0 and local == 0 and smem == 0, out
    h = re.search(r"hmma=(\d+) bar_sync=(\d+)", out)
    # 64 mma.sync a page (one loop), no barrier; the hot-token loop: 32 a step of 32 tokens, one warp barrier (the
    # ring's new row written before it is read)
    assert (int(h.group(1)), int(h.group(2))) == ((96, 1) if hot else (64, 0)), out


@pytest.mark.parametrize("G,P,hot,stages", [(4, 128, 0, 2), (2, 64, 0, 3), (4, 64, 1, 2), (4, 128, 0, 4)])
def test_ring_form_compiles_for_sm90(G, P, hot, stages):
    """The shared-memory ring: its slots are the only shared memory, and the registers leave room for the programs
    an SM that launch.gluon_programs_per_sm counts on (12 at 2 slots: 65536 / (12 x 32) -> 168)."""
    from sgl_spec.kernels.draft_decode.launch import GLUON_STREAM_SLOT_BYTES, gluon_programs_per_sm

    out, regs, stack, local, smem = _sass_report(f"G={G}", f"P={P}", f"hot={hot}", f"as={stages}")
    assert stack == 0 and local == 0 and smem == stages * GLUON_STREAM_SLOT_BYTES, out
    if not hot:  # with the hot-token programs (a combination the launch rule does not pick: below 64 pairs the ring
        # runs only past the fused hot programs' split range, tests/ops/test_draft_launch.py) 186 registers, 11 an SM
        assert regs * 32 * gluon_programs_per_sm(stages) <= 65536, out
    assert gluon_programs_per_sm(2) == 12 and gluon_programs_per_sm(3) == 8 and gluon_programs_per_sm(0) == 8


@pytest.mark.parametrize("G,P,stages", [(4, 64, 2), (4, 128, 2), (2, 64, 3)])
def test_tma_ring_compiles_for_sm90(G, P, stages):
    """The ring with TMA copies (gluon_stream.py ``TMA``): no per-lane copies, six TMA copies a page at each
    of the kernel's copy sites (the first STAGES - 1 pages before the loop, one a page in it), the slots plus a
    barrier each as shared memory, and the registers of the cp.async ring (12 programs an SM at 2 slots)."""
    from sgl_spec.kernels.draft_decode.launch import GLUON_STREAM_SLOT_BYTES, gluon_programs_per_sm

    out, regs, stack, local, smem = _sass_report(f"G={G}", f"P={P}", f"as={stages}", "tma=1")
    assert "tma=1" in out and stack == 0 and local == 0, out
    assert smem == stages * (GLUON_STREAM_SLOT_BYTES + 8), out
    assert regs * 32 * gluon_programs_per_sm(stages) <= 65536, out
    copies = re.search(r"utmaldg=(\d+) ldgsts=(\d+)", out)
    assert (int(copies.group(1)), int(copies.group(2))) == (6 * stages, 0), out


@pytest.mark.parametrize("P,stages,tma", [(64, 2, 1), (128, 0, 0)])
def test_hot_last_compiles_for_sm90(P, stages, tma):
    """HOT_LAST (launch.gluon_hot_last): the page launch waits for the stream at its start and releases the
    hot-token launch there instead of waiting for it at its end; the same registers, no stack, and the Triton
    hot-token kernel that then waits at its end compiles too."""
    base = _sass_report("G=4", f"P={P}", f"as={stages}", f"tma={tma}")
    out, regs, stack, local, smem = _sass_report("G=4", f"P={P}", f"as={stages}", f"tma={tma}", "hl=1")
    assert "hot_last=1" in out and stack == 0 and local == 0, out
    assert (regs, smem) == (base[1], base[4]), out
    assert "hot_last=1" in _sass_report(f"P={P}", "hl=1", what="draft")[0]


def test_engine_is_checked():
    from sgl_spec.kernels.draft_decode.launch import DraftLaunch
    from sgl_spec.kernels.draft_decode.triton import draft_decode
    from sgl_spec.kvcache.format import KVFormat

    store = KVFormat(page_size=64, num_kv_heads=2, head_dim=128).alloc(2)
    q = torch.zeros(1, 4, 128, dtype=torch.bfloat16)
    hot = torch.zeros(1, 2, 64, 2, 128, dtype=torch.bfloat16)
    i32 = lambda *v: torch.tensor(v, dtype=torch.int32)  # noqa: E731
    args = (q, store, i32(0, 1)[None], i32(2), hot, hot.clone(), i32(0), i32(128), i32(1), 0.1)
    with pytest.raises(ValueError, match="engine='gluon' needs"):
        draft_decode(*args, engine="gluon")
    with pytest.raises(ValueError, match="engine must be"):
        draft_decode(*args, engine="cuda")
    with pytest.raises(ValueError, match="merge_blocks"):
        draft_decode(*args, launch=DraftLaunch(merge_blocks=3))
    with pytest.raises(ValueError, match="stages"):  # the ring is the Gluon page programs'
        draft_decode(*args, launch=DraftLaunch(stages=2))
    with pytest.raises(ValueError, match="hot_last"):  # the launch order is the Gluon page launch's
        draft_decode(*args, launch=DraftLaunch(hot_last=True))
