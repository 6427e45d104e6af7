"""quantspec's KV pool (sgl_spec/kvcache/pool.py): shapes, page ids, real bytes per token, and the SGLang features it refuses."""
import pytest
import torch

from sgl_spec.config import HOT_RING_PAGES
from sgl_spec.kvcache.format import KVFormat
from sgl_spec.kvcache.pool import QuantSpecKVPool, cell_size_bytes, ring_bytes, score_bytes


def make_pool(size=4 * 64, P=64, H=2, D=128, layers=3, slots=5, dtype=torch.bfloat16, start_layer=0):
    return QuantSpecKVPool(size, page_size=P, dtype=dtype, head_num=H, head_dim=D, layer_num=layers, device="cpu",
                           enable_memory_saver=False, num_slots=slots, start_layer=start_layer,
                           end_layer=start_layer + layers - 1)


def test_shapes_and_page_ids():
    P, size = 64, 4 * 64
    pool = make_pool(size=size, P=P)
    # SGLang slots run 0 … size+P-1 (page 0 = the padding slots); page id = slot // P
    assert pool.num_pages == size // P + 1 == (size + P - 1) // P + 1
    for layer in range(3):
        s = pool.page_store(layer)
        assert s.k_upper.shape == s.k_lower.shape == s.v_upper.shape == (pool.num_pages, 2, P, 64)
        assert s.k_scale.shape == (pool.num_pages, 2, 128) and s.v_scale.shape == (pool.num_pages, 2, P)
        hk, hv = pool.hot(layer)
        assert hk.shape == hv.shape == (5, HOT_RING_PAGES, P, 2, 128) and hk.dtype == torch.bfloat16
    assert pool.page_store(1) is not pool.page_store(2)


def test_layer_ids_are_global_under_pipeline_parallelism():
    pool = make_pool(layers=2, start_layer=4)
    assert pool.page_store(4) is pool.pages[0] and pool.page_store(5) is pool.pages[1]
    assert pool.hot(5)[0] is pool.hot_k[1]


@pytest.mark.parametrize("P,D", [(32, 64), (64, 128), (128, 128)])
def test_bytes_per_token_are_the_real_ones(P, D):
    H, layers, size = 2, 3, 8 * P
    pool = make_pool(size=size, P=P, H=H, D=D, layers=layers)
    k, v = pool.page_bytes()
    per_token = (k + v) / (pool.num_pages * P)
    fmt = KVFormat(P, H, D)
    assert per_token == pytest.approx(fmt.bytes_per_token_per_layer() * layers)
    # cell size (what SGLang divides its budget by) rounds the real cost up, never down
    assert 0 <= cell_size_bytes(fmt, layers) - per_token < 1
    # ≈ 8.4 bits per element instead of 16: about 1.9x the tokens of a bf16 pool in the same memory
    bf16 = 2 * H * D * layers * 2
    assert 1.8 < bf16 / per_token < 2.0
    kb, vb = pool.get_kv_size_bytes()
    ring = ring_bytes(fmt, layers, 5, torch.bfloat16)
    assert kb + vb == k + v + ring
    assert pool.mem_usage == pytest.approx((k + v + ring) / 2**30)


def test_fixed_overheads():
    fmt = KVFormat(64, 8, 128)
    # 2 (K,V) x slots x R x P x H x D x 2 bytes x layers
    assert ring_bytes(fmt, 32, 65, torch.bfloat16) == 2 * 65 * 2 * 64 * 8 * 128 * 2 * 32
    assert score_bytes(fmt, 32, 65, 4096) == 4 * 32 * 65 * 8 * 64


def test_pool_size_must_be_page_aligned():
    with pytest.raises(ValueError, match="multiple of the page size"):
        make_pool(size=100)


@pytest.mark.parametrize("call,feature", [
    (lambda p: p.get_key_buffer(0), "reading K"),
    (lambda p: p.get_kv_buffer(0), "reading K/V"),
    (lambda p: p.set_kv_buffer(None, torch.zeros(1), torch.zeros(1), torch.zeros(1)), "writing K/V"),
    (lambda p: p.move_kv_cache(torch.zeros(1), torch.zeros(1)), "moving KV slots"),
    (lambda p: p.get_cpu_copy(torch.zeros(1)), "offloading"),
    (lambda p: p.get_contiguous_buf_infos(), "disaggregation"),
])
def test_token_row_features_fail_clearly(call, feature):
    with pytest.raises(NotImplementedError, match=feature):
        call(make_pool())


