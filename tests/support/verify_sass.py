"""sm_90 SASS reports of the Gluon verify kernels (``sgl_spec/kernels/verify_attention/gluon_*.py``) on a machine
without a GPU, for tests/ops/test_verify_attention_gluon.py, which runs this in a process of its own (compiled, not
interpreted):

    python tests/support/verify_sass.py pages [G=4] [N=32] [N2=0] [sc=1] [lse=0] [slim=0|1] [P=64|128] [br=0|1] [cw=0|1]
    python tests/support/verify_sass.py ring [G=4] [NT=32] [P=64|128]

``slim`` / ``br`` / ``cw`` left out: the launcher's rules (``gluon_rules.py``); given: that form compiled instead.
"""
from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sass_sm90 import compile_sm90, loops, report, sass  # noqa: E402


def pages(G=4, N=32, sc=1, lse=0, slim=None, N2=0, sub=1, br=None, cw=None):
    """The Gluon verify page programs, four warps; N: the MMA's columns (γ+1 times G, padded to a power of two)."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from sgl_spec.kernels.verify_attention import gluon_pages as vg
    from sgl_spec.kernels.verify_attention import gluon_rules as vgr

    types = dict(q_ptr="*bf16", ku_ptr="*i32", kl_ptr="*i32", vu_ptr="*i16", vl_ptr="*i16", ks_ptr="*i32",
                 kz_ptr="*i32", vs_ptr="*fp16", vz_ptr="*fp16", pt_ptr="*i32", qs_ptr="*i32", m_ptr="*fp32",
                 l_ptr="*fp32", acc_ptr="*fp32", raw_ptr="*fp32", sc_ptr="*fp32", qk_scale="fp32", sm_scale="fp32")
    slim = vgr.slim_form(G) if slim is None else bool(slim)
    br = vgr.value_branches(G, N, N2, bool(sc)) if br is None else bool(br)
    cw = vgr.copy_warp_form(G) if cw is None else bool(cw)
    const = dict(G=G, N=N, N2=N2, HAS_SCORES=bool(sc), SCORE_LSE=bool(lse), PDL=True, SLIM=slim, SUB=sub, BR=br)
    plain = ("NQ", "HQ", "S1", "C", "NS", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "s_pj")
    kernel, opts = vg._verify_pages_kernel, {}
    if cw:
        kernel, types, opts = _copy_warp_types(types)
    cc = compile_sm90(kernel, types, const, plain=plain, num_warps=vgr.NUM_WARPS, num_stages=1,
                      source=GluonASTSource, **opts)
    report(cc, f"verify_pages_gluon G={G} N={N} N2={N2} scores={sc} lse={lse} slim={int(slim)} br={int(br)} "
               f"cw={int(cw)} P={64 * sub}")
    _, lps = loops(sass(cc))
    # the page loop: most MMAs, then the shortest (the copy-warp form's partitions sit in loops around it)
    ops = max(lps, key=lambda x: (sum(v for k, v in x[2].items() if k.startswith("HMMA")), x[0] - x[1]))[2]
    count = lambda op: sum(v for k, v in ops.items() if k.startswith(op))  # noqa: E731
    print(f"  loop_instr={sum(ops.values())} loop_hmma={count('HMMA')} loop_bar_sync={count('BAR.SYNC')} "
          f"loop_ldl={count('LDL')} loop_ldgsts={count('LDGSTS')} loop_shfl={count('SHFL')}")
    if cw:  # the copy warp's TMA copies and the partitions' register split
        regs = sorted({int(r) for r in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", cc.asm["ptx"])})
        print(f"  utmaldg={sass(cc).count('UTMALDG')} setmaxnreg={','.join(map(str, regs))}")


def _copy_warp_types(types):
    """(kernel, argument types, compile options) of the copy-warp form: its TMA descriptors in place of the plane and
    scale pointers, launched at WS_MAXNREG."""
    from sgl_spec.kernels.verify_attention import gluon_copy_warp as ws

    k, s, v = ws.KTM.value, ws.STM.value, ws.VTM.value
    types = {n: t for n, t in types.items() if n not in ("ku_ptr", "kl_ptr", "vu_ptr", "vl_ptr", "ks_ptr", "kz_ptr",
                                                          "vs_ptr", "vz_ptr")}
    types.update(kud=f"tensordesc<i32[64, 16],{k!r}>", kld=f"tensordesc<i32[64, 16],{k!r}>",
                 vud=f"tensordesc<i16[64, 32],{v!r}>", vld=f"tensordesc<i16[64, 32],{v!r}>",
                 ksd=f"tensordesc<i32[1, 64],{k!r}>", kzd=f"tensordesc<i32[1, 64],{k!r}>",
                 vsd=f"tensordesc<fp16[1, 64],{s!r}>", vzd=f"tensordesc<fp16[1, 64],{s!r}>")
    return ws._verify_pages_ws_kernel, types, dict(maxnreg=ws.WS_MAXNREG)


def ring(G=4, NT=32, sub=1):
    """The Gluon ring launch of the verify: four warps, NT columns, P = 64 sub."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from sgl_spec.kernels.verify_attention import gluon_ring as vr

    types = dict(q_ptr="*bf16", hk_ptr="*bf16", hv_ptr="*bf16", hs_ptr="*i32", m_ptr="*fp32", l_ptr="*fp32",
                 acc_ptr="*fp32", qs_ptr="*i32", qk_scale="fp32")
    plain = ("NQ", "HQ", "S1", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "shk_n")
    cc = compile_sm90(vr._verify_ring_kernel, types, dict(G=G, NT=NT, PT=64 * sub, PDL=True), plain=plain,
                      num_warps=4, num_stages=1, source=GluonASTSource)
    report(cc, f"verify_ring_gluon G={G} NT={NT} P={64 * sub}")


if __name__ == "__main__":
    what = sys.argv[1]
    kv = dict(a.split("=") for a in sys.argv[2:] if "=" in a)
    opt = lambda k: int(kv[k]) if k in kv else None  # noqa: E731
    if what == "pages":
        pages(int(kv.get("G", 4)), int(kv.get("N", 32)), int(kv.get("sc", 1)), int(kv.get("lse", 0)), opt("slim"),
              int(kv.get("N2", 0)), int(kv.get("P", 64)) // 64, opt("br"), opt("cw"))
    elif what == "ring":
        ring(int(kv.get("G", 4)), int(kv.get("NT", 32)), int(kv.get("P", 64)) // 64)
    else:
        raise SystemExit(f"unknown report {what!r}")
