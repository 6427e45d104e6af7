"""Compile a Triton kernel for sm_90 on a machine without a GPU and report what costs no device time.

Triton's wheel ships ptxas and cuobjdump, so the SASS of a kernel can be read here: registers, spills, shared
memory, and an instruction histogram of every loop (a backward branch), which is where a memory-bound kernel's
instructions-per-byte budget goes. Integer arguments and pointers are marked 16-divisible the way the JIT
specializes them at run time (pass ``plain=`` for arguments that are not, e.g. a stride of 1 or odd sizes).

    python bench/sass_report.py draft      # the draft_decode page loop for Llama-3-8B shapes
"""
from __future__ import annotations

import collections
import inspect
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


def compile_sm90(kernel, types: dict, constexprs: dict, plain=(), num_warps=4, num_stages=3, source=ASTSource,
                 **opts):
    params = list(inspect.signature(kernel.fn).parameters)
    sig, attrs = {}, {}
    for i, p in enumerate(params):
        if p in constexprs:
            sig[p] = "constexpr"
            continue
        sig[p] = types.get(p, "*u8" if p.endswith("_ptr") else "i32")
        if p not in plain and (sig[p].startswith("*") or sig[p] in ("i32", "i64")):
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = source(kernel, sig, constexprs={(params.index(k),): v for k, v in constexprs.items()}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages, **opts))


def _cuobjdump(cc, flag) -> str:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cc.asm["cubin"])
        f.flush()
        return subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=True).stdout


def sass(cc) -> str:
    return _cuobjdump(cc, "-sass")


def resources(cc) -> str:
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", _cuobjdump(cc, "-res-usage"))
    return f"regs={m.group(1)} stack={m.group(2)} local={m.group(4)} smem={cc.metadata.shared}" if m else "?"


def loops(text: str):
    """[(first, last, Counter of opcodes)] for every backward branch, innermost first."""
    ins = []
    for line in text.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    where = {a: i for i, (a, _) in enumerate(ins)}
    out = []
    for i, (a, t) in enumerate(ins):
        m = re.search(r"BRA\s.*?0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in where:
            s = where[int(m.group(1), 16)]
            out.append((ins[s][0], a, collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0]
                                                            for _, t in ins[s: i + 1])))
    return len(ins), out


def report(cc, label=""):
    n, ls = loops(sass(cc))
    print(f"== {label}: {resources(cc)} total_instr={n}")
    for a, b, h in ls:
        print(f"  loop {a:#x}-{b:#x}: {sum(h.values())} instr: " + ", ".join(f"{k}:{v}" for k, v in h.most_common(28)))


def _draft(P=64, pf=None, fs=None, nr=None, kf=None, wn=False, nw=None, hl=0):
    """The draft_decode stage-1 kernel; pf / fs / nr / kf: the launcher's prefetch / flat_scales / maxnreg /
    key_frag keywords (None: the launcher's defaults for P); wn: the hot program writes the new token (new_k/new_v);
    hl: as the hot-token launch after the Gluon page launch (HOT_LAST, draft_launch.GLUON_HOT_LAST)."""
    from sgl_spec.kernels.draft_decode import triton as dd

    types = dict(ku_ptr="*i32", vu_ptr="*i32", ks_ptr="*i32", kz_ptr="*i32", q_ptr="*bf16", hk_ptr="*bf16",
                 hv_ptr="*bf16", vs_ptr="*fp16", vz_ptr="*fp16", pid_ptr="*i32", np_ptr="*i32", hslot_ptr="*i32",
                 hstart_ptr="*i32", hlen_ptr="*i32", m_ptr="*fp32", l_ptr="*fp32", acc_ptr="*fp32", qk_scale="fp32",
                 nk_ptr="*bf16", nv_ptr="*bf16")
    cnw, st, cpf, cnr, _ = dd.launch_config(P, 16)
    nw = cnw if nw is None else nw
    pf = int(cpf if pf is None else pf)
    nr = cnr if nr is None else (nr or None)
    fs = P <= dd.FLAT_SCALES_MAX_P if fs is None else fs
    kf = dd.key_frag_on(kf, P, 64, nw, 16)
    hn = bool(dd.HOT_NATIVE)  # the launcher's default for a bf16 model
    const = dict(G=4, GPAD=16, HALF=64, BLOCK_C=64, P=P, NUM_SPLITS=16, HOT_PREC="tf32", HOT_BLOCK=64 if hn else 32,
                 HOT_NATIVE=hn, USE_ASM=True, PREFETCH=pf, FLAT_SCALES=bool(fs), KF=kf, WRITE_NEW=bool(wn), PDL=bool(hl),
                 HOT_LAST=bool(hl))
    report(compile_sm90(dd._draft_decode_kernel, types, const, plain=("MAXP",), num_warps=nw,
                        num_stages=1 if pf else st, **({"maxnreg": nr} if nr else {})),
           f"draft_decode P={P} num_warps={nw} prefetch={pf} flat_scales={int(bool(fs))} maxnreg={nr} key_frag={int(kf)} "
           f"write_new={int(bool(wn))} hot_last={int(bool(hl))} "
           "(Llama-3-8B shapes)")


