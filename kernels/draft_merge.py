"""Partials of ``draft_decode``'s split-KV stage 1 and their merge (stage 2).

Stage-1 programs write (m, l, unnormalized acc) per query head. By default (FUSED_MERGE) the last of a (request, KV
head)'s 1 + NUM_SPLITS programs to finish merges its G query heads itself: each program bumps a per-(request, KV head)
counter after its stores, and the one that sees NUM_SPLITS is the last. That saves the separate merge launch, which
ran once per layer and draft step (15k x 64 on an H200: 1.7-2.0 us of kernel plus the gap before it, ~190 us of a
7.1 ms round; bench/results/profile/kprof_s14_spec_15k_b64.txt). The separate launch (one program per (request,
query head)) stays for ``fused_merge=False``. Both run the same ``_merge_row``, so their outputs are bit-identical.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _store_partial(m_ptr, l_ptr, acc_ptr, prow, g_ok, offs_c, c_ok, m_i, l_i, acc_lo, acc_hi, HALF: tl.constexpr):
    tl.store(m_ptr + prow, m_i, mask=g_ok)
    tl.store(l_ptr + prow, l_i, mask=g_ok)
    a = acc_ptr + prow[:, None] * (2 * HALF) + offs_c[None, :]
    msk = g_ok[:, None] & c_ok[None, :]
    tl.store(a, acc_lo, mask=msk)
    tl.store(a + HALF, acc_hi, mask=msk)


@triton.jit
def _merge_row(m_ptr, l_ptr, acc_ptr, base, o_ptr, NPART: tl.constexpr, BLOCK_S: tl.constexpr, CHUNK: tl.constexpr,
               D: tl.constexpr, BLOCK_D: tl.constexpr):
    """out = Σ_s 2^(m_s - M) acc_s / Σ_s 2^(m_s - M) l_s over the NPART partials at ``base``. The loads bypass L1
    (.cg): in the fused merge the partials were written by other programs, possibly on other SMs."""
    offs_s = tl.arange(0, BLOCK_S)
    ms = tl.load(m_ptr + base + offs_s, mask=offs_s < NPART, other=float("-inf"), cache_modifier=".cg")
    big = tl.max(ms, 0)  # finite: the hot partial always holds >= 1 token
    ls = tl.load(l_ptr + base + offs_s, mask=offs_s < NPART, other=0.0, cache_modifier=".cg")
    denom = tl.sum(tl.exp2(ms - big) * ls, 0)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    acc = tl.zeros([BLOCK_D], tl.float32)
    for c0 in range(0, NPART, CHUNK):
        offs = c0 + tl.arange(0, CHUNK)
        ok = offs < NPART
        w = tl.exp2(tl.load(m_ptr + base + offs, mask=ok, other=float("-inf"), cache_modifier=".cg") - big)
        a = tl.load(acc_ptr + (base + offs)[:, None] * D + offs_d[None, :], mask=ok[:, None] & d_ok[None, :],
                    other=0.0, cache_modifier=".cg")
        acc += tl.sum(w[:, None] * a, 0)
    tl.store(o_ptr + offs_d, (acc / denom).to(o_ptr.dtype.element_ty), mask=d_ok)


@triton.jit
def _merge_if_last(cnt_ptr, m_ptr, l_ptr, acc_ptr, out_ptr, s_ob, s_oh, b, h, HKV, G: tl.constexpr,
                   NUM_SPLITS: tl.constexpr, BLOCK_S: tl.constexpr, CHUNK: tl.constexpr, D: tl.constexpr,
                   BLOCK_D: tl.constexpr):
    """Called by every stage-1 program after its partial stores. The barrier orders all of the program's threads'
    stores before the counter's gpu-scope release; the last program's acquire (and the barrier Triton puts behind a
    scalar atomic's broadcast) orders its loads of the others' partials after their stores. The last program also
    puts the counter back to 0, so the same buffer serves the next launch (every layer, every CUDA-graph replay)."""
    tl.debug_barrier()
    c = cnt_ptr + b.to(tl.int64) * HKV + h
    done = tl.atomic_add(c, 1, sem="acq_rel", scope="gpu")
    if done == NUM_SPLITS:
        tl.store(c, 0)
        hq = HKV * G
        for g in range(G):
            row = b.to(tl.int64) * hq + h * G + g
            _merge_row(m_ptr, l_ptr, acc_ptr, row * (NUM_SPLITS + 1),
                       out_ptr + b.to(tl.int64) * s_ob + (h * G + g).to(tl.int64) * s_oh,
                       NUM_SPLITS + 1, BLOCK_S, CHUNK, D, BLOCK_D)


@triton.jit
def _draft_decode_merge_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, s_ob, s_oh, HQ,
                               NPART: tl.constexpr, BLOCK_S: tl.constexpr, CHUNK: tl.constexpr,
                               D: tl.constexpr, BLOCK_D: tl.constexpr):
    """One program per (request, query head) (``fused_merge=False``)."""
    pid = tl.program_id(0)
    b = pid // HQ
    hq = pid % HQ
    _merge_row(m_ptr, l_ptr, acc_ptr, pid.to(tl.int64) * NPART,
               out_ptr + b.to(tl.int64) * s_ob + hq.to(tl.int64) * s_oh, NPART, BLOCK_S, CHUNK, D, BLOCK_D)
