# session 35: the draft rule's ring at batch 1-2 with long splits (P = 128) against the reference and the register form
import sys, time
sys.path[:0] = ['bench']
import torch
import kernel_cases as dk
from sgl_spec.kernels.draft_decode import draft_decode
from sgl_spec.kernels.draft_decode_ref import draft_decode as ref
gen = torch.Generator().manual_seed(35)
for lens in ([262144], [131072, 131072 - 77]):
    P = 128
    toks = [(torch.randn(n, dk.HKV, dk.D, generator=gen).to("cuda", dk.DTYPE) * 2,
             torch.randn(n, dk.HKV, dk.D, generator=gen).to("cuda", dk.DTYPE)) for n in lens]
    qb = dk.quant_pages(lens, P, "cuda", tokens=toks, gen=gen)[0]
    ids, cnt, hs, hl = dk.draft_args(qb, gen=gen)
    q = torch.randn(len(lens), dk.HQ, dk.D, generator=gen).to("cuda", dk.DTYPE)
    args = (q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, dk.SM_SCALE)
    want = ref(*args, out=torch.empty(q.shape, device="cuda"))
    outs = {}
    for st in (None, 0):
        out = torch.full_like(q, float("nan"))
        draft_decode(*args, out=out, engine="gluon", stages=st)
        err = ((out.float() - want).norm() / want.norm()).item()
        outs[st] = out
        print(f"lens={lens} stages={st}: rel err {err:.2e} nonfinite {(~torch.isfinite(out)).sum().item()}",
              "ok" if err < 1e-2 and torch.isfinite(out).all() else "FAIL", flush=True)
    print("rule vs registers max abs diff", (outs[None].float() - outs[0].float()).abs().max().item())
