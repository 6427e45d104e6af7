"""The test-only sgl_kernel stand-in (tests/shims/sgl_kernel) against SGLang's own Triton kernels for the same
ops, run under TRITON_INTERPRET=1 (set by tests/conftest.py). The server tests only show the ops are right on the
paths one tiny model happens to take; this checks odd batch sizes, ragged lengths and branching trees.

The shim is loaded from its file under a private name, not put on sys.path: if `import sgl_kernel` succeeded in the
pytest process, in-process SGLang imports elsewhere in the suite would silently change behaviour.
"""
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

SHIM_DIR = Path(__file__).resolve().parents[1] / "shims" / "sgl_kernel"


def _load_shim():
    name = "_sgl_kernel_test_shim"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, SHIM_DIR / "__init__.py", submodule_search_locations=[str(SHIM_DIR)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # relative imports inside the package need it registered
        spec.loader.exec_module(module)
    return sys.modules[name]


shim = _load_shim()
BATCHES = [1, 3, 17]


def _pow2(n):
    return 1 << (max(n, 1) - 1).bit_length()


def _ragged(bs, pool_len, gen, max_len=40):
    """Distinct request rows and [start, end) windows inside pool_len (some empty)."""
    rpi = torch.randperm(bs + 5, generator=gen)[:bs]
    start = torch.randint(0, pool_len - max_len, (bs,), generator=gen)
    length = torch.randint(0, max_len, (bs,), generator=gen)
    length[0] = max_len - 1  # one long window in every batch
    return rpi, start, start + length


# SGLang's Triton kernels for the three slot-copy ops below loop over data-dependent trip counts
# (`range(tl.cdiv(kv_end - kv_start, B))`), which Triton 3.6's interpreter cannot run ("only 0-dimensional arrays
# can be converted to Python scalars"). Their references are therefore element-by-element transcriptions of those
# kernels: output offset of request i = sum of the lengths of requests < i.


def _segments(start, end):
    out = 0
    for s, e in zip(start.tolist(), end.tolist()):
        yield s, e, out
        out += e - s


@pytest.mark.parametrize("bs", BATCHES)
def test_assign_req_to_token_pool(bs):
    gen = torch.Generator().manual_seed(bs)
    pool_len = 97
    rpi, start, end = _ragged(bs, pool_len, gen)
    out_cache_loc = torch.randint(0, 10_000, (int((end - start).sum()),), generator=gen)
    init = torch.randint(-5, 0, (bs + 5, pool_len), dtype=torch.int32, generator=gen)  # untouched cells must stay
    ref, got = init.clone(), init.clone()
    for r, (s, e, o) in zip(rpi.tolist(), _segments(start, end)):
        for j in range(s, e):
            ref[r, j] = int(out_cache_loc[o + j - s])
    assert shim.assign_req_to_token_pool_cpu(rpi, got, start, end, out_cache_loc, pool_len) is None
    assert torch.equal(got, ref)


@pytest.mark.parametrize("bs", BATCHES)
def test_assign_extend_cache_locs(bs):
    gen = torch.Generator().manual_seed(100 + bs)
    pool_len = 97
    rpi, start, end = _ragged(bs, pool_len, gen)
    req_to_token = torch.randint(0, 10_000, (bs + 5, pool_len), dtype=torch.int32, generator=gen)
    n = int((end - start).sum())
    ref = torch.full((n + 3,), -7, dtype=torch.int64)  # 3 spare cells: nothing may be written past n
    got = ref.clone()
    for r, (s, e, o) in zip(rpi.tolist(), _segments(start, end)):
        for j in range(s, e):
            ref[o + j - s] = int(req_to_token[r, j])
    shim.assign_extend_cache_locs_cpu(rpi, req_to_token, start, end, got, pool_len)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("bs", BATCHES)
@pytest.mark.parametrize("topk,steps", [(1, 3), (4, 2)])
def test_assign_draft_cache_locs_contiguous(bs, topk, steps):
    gen = torch.Generator().manual_seed(200 + bs)
    pool_len = 64
    rpi = torch.randperm(bs + 5, generator=gen)[:bs]
    seq_lens = torch.randint(0, pool_len - topk * steps, (bs,), generator=gen)
    req_to_token = torch.randint(0, 10_000, (bs + 5, pool_len), dtype=torch.int32, generator=gen)
    width = topk * steps
    ref = torch.full((bs * width,), -7, dtype=torch.int64)
    got = ref.clone()
    for i, (r, L) in enumerate(zip(rpi.tolist(), seq_lens.tolist())):
        for j in range(width):
            ref[i * width + j] = int(req_to_token[r, L + j])
    shim.assign_draft_cache_locs_contiguous_cpu(rpi, req_to_token, seq_lens, got, pool_len, topk, steps)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("bs", BATCHES)
def test_fill_bonus_tokens(bs):
    from sglang.kernels.ops.speculative.eagle import fill_bonus_tokens

    gen = torch.Generator().manual_seed(300 + bs)
    stride = 5
    accept_tokens = torch.randint(0, 8192, (bs, stride), dtype=torch.int32, generator=gen)
    accept_lens = torch.randint(1, stride + 1, (bs,), dtype=torch.int32, generator=gen)
    ref = torch.full((bs,), -7, dtype=torch.int32)
    got = ref.clone()
    fill_bonus_tokens[(bs,)](accept_tokens, accept_lens, ref, stride)
    shim.fill_bonus_tokens_cpu(accept_tokens, accept_lens, got, stride)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("bs", BATCHES)
def test_fill_accept_out_cache_loc(bs):
    from sglang.kernels.ops.speculative.eagle import fill_accept_out_cache_loc

    gen = torch.Generator().manual_seed(400 + bs)
    width = 4
    accept_index = torch.randint(0, bs * width, (bs, width), dtype=torch.int32, generator=gen)
    accept_index[torch.rand(bs, width, generator=gen) < 0.4] = -1  # rejected slots
    out_cache_loc = torch.randint(0, 10_000, (bs * width,), generator=gen)
    size = bs * width
    ref = torch.full((size,), -7, dtype=torch.int64)
    got = ref.clone()
    fill_accept_out_cache_loc[(size,)](accept_index, out_cache_loc, ref, _pow2(size))
    shim.fill_accept_out_cache_loc_cpu(accept_index, out_cache_loc, got)  # 0.5.17 calls it without size
    assert torch.equal(got, ref)


@pytest.mark.parametrize("num_locs", [1, 7, 33])
def test_copy_all_layer_kv_cache(num_locs):
    # The Triton kernel casts raw addresses to pointers, which the interpreter cannot do; the reference is the
    # definition: for every buffer, rows src are copied to rows tgt, gathered before any row is written.
    gen = torch.Generator().manual_seed(500 + num_locs)
    slots = 64
    bufs = [torch.randn(slots, 2, 16, generator=gen), torch.randn(slots, 2, 8, generator=gen).to(torch.bfloat16)]
    perm = torch.randperm(slots, generator=gen)
    src, tgt = perm[:num_locs], perm[num_locs // 2 : num_locs // 2 + num_locs]  # overlapping sets
    expected = []
    for b in bufs:
        e = b.clone()
        e[tgt] = b[src]
        expected.append(e)
    ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.uint64)
    strides = torch.tensor([b[0].numel() * b.element_size() for b in bufs], dtype=torch.int64)
    shim.copy_all_layer_kv_cache_cpu(ptrs, strides, tgt, src)
    for b, e in zip(bufs, expected):
        assert torch.equal(b, e)


def _eagle_tree(bs, topk, depth, num_draft, gen):
    """parent_list / top_scores_index as EAGLE's draft loop and organize_draft_results build them."""
    topk_p = torch.rand(bs, topk, generator=gen).sort(descending=True).values
    score_list = [topk_p.unsqueeze(1)]
    parents_list = [torch.arange(-1, topk).expand(bs, -1)]
    scores = topk_p
    for i in range(1, depth):
        p = torch.rand(bs * topk, topk, generator=gen).sort(descending=True).values
        expand = scores.unsqueeze(2) * p.view(bs, topk, topk)
        scores, cs_index = expand.flatten(1).topk(topk, dim=-1)
        score_list.append(expand)
        parents_list.append(cs_index + topk * topk * (i - 1) + topk)
    flat_scores = torch.cat(score_list, dim=1).flatten(1)
    top_index = flat_scores.topk(num_draft - 1, dim=-1).indices.sort().values
    return torch.cat(parents_list[:-1], dim=1).contiguous(), top_index.contiguous()


def _tree_buffers(bs, n, seq_lens, mode):
    numel = bs * n * n if mode == 1 else int(seq_lens.sum()) * n + bs * n * n
    return (torch.ones(numel, dtype=torch.bool), torch.full((bs * n,), -9, dtype=torch.long),
            *torch.full((3, bs, n), -1, dtype=torch.long).clone())


@pytest.mark.parametrize("bs", BATCHES)
@pytest.mark.parametrize("topk,depth,num_draft", [(1, 3, 4), (4, 3, 8), (2, 4, 6)])
@pytest.mark.parametrize("mode", [0, 1])  # FULL_MASK, QLEN_ONLY
def test_build_tree_then_reconstruct(bs, topk, depth, num_draft, mode):
    from sglang.kernels.ops.speculative.spec_tree import sgl_build_tree_kernel_efficient_triton

    gen = torch.Generator().manual_seed(600 + bs * 7 + topk)
    parent_list, sel = _eagle_tree(bs, topk, depth, num_draft, gen)
    seq_lens = torch.randint(1, 30, (bs,), generator=gen)
    ref = _tree_buffers(bs, num_draft, seq_lens, mode)
    got = _tree_buffers(bs, num_draft, seq_lens, mode)
    sgl_build_tree_kernel_efficient_triton[(bs,)](
        parent_list, sel, seq_lens, torch.cumsum(seq_lens, 0) - seq_lens, *ref, topk=topk, depth=depth,
        draft_token_num=num_draft, tree_mask_mode=mode, batch_size=bs, parent_list_stride=parent_list.stride(0),
        selected_index_stride=sel.stride(0))
    shim.build_tree_kernel_efficient_cpu(parent_list, sel, seq_lens, *got, topk, depth, num_draft, mode)
    for g, r in zip(got, ref):
        assert torch.equal(g, r)
    if mode == 1:
        # NGRAM's op goes the other way: from the [n, n] ancestor mask back to positions and tree links.
        tree_mask, positions, ri, rnt, rns = got
        back = [torch.full_like(t, -9) for t in (positions, ri, rnt, rns)]
        shim.reconstruct_indices_from_tree_mask(tree_mask, seq_lens, *back, bs, num_draft)
        for b_, g in zip(back, (positions, ri, rnt, rns)):
            assert torch.equal(b_, g)


@pytest.mark.parametrize("bs", BATCHES)
@pytest.mark.parametrize("topk,depth,num_draft", [(1, 4, 5), (4, 3, 8)])
def test_verify_tree_greedy(bs, topk, depth, num_draft):
    from sglang.kernels.ops.speculative.spec_tree import verify_tree_greedy_kernel_triton

    gen = torch.Generator().manual_seed(700 + bs + topk)
    parent_list, sel = _eagle_tree(bs, topk, depth, num_draft, gen)
    seq_lens = torch.randint(1, 30, (bs,), generator=gen)
    _, _, ri, rnt, rns = _tree_buffers(bs, num_draft, seq_lens, 1)
    mask = torch.ones(bs * num_draft * num_draft, dtype=torch.bool)
    positions = torch.empty(bs * num_draft, dtype=torch.long)
    shim.build_tree_kernel_efficient_cpu(parent_list, sel, seq_lens, mask, positions, ri, rnt, rns, topk, depth,
                                         num_draft, 1)
    # Random tokens rarely match, so even requests get a forced accept path: walk first children from the root and
    # make the target's prediction at each node equal the next draft token.
    candidates = torch.randint(0, 3, (bs, num_draft), generator=gen)
    target = torch.randint(0, 3, (bs, num_draft), generator=gen)
    forced = {}
    for b in range(0, bs, 2):
        cur, length = 0, 0
        while int(rnt[b, cur]) != -1 and length < depth:
            nxt = int(rnt[b, cur])
            target[b, cur] = candidates[b, nxt]
            cur, length = nxt, length + 1
        forced[b] = length
    steps = depth + 1
    outs = []
    for _ in range(2):
        outs.append((torch.full((bs * num_draft,), -7, dtype=torch.int32),
                     torch.full((bs, steps), -1, dtype=torch.int32), torch.full((bs,), -7, dtype=torch.int32)))
    verify_tree_greedy_kernel_triton[(bs,)](*outs[0], candidates, ri, rnt, rns, target, batch_size=bs,
                                            num_speculative_tokens=steps, num_draft_tokens=num_draft)
    shim.verify_tree_greedy_cpu(*outs[1], candidates, ri, rnt, rns, target)
    for r, g in zip(*outs):
        assert torch.equal(g, r)
    for b, length in forced.items():
        assert int(outs[1][2][b]) >= length > 0  # acceptance really exercised


def test_unknown_op_raises_not_implemented():
    with pytest.raises(NotImplementedError, match="fast_topk"):
        shim.fast_topk(torch.zeros(1), 1)
    with pytest.raises(AttributeError):
        shim.__no_such_dunder__  # noqa: B018
