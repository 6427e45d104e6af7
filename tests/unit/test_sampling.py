"""Acceptance rules of sgl_spec.speculative.sampling: greedy matching, SGLang-equivalent filtering, and that chain rejection
sampling reproduces the target distribution exactly (checked statistically against exact marginals)."""
import pytest
import torch

from sgl_spec.speculative.sampling import (
    filtered_probs,
    greedy_accept,
    rejection_accept,
    sample_from_probs,
    verify_chain,
)

TOP_K_ALL = 1 << 30  # SGLang's "no top-k" value


# ---- greedy -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "draft, target, n_acc",
    [
        ([5, 6, 7], [5, 6, 7, 9], 4),  # all accepted + bonus
        ([5, 6, 7], [1, 6, 7, 9], 1),  # first draft wrong: only the correction
        ([5, 6, 7], [5, 2, 7, 9], 2),  # later matches after a mismatch do not count
        ([5, 6, 7], [5, 6, 3, 9], 3),
        ([4], [4, 8], 2),  # gamma = 1
        ([4], [3, 8], 1),
    ],
)
def test_greedy_accept_cases(draft, target, n_acc):
    tokens, lens = greedy_accept(torch.tensor([draft]), torch.tensor([target]))
    assert lens.tolist() == [n_acc]
    # Emitted run: accepted drafts then the target's token at the first mismatch (or the bonus).
    assert tokens[0, :n_acc].tolist() == draft[: n_acc - 1] + [target[n_acc - 1]]


def test_greedy_accept_batched_rows_independent():
    draft = torch.tensor([[1, 2], [1, 2], [3, 3]])
    target = torch.tensor([[1, 2, 0], [1, 5, 0], [4, 3, 3]])
    tokens, lens = greedy_accept(draft, target)
    assert lens.tolist() == [3, 2, 1]
    assert tokens[0].tolist() == [1, 2, 0] and tokens[1, :2].tolist() == [1, 5] and tokens[2, 0] == 4


# ---- filtering (must match SGLang's sampler semantics) ------------------------------------------------------------
def _filtered_ref(logits, t, k, p, m):
    """Row-by-row transcription of sglang.srt.layers.sampler.top_k_top_p_min_p_sampling_from_probs_torch."""
    probs = torch.softmax(logits.double() / t, -1)
    ps, idx = probs.sort(descending=True)
    csum = ps.cumsum(-1)
    ps = ps.clone()
    ps[torch.arange(len(ps)) >= k] = 0
    ps[(csum - probs.sort(descending=True).values) > p] = 0
    ps[ps < ps[0] * m] = 0
    out = torch.zeros_like(probs)
    out[idx] = ps / ps.sum()
    return out


def test_filtered_probs_matches_sglang_semantics():
    g = torch.Generator().manual_seed(0)
    N, V = 64, 11
    logits = torch.randn(N, V, generator=g) * 2
    t = torch.rand(N, generator=g) * 1.5 + 0.3
    k = torch.randint(1, V + 2, (N,), generator=g)
    k[::5] = TOP_K_ALL
    p = torch.rand(N, generator=g) * 0.9 + 0.1
    p[::3] = 1.0
    m = torch.rand(N, generator=g) * 0.3
    m[::4] = 0.0
    got = filtered_probs(logits, t, k, p, m)
    for i in range(N):
        ref = _filtered_ref(logits[i], t[i].item(), k[i].item(), p[i].item(), m[i].item())
        # fp32 softmax/cumsum vs fp64 reference: 1e-5 absolute is ~50 ulps of the largest probabilities.
        torch.testing.assert_close(got[i].double(), ref, atol=1e-5, rtol=0)
    assert torch.allclose(got.sum(-1), torch.ones(N), atol=1e-5)


def test_filtered_probs_no_filter_is_softmax_and_top1_is_argmax():
    logits = torch.tensor([[0.1, 2.0, -1.0, 1.5]])
    t = torch.tensor([0.5])
    torch.testing.assert_close(filtered_probs(logits, t), torch.softmax(logits / 0.5, -1))
    one_hot = filtered_probs(logits, t, top_ks=torch.tensor([1]))
    assert one_hot.tolist() == [[0.0, 1.0, 0.0, 0.0]]


def test_sample_from_probs_inverse_cdf_skips_zero_mass():
    probs = torch.tensor([[0.0, 0.25, 0.0, 0.75, 0.0]] * 4)
    u = torch.tensor([0.0, 0.2499, 0.25, 0.999999])
    assert sample_from_probs(probs, u).tolist() == [1, 1, 3, 3]
    g = torch.Generator().manual_seed(1)
    many = torch.rand(5000, 7, generator=g) * (torch.rand(5000, 7, generator=g) > 0.5)
    many[:, 0] += 1e-3  # every row needs positive mass
    tok = sample_from_probs(many, torch.rand(5000, generator=g))
    assert (many.gather(1, tok[:, None]) > 0).all()


