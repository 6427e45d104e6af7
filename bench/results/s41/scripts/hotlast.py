"""Session 41 dev: the hot-token launch after the page launch instead of before it ("hot last"), so its programs
run in the page launch's tail instead of holding SM slots at its start. Forms by text substitution:
the Gluon page kernel waits for the stream at its start and releases the next launch at once (no wait at its end);
the Triton hot-token kernel waits for the page launch at its end (so the merge, which waits for it, sees both) and
releases nothing early. Outputs must be bit-equal to the shipped order. µs, graph replay, read flush, interleaved."""
import importlib.util
import sys
from pathlib import Path

sys.path[:0] = ["bench", ".work"]
import torch
import kernel_cases as kc
from kernel_cases import quant_pages, draft_args, SM_SCALE, DTYPE
from dev_timing import timer
from sgl_spec.kernels import draft_pages_gluon as dpg
from sgl_spec.kernels import draft_pages as dp
from sgl_spec.kernels import draft_decode as ddm

WAIT = 'gl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32, is_pure=False,'
REL = 'gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // dummy $0", "=r", [], dtype=gl.int32, ' \
      'is_pure=False,'
G_SUBS = [
    ("    if PDL and HS > 0:  # the launch's first kernel: wait for the stream (q, the ring) before any load\n"
     f"        {WAIT}\n                                  pack=1)\n",
     f"    if PDL:\n        {WAIT}\n                                  pack=1)\n        {REL}\n"
     "                                  pack=1)\n"),
    ("        if PDL:  # the hot-token launch before this one let it start early: finish only after it, for the merge\n"
     f"            {WAIT}\n                                      pack=1)\n", ""),
]
T_SUBS = [("    _wait_prior(PDL)\n    _release_dependents(EARLY_LAUNCH)", "    pass")]
T_SUBS_REL = [("    _wait_prior(PDL)\n    _release_dependents(EARLY_LAUNCH)", "    _release_dependents(EARLY_LAUNCH)")]
G_SUBS_ME = [  # hot first as shipped; the page launch releases the merge at its start (it waits for the pages)
    ("    s = gl.program_id(0)\n    bh = gl.program_id(1)\n",
     f"    if PDL:\n        {REL}\n                                  pack=1)\n    s = gl.program_id(0)\n    bh = gl.program_id(1)\n"),
]


def _load(mod, subs, name, tail=""):
    src = Path(mod.__file__).read_text()
    for a, b in subs:
        assert src.count(a) == 1, (name, a[:80])
        src = src.replace(a, b)
    path = Path(f"/tmp/{name}.py")
    path.write_text(src + tail)
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


class _HotLast:
    """Stands in for the Gluon page kernel: launches the variant, then the held hot-token launch."""

    def __init__(self, kern, held, launch_hot):
        self.kern, self.held, self.launch_hot = kern, held, launch_hot

    def __getitem__(self, grid):
        def run(*a, **k):
            self.kern[grid](*a, **k)
            if self.held:
                args, kw = self.held.pop()
                self.launch_hot(*args, **kw)
        return run


def main():
    gk = _load(dpg, G_SUBS, "dpg_hotlast")._draft_pages_kernel
    gme = _load(dpg, G_SUBS_ME, "dpg_mergeearly")._draft_pages_kernel
    tail = "    _wait_prior(PDL)\n" if Path(dp.__file__).read_text().endswith("\n") else "\n    _wait_prior(PDL)\n"
    tk = _load(dp, T_SUBS, "dp_hotlast", tail)._draft_decode_kernel
    tkr = _load(dp, T_SUBS_REL, "dp_hotlast_rel", tail)._draft_decode_kernel
    orig = (dpg._draft_pages_kernel, ddm._launch_hot, ddm._draft_decode_kernel)
    held = []

    def hold(*a, **k):
        held.append((a, k))

    gen = torch.Generator().manual_seed(0)
    for cell in sys.argv[1].split(","):
        ctx, B, P = map(int, cell.split(":")[:3])
        sparse = (0.07, 1, 1) if cell.endswith(":s") else None
        qb = quant_pages([ctx] * B, P, "cuda", copies=1, gen=gen)[0]
        ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=gen)
        q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
        rows, outs = {}, {}
        for rep in range(3):
            for form in ("shipped", "hotlast", "hotlast_rel", "mergeearly"):
                out = torch.empty_like(q)
                if form.startswith("hotlast"):
                    dpg._draft_pages_kernel = _HotLast(gk, held, orig[1])
                    ddm._launch_hot, ddm._draft_decode_kernel = hold, (tk if form == "hotlast" else tkr)
                elif form == "mergeearly":
                    dpg._draft_pages_kernel = gme
                try:
                    fn = lambda: ddm.draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs,  # noqa
                                                  hl, SM_SCALE, out=out, engine="gluon")
                    if rep == 0:
                        outs[form] = fn().clone()
                    ms = timer(fn)
                finally:
                    dpg._draft_pages_kernel, ddm._launch_hot, ddm._draft_decode_kernel = orig
                    held.clear()
                rows.setdefault(form, []).append(ms * 1e3)
        eq = all(torch.equal(outs["shipped"], o) for o in outs.values())
        parts = [f"{k} {', '.join(f'{x:.1f}' for x in v)}" for k, v in rows.items()]
        print(f"draft{'/7%' if sparse else ''} ctx={ctx} B={B} P={P} equal:{eq} us | " + " | ".join(parts), flush=True)
        qb = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