def _verify(old=False, maxnreg=None, has_scores=True, pp=None, nw=None, qa=0, lse=0, kf=None, g=4, bm=None):
    """The verify_attention stage-1 kernel for Llama-3-8B shapes (G=4, P=64, D=128), NQ-independent code; kf: the
    launcher's key_frag keyword (None: its default); g: the group size (2: pycode-30m), bm: the row tile (None: the
    G-only block_rows)."""
    if old:
        sys.path.insert(0, os.path.dirname(__file__))
        import verify_attention_v0 as va
    else:
        from sgl_spec.kernels.verify_attention import triton as va
    params = list(inspect.signature(va._verify_attention_kernel.fn).parameters)
    types = {p: "*i32" for p in params[:18]}
    types.update(Q="*bf16", HK="*bf16", HV="*bf16", VS="*fp16", VZ="*fp16", PM="*fp32", PL="*fp32", PACC="*fp32",
                 SCORES="*fp32", qk_scale="fp32", sm_scale="fp32")
    if old:
        types.update(KU="*u8", KL="*u8", VU="*u8", VL="*u8", KS="*fp16", KZ="*fp16")
        const = dict(G=4, P=64, DH=64, BLOCK_DH=64, BLOCK_M=32, BLOCK_G=4, HAS_SCORES=has_scores, NUM_STAGES=2,
                     PREFETCH=False)
        nw, st, opts = 4, 2, {}
    else:
        pp = va.PAGES_PER_ITER if pp is None else pp
        nr = va.MAXNREG if maxnreg is None else maxnreg
        nw, st, opts = va.NUM_WARPS if nw is None else nw, 1, ({"maxnreg": nr} if nr else {})
        kf = va.key_frag_on(kf, 64, 64, nw, pp, qa)
        bm = va.block_rows(g) if bm is None else bm
        const = dict(G=g, P=64, DH=64, BLOCK_DH=64, BLOCK_M=max(64, bm) if qa else bm, HAS_SCORES=has_scores,
                     USE_ASM=True, PP=pp, QA=qa, SCORE_LSE=bool(lse), KF=kf, AFTER_PAGES=False)
        types.update(RAW="*fp32")
    plain = ("sq_n", "spt_j", "ssc_j", "NQ", "RB", "ra", "rb", "n_front", "lo_r", "hi_r", "C", "S1", "HQ")
    tag = f"verify_attention {'v0' if old else 'new'} scores={'on' if has_scores else 'off'} maxnreg={opts.get('maxnreg')}"
    if not old:
        tag += (f" pages_per_iter={const['PP']} num_warps={nw} rows_as_m={qa} score_kind={'lse' if lse else 'max'}"
                f" key_frag={int(kf)} G={g} BLOCK_M={const['BLOCK_M']}")
    report(compile_sm90(va._verify_attention_kernel, types, const, plain=plain, num_warps=nw, num_stages=st, **opts),
           tag)