# ---- rejection sampling: exact cases --------------------------------------------------------------------------------
def test_rejection_identical_distributions_accept_everything():
    g = torch.Generator().manual_seed(2)
    B, G, V = 32, 3, 8
    q = torch.softmax(torch.randn(B, G, V, generator=g), -1)
    p = torch.cat([q, torch.softmax(torch.randn(B, 1, V, generator=g), -1)], 1)
    d = sample_from_probs(q.reshape(-1, V), torch.rand(B * G, generator=g)).view(B, G)
    tokens, lens = rejection_accept(d, q, p, torch.rand(B, G, generator=g), torch.rand(B, generator=g))
    assert (lens == G + 1).all()
    assert torch.equal(tokens[:, :G], d)


def test_rejection_disjoint_support_rejects_first_and_resamples_from_target():
    V = 6
    q = torch.zeros(1, 2, V)
    q[0, :, 0] = 1.0  # draft always proposes token 0
    p = torch.zeros(1, 3, V)
    p[0, :, 4] = 1.0  # target never emits token 0
    tokens, lens = rejection_accept(torch.tensor([[0, 0]]), q, p, torch.tensor([[0.0, 0.0]]), torch.tensor([0.5]))
    assert lens.tolist() == [1] and tokens[0, 0] == 4


# ---- rejection sampling preserves the target distribution -----------------------------------------------------------
def _markov_spec_decode(Lp, Lq, start, n_out, G, sampling, greedy_rows, gen):
    """Run chain speculation on N independent "requests" whose target/draft next-token logits depend on the previous
    token (Markov tables Lp, Lq [V, V]), until each has n_out tokens. Uses verify_chain exactly like the worker."""
    N = start.shape[0]
    V = Lp.shape[0]
    out = torch.full((N, n_out + G + 1), -1, dtype=torch.int64)
    count = torch.zeros(N, dtype=torch.int64)
    last = start.clone()
    rows = torch.arange(N)
    while (count < n_out).any():
        prev, drafts, qs = last, [], []
        for _ in range(G):
            q = filtered_probs(Lq[prev], **sampling)
            d = sample_from_probs(q, torch.rand(N, generator=gen))
            d = torch.where(greedy_rows, Lq[prev].argmax(-1), d)
            drafts.append(d)
            qs.append(q)
            prev = d
        drafts = torch.stack(drafts, 1)
        window = torch.cat([last[:, None], drafts], 1)  # verify row j is conditioned on window[:, j]
        tokens, lens = verify_chain(
            drafts,
            Lp[window],
            draft_probs=torch.stack(qs, 1),
            greedy_rows=greedy_rows,
            u_accept=torch.rand(N, G, generator=gen),
            u_final=torch.rand(N, generator=gen),
            **sampling,
        )
        j = torch.arange(G + 1)
        write = (j[None, :] < lens[:, None]) & (count[:, None] < n_out)
        cols = (count[:, None] + j[None, :]).clamp(max=out.shape[1] - 1)
        out[rows[:, None].expand_as(cols)[write], cols[write]] = tokens[write]
        count = count + torch.where(count < n_out, lens, torch.zeros_like(lens))
        last = tokens[rows, lens - 1]
    return out[:, :n_out]


def _exact_marginals(Lp, start_token, n_out, sampling_row):
    V = Lp.shape[0]
    P = filtered_probs(Lp, **{k: v[:1].expand(V) for k, v in sampling_row.items()}).double()
    m = torch.zeros(V, dtype=torch.float64)
    m[start_token] = 1.0
    res = []
    for _ in range(n_out):
        m = m @ P
        res.append(m)
    return torch.stack(res)


def _tv(samples, exact):
    V = exact.shape[0]
    emp = torch.bincount(samples, minlength=V).double() / samples.numel()
    return 0.5 * (emp - exact).abs().sum().item()


