"""Session 41: draft_decode's hot-token launch before (hot_last=False) / after (True) the Gluon page launch, the
package's keyword, defaults otherwise (the rule picks ring or registers). µs, graph replay, read flush, three
interleaved timings; outputs compared bit for bit."""
import sys

sys.path[:0] = ["bench"]
import torch
import kernel_cases as kc
from kernel_cases import quant_pages, draft_args, SM_SCALE, DTYPE
from dev_timing import timer
from sgl_spec.kernels.draft_decode import draft_decode


def main():
    gen = torch.Generator().manual_seed(0)
    for cell in sys.argv[1].split(","):
        ctx, B, P = map(int, cell.split(":"))
        qb = quant_pages([ctx] * B, P, "cuda", copies=1, gen=gen)[0]
        ids, cnt, hs, hl = draft_args(qb, gen=gen)
        q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
        rows, outs = {}, {}
        for rep in range(3):
            for last in (False, True):
                out = torch.empty_like(q)
                fn = lambda: draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl,  # noqa
                                          SM_SCALE, out=out, engine="gluon", hot_last=last)
                if rep == 0:
                    outs[last] = fn().clone()
                rows.setdefault(last, []).append(timer(fn) * 1e3)
        eq = torch.equal(outs[False], outs[True])
        med = {k: sorted(v)[1] for k, v in rows.items()}
        print(f"draft ctx={ctx} B={B} P={P} equal:{eq} | before {', '.join(f'{x:.1f}' for x in rows[False])} | "
              f"after {', '.join(f'{x:.1f}' for x in rows[True])} | median {med[False]:.1f} -> {med[True]:.1f} us "
              f"({med[True] / med[False] - 1:+.1%})", flush=True)
        qb = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
