"""window_meta: the reference against a per-element oracle written from the contract (sgl_spec/kernels/window_meta/ref.py),
and the Triton kernel against the reference, exactly (integer arithmetic). NaN cannot poison integers: the launcher's outputs are allocated
filled with -7 here (``torch.empty`` patched during the call) and every element is compared, so an unwritten one
fails.
Under TRITON_INTERPRET=1 on CPU, natively on GPU."""
import pytest
import torch

from sgl_spec.kernels.window_meta.triton import window_meta
from sgl_spec.kernels.window_meta.ref import window_meta as window_meta_ref

pytestmark = pytest.mark.interp
R = 2


def _case(B, nq, P, L, S, seed):
    gen = torch.Generator().manual_seed(seed)
    slots = torch.randperm(S, generator=gen)[:B]
    q0 = torch.randint(0, L - nq, (B,), generator=gen)
    q0[0] = L - nq  # a window that ends on the last position (the page-table column clamp)
    positions = (q0[:, None] + torch.arange(nq)[None, :]).reshape(-1)
    rtt = torch.randint(0, 1 << 20, (S, L), generator=gen, dtype=torch.int32)
    window_start = torch.clamp(q0 - torch.randint(0, 3 * P, (B,), generator=gen), min=0)
    return positions, slots, rtt, window_start


def _oracle(positions, slots, P, rtt, window_start):
    B = slots.shape[0]
    nq = positions.shape[0] // B
    maxp = -(-rtt.shape[1] // P)
    out = {"w_row": [], "slots": [], "q_start": [], "page_table": [], "q_rows": [], "q_pages": [], "hot_start": [],
           "hot_len": [], "dense_pages": []}
    for b in range(B):
        s = int(slots[b])
        pos = [int(x) for x in positions[b * nq:(b + 1) * nq]]
        out["w_row"] += [(s * R + (p // P) % R) * P + p % P for p in pos]
        out["slots"].append(s)
        out["q_start"].append(pos[0])
        table = [int(rtt[s, j * P]) // P for j in range(maxp)]
        out["page_table"].append(table)
        j = pos[0] // P
        out["q_rows"].append((s * R + j % R) * P)
        out["q_pages"].append(table[min(j, maxp - 1)] if (j + 1) * P <= pos[0] + nq else 0)
        first = int(window_start[b]) // P
        out["hot_start"].append(first * P)
        out["hot_len"].append(pos[0] - first * P + 1)
        out["dense_pages"].append(first)
    return {k: torch.tensor(v) for k, v in out.items()}


@pytest.mark.parametrize("B,nq,P,L", [(1, 1, 64, 4097), (3, 5, 32, 1024), (17, 13, 64, 4097), (3, 1, 128, 63 * 128),
                                      (17, 8, 64, 64)])
@pytest.mark.parametrize("kind", ["verify", "draft-sparse", "draft-dense"])
def test_kernel_equals_reference_equals_oracle(B, nq, P, L, kind, device, monkeypatch):
    positions, slots, rtt, ws = _case(B, nq, P, L, S=B + 5, seed=B * 31 + nq)
    kw = {"verify": dict(req_to_token=rtt, completions=True),
          "draft-sparse": dict(window_start=ws),
          "draft-dense": dict(req_to_token=rtt, window_start=ws)}[kind]
    want = _oracle(positions, slots, P, rtt, ws)
    ref = window_meta_ref(positions, slots, P, R, **kw)
    args = (positions.to(device), slots.to(device), P, R)
    kw = {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in kw.items()}
    empty = torch.empty
    with monkeypatch.context() as m:
        m.setattr(torch, "empty", lambda *a, **k: empty(*a, **k).fill_(-7))
        got = window_meta(*args, **kw)
    for name in ref._fields:
        r, g = getattr(ref, name), getattr(got, name)
        if r is None:
            assert g is None, name
            continue
        assert g.dtype == r.dtype, (name, g.dtype, r.dtype)
        assert torch.equal(r, want[name].to(r.dtype).view(r.shape)), name
        assert torch.equal(g.cpu(), r), name
    assert ref.w_row.dtype == torch.int64 and ref.slots.dtype == torch.int32


def test_int32_inputs_and_empty_batch(device):
    positions, slots, rtt, ws = _case(3, 4, 64, 512, S=6, seed=1)
    a = window_meta(positions.to(device, torch.int32), slots.to(device, torch.int32), 64, R, req_to_token=rtt.to(device),
                    completions=True)
    b = window_meta_ref(positions, slots, 64, R, req_to_token=rtt, completions=True)
    for x, y in zip(a, b):
        assert (x is None and y is None) or torch.equal(x.cpu(), y)
    e = window_meta(positions[:0].to(device), slots[:0].to(device), 64, R, window_start=ws[:0].to(device))
    assert e.w_row.shape == (0,) and e.hot_len.shape == (0,)


def test_bad_input_is_rejected(device):
    positions, slots, rtt, ws = _case(3, 4, 64, 512, S=6, seed=2)
    with pytest.raises(ValueError, match="equal windows"):
        window_meta(positions[:-1].to(device), slots.to(device), 64, R)
    with pytest.raises(ValueError, match="need req_to_token"):
        window_meta(positions.to(device), slots.to(device), 64, R, completions=True)
    with pytest.raises(ValueError, match="int32"):
        window_meta(positions.to(device), slots.to(device), 64, R, req_to_token=rtt.long().to(device))
    with pytest.raises(ValueError, match="integer"):
        window_meta(positions.float().to(device), slots.to(device), 64, R)
