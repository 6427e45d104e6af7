"""GPU diagnostics for the Gluon draft page programs: error overall, per half, and the best column matching."""
import sys, torch
sys.path[:0] = ["bench"]
import dev_kernels as dk
from dev_kernels import quant_pages, draft_args
from sgl_spec.kernels.draft_decode import draft_decode
from sgl_spec.kernels.draft_decode_ref import draft_decode as ref

gen = torch.Generator().manual_seed(1)
for lens, ns in (([64 * 3 + 1], 1), ([4097], None), ([3 * 64 + 5, 1, 128, 9 * 64 + 63], 7)):
    toks = [(torch.randn(n, dk.HKV, dk.D, generator=gen).to("cuda", dk.DTYPE) * 2,
             torch.randn(n, dk.HKV, dk.D, generator=gen).to("cuda", dk.DTYPE)) for n in lens]
    qb = quant_pages(lens, 64, "cuda", tokens=toks, gen=gen)[0]
    ids, cnt, hs, hl = draft_args(qb, gen=gen)
    q = torch.randn(len(lens), dk.HQ, dk.D, generator=gen).to("cuda", dk.DTYPE)
    args = (q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, dk.SM_SCALE)
    out = torch.full_like(q, float("nan"))
    draft_decode(*args, out=out, num_splits=ns, engine="gluon")
    tri = torch.full_like(q, float("nan"))
    draft_decode(*args, out=tri, num_splits=ns)
    want = ref(*args, out=torch.empty(q.shape, device="cuda"))
    e = lambda a: ((a.float() - want).norm() / want.norm()).item()
    lo = ((out.float() - want)[..., :64].norm() / want[..., :64].norm()).item()
    hi = ((out.float() - want)[..., 64:].norm() / want[..., 64:].norm()).item()
    print(f"lens={lens} ns={ns}: gluon rel {e(out):.2e} (lo {lo:.2e} hi {hi:.2e}) triton rel {e(tri):.2e} "
          f"nan {torch.isnan(out).sum().item()}", flush=True)
    o, w = out.float().reshape(-1, dk.D), want.reshape(-1, dk.D)
    d = torch.cdist(o.t(), w.t())
    best = d.argmin(1)
    print("  best column match of gluon channel c -> ref channel:", best[:16].tolist(), "... identity",
          bool((best == torch.arange(dk.D, device="cuda")).all()), flush=True)
