"""Pure-torch stand-ins for sgl_kernel's CPU KV-slot bookkeeping ops (test-only, see package docstring).

Semantics follow sgl-kernel's csrc/cpu/spec.cpp, speculative_decoding.cpp and kvcache.cpp (the CPU twins of the
Triton kernels in sglang.srt.mem_cache.allocation and sglang.kernels.ops.{speculative,kvcache}). All ops write in
place and return None, like the C++ ops. Batches on a test server are tiny, so per-request Python loops are fine;
`.tolist()` pulls the few offsets to the host once instead of one sync per element.
"""
import ctypes

import torch


def _prefix_offsets(start_offset: torch.Tensor, end_offset: torch.Tensor):
    starts = start_offset.tolist()
    ends = end_offset.tolist()
    outs, acc = [], 0
    for s, e in zip(starts, ends):
        outs.append(acc)
        acc += e - s
    return starts, ends, outs


def assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len):
    """req_to_token[rpi[i], start[i]:end[i]] = out_cache_loc[prefix[i]:prefix[i] + end[i] - start[i]]."""
    del pool_len  # implied by req_to_token.shape[1]
    starts, ends, outs = _prefix_offsets(start_offset, end_offset)
    for rpi, s, e, o in zip(req_pool_indices.tolist(), starts, ends, outs):
        if e > s:
            req_to_token[rpi, s:e] = out_cache_loc[o : o + e - s].to(req_to_token.dtype)


def assign_extend_cache_locs_cpu(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len):
    """Inverse gather: out_cache_loc[prefix[i]:...] = req_to_token[rpi[i], start[i]:end[i]]."""
    del pool_len
    starts, ends, outs = _prefix_offsets(start_offset, end_offset)
    for rpi, s, e, o in zip(req_pool_indices.tolist(), starts, ends, outs):
        if e > s:
            out_cache_loc[o : o + e - s] = req_to_token[rpi, s:e].to(out_cache_loc.dtype)


def assign_draft_cache_locs_contiguous_cpu(
    req_pool_indices, req_to_token, seq_lens, out_cache_loc, pool_len, topk, num_steps
):
    """out_cache_loc[i*topk*num_steps : (i+1)*...] = req_to_token[rpi[i], seq_lens[i] : seq_lens[i] + topk*num_steps]."""
    del pool_len
    n = topk * num_steps
    for i, (rpi, s) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist())):
        out_cache_loc[i * n : (i + 1) * n] = req_to_token[rpi, s : s + n].to(out_cache_loc.dtype)


def fill_accept_out_cache_loc_cpu(accept_index, out_cache_loc, accept_out_cache_loc, size=None):
    """Compact out_cache_loc[accept_index] over the non -1 entries of accept_index into accept_out_cache_loc[:k].

    sglang 0.5.17 calls it with 3 arguments; newer sgl-kernel builds take `size` (the prefix of accept_index read).
    """
    flat = accept_index.reshape(-1)
    if size is not None:
        flat = flat[:size]
    kept = flat[flat > -1].long()
    accept_out_cache_loc[: kept.numel()] = out_cache_loc[kept].to(accept_out_cache_loc.dtype)


def _byte_view(address: int, nbytes: int) -> torch.Tensor:
    # The op gets raw buffer addresses (one per layer's K or V pool), like the Triton kernel it replaces; wrap them
    # without copying. The pools outlive this call, so borrowing the memory is safe.
    return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(address), dtype=torch.uint8)


def copy_all_layer_kv_cache_cpu(data_ptrs, strides, tgt_loc, src_loc):
    """For every buffer b: buf_b[tgt_loc[i], :] = buf_b[src_loc[i], :] (rows of strides[b] bytes).

    Gather-then-scatter, so overlapping src/tgt sets are safe, as in the C++ op.
    """
    if data_ptrs.numel() == 0 or tgt_loc.numel() == 0:
        return
    tgt = tgt_loc.long()
    src = src_loc.long()
    # Only rows up to the largest referenced slot are touched; that bounds the view.
    rows = int(torch.maximum(tgt.max(), src.max()).item()) + 1
    for address, stride in zip(data_ptrs.tolist(), strides.tolist()):
        buf = _byte_view(int(address), rows * stride).view(rows, stride)
        buf[tgt] = buf[src].clone()
