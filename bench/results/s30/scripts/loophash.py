"""Hash of the main page loop's opcode sequence (and stack/LDL) of the Gluon verify kernel for the forms given."""
import hashlib, re, sys
sys.path.insert(0, "bench"); sys.path.insert(0, ".work")
from loopcmp import loop_ops  # noqa
import sass_report as sr
for form in sys.argv[1:]:
    N, N2, sub, ring = (int(x) for x in form.split(","))
    ops, body = loop_ops(N, N2, sub, ring)
    full = hashlib.md5("\n".join(re.sub(r"R\d+|0x[0-9a-f]+|UR\d+|P\d", "", t) for t in body).encode()).hexdigest()[:10]
    print(f"N={N} N2={N2} SUB={sub} ring={ring}: loop {len(ops)} ldl {sum(o.startswith('LDL') for o in ops)} "
          f"ops {hashlib.md5(' '.join(ops).encode()).hexdigest()[:10]} body {full}", flush=True)
