# TTGIR of HEAD cdd640c's verify kernel (vg_base.diff: .work/vg/base.py during the session) against the package's kernel
# for windows that do not take the 16 + 8 split: identical up to SSA names and locations
import importlib.util, sys, re
sys.path.insert(0, "bench")
import sass_report as sr
from triton.experimental.gluon._runtime import GluonASTSource
import sgl_spec.kernels.verify_pages_gluon as vg
def get(kernel, n2, G=4, N=32, SLIM=True, SC=True):
    types = dict(q_ptr="*bf16", ku_ptr="*i32", kl_ptr="*i32", vu_ptr="*i16", vl_ptr="*i16", ks_ptr="*i32",
                 kz_ptr="*i32", vs_ptr="*fp16", vz_ptr="*fp16", pt_ptr="*i32", qs_ptr="*i32", m_ptr="*fp32",
                 l_ptr="*fp32", acc_ptr="*fp32", raw_ptr="*fp32", qk_scale="fp32")
    const = dict(G=G, N=N, HAS_SCORES=SC, SCORE_LSE=False, PDL=True, SLIM=SLIM)
    if n2: const["N2"] = 0
    plain = ("NQ", "HQ", "S1", "C", "NS", "ra", "rb", "n_front", "lo_r", "hi_r", "s_qn", "s_pj")
    cc = sr.compile_sm90(kernel, types, const, plain=plain, num_warps=4, num_stages=1, source=GluonASTSource)
    t = cc.asm["ttgir"]
    t = re.sub(r"loc\([^)]*\)", "", t); t = re.sub(r"#loc\d*", "", t)
    return t
import subprocess, tempfile, os
tmp = tempfile.mkdtemp()  # HEAD cdd640c's kernel, made self-contained (vg_base.diff): its own int8_frags_gluon
show = lambda path: subprocess.run(["git", "show", f"cdd640c:{path}"], capture_output=True, text=True, check=True).stdout
open(os.path.join(tmp, "int8_frags_base.py"), "w").write(show("kernels/int8_frags_gluon.py"))
open(os.path.join(tmp, "vg_base.py"), "w").write(show("kernels/verify_pages_gluon.py").replace(
    "from sgl_spec.kernels.int8_frags_gluon import", "from int8_frags_base import"))
sys.path.insert(0, tmp)
spec = importlib.util.spec_from_file_location("vgx", os.path.join(tmp, "vg_base.py")); mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
import itertools
for G, N, SL, SC in [(4, 32, True, True), (2, 32, False, True), (4, 8, True, True), (4, 32, True, False), (2, 16, False, True)]:
    x = get(mod._verify_pages_kernel, False, G, N, SL, SC); y = get(vg._verify_pages_kernel, True, G, N, SL, SC)
    norm = lambda t: [l for l in re.sub(r"%[A-Za-z_0-9]+", "%v", t).splitlines() if not re.fullmatch(r" *= *\)?", l)]
    print(G, N, SL, SC, "identical" if norm(x) == norm(y) else "DIFFERENT"); open("/tmp/a.txt","w").write("\n".join(norm(x))); open("/tmp/b.txt","w").write("\n".join(norm(y)))
