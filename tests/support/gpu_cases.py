"""Shared inputs of the GPU kernel tests (the ``gpu``-marked tests of tests/ops/test_draft_decode.py,
test_quantize_pages.py, test_select_topk.py, test_norm_pair_linear.py, test_verify_attention.py and
test_verify_attention_gluon.py): Llama-3-8B attention shapes (Hq=32, Hkv=8, D=128, bf16
K/V), a random batch of quantized pages with poisoned unused slots, and the tolerance every comparison uses. The tests
run page sizes 64 and 128, batches 1/3/17 and contexts of 1, 63 and 4097 tokens with the other requests of a batch at
random shorter lengths.

Inputs that a correct kernel must never give weight to are poisoned with large finite values: ring positions past a
request's newest token, and page-table entries past a request's page list (they point at a page whose scales are
1e4). Finite, because in production those slots hold stale but finite data a kernel may load and mask.

Tolerances: the refs compute in fp32 from the dequantized views; a Triton kernel may round dequantized K/V and the
softmax weights to bf16 for tensor-core dots (2^-9 relative each) and rounds the output to bf16 (2^-9), so with
|out| <~ 4 the expected error is a few 1e-3; 2e-2 (abs + rel) separates that from a wrong page/head/mask/scale
(errors of order 0.1-1). Page scores are sums over 4 query heads of maxima of logits (|s| <~ 15) whose bf16
rounding is ~2^-9 relative per product: atol 5e-2, rtol 1e-2 (lse scores, sums of G page log-sum-exps: the same).
"""
import math

import torch

from sgl_spec.kvcache.format import KVFormat

HQ, HKV, D, RING = 32, 8, 128, 2
SM = 1.0 / math.sqrt(D)
POISON = 300.0
ATOL = RTOL = 2e-2


def _kernels(op):
    import importlib

    tri = getattr(importlib.import_module(f"sgl_spec.kernels.{op}.triton"), op)
    ref = getattr(importlib.import_module(f"sgl_spec.kernels.{op}.ref"), op)
    return tri, ref


def _lens(B, ctx, lo, gen):
    """Request 0 holds ``ctx`` tokens, the others a random length in [lo, ctx]."""
    rest = torch.randint(lo, ctx + 1, (B - 1,), generator=gen).tolist() if B > 1 else []
    return [ctx] + rest


