#!/usr/bin/env python
"""GPU dev bench for kernels/skinny_linear.py against cuBLAS (F.linear) at a draft pass's shapes.

1. Per shape (pycode-30m: qkv 1024x512, o 512x512, gate_up 3072x512, down 512x1536, lm_head 8192x512) and batch M:
   8 weight copies (one per layer, so the weights come from memory as in a pass) run back to back in one CUDA graph,
   cuBLAS and every ``--configs`` entry (bn:bk:num_warps:num_stages:weights_first); one line per (M, shape, config):
   us per GEMM (median of replays) and the max error against fp32.
2. A pass-shaped chain per M (8 layers of qkv -> o -> gate_up -> silu*mul -> down + residual, then lm_head), cuBLAS
   against skinny_linear with each shape's fastest config from step 1: us per pass.
3. ``--layers``: the draft pass's layer chain as SGLang runs it (sgl_kernel's fused_add_rmsnorm / silu_and_mul where
   importable, else torch stand-ins, and cuBLAS) against the fused draft layers (kernels/norm_linear.py,
   kernels/act_linear.py) under each ``--fused-configs`` entry, 8 layers a chain; one line per M.

  python3 bench/dev_linear.py --out $OUT                 # GPU only
4. ``--probe``: what one kernel costs inside a dependent chain (each step's output is the next step's input, 32
   steps in one graph): cuBLAS, skinny_linear and add_rmsnorm_linear variants (with / without programmatic
   dependent launch), and a one-program-per-row norm kernel standing in for SGLang's. One line per (M, variant).

  python3 bench/dev_linear.py --layers --m 8,16,32,48,64 --out $OUT
  python3 bench/dev_linear.py --probe --m 8,32,64 --out $OUT
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel_cases  # noqa: E402,F401  (makes sgl_spec.kernels importable from a checkout)
from sgl_spec.kernels.skinny_linear import skinny_linear  # noqa: E402

SHAPES = {"qkv": (1024, 512), "o": (512, 512), "gate_up": (3072, 512), "down": (512, 1536), "lm_head": (8192, 512)}
LAYERS = 8


def graph_time(fn, reps=200, rounds=7):
    """Median us of one ``fn()`` call, from CUDA-graph replays of ``reps`` calls."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / reps)
    return statistics.median(ts)


