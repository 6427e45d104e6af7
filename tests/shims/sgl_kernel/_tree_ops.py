"""Pure-torch stand-ins for sgl_kernel's speculative-decoding tree ops (test-only, see package docstring).

Semantics follow sgl-kernel's csrc/speculative/ngram_utils.cu (reconstruct_indices_from_tree_mask) and
csrc/cpu/spec.cpp (verify_tree_greedy_cpu, build_tree_kernel_efficient_cpu, fill_bonus_tokens_cpu,
rotate_input_ids_cpu). Trees are a few tokens per request on a test server, so the walks run on host lists and the
results are written back with one copy per output tensor.
"""
import torch


def _write(dst: torch.Tensor, values) -> None:
    dst.copy_(torch.tensor(values, dtype=dst.dtype).view(dst.shape))


def reconstruct_indices_from_tree_mask(
    tree_mask, verified_seq_len, positions, retrieve_index, retrieve_next_token, retrieve_next_sibling,
    batch_size, draft_token_num,
):
    """From a per-request [n, n] ancestor mask (row t = tokens t attends to), derive depth-based positions and the
    first-child / next-sibling links that verify_tree_greedy walks."""
    n = draft_token_num
    mask = tree_mask.reshape(-1)[: batch_size * n * n].view(batch_size, n, n).tolist()
    seq = verified_seq_len.tolist()
    pos, ri, rnt, rns = [], [], [], []
    for b in range(batch_size):
        m = mask[b]
        for t in range(n):
            ancestors = [i for i in range(t - 1, -1, -1) if m[t][i]]
            parent = ancestors[0] if ancestors else -1  # nearest ancestor = parent
            pos.append(len(ancestors) + seq[b])
            ri.append(b * n + t)
            rnt.append(next((i for i in range(t + 1, n) if m[i][t]), -1))
            sibling = -1
            if parent != -1:
                for i in range(t + 1, n):
                    # i is a sibling when its ancestors between parent and itself are all absent.
                    if m[i][parent] and not any(m[i][parent + 1 : i]):
                        sibling = i
                        break
            rns.append(sibling)
    _write(positions.view(-1)[: batch_size * n], pos)
    _write(retrieve_index.view(-1)[: batch_size * n], ri)
    _write(retrieve_next_token.view(-1)[: batch_size * n], rnt)
    _write(retrieve_next_sibling.view(-1)[: batch_size * n], rns)


def verify_tree_greedy_cpu(
    predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token, retrive_next_sibling,
    target_predict,
):
    """Accept the longest root path whose draft tokens equal the target argmax; writes predicts (by flat draft
    index), accept_index ([bs, num_spec_step], flat indices, untouched past the accepted length) and
    accept_token_num (accepted drafts, bonus excluded)."""
    bs, n = candidates.shape
    steps = accept_index.shape[1]
    cand = candidates.tolist()
    ri = retrive_index.tolist()
    rnt = retrive_next_token.tolist()
    rns = retrive_next_sibling.tolist()
    tp = target_predict.reshape(-1).tolist()
    pred_flat = predicts.view(-1)
    for b in range(bs):
        last = ri[b][0]
        accept_index[b, 0] = last
        correct, cur = 0, 0
        for _ in range(1, steps):
            cur = rnt[b][cur]
            while cur != -1:
                if cand[b][cur] == tp[last]:
                    pred_flat[last] = tp[last]
                    correct += 1
                    accept_index[b, correct] = ri[b][cur]
                    last = ri[b][cur]
                    break
                cur = rns[b][cur]
            if cur == -1:
                break
        accept_token_num[b] = correct
        pred_flat[last] = tp[last]


