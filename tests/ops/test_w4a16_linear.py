"""``w4a16_linear`` (sgl_spec/kernels/w4a16_linear/): the 4-bit format's round trip, the twin against a plain matmul
with the dequantized weight, the launcher's checks, and on the GPU SGLang's Marlin engine against the twin.

Tolerances: the twin computes in fp32 from the same dequantized weight as the plain matmul, so only the output
rounding to the activations' dtype differs (bf16: 2^-8 relative). Marlin multiplies bf16 activations by bf16
dequantized weights with fp32 accumulation in another order: 2e-2 relative on outputs of size ~1."""
import pytest
import torch

from sgl_spec.kernels import w4a16_linear as w4
from sgl_spec.kernels.w4a16_linear import ref


@pytest.mark.parametrize("N,K", [(64, 128), (200, 384), (7, 256)])
def test_round_trip_error_is_at_most_half_a_scale(N, K):
    g = torch.Generator().manual_seed(N + K)
    w = torch.randn(N, K, generator=g) * 0.05
    w[0, :128] = 0.0  # an all-zero group: scale 0, codes 8, exact
    q, s = ref.quantize(w)
    assert q.shape == (K // 8, N) and q.dtype == torch.int32 and s.shape == (K // 128, N)
    codes = ref.unpack(q)
    assert int(codes.min()) >= 0 and int(codes.max()) <= 15
    err = (ref.dequantize(q, s, torch.float32) - w).abs()
    bound = s.float().repeat_interleave(128, dim=0).t() / 2
    assert bool((err <= bound * (1 + 1e-5)).all())  # 1e-5: fp32 rounding of max|w| / 7.5 and of 7s
    assert float(err[0, :128].max()) == 0.0


@pytest.mark.parametrize("M", [1, 3, 8, 33])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_twin_equals_matmul_with_the_dequantized_weight(M, dtype):
    g = torch.Generator().manual_seed(M)
    N, K = 192, 256
    w = (torch.randn(N, K, generator=g) * 0.05).to(dtype)
    x = torch.randn(M, K, generator=g).to(dtype)
    bias = torch.randn(N, generator=g).to(dtype)
    wt = w4.prepare(w, "torch")
    out = torch.full((M, N), float("nan"), dtype=dtype)
    got = w4.w4a16_linear(x, wt, bias, out=out)
    assert got is out and not torch.isnan(got).any()
    want = (x.float() @ w4.dequantize(wt.qweight, wt.scales, torch.float32).t() + bias.float()).to(dtype)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    # and close to the unquantized layer: the 4-bit error, ~2% of an output's size here
    rel = (got.float() - (x.float() @ w.float().t() + bias.float())).norm() / got.float().norm()
    assert float(rel) < 0.1


def test_launcher_checks():
    wt = w4.prepare(torch.randn(64, 128), "torch")
    with pytest.raises(ValueError, match="input channels"):
        w4.w4a16_linear(torch.randn(2, 64), wt)
    with pytest.raises(ValueError, match="out must be"):
        w4.w4a16_linear(torch.randn(2, 128), wt, out=torch.empty(2, 63))
    with pytest.raises(ValueError, match="multiple of the group size"):
        w4.prepare(torch.randn(64, 96), "torch")
    assert "Marlin needs" in w4.supported(100, 128, "marlin") and w4.supported(100, 128, "torch") == ""


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 8, 33])
@pytest.mark.parametrize("N,K", [(4096, 4096), (6144, 4096), (1024, 14336)])
def test_marlin_engine_matches_twin(M, N, K):
    g = torch.Generator(device="cuda").manual_seed(M)
    w = (torch.randn(N, K, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    x = torch.randn(M, K, generator=g, device="cuda").to(torch.bfloat16)
    marlin, twin = w4.prepare(w, "marlin"), w4.prepare(w, "torch")
    assert marlin.marlin is not None and marlin.nbytes < w.nbytes / 3
    got = w4.w4a16_linear(x, marlin)
    want = w4.w4a16_linear(x.float(), twin)
    assert got.dtype == torch.bfloat16 and not torch.isnan(got).any()
    torch.testing.assert_close(got.float(), want, atol=2e-2 * float(want.abs().max()), rtol=2e-2)


# ---- Triton engine (triton.py): against the twin under the interpreter (small shapes), compiled on the GPU ------
@pytest.mark.interp
@pytest.mark.parametrize("M,N,K,bias,bn,bk,path,splits", [
    (1, 64, 128, False, 32, 512, "gemv", None), (3, 100, 256, True, 16, 128, "gemv", 2),
    (1, 48, 1024, True, 16, 256, "auto", None), (17, 64, 384, False, 64, 256, "dot", None),
    (2, 48, 512, True, 32, 256, "dot", 2), (5, 40, 512, False, 16, 128, "auto", 4)])
def test_triton_engine_matches_twin(M, N, K, bias, bn, bk, path, splits):
    """fp16 operands, fp32 accumulation: 1e-2 relative to the output scale (the dot path rounds the dequantized
    weight to fp16; the GEMV path multiplies in fp32). Odd N pads the last column block; K = 384 takes one group an
    iteration; splits over K (given, or chosen for the interpreter's 4 "SMs") reduce through the workspace, which
    leaves the counters at zero and gives the same bits on a second launch."""
    from sgl_spec.kernels.w4a16_linear import triton as wt

    g = torch.Generator().manual_seed(M * N)
    w = torch.randn(N, K, generator=g) * 0.05
    q, s = ref.quantize(w.half())
    tw = wt.prepare(q, s, block_n=bn)
    assert tw.tiles.shape == (-(-N // bn), K // 8, bn)
    x = torch.randn(M, K, generator=g).half()
    b = torch.randn(N, generator=g).half() if bias else None
    out = torch.full((M, N), float("nan"), dtype=torch.float16)
    got = wt.w4a16_linear(x, tw, b, out=out, block_k_max=bk, path=path, splits=splits)
    assert got is out and not torch.isnan(got).any()
    want = ref.w4a16_linear(x.float(), q, s, None if b is None else b.float())
    torch.testing.assert_close(got.float(), want, atol=1e-2 * float(want.abs().max()), rtol=1e-2)
    assert int(wt.scratch("cpu")[1].abs().sum()) == 0
    again = wt.w4a16_linear(x, tw, b, block_k_max=bk, path=path, splits=splits)
    assert torch.equal(again, got)


def test_triton_layout_and_checks():
    from sgl_spec.kernels.w4a16_linear import triton as wt

    q, s = ref.quantize(torch.randn(40, 256))
    tw = wt.prepare(q, s, block_n=16)
    assert torch.equal(tw.tiles[1, :, 3], q[:, 19]) and torch.equal(tw.tiles[2, :, 8:], torch.zeros(32, 8, dtype=torch.int32))
    assert wt.block_k(4096) == 512 and wt.block_k(384) == 128 and wt.block_k(14336) == 512 and wt.block_k(768) == 256
    # o_proj of an 8B model on 132 SMs: 64 column blocks need 8 splits for 8 programs an SM; gate_up's 448 need 4
    assert wt.split_k(4096, 512, 64, 1, 4096, 132) == 8 and wt.split_k(4096, 512, 448, 1, 28672, 132) == 4
    assert wt.split_k(14336, 512, 64, 1, 4096, 132) == 14  # the divisor of 28 iterations past the target
    assert wt.dot_stages(64, 512, 32, 3) == 1 and wt.dot_stages(16, 512, 32, 3) == 2  # shared memory caps stages
    with pytest.raises(ValueError, match="block_n"):
        wt.prepare(q, s, block_n=24)
    with pytest.raises(ValueError, match="fp16 / bf16"):
        wt.w4a16_linear(torch.randn(1, 256), tw)
    with pytest.raises(ValueError, match="bias"):
        wt.w4a16_linear(torch.randn(1, 256).half(), tw, bias=torch.zeros(41).half())
    with pytest.raises(ValueError, match="path"):
        wt.w4a16_linear(torch.randn(1, 256).half(), tw, path="mma")
    with pytest.raises(ValueError, match="splits"):
        wt.w4a16_linear(torch.randn(1, 256).half(), tw, block_k_max=128, splits=3)


@pytest.mark.gpu
@pytest.mark.parametrize("M,path", [(1, "auto"), (3, "auto"), (8, "gemv"), (8, "dot"), (33, "auto"), (64, "auto")])
@pytest.mark.parametrize("N,K", [(4096, 4096), (6144, 4096), (1024, 14336), (100, 256)])
@pytest.mark.parametrize("bn", [16, 32, 64])
def test_triton_engine_matches_twin_on_gpu(M, path, N, K, bn):
    from sgl_spec.kernels.w4a16_linear import triton as wt

    g = torch.Generator(device="cuda").manual_seed(M)
    w = (torch.randn(N, K, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    x = torch.randn(M, K, generator=g, device="cuda").to(torch.bfloat16)
    q, s = ref.quantize(w)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    tw = wt.prepare(q, s, block_n=bn)
    got = wt.w4a16_linear(x, tw, out=out, path=path)
    want = ref.w4a16_linear(x.float(), q, s)
    assert not torch.isnan(got).any()
    assert torch.equal(wt.w4a16_linear(x, tw, path=path), got)  # the split-K reduction is deterministic
    assert int(wt.scratch("cuda")[1].abs().sum()) == 0
    torch.testing.assert_close(got.float(), want, atol=2e-2 * float(want.abs().max()), rtol=2e-2)


@pytest.mark.interp
def test_triton_engine_through_the_op():
    """prepare(w, "triton") keeps only the Triton layout; the op dispatches to it (as draft_weights.py calls it)."""
    g = torch.Generator().manual_seed(5)
    w = (torch.randn(72, 256, generator=g) * 0.05).half()
    x = torch.randn(2, 256, generator=g).half()
    tw, twin = w4.prepare(w, "triton"), w4.prepare(w, "torch")
    assert tw.triton is not None and tw.qweight.numel() == 0 and tw.nbytes == tw.triton.nbytes
    got = w4.w4a16_linear(x, tw)
    want = w4.w4a16_linear(x.float(), twin)
    torch.testing.assert_close(got.float(), want, atol=1e-2 * float(want.abs().max()), rtol=1e-2)


def test_engine_knob(monkeypatch):
    from sgl_spec.kernels import engine

    monkeypatch.setenv(engine.W4A16_ENV, "cutlass")
    with pytest.raises(ValueError, match="SGL_SPEC_W4A16 must be one of"):
        engine.w4a16_engine("cpu")
    monkeypatch.setenv(engine.W4A16_ENV, "triton")
    assert engine.w4a16_engine("cpu") == ("torch", "not a CUDA device")  # the CPU always takes the twin




_COMPILE = """
import os, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from sgl_spec.kernels.w4a16_linear import triton as tk

M, K = int(sys.argv[1]), int(sys.argv[2])
cfg = tk.launch_config(M, K, tk.BLOCK_N)
ints = ("N", "K", "K_SPLIT", "stride_xm", "stride_tb", "stride_sk", "stride_om")
sig = {"x_ptr": "*bf16", "t_ptr": "*i32", "s_ptr": "*bf16", "b_ptr": "*bf16", "out_ptr": "*bf16", "ws_ptr": "*fp32",
       "cnt_ptr": "*i32", "M": "constexpr" if M == 1 else "i32", **dict.fromkeys(ints, "i32")}
consts = {"HAS_BIAS": True, "GROUP_K": 128, "BLOCK_M": cfg.block_m, "BLOCK_N": tk.BLOCK_N, "BLOCK_K": cfg.block_k,
          "SPLIT_K": 4}
sig.update(dict.fromkeys(consts, "constexpr"))
if M == 1:
    consts["M"] = 1  # what Triton's specialization makes of an integer argument equal to 1
kernel = tk._gemv_kernel if cfg.gemv else tk._dot_kernel
k = triton.compile(ASTSource(kernel, sig, consts), target=GPUTarget("cuda", 90, 32),
                   options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
    f.write(k.asm["ptx"])
r = subprocess.run([ptxas, "-v", "-arch=sm_90a", f.name, "-o", os.devnull], capture_output=True, text=True)
os.unlink(f.name)
regs = re.search(r"Used (\\d+) registers", r.stderr)
spill = re.search(r"(\\d+) bytes spill stores", r.stderr)
print(cfg, "registers", regs and regs.group(1), "spill stores", spill and spill.group(1))
"""


@pytest.mark.parametrize("M", [1, 2, 4, 8, 33, 64])
def test_triton_launches_compile_for_hopper_without_spills(M):
    """Each launch ``launch_config`` makes at a Llama-3-8B K, compiled (not interpreted: a process without
    TRITON_INTERPRET) for sm_90 and assembled by Triton's own ptxas, no GPU needed: it must compile (Triton turns an
    integer argument equal to 1 into a constant, so M = 1, a batch-1 draft, is a program of its own) and spill no
    registers (a spilling tile streams local memory besides the weights: 64-column GEMV tiles ran at 0.14 of the copy
    bandwidth on an H100)."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH"))
                                        if p)
    r = subprocess.run([sys.executable, "-c", _COMPILE, str(M), "4096"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    found = re.search(r"registers (\d+) spill stores (\d+)", r.stdout)
    assert found, r.stdout + r.stderr[-2000:]
    print(r.stdout.strip())
    assert int(found.group(2)) == 0, r.stdout
