"""Compare the main page loop's SASS (opcode sequence, registers stripped) of the Gluon verify kernel ring=0 vs 1."""
import difflib, re, sys
sys.path.insert(0, "bench")
import sass_report as sr
from triton.experimental.gluon._runtime import GluonASTSource
from sgl_spec.kernels import verify_pages_gluon as vg

def loop_ops(N, N2, sub, ring):
    types = dict(q_ptr="*bf16", ku_ptr="*i32", kl_ptr="*i32", vu_ptr="*i16", vl_ptr="*i16", ks_ptr="*i32",
                 kz_ptr="*i32", vs_ptr="*fp16", vz_ptr="*fp16", pt_ptr="*i32", qs_ptr="*i32", m_ptr="*fp32",
                 l_ptr="*fp32", acc_ptr="*fp32", raw_ptr="*fp32", sc_ptr="*fp32", qk_scale="fp32", sm_scale="fp32",
                 hk_ptr="*bf16", hv_ptr="*bf16", hs_ptr="*i32")
    const = dict(G=4, N=N, N2=N2, HAS_SCORES=True, SCORE_LSE=False, PDL=True, SLIM=True, DIRECT=True, FIRST=True,
                 SUB=sub, RING=bool(ring), NT=vg._rows_tile(N + N2))
    plain = ("NQ", "HQ", "S1", "C", "NS", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "s_pj")
    cc = sr.compile_sm90(vg._verify_pages_kernel, types, const, plain=plain, num_warps=4, num_stages=1,
                         source=GluonASTSource)
    text = sr.sass(cc)
    ins = []
    for line in text.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    _, ls = sr.loops(text)
    a, b, _ = max(ls, key=lambda x: x[1] - x[0])
    body = [t for (ad, t) in ins if a <= ad <= b]
    ops = [re.sub(r"^@!?U?P\w+\s+", "", t).split()[0] for t in body]
    return ops, body

if __name__ == "__main__":
    N, N2, sub = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    o0, b0 = loop_ops(N, N2, sub, 0)
    o1, b1 = loop_ops(N, N2, sub, 1)
    sm = difflib.SequenceMatcher(None, o0, o1, autojunk=False)
    print(f"N={N} N2={N2} SUB={sub}: loop {len(o0)} vs {len(o1)} instr, opcode-sequence ratio {sm.ratio():.4f}")
    pos = lambda ops, op: [i for i, o in enumerate(ops) if o.startswith(op)]
    for op in ("LDGSTS", "LDL", "STL", "BAR"):
        print(f"  {op}: {pos(o0, op)[:12]} | {pos(o1, op)[:12]}")