def build_tree_kernel_efficient_cpu(
    parent_list, selected_index, verified_seq_len, tree_mask, positions, retrive_index, retrive_next_token,
    retrive_next_sibling, topk, depth, draft_token_num, tree_mask_mode,
):
    """EAGLE top-k tree construction (mode 0 = FULL_MASK with the seq_len prefix, 1 = QLEN_ONLY). The caller
    pre-fills retrive_next_token/sibling with -1 and the FULL_MASK prefix columns with True, as for the C++ op."""
    if tree_mask_mode not in (0, 1):
        raise NotImplementedError("build_tree_kernel_efficient_cpu: only FULL_MASK (0) and QLEN_ONLY (1)")
    n = draft_token_num
    bs = parent_list.shape[0]
    p_stride, s_stride = topk * (depth - 1) + 1, n - 1
    parents = parent_list.reshape(-1).tolist()
    sel = selected_index.reshape(-1).tolist()

    def sel_at(b, j):  # the C++ op reads flat memory; mirror it, treating out-of-range as "no match"
        k = b * s_stride + j
        return sel[k] if 0 <= k < len(sel) else None

    seq = verified_seq_len.tolist()
    pos = positions.reshape(-1).tolist()
    ri = retrive_index.reshape(-1).tolist()
    rnt = retrive_next_token.reshape(-1).tolist()
    rns = retrive_next_sibling.reshape(-1).tolist()
    mask = tree_mask.view(-1)
    mask_base = 0
    for b in range(bs):
        off, sl = b * n, seq[b]
        pos[off] = sl
        ri[off] = off
        for i in range(n - 1, 0, -1):
            ri[off + i] = off + i
            ptb = sel_at(b, i - 1) // topk
            ppos = 0
            if ptb > 0:
                ptok = parents[b * p_stride + ptb]
                while ppos < n:
                    ppos += 1
                    if sel_at(b, ppos - 1) == ptok:
                        break
            if ppos == n:
                continue  # parent not among the selected tokens: the C++ op skips it too
            if rnt[off + ppos] == -1:
                rnt[off + ppos] = i
            else:
                rns[off + i] = rnt[off + ppos]
                rnt[off + ppos] = i
        for t in range(n):
            row = (off + t) * n if tree_mask_mode == 1 else mask_base + (sl + n) * t + sl
            mask[row] = True
            mask[row + 1 : row + n] = False
            if t == 0:
                continue
            depth_t, cur = 0, t - 1
            while True:
                depth_t += 1
                mask[row + cur + 1] = True
                ptb = sel_at(b, cur) // topk
                if ptb == 0:
                    break
                ptok = parents[b * p_stride + ptb]
                cur = next((c for c in range(n) if sel_at(b, c) == ptok), n)
            pos[off + t] = depth_t + sl
        mask_base += n * n + sl * n
    _write(positions, pos)
    _write(retrive_index, ri)
    _write(retrive_next_token, rnt)
    _write(retrive_next_sibling, rns)


def fill_bonus_tokens_cpu(accept_tokens, accept_lens, bonus_tokens, accept_stride):
    """bonus_tokens[i] = accept_tokens.flat[accept_stride * i + accept_lens[i] - 1] (the last accepted slot)."""
    lens = accept_lens.long()
    idx = torch.arange(lens.numel(), dtype=torch.long) * accept_stride + lens - 1
    bonus_tokens.copy_(accept_tokens.reshape(-1)[idx].to(bonus_tokens.dtype))


def rotate_input_ids_cpu(input_ids, extend_start_loc, extend_seq_lens, topk_index, select_index=None):
    """Shift each request's extend segment left by one and write its new token last (or at select_index)."""
    starts = extend_start_loc.tolist()
    lens = extend_seq_lens.tolist()
    toks = topk_index.reshape(-1).tolist()
    sel = select_index.tolist() if select_index is not None else None
    for i, (s, n) in enumerate(zip(starts, lens)):
        if n > 1:
            input_ids[s : s + n - 1] = input_ids[s + 1 : s + n].clone()
        if n > 0:
            input_ids[sel[i] if sel is not None else s + n - 1] = toks[i]
