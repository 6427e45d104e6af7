"""Session 40 dev diagnosis: the dense draft's launch as a timeline. A form of kernels/draft_pages_gluon.py (text
substitution) whose every program stores %globaltimer at its start and end and its %smid; one CUDA-graph replay after
an L2 flush is timed with events, and the programs' starts / ends are summarised against the replay's time (where
the fixed costs go: start spread, tail, merge). Usage: draft_timeline.py ctx:B:P,... [--compile-only]"""
import importlib.util
import sys
from pathlib import Path

sys.path[:0] = ["bench"]
import kernel_cases  # noqa: F401 E402  (makes sgl_spec importable from the checkout)
from sgl_spec.kernels import draft_pages_gluon as dpg

SRC = Path(dpg.__file__).read_text()
SIG = "    STEAL: gl.constexpr = 0,\n):"
START = "    bh = gl.program_id(1)\n"
END = ("        if PDL:  # the hot-token launch before this one let it start early: finish only after it, for the merge\n"
       "            gl.inline_asm_elementwise(\"griddepcontrol.wait; // dummy $0\", \"=r\", [], dtype=gl.int32, is_pure=False,\n"
       "                                      pack=1)\n")
GT = "gl.inline_asm_elementwise(\"mov.u64 $0, %globaltimer;\", \"=l\", [], dtype=gl.int64, is_pure=False, pack=1)"
STORE = ("    t1_ = " + GT + "\n"
         "    sm_ = gl.inline_asm_elementwise(\"mov.u32 $0, %smid;\", \"=r\", [], dtype=gl.int32, is_pure=False, pack=1)\n"
         "    ix_ = (gl.program_id(1) * gl.num_programs(0) + gl.program_id(0)).to(gl.int64) * 4\n"
         "    gl.store(tl_ptr + ix_, t0_)\n"
         "    gl.store(tl_ptr + ix_ + 1, t1_)\n"
         "    gl.store(tl_ptr + ix_ + 2, sm_.to(gl.int64))\n"
         "    gl.store(tl_ptr + ix_ + 3, (bh * 65536 + s).to(gl.int64))\n")


def load_form():
    src = SRC
    for a, b in ((SIG, "    STEAL: gl.constexpr = 0, tl_ptr=None,\n):"),
                 (START, START + "    t0_ = " + GT + "\n"), (END, END + STORE)):
        assert src.count(a) == 1, a
        src = src.replace(a, b)
    path = Path("/tmp/dpg_timeline.py")
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("dpg_timeline", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod._draft_pages_kernel


class WithBuffer:
    """The form's kernel with ``tl_ptr`` added to every launch (the launcher does not know the argument)."""

    def __init__(self, k, buf):
        self.k, self.buf, self.grid = k, buf, None

    def __getitem__(self, grid):
        self.grid = grid
        return lambda *a, **kw: self.k[grid](*a, tl_ptr=self.buf, **kw)


def compile_only():
    import sass_report as sr
    from triton.experimental.gluon._runtime import GluonASTSource
    k = load_form()
    orig = sr.compile_sm90

    def comp(kernel, types, const, **kw):
        types = dict(types, tl_ptr="*i64")
        return orig(k, types, const, **kw)
    sr.compile_sm90 = comp
    sr._draft_gluon(G=4, stages=2, tma=1)
    sr._draft_gluon(G=4, stages=2, tma=1, hot=1)
    del GluonASTSource


def q(xs, f):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(f * len(xs)))]


def main():
    import torch
    import kernel_cases as kc
    from kernel_cases import quant_pages, draft_args, SM_SCALE, DTYPE
    from dev_timing import capture_graph, _bench
    from l2_timer import L2Flush
    from sgl_spec.kernels.draft_decode import draft_decode
    k = load_form()
    flush = L2Flush("read")
    gen = torch.Generator().manual_seed(0)
    orig = dpg._draft_pages_kernel
    for cell in sys.argv[1].split(","):
        ctx, B, P = map(int, cell.split(":"))
        qb = quant_pages([ctx] * B, P, "cuda", copies=1, gen=gen)[0]
        ids, cnt, hs, hl = draft_args(qb, gen=gen)
        qq = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
        out = torch.empty_like(qq)
        buf = torch.zeros(1 << 22, dtype=torch.int64, device="cuda")
        wb = WithBuffer(k, buf)
        kw = {}
        for part in (sys.argv[3].split(",") if len(sys.argv) > 3 and sys.argv[3] else []):
            k_, v_ = part.split("=")
            kw[k_] = int(v_)
        if kw.get("steal"):
            kw["steal_counters"] = torch.zeros(2 * B * kc.HKV, dtype=torch.int32, device="cuda")
        fn = lambda: draft_decode(qq, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, out=out,
                                  engine="gluon", **kw)
        g0 = capture_graph(fn)
        ms_plain = _bench(g0.replay)
        dpg._draft_pages_kernel = wb
        try:
            g = capture_graph(fn)
        finally:
            dpg._draft_pages_kernel = orig
        ms_form = _bench(g.replay)
        grid = wb.grid
        nx, ny = int(grid[0]), int(grid[1])
        rows = []
        for rep in range(5):
            buf.zero_()
            flush()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            g.replay()
            e1.record()
            torch.cuda.synchronize()
            t = buf[: nx * ny * 4].view(nx * ny, 4).cpu()
            t0, t1, sm = t[:, 0], t[:, 1], t[:, 2]
            base = int(t0.min())
            st = ((t0 - base) / 1e3).tolist()
            en = ((t1 - base) / 1e3).tolist()
            dur = [b - a for a, b in zip(st, en)]
            nsm = len(set(sm.tolist()))
            per_sm = {}
            for i, s_ in enumerate(sm.tolist()):
                per_sm[s_] = max(per_sm.get(s_, 0), en[i])
            sm_end = list(per_sm.values())
            rows.append(f"  rep {rep}: event {e0.elapsed_time(e1) * 1e3:.1f}us | grid {nx}x{ny} on {nsm} SMs | start "
                        f"p50 {q(st, .5):.1f} p90 {q(st, .9):.1f} max {max(st):.1f} | end min {min(en):.1f} p10 "
                        f"{q(en, .1):.1f} p50 {q(en, .5):.1f} p90 {q(en, .9):.1f} max {max(en):.1f} | dur p10 "
                        f"{q(dur, .1):.1f} p50 {q(dur, .5):.1f} max {max(dur):.1f} | SM last end min "
                        f"{min(sm_end):.1f} p50 {q(sm_end, .5):.1f}")
        print(f"draft ctx={ctx} B={B} P={P} {sys.argv[3] if len(sys.argv) > 3 else ''} | plain {ms_plain * 1e3:.1f}us form {ms_form * 1e3:.1f}us", flush=True)
        print("\n".join(rows), flush=True)
        torch.save(buf[: nx * ny * 4].view(nx * ny, 4).cpu(), f"{sys.argv[2] if len(sys.argv) > 2 else '/tmp'}/tl_{ctx}_{B}_{P}_{len(sys.argv) > 3 and sys.argv[3].replace(',', '_').replace('=', '')}.pt")
        qb = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    compile_only() if "--compile-only" in sys.argv else main()
