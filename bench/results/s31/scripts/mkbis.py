# variants of the ring function for bisecting the page loop's codegen; writes .work/vg/bis_<name>.py
import re
ring = open('/work/main/kernels/verify_ring_gluon.py').read()
start = ring.index('@gluon.jit\ndef _ring_program(')
fn = ring[start:]
base = open('/work/main/kernels/verify_pages_gluon.py').read()
base = base.replace("from sgl_spec.kernels.verify_ring_gluon import _ring_program\n", "")
i = base.index('# ---- copy and shared-memory layouts')
imports = ("from sgl_spec.kernels.verify_ring_gluon import RL, TSM, CSM, QL\n"
           "from sgl_spec.kernels.verify_rows_gluon import _window_row\n"
           "from triton.experimental.gluon.language.nvidia.ampere import mma_v2 as _mma\n")
def write(name, f):
    f = f.replace("mma_v2(", "_mma(")
    open(f'/work/main/.work/vg/bis_{name}.py', 'w').write(base[:i] + imports + "\n\n" + f + "\n\n" + base[i:])
write("full", fn)
# no O^T MMAs (p stored, acc unchanged)
write("nopv", fn.replace('''        acc = mma_v2(va, p_hi.load(OPB), acc * alpha[None, :])
        acc = mma_v2(va, p_lo.load(OPB), acc)''', '''        acc = acc * alpha[None, :]'''))
# no S MMA
write("nos", fn.replace('''        s = mma_v2(ksm.load(OPA), qsm.load(OPB), gl.zeros([64, NT], gl.float32, layout=MMA))''',
                        '''        s = gl.zeros([64, NT], gl.float32, layout=MMA) + ksm.load(MMA).to(gl.float32).sum(1)[:, None] * 0.0'''))
# one p term only (no lo)
write("nolo", fn.replace('''        p_lo.store((p - hi.to(gl.float32)).to(dt))\n''', '').replace('''        acc = mma_v2(va, p_lo.load(OPB), acc)\n''', ''))
# no chunk loop: q^T to smem, then the stores
a = fn.index('    for c in range(')
b = fn.index('    prow = ')
write("noloop", fn[:a] + "    gl.store(m_ptr + b, qsm.load(OPB).to(gl.float32).sum(0).sum(0) * 0.0)\n" + fn[b:])
# loop with loads and stores to smem but no math
body_loop = fn[a:b]
c = body_loop.index('        s = mma_v2(')
d = body_loop.index('        m = m_new')
write("loadonly", fn[:a] + body_loop[:c] + "        acc = acc + ksm.load(MMA).to(gl.float32).sum(0).sum(0) + vsm.load(MMA).to(gl.float32).sum(0).sum(0)\n" + fn[b:])
