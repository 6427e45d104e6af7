"""Correctness guard of the kernel benchmark: before anything is timed, every kernel under test is compared with
its pure-torch twin (``sgl_spec/kernels/<op>/ref.py``) and every BF16 baseline with an fp32 attention on one small batch of
odd-length requests. The numbers of a wrong kernel are worthless, so a failing kernel aborts the run; a failing
baseline is dropped (it would be measured doing something else than attention over the cache).

Tolerances (outputs bf16, |out| <~ 4): the kernels may dequantize into bf16 for tensor-core dots and round the
softmax weights to bf16 (each ~2^-9 relative), then round the output to bf16 (2^-9): a few 1e-3 absolute; a wrong
page, head, mask or scale gives errors of order 0.1-1. Hence atol = rtol = 2e-2 for outputs; page scores (sums of
4 heads' maxima, |s| <~ 15) get atol 5e-2.
"""
from __future__ import annotations

import torch

from kernel_cases import (D, DTYPE, HKV, HQ, SM_SCALE, bf16_pages, draft_args, quant_pages,
                          verify_q_start)
from sgl_spec.kernels.quantize_pages.ref import dequant_keys_ref, dequant_values_ref
from sgl_spec.kvcache.format import KVFormat

ATOL = RTOL = 2e-2
SCORE_ATOL, SCORE_RTOL = 5e-2, 1e-2


class GuardError(RuntimeError):
    pass


def _check(name, got, want, atol=ATOL, rtol=RTOL):
    if got.shape != want.shape:
        raise GuardError(f"{name}: shape {tuple(got.shape)} != {tuple(want.shape)}")
    got, want = got.float(), want.float()
    if not torch.isfinite(got).all():
        raise GuardError(f"{name}: {(~torch.isfinite(got)).sum().item()} non-finite values (unwritten or NaN)")
    err = (got - want).abs()
    bad = err > atol + rtol * want.abs()
    if bad.any():
        raise GuardError(f"{name}: {bad.sum().item()}/{bad.numel()} elements off, max |err| {err.max().item():.4g}")


def guard_lens(P):
    return [6 * P + 37, 2 * P + 1, 9]  # within a page / window straddling a page boundary / no complete page


def _tokens(lens, device, gen):
    return [(torch.randn(n, HKV, D, generator=gen).to(device, DTYPE), torch.randn(n, HKV, D, generator=gen).to(
        device, DTYPE)) for n in lens]