def parse_cfg(s):
    bn, bk, nw, ns, wf = s.split(":")
    return dict(block_n=int(bn), block_k=int(bk), num_warps=int(nw), num_stages=int(ns), weights_first=wf == "1")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", default="1,8,32,64,128")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--configs", default="16:128:4:3:1,16:256:4:3:1,16:64:4:4:1,32:128:4:3:1,32:256:4:3:1,"
                                         "64:128:4:3:1,16:128:4:3:0,32:128:4:3:0,16:512:4:2:1,32:64:4:4:1")
    ap.add_argument("--out")
    ap.add_argument("--layers", action="store_true", help="only the layer-chain comparison (3.)")
    ap.add_argument("--probe", action="store_true", help="only the per-kernel chain probe (4.)")
    ap.add_argument("--fused-configs", default="16:64:4:3:0,16:64:4:3:1,16:128:4:3:0,16:128:4:3:1,32:64:4:3:0,"
                                               "32:64:4:3:1,32:128:4:3:0,32:128:4:3:1,default")
    a = ap.parse_args()
    if a.layers:
        return layer_chains(a)
    if a.probe:
        return probe(a)
    dev = torch.device("cuda")
    dt = torch.bfloat16
    torch.manual_seed(0)
    cfgs = {c: parse_cfg(c) for c in a.configs.split(",")}
    shapes = [s for s in a.shapes.split(",")]
    ws = {s: [torch.randn(*SHAPES[s], device=dev, dtype=dt) / SHAPES[s][1] ** 0.5 for _ in range(LAYERS)]
          for s in shapes}
    rows, best = [], {}
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for M in (int(m) for m in a.m.split(",")):
        for s in shapes:
            N, K = SHAPES[s]
            x = torch.randn(M, K, device=dev, dtype=dt)
            outs = [torch.empty(M, N, device=dev, dtype=dt) for _ in range(LAYERS)]
            ref = [(x.float() @ w.float().T) for w in ws[s]]

            def run_cublas():
                for i in range(LAYERS):
                    torch.matmul(x, ws[s][i].T, out=outs[i])
            t = graph_time(run_cublas) / LAYERS
            rows.append(dict(m=M, shape=s, cfg="cublas", us=t))
            line = [f"M={M:4d} {s:8s} cublas {t:6.2f}"]
            bt, bc = t, None
            for name, kw in cfgs.items():
                def run_sk(kw=kw):
                    for i in range(LAYERS):
                        skinny_linear(x, ws[s][i], out=outs[i], **kw)
                try:
                    run_sk()
                    torch.cuda.synchronize()
                    err = max(((o.float() - r).abs() / r.abs().clamp_min(1)).max().item() for o, r in zip(outs, ref))
                    t = graph_time(run_sk) / LAYERS
                except Exception as e:  # a config that does not compile is reported, not fatal
                    print(f"  {name}: {type(e).__name__}: {str(e)[:120]}")
                    continue
                rows.append(dict(m=M, shape=s, cfg=name, us=t, max_rel_err=err))
                line.append(f"{name} {t:6.2f}{'!' if err > 2 ** -7 else ''}")
                if t < bt:
                    bt, bc = t, name
            best[(M, s)] = bc
            print(" | ".join(line) + f" | best {bc or 'cublas'}", flush=True)
        # ---- pass-shaped chain
        if all(k in shapes for k in ("qkv", "o", "gate_up", "down")):
            h0 = torch.randn(M, 512, device=dev, dtype=dt)

            def chain(lin):
                h = h0
                for i in range(LAYERS):
                    q = lin(h, ws["qkv"][i], "qkv")
                    o = lin(q[:, :512].contiguous(), ws["o"][i], "o")
                    g = lin(o + h, ws["gate_up"][i], "gate_up")
                    d = lin(F.silu(g[:, :1536]) * g[:, 1536:], ws["down"][i], "down")
                    h = d + h
                if "lm_head" in shapes:
                    lin(h, ws["lm_head"][0], "lm_head")

            def cub(x, w, s):
                return F.linear(x, w)

            def sk(x, w, s):
                c = best.get((M, s))
                return skinny_linear(x, w, **cfgs[c]) if c else F.linear(x, w)
            tc, ts = graph_time(lambda: chain(cub), reps=20), graph_time(lambda: chain(sk), reps=20)
            rows.append(dict(m=M, shape="pass", cfg="cublas", us=tc))
            rows.append(dict(m=M, shape="pass", cfg="skinny-best", us=ts, picks={s: best.get((M, s)) for s in shapes}))
            print(f"M={M:4d} pass chain: cublas {tc:7.1f} us, skinny(best per shape) {ts:7.1f} us, "
                  f"saved {tc - ts:6.1f} us ({(tc - ts) / tc:.1%})", flush=True)
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "dev_linear.json").write_text(json.dumps(dict(device=torch.cuda.get_device_name(),
                                                                     torch=torch.__version__, rows=rows), indent=1))


