"""Page-loop instructions, spill reloads and opcode hash of a verify_pages_gluon copy: loophash_module.py FILE N,N2,SUB,RING ..."""
import hashlib, re, sys, importlib.util
sys.path[:0] = ["bench", ".work"]
import sass_report as sr
from triton.experimental.gluon._runtime import GluonASTSource
spec = importlib.util.spec_from_file_location("rsw", sys.argv.pop(1)); vg = importlib.util.module_from_spec(spec); spec.loader.exec_module(vg)
types = dict(q_ptr="*bf16", ku_ptr="*i32", kl_ptr="*i32", vu_ptr="*i16", vl_ptr="*i16", ks_ptr="*i32",
             kz_ptr="*i32", vs_ptr="*fp16", vz_ptr="*fp16", pt_ptr="*i32", qs_ptr="*i32", m_ptr="*fp32",
             l_ptr="*fp32", acc_ptr="*fp32", raw_ptr="*fp32", sc_ptr="*fp32", qk_scale="fp32", sm_scale="fp32",
             hk_ptr="*bf16", hv_ptr="*bf16", hs_ptr="*i32")
if "ring_work" in vg._verify_pages_kernel.arg_names:  # the vg_rs_* copies' run-time flag
    types["ring_work"] = "i32"
plain = ("NQ", "HQ", "S1", "C", "NS", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "s_pj")
for form in sys.argv[1:]:
    N, N2, sub, ring = (int(x) for x in form.split(","))
    const = dict(G=4, N=N, N2=N2, HAS_SCORES=True, SCORE_LSE=False, PDL=True, SLIM=True, DIRECT=True, FIRST=True,
                 SUB=sub, RING=bool(ring), NT=vg._rows_tile(N + N2))
    cc = sr.compile_sm90(vg._verify_pages_kernel, types, const, plain=plain, num_warps=4, num_stages=1, source=GluonASTSource)
    text = sr.sass(cc)
    ins = []
    for line in text.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m: ins.append((int(m.group(1), 16), m.group(2).strip()))
    _, ls = sr.loops(text)
    a, b, _ = max(ls, key=lambda x: x[1] - x[0])
    body = [t for (ad, t) in ins if a <= ad <= b]
    ops = [re.sub(r"^@!?U?P\w+\s+", "", t).split()[0] for t in body]
    print(form, len(ops), sum(o.startswith('LDL') for o in ops), hashlib.md5(' '.join(ops).encode()).hexdigest()[:10], flush=True)
