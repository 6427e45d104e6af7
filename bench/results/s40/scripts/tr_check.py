"""Session 40 dev: the draft TMA ring's key / value boxes with 16 / 32 / 64 words a row (64 / 128 / 256-byte rows of
the same 4 KiB): outputs bit-equal to 16, then same-process timings (graph replay, read flush), interleaved twice."""
import sys
sys.path[:0] = ["bench"]
import torch
import kernel_cases as kc
from kernel_cases import quant_pages, draft_args, SM_SCALE, DTYPE, bytes_draft
from dev_timing import timer, copy_gbps
from sgl_spec.kernels.draft_decode import draft_decode

ROWS = (16, 32, 64)
gbps = copy_gbps()
print(f"copy {gbps:.0f} GB/s", flush=True)
gen = torch.Generator().manual_seed(0)
for cell in sys.argv[1].split(","):
    ctx, B, P = map(int, cell.split(":"))
    lens = [ctx] * B if B > 2 else [ctx] + [max(1, ctx // 3)] * (B - 1)
    qb = quant_pages(lens, P, "cuda", copies=1, gen=gen)[0]
    ids, cnt, hs, hl = draft_args(qb, gen=gen)
    q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
    outs = {}
    for r in ROWS:
        outs[r] = torch.full_like(q, float("nan"))
        draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, out=outs[r],
                     engine="gluon", stages=2, stream_tma=True, tma_row_words=r)
    eq = all(torch.equal(outs[r], outs[16]) for r in ROWS) and bool(torch.isfinite(outs[16]).all())
    nbytes = bytes_draft(P, cnt.tolist(), hl.tolist())
    parts = []
    if ctx >= 32768:
        for rep in range(2):
            for r in ROWS:
                out = torch.empty_like(q)
                ms = timer(lambda: draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl,
                                                SM_SCALE, out=out, engine="gluon", stages=2, stream_tma=True,
                                                tma_row_words=r))
                parts.append(f"tr={r} {ms * 1e3:.1f}us {nbytes / ms / 1e6 / gbps:.0%}")
    print(f"draft ctx={ctx} B={B} P={P} bit-equal={eq} | " + " | ".join(parts), flush=True)
    qb = None
    torch.cuda.empty_cache()