@triton.jit
def _row_norm_kernel(x_ptr, r_ptr, w_ptr, o_ptr, K, eps, BK: tl.constexpr):
    """Stand-in for SGLang's fused add-RMSNorm: one program per row, r <- x + r, o <- norm(r) * w."""
    row = tl.program_id(0).to(tl.int64) * K
    k = tl.arange(0, BK)
    ok = k < K
    r = tl.load(x_ptr + row + k, mask=ok, other=0.0).to(tl.float32) + tl.load(r_ptr + row + k, mask=ok,
                                                                               other=0.0).to(tl.float32)
    tl.store(r_ptr + row + k, r.to(r_ptr.dtype.element_ty), mask=ok)
    h = r * tl.rsqrt(tl.sum(r * r, 0) / K + eps) * tl.load(w_ptr + k, mask=ok, other=0.0).to(tl.float32)
    tl.store(o_ptr + row + k, h.to(o_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _row_act_kernel(gu_ptr, o_ptr, I, BI: tl.constexpr):
    """Stand-in for SGLang's silu_and_mul: one program per row."""
    row = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, BI)
    ok = k < I
    g = tl.load(gu_ptr + row * 2 * I + k, mask=ok, other=0.0).to(tl.float32)
    u = tl.load(gu_ptr + row * 2 * I + I + k, mask=ok, other=0.0).to(tl.float32)
    tl.store(o_ptr + row * I + k, (g / (1.0 + tl.exp(-g)) * u).to(o_ptr.dtype.element_ty), mask=ok)


def probe(a):
    from sgl_spec.kernels import pdl
    from sgl_spec.kernels.act_linear import silu_mul_linear
    from sgl_spec.kernels.norm_linear import add_rmsnorm_linear

    dev, dt = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    steps = 32
    W = [torch.randn(512, 512, device=dev, dtype=dt) / 23 for _ in range(steps)]
    WA = [torch.randn(1024, 512, device=dev, dtype=dt) / 23 for _ in range(steps)]
    nw = torch.ones(512, device=dev, dtype=dt)
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}; us per chain step ({steps} steps)")
    rows = []
    for M in (int(m) for m in a.m.split(",")):
        x0, r0 = torch.randn(M, 512, device=dev, dtype=dt), torch.randn(M, 512, device=dev, dtype=dt)
        bufs = [torch.empty(M, 512, device=dev, dtype=dt) for _ in range(2)]

        def cublas():
            x = x0
            for w in W:
                x = F.linear(x, w)

        def norm_cublas():
            x, r = x0, r0.clone()
            for w in W:
                _row_norm_kernel[(M,)](x, r, nw, bufs[0], 512, 1e-6, BK=512, num_warps=4)
                x = F.linear(bufs[0], w)

        def norm_only():
            x, r = x0, r0.clone()
            for i in range(steps):
                _row_norm_kernel[(M,)](x, r, nw, bufs[i % 2], 512, 1e-6, BK=512, num_warps=4)
                x = bufs[i % 2]

        def sk(kw):
            def f():
                x = x0
                for w in W:
                    x = skinny_linear(x, w, **kw)
            return f

        def fu(kw, res=True):
            def f():
                x, r = x0, (r0 if res else None)
                for w in W:
                    x, r = add_rmsnorm_linear(x, r, nw, 1e-6, w, **kw)
            return f
        gu0 = torch.randn(M, 1024, device=dev, dtype=dt)
        abuf = torch.empty(M, 512, device=dev, dtype=dt)

        def act_cublas():
            g = gu0
            for w in WA:
                _row_act_kernel[(M,)](g, abuf, 512, BI=512, num_warps=4)
                g = F.linear(abuf, w)

        def ac(kw):
            def f():
                g = gu0
                for w in WA:
                    g = silu_mul_linear(g, w, **kw)
            return f
        variants = [("cublas", cublas), ("norm-only", norm_only), ("norm+cublas", norm_cublas),
                    ("act+cublas", act_cublas)]
        for c in ("default", "16:128:4:3:0", "16:64:4:3:0", "32:64:4:3:0", "16:32:4:3:0"):
            kw = {} if c == "default" else parse_cfg(c)
            variants += [(f"skinny {c}", sk(kw)), (f"fused {c}", fu(kw)), (f"fused-nores {c}", fu(kw, res=False)),
                         (f"act {c}", ac(kw))]
        for name, fn in variants:
            for on in ((True, False) if name in ("skinny default", "fused default", "act default") else (True,)):
                pdl.ENABLED = on
                try:
                    t = graph_time(fn, reps=5) / steps
                except Exception as e:  # noqa: BLE001
                    print(f"  {name}: {type(e).__name__}: {str(e)[:100]}")
                    continue
                label = name + ("" if on else " (no PDL)")
                rows.append(dict(m=M, variant=label, us=t))
                print(f"M={M:3d} {label:32s} {t:6.2f}", flush=True)
        pdl.ENABLED = True
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "dev_linear_probe.json").write_text(json.dumps(dict(
            device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), indent=1))