@pytest.mark.parametrize(
    "name, sampling",
    [
        ("plain", dict(temperatures=1.0)),
        ("temp0.6_topk4", dict(temperatures=0.6, top_ks=4)),
        ("temp1.4_topp0.8", dict(temperatures=1.4, top_ps=0.8)),
        ("minp0.1_topk6", dict(temperatures=0.9, top_ks=6, min_ps=0.1)),
    ],
)
def test_rejection_sampling_preserves_target_marginals(name, sampling):
    """Empirical distribution of the t-th emitted token vs. the exact target marginal (Markov chain over V=8
    tokens, gamma=3). N=40000 requests: the expected TV of an 8-bin empirical distribution is ~0.005, so 0.02 is
    a 4x margin that a wrong rule (e.g. accepting with p instead of p/q, or skipping the filter on p) exceeds."""
    gen = torch.Generator().manual_seed(sum(map(ord, name)))  # stable across runs (str hash is salted)
    V, G, N, n_out = 8, 3, 40000, 6
    Lp = torch.randn(V, V, generator=gen) * 1.5
    Lq = Lp + torch.randn(V, V, generator=gen) * 1.0  # imperfect draft: acceptance well below 1
    dtypes = dict(temperatures=torch.float32, top_ks=torch.int64, top_ps=torch.float32, min_ps=torch.float32)
    batch = {k: torch.full((N,), v, dtype=dtypes[k]) for k, v in sampling.items()}
    start = torch.zeros(N, dtype=torch.int64)
    out = _markov_spec_decode(Lp, Lq, start, n_out, G, batch, torch.zeros(N, dtype=torch.bool), gen)
    exact = _exact_marginals(Lp, 0, n_out, batch)
    for t in range(n_out):
        assert _tv(out[:, t], exact[t]) < 0.02, (name, t)


def test_mixed_batch_per_request_temperature_and_greedy_rows():
    """One batch, three kinds of request: greedy rows must follow the target argmax chain exactly; the two sampled
    groups (different temperature / top-k) must each match their own target marginals."""
    gen = torch.Generator().manual_seed(7)
    V, G, n_out = 8, 3, 5
    Lp = torch.randn(V, V, generator=gen) * 1.5
    Lq = Lp + torch.randn(V, V, generator=gen)
    n_each = 30000
    N = 2 * n_each + 16
    temps = torch.cat([torch.full((n_each,), 0.5), torch.full((n_each,), 1.3), torch.ones(16)])
    topk = torch.cat([torch.full((n_each,), 3), torch.full((n_each,), TOP_K_ALL), torch.ones(16, dtype=torch.int64)])
    greedy = topk == 1
    batch = dict(temperatures=temps, top_ks=topk)
    out = _markov_spec_decode(Lp, Lq, torch.zeros(N, dtype=torch.int64), n_out, G, batch, greedy, gen)

    tok, chain = 0, []
    for _ in range(n_out):
        tok = Lp[tok].argmax().item()
        chain.append(tok)
    assert (out[greedy] == torch.tensor(chain)).all()
    for lo, hi in ((0, n_each), (n_each, 2 * n_each)):
        exact = _exact_marginals(Lp, 0, n_out, {k: v[lo:hi] for k, v in batch.items()})
        for t in range(n_out):
            assert _tv(out[lo:hi, t], exact[t]) < 0.02, (lo, t)
    # top-k = 3 group: every emitted token is within the top 3 of its target row.
    prev = torch.cat([torch.zeros(n_each, 1, dtype=torch.int64), out[:n_each, :-1]], 1)
    top3 = Lp[prev].topk(3, dim=-1).indices
    assert (top3 == out[:n_each, :, None]).any(-1).all()


def test_acceptance_simulator_keeps_the_greedy_output_and_sets_acceptance(monkeypatch):
    """SGL_SPEC_SIMULATE_ACCEPT (accept.py): drafts that all match are kept i.i.d. with probability α, so the
    accepted prefix of γ drafts has mean (α - α^(γ+1)) / (1 - α); the emitted tokens stay the target's argmax."""
    from sgl_spec.speculative import accept

    monkeypatch.setenv(accept.SIMULATE_ENV, "0.8")
    alpha = accept.simulated_alpha()
    assert alpha == 0.8
    torch.manual_seed(0)
    B, G, V = 4000, 6, 11
    logits = torch.randn(B, G + 1, V)
    drafts = logits[:, :-1].argmax(-1)  # the target accepts every draft
    tokens, lens = accept.accept(drafts, logits, None, simulate=alpha)
    assert torch.equal(tokens, logits.argmax(-1))
    want = (alpha - alpha ** (G + 1)) / (1 - alpha)
    assert abs(float((lens - 1).float().mean()) - want) < 0.05  # sd of the mean ~0.03 at 4000 rows
    assert torch.equal(accept.accept(drafts, logits, None)[1], torch.full((B,), G + 1))  # off: all accepted
    monkeypatch.setenv(accept.SIMULATE_ENV, "1.5")
    with pytest.raises(ValueError, match="must be in"):
        accept.simulated_alpha()
