"""Session 41 dev diagnosis: does the dense draft's stream rate (~4.1 TB/s against FA3's ~4.5) depend on where its
bytes lie? Same process, interleaved, µs (graph replay, read flush). Layouts of the same page contents:
``split`` (the pool's: four plane tensors and four scale tensors, as allocated) and ``inter`` (one byte buffer
[pages, H, 8960]: per (page, head) key words | value words | key scales | key zeros | value scales | value zeros,
so one (page, head) is one 8960-byte run and one page all heads' 71.7 KB; lower planes elsewhere). Page orders:
``rand`` (kernel_cases: pages in random physical order) and ``contig`` (request b's pages b*n .. b*n+n-1, i.e.
each request's stream is one run). Forms: ``ring`` (shipped kernel) and ``nomath`` (page math replaced by a fold
of the words, session 39). Plus a plain Triton read of the same byte count (roofline of a read-only stream)."""
import importlib.util
import sys
from pathlib import Path

sys.path[:0] = ["bench"]
import torch
import triton
import triton.language as tl
import kernel_cases as kc
from kernel_cases import quant_pages, draft_args, SM_SCALE, DTYPE, bytes_draft
from dev_timing import timer, copy_gbps
from sgl_spec.kvformat import PageStore
from sgl_spec.kernels import draft_pages_gluon as dpg
from sgl_spec.kernels.draft_decode import draft_decode

SRC = Path(dpg.__file__).read_text()
LOOP = "            m_i, l_i, pz_i, o_i = _attend(m_i, l_i, pz_i, o_i, q_b, page, zero_s, zero_o, MMA, OPA, OPB)\n            slot"
assert SRC.count(LOOP) == 1
FOLD = ("            kw_, vw_, s_lo_, s_hi_, z_lo_, z_hi_, vs_, vz_ = page\n"
        "            l_i = l_i + (gl.sum(gl.sum(kw_ ^ 3, 1), 0) + gl.sum(gl.sum(vw_ ^ 5, 1), 0) + gl.sum(s_lo_ ^ s_hi_ ^ z_lo_"
        " ^ z_hi_, 0)).to(gl.float32) + gl.sum(vs_.to(gl.float32) + vz_.to(gl.float32), 0)\n            slot")


def load_nomath():
    path = Path("/tmp/dpg_nomath.py")
    path.write_text(SRC.replace(LOOP, FOLD))
    spec = importlib.util.spec_from_file_location("dpg_nomath", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod._draft_pages_kernel


@triton.jit
def _read_kernel(x_ptr, out_ptr, n_words, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i in range(ITERS):
        offs = (pid * ITERS + i) * BLOCK + tl.arange(0, BLOCK)
        acc ^= tl.load(x_ptr + offs, mask=offs < n_words, other=0)
    tl.store(out_ptr + pid, tl.sum(acc, 0))


def read_us(nbytes):
    words = nbytes // 4
    x = torch.empty(words, dtype=torch.int32, device="cuda").random_(0, 1 << 30)
    res = {}
    for block, iters, nw in ((4096, 4, 8), (2048, 8, 4), (8192, 2, 8)):
        grid = triton.cdiv(words, block * iters)
        out = torch.empty(grid, dtype=torch.int32, device="cuda")
        res[f"read{block}x{iters}"] = timer(lambda: _read_kernel[(grid,)](x, out, words, BLOCK=block, ITERS=iters,
                                                                           num_warps=nw)) * 1e3
    return res


def interleave(st: PageStore) -> PageStore:
    NP, H, P, half = st.k_upper.shape
    D = st.k_scale.shape[-1]
    run = 2 * P * half + 2 * D * 2 + 2 * P * 2
    buf = torch.empty(NP, H, run, dtype=torch.uint8, device=st.k_upper.device)
    f16 = buf.view(torch.float16)  # [NP, H, run // 2]
    pb = P * half

    def plane(o):
        return torch.as_strided(buf, (NP, H, P, half), (H * run, run, half, 1), buf.storage_offset() + o)

    def scal(o, n):  # o in bytes
        return torch.as_strided(f16, (NP, H, n), (H * run // 2, run // 2, 1), f16.storage_offset() + o // 2)

    ku, vu = plane(0), plane(pb)
    ks, kz = scal(2 * pb, D), scal(2 * pb + 2 * D, D)
    vs, vz = scal(2 * pb + 4 * D, P), scal(2 * pb + 4 * D + 2 * P, P)
    for a, b in ((ku, st.k_upper), (vu, st.v_upper), (ks, st.k_scale), (kz, st.k_zero), (vs, st.v_scale),
                 (vz, st.v_zero)):
        a.copy_(b)
    return PageStore(ku, st.k_lower, vu, st.v_lower, ks, kz, vs, vz)


def main():
    gbps = copy_gbps()
    print(f"copy {gbps:.0f} GB/s", flush=True)
    nomath = load_nomath()
    orig = dpg._draft_pages_kernel
    gen = torch.Generator().manual_seed(0)
    for cell in sys.argv[1].split(","):
        ctx, B, P = map(int, cell.split(":"))
        qb = quant_pages([ctx] * B, P, "cuda", copies=1, gen=gen)[0]
        ids, cnt, hs, hl = draft_args(qb, gen=gen)
        n = kc.n_pages(ctx, P)
        contig = (torch.arange(B, device="cuda").view(B, 1) * n + torch.arange(ids.shape[1], device="cuda")).to(
            torch.int32).contiguous()
        stores = {"split": qb.store, "inter": interleave(qb.store)}
        q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
        outs = {}
        nbytes = bytes_draft(P, cnt.tolist(), hl.tolist())

        def call(st, pt, out):
            return draft_decode(q, st, pt, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs, hl, SM_SCALE, out=out, engine="gluon")

        for lay, st in stores.items():
            outs[lay] = call(st, ids, torch.empty_like(q))
        torch.cuda.synchronize()
        eq = torch.equal(outs["split"], outs["inter"])
        rows = {}
        for rep in range(2):
            for form, k in (("ring", orig), ("nomath", nomath)):
                for lay, st in stores.items():
                    for order, pt in (("rand", ids), ("contig", contig)):
                        dpg._draft_pages_kernel = k
                        out = torch.empty_like(q)
                        try:
                            ms = timer(lambda: call(st, pt, out))
                        finally:
                            dpg._draft_pages_kernel = orig
                        rows.setdefault(f"{form}/{lay}/{order}", []).append(ms * 1e3)
        rd = read_us(nbytes)
        parts = [f"{k} {', '.join(f'{x:.1f}' for x in v)}us {nbytes / min(v) / 1e3 / gbps:.0%}"
                 for k, v in rows.items()]
        parts += [f"{k} {v:.1f}us {nbytes / v / 1e3 / gbps:.0%}" for k, v in rd.items()]
        print(f"draft ctx={ctx} B={B} P={P} bytes={nbytes / 1e6:.0f}MB split==inter:{eq} | " + " | ".join(parts),
              flush=True)
        qb = stores = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
