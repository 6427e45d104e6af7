"""Session 41 dev: what a read-only stream of ~1.17 GB reaches on this GPU by access pattern and launch shape
(the draft's 128k x 8 byte count). Chunks of CW int32 words read by W-warp programs, each program a list of chunk
ids: ``lin`` (contiguous share), ``str`` (chunk p, p + G, ...: a sweep), ``rnd`` (random permutation). U chunks
loaded before they are combined (loads in flight a warp). Plus the plain block read. µs, graph replay, read flush."""
import sys

sys.path[:0] = ["bench"]
import torch
import triton
import triton.language as tl
from dev_timing import timer, copy_gbps


@triton.jit
def _gather_read_kernel(x_ptr, ids_ptr, out_ptr, n_per, CW: tl.constexpr, U: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, CW)
    acc = tl.zeros([CW], dtype=tl.int32)
    for i in range(0, n_per, U):
        for u in tl.static_range(U):
            c = tl.load(ids_ptr + pid * n_per + i + u, mask=i + u < n_per, other=0).to(tl.int64)
            acc ^= tl.load(x_ptr + c * CW + offs, mask=i + u < n_per, other=0)
    tl.store(out_ptr + pid, tl.sum(acc, 0))


@triton.jit
def _read_kernel(x_ptr, out_ptr, n_words, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i in range(ITERS):
        offs = (pid * ITERS + i) * BLOCK + tl.arange(0, BLOCK)
        acc ^= tl.load(x_ptr + offs, mask=offs < n_words, other=0)
    tl.store(out_ptr + pid, tl.sum(acc, 0))


def main():
    gbps = copy_gbps()
    print(f"copy {gbps:.0f} GB/s", flush=True)
    nbytes = 1176 * 10 ** 6
    words = nbytes // 4
    x = torch.empty(words, dtype=torch.int32, device="cuda").random_(0, 1 << 30)
    res = []

    def rec(name, fn, nb):
        fn()
        torch.cuda.synchronize()
        us = timer(fn) * 1e3
        res.append(f"{name} {us:.1f}us {nb / us / 1e3 / gbps:.0%}")
        print(res[-1], flush=True)

    grid = triton.cdiv(words, 4096 * 4)
    out = torch.empty(grid, dtype=torch.int32, device="cuda")
    rec("block4096x4w8", lambda: _read_kernel[(grid,)](x, out, words, BLOCK=4096, ITERS=4, num_warps=8), nbytes)
    gen = torch.Generator().manual_seed(0)
    for cw, w, G, U in ((2048, 1, 1584, 2), (2048, 1, 1584, 1), (2048, 1, 1584, 4), (1024, 1, 1584, 4),
                        (2048, 1, 3168, 2), (2048, 4, 1584, 2), (2048, 4, 528, 2), (4096, 4, 1056, 2),
                        (2048, 1, 4224, 2)):
        nch = words // cw
        n_per = nch // G
        tot = n_per * G
        nb = tot * cw * 4
        for pat in ("lin", "str", "rnd"):
            if pat == "lin":
                ids = torch.arange(tot)
            elif pat == "str":
                ids = torch.arange(tot).view(n_per, G).t().contiguous().view(-1)
            else:
                ids = torch.randperm(tot, generator=gen)
            ids = ids.to(torch.int32).cuda()
            o = torch.empty(G, dtype=torch.int32, device="cuda")
            rec(f"gather cw={cw * 4}B w={w} G={G} U={U} {pat}",
                lambda: _gather_read_kernel[(G,)](x, ids, o, n_per, CW=cw, U=U, num_warps=w), nb)


if __name__ == "__main__":
    main()
