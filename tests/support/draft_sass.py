"""sm_90 SASS reports of the draft kernels (``sgl_spec/kernels/draft_decode/``) on a machine without a GPU, for
tests/ops/test_draft_pages_gluon.py, which runs this in a process of its own (compiled, not interpreted):

    python tests/support/draft_sass.py draft [P=64|128] [wn=0|1] [hl=0|1]
    python tests/support/draft_sass.py draft_gluon [G=4] [P=64|128] [hot=0|1] [as=0|2|3|4] [tma=0|1] [hl=0|1]

``draft``: the Triton stage-1 kernel with the launcher's configuration for P (Llama-3-8B shapes, bf16); wn: the hot
program writes the new token; hl: as the hot-token launch after the Gluon page launch (HOT_LAST). ``draft_gluon``:
the Gluon page programs, one warp; hot: with the hot-token programs in the launch; as: ring slots (0: registers);
tma: the ring's pages copied by TMA.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sass_sm90 import compile_sm90, report, sass  # noqa: E402


def draft(P=64, wn=False, hl=0):
    from sgl_spec.kernels.draft_decode import triton as dd

    types = dict(ku_ptr="*i32", vu_ptr="*i32", ks_ptr="*i32", kz_ptr="*i32", q_ptr="*bf16", hk_ptr="*bf16",
                 hv_ptr="*bf16", vs_ptr="*fp16", vz_ptr="*fp16", pid_ptr="*i32", np_ptr="*i32", hslot_ptr="*i32",
                 hstart_ptr="*i32", hlen_ptr="*i32", m_ptr="*fp32", l_ptr="*fp32", acc_ptr="*fp32", qk_scale="fp32",
                 nk_ptr="*bf16", nv_ptr="*bf16")
    nw, st, pf, nr, _ = dd.launch_config(P, 16)
    fs = P <= dd.FLAT_SCALES_MAX_P
    kf = dd.key_frag_on(P, 64, nw, 16)
    const = dict(G=4, GPAD=16, HALF=64, BLOCK_C=64, P=P, HOT_PREC="tf32", HOT_BLOCK=64,
                 HOT_NATIVE=True, USE_ASM=True, PREFETCH=int(pf), FLAT_SCALES=bool(fs), KF=kf, WRITE_NEW=bool(wn),
                 PDL=bool(hl), HOT_LAST=bool(hl))
    report(compile_sm90(dd._draft_decode_kernel, types, const, plain=("MAXP", "NUM_SPLITS"), num_warps=nw,
                        num_stages=1 if pf else st, **({"maxnreg": nr} if nr else {})),
           f"draft_decode P={P} num_warps={nw} prefetch={int(pf)} flat_scales={int(fs)} maxnreg={nr} key_frag={int(kf)} "
           f"write_new={int(bool(wn))} hot_last={int(bool(hl))} (Llama-3-8B shapes)")


def draft_gluon(G=4, sub=1, hot=0, stages=0, tma=0, hl=0):
    from triton.experimental.gluon._runtime import GluonASTSource

    from sgl_spec.kernels.draft_decode import gluon_pages as dg
    from sgl_spec.kernels.draft_decode.launch import GLUON_HOT_TOKENS
    from sgl_spec.kernels.draft_decode.triton_hot import RING

    types = dict(q_ptr="*bf16", ku_ptr="*i32", vu_ptr="*i32", ks_ptr="*i32", kz_ptr="*i32", vs_ptr="*fp16",
                 vz_ptr="*fp16", pid_ptr="*i32", np_ptr="*i32", m_ptr="*fp32", l_ptr="*fp32", acc_ptr="*fp32",
                 qk_scale="fp32", hk_ptr="*bf16", hv_ptr="*bf16", hvw_ptr="*i32", hslot_ptr="*i32", hstart_ptr="*i32",
                 hlen_ptr="*i32", nk_ptr="*bf16", nv_ptr="*bf16")
    hs = RING * 64 * sub // GLUON_HOT_TOKENS if hot else 0  # the launcher's hot-token programs a pair
    const = dict(G=G, NUM_SPLITS=16, PDL=True, SUB=sub, HS=hs, WRITE_NEW=bool(hot), STAGES=stages, TMA=bool(tma),
                 HOT_LAST=bool(hl))
    if tma:  # the descriptors' layouts are the ring's TMA destination layouts
        from sgl_spec.kernels.draft_decode import gluon_stream as ds

        w, f = repr(ds.TW.value), repr(ds.TH.value)
        types.update(kud=f"tensordesc<i32[64, 16],{w}>", vud=f"tensordesc<i32[64, 16],{w}>",
                     ksd=f"tensordesc<i32[1, 64],{w}>", kzd=f"tensordesc<i32[1, 64],{w}>",
                     vsd=f"tensordesc<fp16[1, 64],{f}>", vzd=f"tensordesc<fp16[1, 64],{f}>", rk_p="i32", rk_h="i32",
                     rs_p="i32", rs_h="i32", rv_p="i32", rv_h="i32")
    cc = compile_sm90(dg._draft_pages_kernel, types, const, plain=("MAXP", "HKV"), num_warps=1,
                      source=GluonASTSource)
    report(cc, f"draft_pages_gluon G={G} P={64 * sub} hot={int(bool(hot))} stages={stages} tma={int(bool(tma))} "
               f"hot_last={int(bool(hl))} (one warp a page)")
    text = sass(cc)
    print(f"  hmma={text.count('HMMA.16816.F32')} bar_sync={text.count('BAR.SYNC')} utmaldg={text.count('UTMALDG')} "
          f"ldgsts={text.count('LDGSTS')}")


if __name__ == "__main__":
    what = sys.argv[1]
    kv = dict(a.split("=") for a in sys.argv[2:] if "=" in a)
    if what == "draft":
        draft(int(kv.get("P", 64)), bool(int(kv.get("wn", 0))), int(kv.get("hl", 0)))
    elif what == "draft_gluon":
        draft_gluon(int(kv.get("G", 4)), int(kv.get("P", 64)) // 64, int(kv.get("hot", 0)), int(kv.get("as", 0)),
                    int(kv.get("tma", 0)), int(kv.get("hl", 0)))
    else:
        raise SystemExit(f"unknown report {what!r}")
