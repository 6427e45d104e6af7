"""Session 39 dev diagnosis of the ring-form dense draft on the H200: where its time goes. Forms of
kernels/draft_pages_gluon.py made by text substitution (loaded as modules of their own, swapped in for the call):
``nomath`` the ring's page math replaced by a fold of the words (the bytes still move), ``nocopy`` every copy
masked off (the math on whatever the slots hold, no bytes move). Same process, interleaved, µs (graph replay,
read flush)."""
import importlib.util
import sys
from pathlib import Path

sys.path[:0] = ["bench"]
import torch
import kernel_cases as kc
from kernel_cases import quant_pages, draft_args, SM_SCALE, DTYPE, bytes_draft
from dev_timing import timer, copy_gbps
from sgl_spec.kernels import draft_pages_gluon as dpg
from sgl_spec.kernels.draft_decode import draft_decode

SRC = Path(dpg.__file__).read_text()
LOOP = "            m_i, l_i, pz_i, o_i = _attend(m_i, l_i, pz_i, o_i, q_b, page, zero_s, zero_o, MMA, OPA, OPB)\n            slot"
assert SRC.count(LOOP) == 1
FOLD = ("            kw_, vw_, s_lo_, s_hi_, z_lo_, z_hi_, vs_, vz_ = page\n"
        "            l_i = l_i + (gl.sum(gl.sum(kw_ ^ 3, 1), 0) + gl.sum(gl.sum(vw_ ^ 5, 1), 0) + gl.sum(s_lo_ ^ s_hi_ ^ z_lo_"
        " ^ z_hi_, 0)).to(gl.float32) + gl.sum(vs_.to(gl.float32) + vz_.to(gl.float32), 0)\n            slot")
FORMS = {
    "nomath": [(LOOP, FOLD)],
    "nocopy": [("pg0, h, ok0, KW, VW, half0)", "pg0, h, ok0 & (lo < 0), KW, VW, half0)"),
               ("pg_k, h, lo + k * ST < hi, KW, VW, half_k)", "pg_k, h, lo + k * ST < lo, KW, VW, half_k)"),
               ("pg_a, h, ia < hi, KW, VW, half_a)", "pg_a, h, ia < lo, KW, VW, half_a)")],
}


def load_form(name):
    src = SRC
    for a, b in FORMS[name]:
        assert src.count(a) == 1, (name, a)
        src = src.replace(a, b)
    path = Path(f"/tmp/dpg_{name}.py")
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"dpg_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod._draft_pages_kernel


def main():
    gbps = copy_gbps()
    print(f"copy {gbps:.0f} GB/s", flush=True)
    kernels = {"ring": dpg._draft_pages_kernel}
    for f in FORMS:
        kernels[f] = load_form(f)
    orig = dpg._draft_pages_kernel
    gen = torch.Generator().manual_seed(0)
    for cell in sys.argv[1].split(","):
        ctx, B, P = map(int, cell.split(":"))
        qb = quant_pages([ctx] * B, P, "cuda", copies=1, gen=gen)[0]
        ids, cnt, hs, hl = draft_args(qb, gen=gen)
        q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
        out = torch.empty_like(q)
        nbytes = bytes_draft(P, cnt.tolist(), hl.tolist())
        parts = []
        for rep in range(2):
            for name, k in kernels.items():
                for tma in ((False, True) if name != "nocopy" else (False,)):
                    dpg._draft_pages_kernel = k
                    try:
                        ms = timer(lambda: draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs,
                                                        hl, SM_SCALE, out=out, engine="gluon", stages=2,
                                                        stream_tma=tma))
                    finally:
                        dpg._draft_pages_kernel = orig
                    parts.append(f"{name}{'/tma' if tma else ''} {ms * 1e3:.1f}us {nbytes / ms / 1e6 / gbps:.0%}")
        print(f"draft ctx={ctx} B={B} P={P} | " + " | ".join(parts), flush=True)
        qb = None
        torch.cuda.empty_cache()


main()
