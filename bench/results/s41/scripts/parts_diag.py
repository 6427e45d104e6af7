"""Session 41 dev: the dense draft's time by launch (diagnosis: outputs wrong where a launch is skipped). Same
process, interleaved, µs (graph replay, read flush): ``full`` (shipped), ``nohot`` (the hot-token launch skipped),
``nomerge`` (the merge launch skipped), ``pages`` (both skipped: the page launch alone), ``hot1`` (hot_len 1), each
with the shipped page math and with ``nomath`` (layout_diag.py's fold), plus a plain read of the same bytes."""
import sys

sys.path[:0] = ["bench", ".work"]
import torch
import kernel_cases as kc
from kernel_cases import quant_pages, draft_args, SM_SCALE, DTYPE, bytes_draft
from dev_timing import timer, copy_gbps
from sgl_spec.kernels import draft_pages_gluon as dpg
from sgl_spec.kernels import draft_decode as ddm
import layout_diag as ld


class _Skip:
    def __getitem__(self, grid):
        return lambda *a, **k: None


def main():
    gbps = copy_gbps()
    print(f"copy {gbps:.0f} GB/s", flush=True)
    nomath = ld.load_nomath()
    orig_k, orig_hot, orig_merge = dpg._draft_pages_kernel, ddm._launch_hot, ddm._draft_decode_merge_kernel
    gen = torch.Generator().manual_seed(0)
    for cell in sys.argv[1].split(","):
        ctx, B, P = map(int, cell.split(":"))
        qb = quant_pages([ctx] * B, P, "cuda", copies=1, gen=gen)[0]
        ids, cnt, hs, hl = draft_args(qb, gen=gen)
        hl1 = torch.ones_like(hl)
        hs1 = (hs + hl - 1).contiguous()
        q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
        nbytes = bytes_draft(P, cnt.tolist(), hl.tolist())
        rows = {}
        for rep in range(2):
            for form, k in (("ring", orig_k), ("nomath", nomath)):
                for part in ("full", "nohot", "nomerge", "pages", "hot1"):
                    dpg._draft_pages_kernel = k
                    if part in ("nohot", "pages"):
                        ddm._launch_hot = lambda *a, **kw: None
                    if part in ("nomerge", "pages"):
                        ddm._draft_decode_merge_kernel = _Skip()
                    a, b = (hs1, hl1) if part == "hot1" else (hs, hl)
                    out = torch.empty_like(q)
                    try:
                        ms = timer(lambda: ddm.draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot,
                                                            a, b, SM_SCALE, out=out, engine="gluon"))
                    finally:
                        dpg._draft_pages_kernel, ddm._launch_hot = orig_k, orig_hot
                        ddm._draft_decode_merge_kernel = orig_merge
                    rows.setdefault(f"{form}/{part}", []).append(ms * 1e3)
        rd = ld.read_us(nbytes)
        parts = [f"{k} {', '.join(f'{x:.1f}' for x in v)}" for k, v in rows.items()]
        parts += [f"{k} {v:.1f}" for k, v in rd.items()]
        print(f"draft ctx={ctx} B={B} P={P} bytes={nbytes / 1e6:.0f}MB us | " + " | ".join(parts), flush=True)
        qb = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