class Batch:
    """Random K/V per request, complete pages quantized with the reference quantizer into shuffled physical pages,
    the two newest pages in the ring, and a poison page that unused page-table entries point at."""

    def __init__(self, lens, P, gen, dev="cuda"):
        from sgl_spec.kernels.quantize_pages.ref import quantize_pages_ref

        self.lens, self.P, B = lens, P, len(lens)
        npl = [(n - 1) // P for n in lens]  # quantized pages: all before the newest token's page
        self.maxp = max(npl) + 3
        total = sum(npl) + 1
        self.store = KVFormat(P, HKV, D).alloc(total, dev)
        poison = total - 1
        for t in (self.store.k_upper, self.store.k_lower, self.store.v_upper, self.store.v_lower):
            t[poison] = 0xFF
        for t in (self.store.k_scale, self.store.v_scale):
            t[poison] = 1e4
        perm = torch.randperm(total - 1, generator=gen)
        self.page_table = torch.full((B, self.maxp), poison, dtype=torch.int32)
        self.hot_k = torch.full((B + 2, RING, P, HKV, D), POISON, dtype=torch.bfloat16, device=dev)
        self.hot_v = self.hot_k.clone()
        self.hot_slot = torch.randperm(B + 2, generator=gen)[:B].to(dev, torch.int32)  # slots != batch index
        at = 0
        for b, n in enumerate(lens):
            k = torch.randn(n, HKV, D, generator=gen).to(dev, torch.bfloat16)
            v = torch.randn(n, HKV, D, generator=gen).to(dev, torch.bfloat16)
            m = npl[b]
            ids = perm[at: at + m]
            at += m
            self.page_table[b, :m] = ids.to(torch.int32)
            if m:
                pages = quantize_pages_ref(k[: m * P].view(m, P, HKV, D).transpose(1, 2),
                                           v[: m * P].view(m, P, HKV, D).transpose(1, 2))
                for name, t in pages.items():
                    getattr(self.store, name)[ids.to(dev)] = t
            slot = int(self.hot_slot[b])
            for j in range(max(0, m - 1), m + 1):
                hi = min(n, (j + 1) * P)
                self.hot_k[slot, j % RING, : hi - j * P] = k[j * P: hi]
                self.hot_v[slot, j % RING, : hi - j * P] = v[j * P: hi]
        self.page_table = self.page_table.to(dev)

    def i32(self, xs):
        return torch.tensor(xs, dtype=torch.int32, device=self.page_table.device)


def verify_window(B, ctx, P, nq, gen, hq=HQ, dtype=torch.bfloat16, dev="cuda"):
    """A Batch (request 0 ``ctx`` tokens) and a window of its requests' last ``nq`` tokens as queries: (bt, q, q_start,
    args), args the positional arguments of verify_attention and its reference (hot K/V in ``dtype``)."""
    bt = Batch(_lens(B, ctx, nq, gen), P, gen, dev)
    q = torch.randn(B, nq, hq, D, generator=gen).to(dev, dtype)
    q_start = bt.i32([n - nq for n in bt.lens])
    return bt, q, q_start, (q, bt.store, bt.page_table, q_start, bt.hot_k.to(dtype), bt.hot_v.to(dtype), bt.hot_slot,
                            SM)


class NewTokenCase:
    """A draft over a window of up to 2P hot tokens a request (it starts a page early where there is one, so the
    ring's older page is read too) whose query writes its own K/V (slices of a fused qkv output: ``new_k``, ``new_v``)
    into its newest ring row: ``args`` for draft_decode, the reference's output ``want`` and ring ``rk`` / ``rv``
    after the write. ``poison()`` sets that row to NaN before a call, so a kernel that reads it before writing it, or
    never writes it, fails."""

    def __init__(self, B, ctx, P, seed, dev="cuda"):
        from sgl_spec.kernels.draft_decode.ref import draft_decode as ref

        gen = torch.Generator().manual_seed(seed)
        self.bt = bt = Batch(_lens(B, ctx, 1, gen), P, gen, dev)
        p = [n - 1 for n in bt.lens]
        nq = [max(0, x // P - 1) for x in p]
        hot_start = [m * P for m in nq]
        hot_len = [x - s + 1 for x, s in zip(p, hot_start)]
        q = torch.randn(B, HQ, D, generator=gen).to(dev, torch.bfloat16)
        new = torch.randn(B, HQ + 2 * HKV, D, generator=gen).to(dev, torch.bfloat16)
        self.new_k, self.new_v = new[:, HQ:HQ + HKV], new[:, HQ + HKV:]
        self.rows = (bt.hot_slot.long(), torch.tensor([(x // P) % RING for x in p], device=dev),
                     torch.tensor([x % P for x in p], device=dev))
        self.poison()
        self.args = (q, bt.store, bt.page_table, bt.i32(nq), bt.hot_k, bt.hot_v, bt.hot_slot, bt.i32(hot_start),
                     bt.i32(hot_len), SM)
        self.rk, self.rv = bt.hot_k.clone(), bt.hot_v.clone()
        self.want = ref(q, bt.store, bt.page_table, bt.i32(nq), self.rk, self.rv, *self.args[6:],
                        new_k=self.new_k, new_v=self.new_v)
        assert not self.want.isnan().any()

    def poison(self):
        self.bt.hot_k[self.rows] = float("nan")
        self.bt.hot_v[self.rows] = float("nan")

    def ring_written(self) -> bool:
        """Whether the ring now equals the reference's after its write, bit for bit."""
        return torch.equal(self.bt.hot_k, self.rk) and torch.equal(self.bt.hot_v, self.rv)


def _close(got, want, atol=ATOL, rtol=RTOL):
    assert got.shape == want.shape
    assert torch.isfinite(got).all(), f"{(~torch.isfinite(got)).sum().item()} non-finite (unwritten?) elements"
    torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=rtol)
