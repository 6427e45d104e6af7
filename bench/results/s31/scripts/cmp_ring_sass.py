"""sm_90 SASS of the committed Gluon ring launch against the dev copy timed and checked on the GPU in session 31
(.work/vg/gring.py: apply scripts/vg_gring.diff to kernels/verify_pages_gluon.py of a5b7d04)."""
import sys, re, importlib.util, hashlib
sys.path[:0] = ["bench"]
import sass_report as sr
from triton.experimental.gluon._runtime import GluonASTSource
from sgl_spec.kernels import verify_ring_gluon as vr
spec = importlib.util.spec_from_file_location("gring", ".work/vg/gring.py"); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
types = dict(q_ptr="*bf16", hk_ptr="*bf16", hv_ptr="*bf16", hs_ptr="*i32", m_ptr="*fp32", l_ptr="*fp32", acc_ptr="*fp32",
             qs_ptr="*i32", qk_scale="fp32")
plain = ("NQ", "HQ", "S1", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "shk_n")
for G, NT, PT in ((4, 32, 64), (4, 32, 128), (4, 8, 64)):
    out = []
    for k in (vr._verify_ring_kernel, m._ring_kernel):
        cc = sr.compile_sm90(k, types, dict(G=G, NT=NT, PT=PT, PDL=True), plain=plain, num_warps=4, num_stages=1, source=GluonASTSource)
        t = sr.sass(cc)
        ins = [re.sub(r"/\*[0-9a-f]+\*/", "", l).strip() for l in t.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]
        out.append(hashlib.md5("\n".join(ins).encode()).hexdigest()[:12] + f" ({len(ins)} lines)")
    print(G, NT, PT, out, "SAME" if out[0] == out[1] else "DIFF")