# ---- attention kernels (draft, verify) -----------------------------------------------------------------------------
def guard_attention(ops, refs, P, device, nqs=(5, 8), log=print):
    gen = torch.Generator().manual_seed(1234 + P)
    lens = guard_lens(P)
    qb = quant_pages(lens, P, device, tokens=_tokens(lens, device, gen), gen=gen)[0]
    B = len(lens)
    common = (qb.hot_k, qb.hot_v, qb.hot_slot)
    if "draft_decode" in ops:
        q = torch.randn(B, HQ, D, generator=gen).to(device, DTYPE)
        for label, sparse in (("dense", None), ("sparse", (0.5, 1, 1))):
            ids, cnt, hs, hl = draft_args(qb, sparse=sparse, gen=gen)
            args = (q, qb.store, ids, cnt, *common, hs, hl, SM_SCALE)
            out = torch.full_like(q, float("nan"))
            ops["draft_decode"](*args, out=out)
            _check(f"draft_decode {label} P={P}", out, refs["draft_decode"](*args))
        log(f"[guard] draft_decode dense+sparse P={P}: ok")
    if "verify_attention" in ops:
        for nq in nqs:
            q = torch.randn(B, nq, HQ, D, generator=gen).to(device, DTYPE)
            q0 = verify_q_start(qb, nq)
            args = (q, qb.store, qb.page_table, q0, *common, SM_SCALE)
            for with_scores in (True, False):
                sc = sc_ref = None
                if with_scores:
                    sc = torch.full((B, HKV, qb.page_table.shape[1]), float("nan"), device=device)
                    sc_ref = sc.clone()
                out = torch.full_like(q, float("nan"))
                ops["verify_attention"](*args, scores=sc, out=out)
                want = refs["verify_attention"](*args, scores=sc_ref)
                tag = f"verify_attention nq={nq} scores={'on' if with_scores else 'off'} P={P}"
                _check(tag, out, want)
                if with_scores:
                    for b, s0 in enumerate((q0 // P).tolist()):
                        _check(f"{tag} scores[b={b}]", sc[b, :, :s0], sc_ref[b, :, :s0], SCORE_ATOL, SCORE_RTOL)
        log(f"[guard] verify_attention nq={list(nqs)} scores on/off P={P}: ok")


# ---- quantize_pages ------------------------------------------------------------------------------------------------
def guard_quantize(ops, refs, P, device, log=print):
    gen = torch.Generator().manual_seed(99 + P)
    fmt = KVFormat(P, HKV, D)
    T = 4 * P + 20
    src_k = (torch.randn(T, HKV, D, generator=gen) * 3).to(device, DTYPE)
    src_v = torch.randn(T, HKV, D, generator=gen).to(device, DTYPE)
    src_row = torch.tensor([0, 3 * P + 5, P, 7, 2 * P + 9], dtype=torch.int64, device=device)  # unaligned rows too
    page_ids = torch.tensor([11, 2, 7, 0, 5], dtype=torch.int32, device=device)
    got, want = fmt.alloc(13, device), fmt.alloc(13, device)
    for name in ("k_upper", "k_lower", "v_upper", "v_lower"):
        getattr(got, name).fill_(0xAB)
    for name in ("k_scale", "k_zero", "v_scale", "v_zero"):
        getattr(got, name).fill_(float("nan"))
    ops["quantize_pages"](src_k, src_v, src_row, page_ids, got)
    refs["quantize_pages"](src_k, src_v, src_row, page_ids, want)
    ids = page_ids.long()
    other = torch.ones(13, dtype=torch.bool, device=device)
    other[ids] = False
    untouched = all((getattr(got, n)[other] == 0xAB).all() for n in ("k_upper", "k_lower", "v_upper", "v_lower"))
    untouched &= all(torch.isnan(getattr(got, n)[other]).all() for n in ("k_scale", "k_zero", "v_scale", "v_zero"))
    if not untouched:
        raise GuardError(f"quantize_pages P={P}: wrote pages it was not asked to")
    tag = f"quantize_pages P={P}"
    for name in ("k_scale", "k_zero", "v_scale", "v_zero"):  # one fp16 ulp (2^-10 relative) of slack
        _check(f"{tag} {name}", getattr(got, name)[ids], getattr(want, name)[ids], atol=1e-6, rtol=2e-3)
    rows = src_row.view(-1, 1) + torch.arange(P, device=device)
    for kind, deq, src in (("keys", dequant_keys_ref, src_k), ("values", dequant_values_ref, src_v)):
        pre = kind[0]
        parts = [getattr(s, f"{pre}_{n}")[ids] for s in (got, want) for n in ("upper", "lower", "scale", "zero")]
        g, w = deq(*parts[:4], draft=False), deq(*parts[4:], draft=False)
        step = parts[6].float().unsqueeze(-2 if kind == "keys" else -1)  # the reference's scale, broadcast
        x = src[rows].float().permute(0, 2, 1, 3)  # [n, HKV, P, D]
        # a code may differ by one INT8 step where (x - z)/s lands within float rounding of a rounding boundary
        off = (g - w).abs() > step / 16 * 1.01 + 1e-6
        if off.any():
            raise GuardError(f"{tag} {kind}: {off.sum().item()} INT8-view values differ by more than one step")
        err = (g - x).abs() > step / 32 * 1.01 + 1e-5 * (x.abs() + 1)  # the format's bound (kvformat docstring)
        if err.any():
            raise GuardError(f"{tag} {kind}: {err.sum().item()} values outside the s/32 error bound")
        frac = sum((getattr(got, f"{pre}_{n}")[ids] != getattr(want, f"{pre}_{n}")[ids]).float().mean().item()
                   for n in ("upper", "lower")) / 2
        if frac > 1e-3:
            raise GuardError(f"{tag} {kind}: {frac:.2%} of plane bytes differ from the reference")
    log(f"[guard] quantize_pages P={P}: ok")


# ---- select_topk_pages ---------------------------------------------------------------------------------------------
def guard_select(ops, refs, device, log=print):
    gen = torch.Generator().manual_seed(7)
    L, maxp, kcap = 3, 256, 8
    elig = [200, 37, 5, 0]  # budget clipped to KCAP / 3 pages / min_pages / nothing eligible
    B = len(elig)
    scores = torch.randn(L, B, HKV, maxp, generator=gen).to(device)
    num_eligible = torch.tensor(elig, dtype=torch.int32, device=device)
    page_table = torch.stack([torch.randperm(10_000, generator=gen)[:maxp] for _ in range(B)]).to(device, torch.int32)
    args = (scores, num_eligible, page_table, 0.07, 2, 1)
    ids = torch.full((L, B, kcap), -7, dtype=torch.int32, device=device)
    cnt = torch.full((L, B), -1, dtype=torch.int32, device=device)
    ids_ref, cnt_ref = torch.zeros_like(ids), torch.zeros_like(cnt)
    ops["select_topk_pages"](*args, out_ids=ids, out_count=cnt)
    refs["select_topk_pages"](*args, out_ids=ids_ref, out_count=cnt_ref)
    if not torch.equal(cnt.cpu(), cnt_ref.cpu()):
        raise GuardError(f"select_topk_pages: counts {cnt.tolist()} != {cnt_ref.tolist()}")
    for l in range(L):
        for b in range(B):
            k = int(cnt_ref[l, b])
            g, w = ids[l, b].cpu(), ids_ref[l, b].cpu()
            if not torch.equal(g[:k].sort().values, w[:k].sort().values) or (g[k:] != 0).any():
                raise GuardError(f"select_topk_pages [l={l}, b={b}]: {g.tolist()} vs reference {w.tolist()}")
    log("[guard] select_topk_pages: ok")


# ---- BF16 baselines ------------------------------------------------------------------------------------------------
def attention_fp32(tokens, q):
    """Exact attention of rows ending at each request's newest token. q [B, nq, HQ, D] -> fp32 [B, nq, HQ, D]."""
    outs = []
    nq = q.shape[1]
    for (k, v), qb in zip(tokens, q):
        n = k.shape[0]
        kk = k.float().repeat_interleave(HQ // HKV, dim=1)  # query head h reads kv head h // (HQ/HKV)
        vv = v.float().repeat_interleave(HQ // HKV, dim=1)
        logits = torch.einsum("ihd,nhd->hin", qb.float(), kk) * SM_SCALE
        allowed = torch.arange(n, device=q.device).view(1, -1) <= (n - nq + torch.arange(nq, device=q.device)).view(
            -1, 1)
        logits = logits.masked_fill(~allowed, float("-inf"))
        outs.append(torch.einsum("hin,nhd->ihd", logits.softmax(-1), vv))
    return torch.stack(outs)


def guard_baselines(factories, P, device, log=print):
    """factories: name -> (nq, build(cache) -> fn(q)); decode (nq == 1) takes q [B, HQ, D] when name has 'flashinfer'.
    Returns {name: error message} for the ones that failed (those must not be used)."""
    gen = torch.Generator().manual_seed(4321 + P)
    lens = guard_lens(P)
    tokens = _tokens(lens, device, gen)
    cache = bf16_pages(lens, P, device, tokens=tokens, gen=gen)[0]
    failed = {}
    for name, (nq, build) in factories.items():
        q = torch.randn(len(lens), nq, HQ, D, generator=gen).to(device, DTYPE)
        try:
            fn = build(cache)
            out = fn(q[:, 0]).unsqueeze(1) if name.startswith("flashinfer") else fn(q)
            if isinstance(out, tuple):
                out = out[0]
            _check(f"baseline {name} P={P}", out.reshape(q.shape), attention_fp32(tokens, q))
            log(f"[guard] baseline {name} P={P}: ok")
        except Exception as e:  # API mismatch or wrong numbers: drop it, loudly
            failed[name] = f"{type(e).__name__}: {e}"
            log(f"[guard] BASELINE {name} P={P} FAILED, dropped: {failed[name]}")
    return failed

