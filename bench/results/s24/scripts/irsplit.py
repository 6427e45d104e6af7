# TTGIR of HEAD d2e9997's verify kernel (the one timed) against the working tree's, the 16 + 8 split forms included
import importlib.util, sys, re, subprocess, tempfile, os
sys.path.insert(0, "bench")
import sass_report as sr
from triton.experimental.gluon._runtime import GluonASTSource
import sgl_spec.kernels.verify_pages_gluon as vg
tmp = tempfile.mkdtemp()
open(os.path.join(tmp, "head.py"), "w").write(subprocess.run(["git", "show", "HEAD:kernels/verify_pages_gluon.py"], capture_output=True, text=True, check=True).stdout)
spec = importlib.util.spec_from_file_location("vgh", os.path.join(tmp, "head.py")); mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
def get(k, G, N, N2, SLIM, SC, LSE):
    types = dict(q_ptr="*bf16", ku_ptr="*i32", kl_ptr="*i32", vu_ptr="*i16", vl_ptr="*i16", ks_ptr="*i32", kz_ptr="*i32", vs_ptr="*fp16", vz_ptr="*fp16", pt_ptr="*i32", qs_ptr="*i32", m_ptr="*fp32", l_ptr="*fp32", acc_ptr="*fp32", raw_ptr="*fp32", qk_scale="fp32")
    const = dict(G=G, N=N, N2=N2, HAS_SCORES=SC, SCORE_LSE=LSE, PDL=True, SLIM=SLIM)
    plain = ("NQ", "HQ", "S1", "C", "NS", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "s_pj")
    t = sr.compile_sm90(k, types, const, plain=plain, num_warps=4, num_stages=1, source=GluonASTSource).asm["ttgir"]
    t = re.sub(r"loc\([^)]*\)", "", t); t = re.sub(r"#loc\d*", "", t)
    return [l for l in re.sub(r"%[A-Za-z_0-9]+", "%v", t).splitlines() if not re.fullmatch(r" *= *\)?", l)]
for c in [(4, 16, 8, True, True, False), (2, 16, 8, False, True, False), (4, 16, 8, True, True, True), (4, 16, 8, True, False, False), (4, 32, 0, False, True, True)]:
    print(c, "identical" if get(mod._verify_pages_kernel, *c) == get(vg._verify_pages_kernel, *c) else "DIFFERENT")
