"""sm_90 SASS of the committed page kernel (no ring code) against a5b7d04's built without the ring program (the build
the GPU tests and timings ran as the ring-launch form): git show a5b7d04:kernels/verify_pages_gluon.py > /tmp/vpg_head.py"""
import sys, re, importlib.util, hashlib
sys.path[:0] = ["bench"]
import sass_report as sr
from triton.experimental.gluon._runtime import GluonASTSource
from sgl_spec.kernels import verify_pages_gluon as cur
spec = importlib.util.spec_from_file_location("vhead", "/tmp/vpg_head.py"); old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)
base = dict(q_ptr="*bf16", ku_ptr="*i32", kl_ptr="*i32", vu_ptr="*i16", vl_ptr="*i16", ks_ptr="*i32",
            kz_ptr="*i32", vs_ptr="*fp16", vz_ptr="*fp16", pt_ptr="*i32", qs_ptr="*i32", m_ptr="*fp32",
            l_ptr="*fp32", acc_ptr="*fp32", raw_ptr="*fp32", sc_ptr="*fp32", qk_scale="fp32", sm_scale="fp32")
plain = ("NQ", "HQ", "S1", "C", "NS", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "s_pj")
for N, N2, SUB, FIRST in ((32, 0, 1, True), (16, 8, 1, True), (16, 8, 2, True), (32, 0, 2, True), (8, 0, 1, True), (16, 8, 1, False)):
    out = []
    for mod, extra, cx in ((cur, {}, {}), (old, dict(hk_ptr="*bf16", hv_ptr="*bf16", hs_ptr="*i32"), dict(RING=False, NT=8))):
        const = dict(G=4, N=N, N2=N2, HAS_SCORES=True, SCORE_LSE=False, PDL=True, SLIM=True, DIRECT=True, FIRST=FIRST, SUB=SUB, **cx)
        cc = sr.compile_sm90(mod._verify_pages_kernel, dict(base, **extra), const, plain=plain, num_warps=4, num_stages=1, source=GluonASTSource)
        t = sr.sass(cc)
        ins = [re.sub(r"/\*[0-9a-f]+\*/", "", l).strip() for l in t.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]
        ins = [re.sub(r"c\[0x0\]\[0x[0-9a-f]+\]", "c[param]", x) for x in ins]  # parameter offsets differ (3 params fewer)
        out.append(hashlib.md5("\n".join(ins).encode()).hexdigest()[:12] + f" ({len(ins)})")
    print(N, N2, SUB, FIRST, out, "SAME" if out[0] == out[1] else "DIFF", flush=True)