def _draft_gluon(G=4, pf=1, st=0, sub=1, hot=0, stages=0, tma=0, hl=0):
    """The Gluon draft page programs (sgl_spec/kernels/draft_decode/gluon_pages.py), one warp, Llama-3-8B (G=4) or pycode-30m (G=2);
    hot=1: with the hot-token programs in the launch (sgl_spec/kernels/draft_decode/gluon_hot.py, the ring's query token written);
    tma=1: the ring's pages copied by TMA (sgl_spec/kernels/draft_decode/gluon_stream.py); hl=1: the hot-token launch after this one
    (HOT_LAST, draft_launch.GLUON_HOT_LAST)."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from sgl_spec.kernels.draft_decode import gluon_pages as dg

    types = dict(q_ptr="*bf16", ku_ptr="*i32", vu_ptr="*i32", ks_ptr="*i32", kz_ptr="*i32", vs_ptr="*fp16",
                 vz_ptr="*fp16", pid_ptr="*i32", np_ptr="*i32", m_ptr="*fp32", l_ptr="*fp32", acc_ptr="*fp32",
                 qk_scale="fp32", hk_ptr="*bf16", hv_ptr="*bf16", hvw_ptr="*i32", hslot_ptr="*i32", hstart_ptr="*i32",
                 hlen_ptr="*i32", nk_ptr="*bf16", nv_ptr="*bf16")
    from sgl_spec.kernels.draft_decode.triton_hot import RING
    from sgl_spec.kernels.draft_decode.launch import GLUON_HOT_TOKENS

    hs = RING * 64 * sub // GLUON_HOT_TOKENS if hot else 0  # the launcher's hot-token programs a pair
    const = dict(G=G, NUM_SPLITS=16, PDL=True, PREFETCH=bool(pf), STRIDED=bool(st), SUB=sub, HS=hs,
                 WRITE_NEW=bool(hot), STAGES=stages, TMA=bool(tma), HOT_LAST=bool(hl))
    if tma:  # the descriptors' layouts are the ring's TMA destination layouts
        from sgl_spec.kernels.draft_decode import gluon_stream as ds

        w, f = repr(ds.TW.value), repr(ds.TH.value)
        types.update(kud=f"tensordesc<i32[64, 16],{w}>", vud=f"tensordesc<i32[64, 16],{w}>",
                     ksd=f"tensordesc<i32[1, 64],{w}>", kzd=f"tensordesc<i32[1, 64],{w}>",
                     vsd=f"tensordesc<fp16[1, 64],{f}>", vzd=f"tensordesc<fp16[1, 64],{f}>", rk_p="i32", rk_h="i32",
                     rs_p="i32", rs_h="i32", rv_p="i32", rv_h="i32")
    cc = compile_sm90(dg._draft_pages_kernel, types, const, plain=("MAXP", "HKV"), num_warps=1,
                      source=GluonASTSource)
    report(cc, f"draft_pages_gluon G={G} prefetch={int(bool(pf))} P={64 * sub} hot={int(bool(hot))} stages={stages} "
               f"tma={int(bool(tma))} hot_last={int(bool(hl))} (one warp a page)")
    text = sass(cc)
    print(f"  hmma={text.count('HMMA.16816.F32')} bar_sync={text.count('BAR.SYNC')} utmaldg={text.count('UTMALDG')} "
          f"ldgsts={text.count('LDGSTS')}")


def _verify_gluon(G=4, N=32, sc=1, lse=0, slim=None, N2=0, first=True, sub=1, br=None, cw=0, ls=None):
    """The Gluon verify page programs (sgl_spec/kernels/verify_attention/gluon_pages.py), four warps, Llama-3-8B (G=4) or pycode-30m
    (G=2); N: the MMA's rows (γ+1 times G, padded to a power of two). slim / br None: the launcher's rules
    (sgl_spec/kernels/verify_attention/gluon_rules.py). cw=1: the copy-warp form (sgl_spec/kernels/verify_attention/gluon_copy_warp.py). ls: running sums
    per lane (LANE) or per warp; None: the rule (lane_sums)."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from sgl_spec.kernels.verify_attention import gluon_rules as vgr
    from sgl_spec.kernels.verify_attention import gluon_pages as vg

    types = dict(q_ptr="*bf16", ku_ptr="*i32", kl_ptr="*i32", vu_ptr="*i16", vl_ptr="*i16", ks_ptr="*i32",
                 kz_ptr="*i32", vs_ptr="*fp16", vz_ptr="*fp16", pt_ptr="*i32", qs_ptr="*i32", m_ptr="*fp32",
                 l_ptr="*fp32", acc_ptr="*fp32", raw_ptr="*fp32", sc_ptr="*fp32", qk_scale="fp32", sm_scale="fp32")
    slim = vgr.slim_form(G) if slim is None else bool(slim)
    br = vgr.value_branches(G, N, N2, bool(sc)) if br is None else bool(br)
    ls = vgr.lane_sums() if ls is None else bool(ls)
    const = dict(G=G, N=N, N2=N2, HAS_SCORES=bool(sc), SCORE_LSE=bool(lse), PDL=True, SLIM=slim,
                 DIRECT=bool(sc) and vgr.direct_scores(bool(lse), 64 * sub), FIRST=first, SUB=sub, BR=br,
                 LANE=bool(ls))
    plain = ("NQ", "HQ", "S1", "C", "NS", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "s_pj")
    kernel, opts = vg._verify_pages_kernel, {}
    if cw:
        kernel, types, opts = _copy_warp_types(types)
    cc = compile_sm90(kernel, types, const, plain=plain, num_warps=vgr.NUM_WARPS, num_stages=1,
                      source=GluonASTSource, **opts)
    report(cc, f"verify_pages_gluon G={G} N={N} N2={N2} scores={sc} lse={lse} slim={int(slim)} "
               f"direct={int(const['DIRECT'])} first={int(first)} br={int(br)} ls={int(ls)} cw={int(bool(cw))} "
               f"P={64 * sub}")
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


