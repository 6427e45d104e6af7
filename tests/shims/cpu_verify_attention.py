"""Test-only SGLang plugin: give the `torch_native` attention backend a TARGET_VERIFY path, so speculative workers
(NGRAM, and later ours) can run end to end on a CPU machine. Never installed for users.

Why: on a CPU without Intel AMX, SGLang 0.5.17 forces `--attention-backend torch_native` (the `intel_amx` backend
needs native sgl_kernel attention ops and falls back otherwise), and torch_native has no verify path: in
TARGET_VERIFY mode it reads `forward_batch.extend_prefix_lens`, which is None, and the scheduler dies.

How it is loaded: tests/shims holds a `sgl_cpu_test_shims-0.0.0.dist-info` whose entry_points.txt registers
`register()` under SGLang's own general-plugin group (`sglang.srt.plugins`), so every server process (main and
scheduler) runs it from `load_plugins()`. It only acts when the env var SGL_CPU_TEST_VERIFY_ATTENTION=1 is set, so
servers launched without it stay stock.

Semantics of the verify pass (same as the Triton backend's TARGET_VERIFY): request b has `seq_lens[b]` committed
tokens (KV already in the pool via req_to_token) and `n = spec_info.draft_token_num` draft tokens whose KV is written
at `out_cache_loc[b*n:(b+1)*n]`. Draft i attends to the whole committed prefix and to the drafts j that
`spec_info.custom_mask` marks visible (its tree ancestors and itself). The mask comes either per request as [n, n]
(QLEN-only layout, what the NGRAM worker builds on CPU) or as [n, seq_len + n] rows (FULL layout). Without a mask
(a chain, tree_topk == 1) the drafts are causal among themselves.
"""
import os

import torch

ENV_FLAG = "SGL_CPU_TEST_VERIFY_ATTENTION"


def _verify_masks(spec_info, seq_lens, n):
    """Per-request [n, seq_len + n] bool masks (True = may attend)."""
    custom = getattr(spec_info, "custom_mask", None)
    lens = seq_lens.tolist()
    tri = torch.ones(n, n, dtype=torch.bool).tril()
    if custom is None or custom.numel() == 0:
        return [torch.cat([torch.ones(n, L, dtype=torch.bool), tri], 1) for L in lens]
    custom = custom.reshape(-1).to(torch.bool)
    full_numel = sum((L + n) * n for L in lens)
    masks, off = [], 0
    for L in lens:
        if custom.numel() >= full_numel and custom.numel() != len(lens) * n * n:
            m = custom[off : off + (L + n) * n].view(n, L + n).clone()
            off += (L + n) * n
        else:
            tree = custom[off : off + n * n].view(n, n)
            off += n * n
            m = torch.cat([torch.ones(n, L, dtype=torch.bool), tree], 1)
        m[:, L:].diagonal().fill_(True)  # a draft always sees itself
        masks.append(m)
    return masks


def _make_backend_class():
    from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend
    from sglang.srt.mem_cache.memory_pool import KVWriteLoc
    from torch.nn.functional import scaled_dot_product_attention

    class TorchNativeVerifyAttnBackend(TorchNativeAttnBackend):
        """torch_native plus a pure-torch TARGET_VERIFY; every other mode is the stock code."""

        def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
            if not forward_batch.forward_mode.is_target_verify():
                return super().forward_extend(q, k, v, layer, forward_batch, save_kv_cache, **kwargs)
            if layer.is_cross_attention or self.use_sliding_window_kv_pool:
                raise NotImplementedError("test verify backend: no cross-attention / sliding-window pools")
            cache_loc = forward_batch.out_cache_loc
            if save_kv_cache and k is not None and v is not None:
                self.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc(cache_loc, None), k, v)
            n = forward_batch.spec_info.draft_token_num
            q_ = q.reshape(-1, layer.tp_q_head_num, layer.qk_head_dim)
            o = q.new_empty((q_.shape[0], layer.tp_q_head_num, layer.v_head_dim))
            k_cache = self.token_to_kv_pool.get_key_buffer(layer.layer_id)
            v_cache = self.token_to_kv_pool.get_value_buffer(layer.layer_id)
            req_to_token = self.req_to_token_pool.req_to_token
            masks = _verify_masks(forward_batch.spec_info, forward_batch.seq_lens, n)
            for b, (rpi, L) in enumerate(zip(forward_batch.req_pool_indices.tolist(),
                                              forward_batch.seq_lens.tolist())):
                # Read the drafts back from the pool (not from k/v) so a KV dtype cast is applied exactly as
                # for every other token the model attends to.
                slots = torch.cat([req_to_token[rpi, :L].long(), cache_loc[b * n : (b + 1) * n].long()])
                key = k_cache[slots].movedim(0, 1).to(q_.dtype)  # [heads, L + n, d]
                val = v_cache[slots].movedim(0, 1).to(q_.dtype)
                qb = q_[b * n : (b + 1) * n].movedim(0, 1)  # [heads, n, d]
                out = scaled_dot_product_attention(
                    qb.unsqueeze(0), key.unsqueeze(0), val.unsqueeze(0), attn_mask=masks[b].to(q_.device),
                    scale=layer.scaling, enable_gqa=layer.tp_q_head_num != layer.tp_k_head_num,
                )
                o[b * n : (b + 1) * n] = out.squeeze(0).movedim(0, 1)
            return o.view(-1, layer.tp_q_head_num * layer.v_head_dim)

    return TorchNativeVerifyAttnBackend


def register():
    """SGLang general-plugin entry point (see module docstring). No-op unless SGL_CPU_TEST_VERIFY_ATTENTION=1."""
    if os.environ.get(ENV_FLAG) != "1":
        return
    from sglang.srt.layers.attention import attention_registry

    backend_cls = _make_backend_class()
    attention_registry.ATTENTION_BACKENDS["torch_native"] = backend_cls
