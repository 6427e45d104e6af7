# compile .work/vg/<name>.py's verify kernel like sass_report verify_gluon (A/B of kernel forms on the CPU)
import importlib.util, sys
sys.path.insert(0, "bench")
import sass_report as sr
name = sys.argv[1]
spec = importlib.util.spec_from_file_location("vgx", f".work/vg/{name}.py"); mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
import sgl_spec.kernels.verify_pages_gluon as vg
vg._verify_pages_kernel = mod._verify_pages_kernel
_orig = sr.compile_sm90
def _c(k, t, const, **kw):
    if 'N2' not in k.arg_names: const.pop('N2', None)
    return _orig(k, t, const, **kw)
sr.compile_sm90 = _c
kv = dict(a.split("=") for a in sys.argv[2:])
sr._verify_gluon(int(kv.get("G", 4)), int(kv.get("N", 32)), int(kv.get("sc", 1)), 0, int(kv["slim"]) if "slim" in kv else None, *([int(kv["N2"])] if "N2" in kv else []))