def _verify_ring_gluon(G=4, NT=32, sub=1):
    """The Gluon ring launch of the verify (sgl_spec/kernels/verify_attention/gluon_ring.py): four warps, NT columns, P = 64 sub."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from sgl_spec.kernels.verify_attention import gluon_ring as vr

    types = dict(q_ptr="*bf16", hk_ptr="*bf16", hv_ptr="*bf16", hs_ptr="*i32", m_ptr="*fp32", l_ptr="*fp32",
                 acc_ptr="*fp32", qs_ptr="*i32", qk_scale="fp32")
    plain = ("NQ", "HQ", "S1", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "shk_n")
    cc = compile_sm90(vr._verify_ring_kernel, types, dict(G=G, NT=NT, PT=64 * sub, PDL=True), plain=plain,
                      num_warps=4, num_stages=1, source=GluonASTSource)
    report(cc, f"verify_ring_gluon G={G} NT={NT} P={64 * sub}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "draft"
    if what == "verify_gluon":  # sass_report.py verify_gluon [G=4] [N=32] [N2=0] [sc=1] [lse=0] [slim=0|1] [first=0|1]
        # [P=64|128] [br=0|1] [cw=0|1] [ls=0|1]
        kv = dict(a.split("=") for a in sys.argv[2:] if "=" in a)
        _verify_gluon(int(kv.get("G", 4)), int(kv.get("N", 32)), int(kv.get("sc", 1)), int(kv.get("lse", 0)),
                      int(kv["slim"]) if "slim" in kv else None, int(kv.get("N2", 0)),
                      bool(int(kv.get("first", 1))), int(kv.get("P", 64)) // 64, int(kv["br"]) if "br" in kv else None,
                      int(kv.get("cw", 0)), int(kv["ls"]) if "ls" in kv else None)
    elif what == "verify_ring_gluon":  # sass_report.py verify_ring_gluon [G=4] [NT=32] [P=64|128]
        kv = dict(a.split("=") for a in sys.argv[2:] if "=" in a)
        _verify_ring_gluon(int(kv.get("G", 4)), int(kv.get("NT", 32)), int(kv.get("P", 64)) // 64)
    elif what == "draft_gluon":  # sass_report.py draft_gluon [G=4] [pf=1|0] [st=0|1] [P=64|128] [hot=0|1] [as=0|2|3]
        # [tma=0|1] [hl=0|1]
        kv = dict(a.split("=") for a in sys.argv[2:] if "=" in a)
        _draft_gluon(int(kv.get("G", 4)), int(kv.get("pf", 1)), int(kv.get("st", 0)), int(kv.get("P", 64)) // 64,
                     int(kv.get("hot", 0)), int(kv.get("as", 0)), int(kv.get("tma", 0)), int(kv.get("hl", 0)))
    elif what == "draft":  # python bench/sass_report.py draft [P=64|128] [pf=0|1] [fs=0|1] [nr=N|0] [kf=1] [wn=1] [nw=1|2|4]
        # [hl=1]
        kv = dict(a.split("=") for a in sys.argv[2:] if "=" in a)
        for P in ([int(kv["P"])] if "P" in kv else (64, 128)):
            _draft(P, pf=int(kv["pf"]) if "pf" in kv else None, fs=int(kv["fs"]) if "fs" in kv else None,
                   nr=int(kv["nr"]) if "nr" in kv else None, kf=int(kv["kf"]) if "kf" in kv else None,
                   wn=bool(int(kv.get("wn", 0))), nw=int(kv["nw"]) if "nw" in kv else None, hl=int(kv.get("hl", 0)))
    elif what == "verify":  # python bench/sass_report.py verify [old] [maxnreg] [pp=1|2] [nw=4|8] [qa=1|2] [lse=1] [kf=1]
        # [g=2] [bm=32]
        args = sys.argv[2:]
        kw = dict(old="old" in args, maxnreg=next((int(a) for a in args if a.isdigit()), None))
        if not kw["old"]:
            kw.update(pp=next((int(a[3:]) for a in args if a.startswith("pp=")), None),
                      nw=next((int(a[3:]) for a in args if a.startswith("nw=")), None),
                      qa=next((int(a[3:]) for a in args if a.startswith("qa=")), 0),
                      lse=next((int(a[4:]) for a in args if a.startswith("lse=")), 0),
                      kf=next((int(a[3:]) for a in args if a.startswith("kf=")), None),
                      g=next((int(a[2:]) for a in args if a.startswith("g=")), 4),
                      bm=next((int(a[3:]) for a in args if a.startswith("bm=")), None))
        _verify(**kw)
        _verify(**kw, has_scores=False)
