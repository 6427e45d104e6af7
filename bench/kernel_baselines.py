"""BF16 attention baselines on the same paged cache our kernels are compared with: sgl_kernel's FA3
(``flash_attn_with_kvcache`` with a page table: decode and γ+1-row verify), FlashInfer's
``BatchDecodeWithPagedKVCacheWrapper`` (decode; tensor cores on and off) and, only when neither is usable,
torch SDPA on a dense copy of the cache (a fallback, said so in the results).

FlashInfer compiles its kernels on first use (JIT, needs nvcc): that is probed in a child process with a time limit,
so a missing compiler or a slow build costs at most ``timeout`` seconds and never hangs the benchmark. The child's
build lands in FlashInfer's on-disk cache, so the benchmark process then loads it without compiling.

Run as a script (``--probe-flashinfer``) this file is that child.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from importlib import metadata

import torch
import torch.nn.functional as F

from kernel_cases import DTYPE, HKV, HQ, D, SM_SCALE, PagedBF16, bf16_pages, n_pages

FI_WORKSPACE_BYTES = 256 << 20


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


# ---- FA3 (sgl_kernel) ----------------------------------------------------------------------------------------------
def load_fa3():
    """(flash_attn_with_kvcache or None, description)."""
    if not torch.cuda.is_available():
        return None, "unavailable: no CUDA"
    try:
        from sgl_kernel.flash_attn import flash_attn_with_kvcache, is_fa3_supported

        if not is_fa3_supported():
            return None, f"unavailable: FA3 not supported on {torch.cuda.get_device_name()}"
        return flash_attn_with_kvcache, _version("sglang-kernel")
    except Exception as e:  # ImportError, or a broken .so: the run goes on without it
        return None, f"unavailable: {type(e).__name__}: {e}"


def fa3_attention(fa3, cache: PagedBF16, nq: int):
    """q [B, nq, HQ, D] -> [B, nq, HQ, D]. causal=True aligns the mask bottom-right: row i sees keys
    0 … len-nq+i, i.e. exactly a γ+1-row verify window ending at the newest token (nq=1: plain decode)."""

    def run(q):
        return fa3(q=q, k_cache=cache.k_cache, v_cache=cache.v_cache, cache_seqlens=cache.lens,
                   page_table=cache.page_table, softmax_scale=SM_SCALE, causal=True)

    return run


# ---- FlashInfer ----------------------------------------------------------------------------------------------------
def _nvcc_found() -> bool:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    return shutil.which("nvcc") is not None or os.path.exists(os.path.join(home, "bin", "nvcc"))


def probe_flashinfer(timeout_s: float):
    """({use_tensor_cores: bool -> usable}, description). Builds/loads both decode variants in a child process."""
    if not torch.cuda.is_available():
        return {}, "unavailable: no CUDA"
    try:
        import flashinfer  # noqa: F401  (cheap: importing compiles nothing)
    except Exception as e:
        return {}, f"unavailable: {type(e).__name__}: {e}"
    version = _version("flashinfer-python")
    if not _nvcc_found():
        return {}, f"{version} unusable: its decode kernels are JIT-built and no nvcc was found"
    cmd = [sys.executable, os.path.abspath(__file__), "--probe-flashinfer"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # own process group: a timeout also ends its nvcc children
    try:
        text, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {}, f"{version} unusable: JIT build took more than {timeout_s:.0f} s (raise --fi-timeout)"
    ok = {tc: f"FI_OK tc={int(tc)}" in text for tc in (False, True)}
    if not any(ok.values()):
        tail = " | ".join(text.strip().splitlines()[-3:])
        return {}, f"{version} unusable: probe failed (rc={proc.returncode}): {tail}"
    return ok, version


def flashinfer_decode(cache: PagedBF16, use_tensor_cores: bool, workspace: torch.Tensor):
    """q [B, HQ, D] -> [B, HQ, D]; plan() (host work) happens here, outside any timing."""
    import flashinfer

    P = cache.P
    npl = [n_pages(n, P) for n in cache.lens_host]
    dev = cache.k_cache.device
    indptr = torch.tensor([0] + list(torch.tensor(npl).cumsum(0).tolist()), dtype=torch.int32, device=dev)
    indices = torch.cat([cache.page_table[b, :n] for b, n in enumerate(npl)]).contiguous()
    last = torch.tensor([n - (m - 1) * P for n, m in zip(cache.lens_host, npl)], dtype=torch.int32, device=dev)
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD", use_tensor_cores=use_tensor_cores)
    w.plan(indptr, indices, last, HQ, HKV, D, P, q_data_type=DTYPE, kv_data_type=DTYPE, sm_scale=SM_SCALE)
    kv = (cache.k_cache, cache.v_cache)
    return lambda q: w.run(q, kv)


def new_fi_workspace(device):
    return torch.zeros(FI_WORKSPACE_BYTES, dtype=torch.uint8, device=device)


# ---- torch SDPA on a dense copy (fallback / CPU smoke) --------------------------------------------------------------
def sdpa_attention(cache: PagedBF16, nq: int):
    """q [B, nq, HQ, D] -> [B, nq, HQ, D]. The cache is gathered to dense [B, HKV, L, D] here, outside timing
    (favourable to the baseline: it gets contiguous K/V)."""
    lens, P = cache.lens_host, cache.P
    L = max(lens)
    dev = cache.k_cache.device
    rows = (cache.page_table.long().unsqueeze(-1) * P + torch.arange(P, device=dev)).flatten(1)[:, :L]
    k = cache.k_cache.view(-1, HKV, D)[rows].transpose(1, 2).contiguous()  # [B, HKV, L, D]
    v = cache.v_cache.view(-1, HKV, D)[rows].transpose(1, 2).contiguous()
    mask = None
    if nq > 1 or min(lens) != L:
        i = torch.arange(nq, device=dev).view(1, nq, 1)
        n = torch.arange(L, device=dev).view(1, 1, L)
        mask = (n <= cache.lens.view(-1, 1, 1) - nq + i).unsqueeze(1)  # [B, 1, nq, L]

    def run(q):
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, attn_mask=mask, scale=SM_SCALE, enable_gqa=True)
        return o.transpose(1, 2)

    return run


def _probe_main():
    """Child process: build both FlashInfer decode variants on a tiny cache and run them once."""
    cache = bf16_pages([200, 64], 64, "cuda")[0]
    ws = new_fi_workspace("cuda")
    q = torch.randn(2, HQ, D, dtype=DTYPE, device="cuda")
    for tc in (False, True):
        try:
            flashinfer_decode(cache, tc, ws)(q)
            torch.cuda.synchronize()
            print(f"FI_OK tc={int(tc)}", flush=True)
        except Exception as e:
            print(f"FI_FAIL tc={int(tc)}: {type(e).__name__}: {str(e)[:400]}", flush=True)


if __name__ == "__main__" and "--probe-flashinfer" in sys.argv:
    _probe_main()