def _sglang_ops():
    """(fused_add_rmsnorm in place, silu_and_mul) as SGLang's CUDA path runs them, or torch stand-ins."""
    try:
        from sgl_kernel import fused_add_rmsnorm, silu_and_mul

        def add_norm(x, res, w, eps):
            fused_add_rmsnorm(x, res, w, eps)  # x <- norm(x + res), res <- x + res
            return x, res
        return add_norm, silu_and_mul, "sgl_kernel"
    except Exception:  # noqa: BLE001 (any import problem: stand-ins)
        def add_norm(x, res, w, eps):
            r = x.float() + res.float()
            res.copy_(r)
            return (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype), res

        def act(gu):
            i = gu.shape[1] // 2
            return (F.silu(gu[:, :i].float()) * gu[:, i:].float()).to(gu.dtype)
        return add_norm, act, "torch stand-ins"


def layer_chains(a):
    from sgl_spec.kernels.act_linear import silu_mul_linear
    from sgl_spec.kernels.norm_linear import add_rmsnorm_linear

    dev, dt = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    add_norm, act, which = _sglang_ops()
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, unfused norms/act: {which}")
    L = [dict(qkv=torch.randn(1024, 512, device=dev, dtype=dt) / 23, o=torch.randn(512, 512, device=dev, dtype=dt) / 23,
              gu=torch.randn(3072, 512, device=dev, dtype=dt) / 23, d=torch.randn(512, 1536, device=dev, dtype=dt) / 40,
              n1=1 + 0.1 * torch.randn(512, device=dev, dtype=dt), n2=1 + 0.1 * torch.randn(512, device=dev, dtype=dt))
         for _ in range(LAYERS)]
    rows = []
    for M in (int(m) for m in a.m.split(",")):
        x0 = torch.randn(M, 512, device=dev, dtype=dt)
        res0 = torch.randn(M, 512, device=dev, dtype=dt)

        def unfused():
            x, res = x0.clone(), res0.clone()
            for w in L:
                h, res = add_norm(x, res, w["n1"], 1e-6)
                qkv = F.linear(h, w["qkv"])
                o = F.linear(qkv[:, :512].contiguous(), w["o"])  # (rope + attention + merge stand-in: one copy)
                h, res = add_norm(o, res, w["n2"], 1e-6)
                x = F.linear(act(F.linear(h, w["gu"])), w["d"])
            return x

        def fused(kw):
            x, res = x0.clone(), res0.clone()
            for w in L:
                qkv, res = add_rmsnorm_linear(x, res, w["n1"], 1e-6, w["qkv"], **kw)
                o = F.linear(qkv[:, :512].contiguous(), w["o"])
                gu, res = add_rmsnorm_linear(o, res, w["n2"], 1e-6, w["gu"], **kw)
                x = silu_mul_linear(gu, w["d"], **kw)
            return x
        want = unfused().float()
        tu = graph_time(unfused, reps=20)
        line = [f"M={M:3d} unfused {tu:6.1f} us"]
        rows.append(dict(m=M, cfg="unfused", us=tu, ops=which))
        for c in a.fused_configs.split(","):
            kw = {} if c == "default" else parse_cfg(c)
            got = fused(kw).float()
            err = ((got - want).abs() / want.abs().clamp_min(1)).max().item()
            t = graph_time(lambda: fused(kw), reps=20)
            rows.append(dict(m=M, cfg=c, us=t, max_rel_err=err))
            line.append(f"{c} {t:6.1f} ({err:.3f})")
        print(" | ".join(line), flush=True)
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "dev_linear_layers.json").write_text(json.dumps(dict(
            device=torch.cuda.get_device_name(), torch=torch.__version__, unfused_ops=which, rows=rows), indent=1))


if __name__ == "__main__":
    main()