# ---- sgl_spec/patches/cpu_paged_allocator.py: SGLang's page allocator without Triton ------------------------------------------
def _reference_extend(prefix, seq, last, free, P):
    """What SGLang's alloc_extend_kernel computes: each request in order first fills its partial last page, then
    takes free pages in free-list order (position -> page*P + pos % P)."""
    out, used = [], 0
    for p, s, lst in zip(prefix.tolist(), seq.tolist(), last.tolist()):
        n1 = min(s, -(-p // P) * P) - p
        out += [lst + 1 + i for i in range(n1)]
        for pos in range(p + n1, s, P):
            out += [int(free[used]) * P + i for i in range(min(P, s - pos))]
            used += 1
    return out, used


def test_cpu_allocator_follows_sglangs_allocation_rule():
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator

    from sgl_spec.patches.cpu_paged_allocator import _allocator_classes

    base, cls = _allocator_classes()
    assert base is PagedTokenToKVPoolAllocator and issubclass(cls, base) and _allocator_classes()[1] is cls
    P, num_pages = 8, 40
    alloc = cls(num_pages * P, P, torch.float32, "cpu", None, False)
    alloc.free_pages = torch.randperm(num_pages, generator=torch.Generator().manual_seed(0)) + 1
    free0 = alloc.free_pages.clone()
    prefix = torch.tensor([0, 5, 8, 13, 16])
    seq = torch.tensor([3, 21, 24, 14, 16 + 9])
    # the last slot of each prefix sits in a page the request owns: (last_loc + 1) % P == prefix % P
    last = torch.where(prefix > 0, (200 + torch.arange(5)) * P + (prefix - 1) % P, torch.full_like(prefix, -1))
    out = alloc.alloc_extend(prefix, prefix, seq, seq, last, int((seq - prefix).sum()))
    want, used = _reference_extend(prefix, seq, last, free0, P)
    assert out.tolist() == want and torch.equal(alloc.free_pages, free0[used:])
    # decode: a request whose new token opens a page ((seq_len - 1) % P == 0) takes the next free page, in order
    free1 = alloc.free_pages.clone()
    seq = torch.tensor([9, 10, 17, 1 + 2 * P, 12])
    last = (300 + torch.arange(5)) * P + (seq - 2) % P
    out = alloc.alloc_decode(seq, seq, last)
    assert out.tolist() == [int(free1[0]) * P, int(last[1]) + 1, int(free1[1]) * P, int(free1[2]) * P,
                            int(last[4]) + 1]
    assert torch.equal(alloc.free_pages, free1[3:])
    # out of pages: refused, free list untouched
    alloc.free_pages = alloc.free_pages[:1]
    assert alloc.alloc_decode(torch.tensor([9, 17]), torch.tensor([9, 17]), torch.tensor([7, 15])) is None
    assert alloc.alloc_extend(torch.tensor([0]), torch.tensor([0]), torch.tensor([2 * P]), torch.tensor([2 * P]),
                              torch.tensor([-1]), 2 * P) is None
    assert len(alloc.free_pages) == 1


def test_cpu_allocator_patch_is_idempotent():
    from sglang.srt.plugins.hook_registry import HookRegistry

    from sgl_spec.patches import cpu_paged_allocator as patch

    patch.apply()
    patch.apply()
    hooks = [h for _, h, _ in HookRegistry._hooks[patch.TARGET] if h is patch._around]
    assert len(hooks) == 1


# ---- the memory-accounting hooks (sgl_spec/plugin.py) ------------------------------------------------------------------
def _configurator(speculative=False, dense=False, max_running=15):
    from types import SimpleNamespace

    from configurator import kv_configurator
    from sgl_spec.config import QuantSpecConfig

    cfg = QuantSpecConfig(speculative=speculative, page_size=64, num_draft_steps=4 if speculative else 0,
                          topk_ratio=0.07, min_pages=8, sink_pages=1, dense_draft=dense)
    mc = SimpleNamespace(get_num_kv_heads=lambda tp: 8 // tp, head_dim=128, context_len=4096)
    return kv_configurator(
        attn_tp_size=2, attn_dp_size=1,
        server_args=SimpleNamespace(_quantspec=cfg, max_running_requests=max_running), is_draft_worker=False,
        model_config=mc, layer_info=SimpleNamespace(num_effective_layers=3), model_dtype=torch.bfloat16,
    )


def test_cell_size_hook_counts_quantized_bytes():
    from sgl_spec import plugin

    with _configurator() as kvc:
        dense = plugin._cell_size(lambda self, kvc, n: 2 * 4 * 256 * n, None, kvc, 3)
        assert dense == cell_size_bytes(KVFormat(64, 4, 128), 3)  # 4 KV heads per rank at tp 2
        kvc.server_args._quantspec = None  # quantspec off: SGLang's own computation
        assert plugin._cell_size(lambda self, kvc, n: 12345, None, kvc, 3) == 12345


@pytest.mark.parametrize("speculative,dense", [(False, False), (True, True), (True, False)])
def test_available_bytes_hook_reserves_rings_and_scores(speculative, dense):
    from sgl_spec import plugin

    fmt = KVFormat(64, 4, 128)
    fixed = ring_bytes(fmt, 3, 16, torch.bfloat16)  # 15 requests + SGLang's padding slot
    if speculative and not dense:
        fixed += score_bytes(fmt, 3, 16, 4096)
    with _configurator(speculative, dense) as kvc:
        assert plugin._available_bytes(10**9, kvc, 0) == 10**9 - fixed
        with pytest.raises(ValueError, match="lower --max-running-requests"):
            plugin._available_bytes(fixed, kvc, 0)
