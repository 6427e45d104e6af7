"""Sampling penalties under ``--spec-algo quantspec`` equal the non-speculative INT8 mode's (real SGLang server, CPU).

SGLang's own speculative decoding applies frequency/presence/repetition penalties in a relaxed form (the tokens a
round accepts before its last one never count), so a penalized request's output drifts from non-speculative
decoding (on these prompts the relaxed form's penalized output equals the *unpenalized* one for 7 of 8 prompts). On
SGLang's non-overlap scheduler (the CPU default) the worker applies them exactly (sgl_spec/speculative/penalties.py):
every window row sees the penalties after the drafts before it, and the penalizers see every accepted token. The
reference is the INT8-only mode on the same (non-overlap) scheduler; one case runs a request at a time, the others
(and min_new_tokens) batched. Repetition penalties are covered by
tests/unit/test_penalties.py: SGLang's own non-speculative path compiles its scaling with torch.compile, which needs a
C++ toolchain on this CPU machine.
"""
from concurrent.futures import ThreadPoolExecutor

import pytest

from test_quantspec_server import PROMPTS

pytestmark = [pytest.mark.server, pytest.mark.timeout(1200)]

N_NEW = 40
CASES = [dict(frequency_penalty=2.0), dict(presence_penalty=2.0), dict(frequency_penalty=0.8, presence_penalty=0.6)]
IDX = list(range(0, len(PROMPTS), 3))  # 8 prompts: one page, page boundaries, several pages, a radix hit


def _gen(srv, ids, **sp):
    params = {"max_new_tokens": N_NEW, "temperature": 0.0, "ignore_eos": True, **sp}
    return srv._json(srv.post("/generate", {"input_ids": ids, "sampling_params": params}))["output_ids"]


def _gen_all(srv, idx, sp_of, batch):
    """The outputs of PROMPTS[i] for i in idx with sampling params ``sp_of(k)``: one request at a time, or all
    together (one batch: rows of other requests beside each penalized row)."""
    if not batch:
        return [_gen(srv, PROMPTS[i], **sp_of(k)) for k, i in enumerate(idx)]
    with ThreadPoolExecutor(len(idx)) as ex:
        return list(ex.map(lambda k: _gen(srv, PROMPTS[idx[k]], **sp_of(k)), range(len(idx))))


def _batched(case):
    """Case 0 runs one request at a time (batch 1), the others batched: the same outputs either way."""
    return case != 0


def _min_new(plain):
    """min_new_tokens with a stop token the unpenalized output emits early: it must not end before 10 tokens."""
    return dict(min_new_tokens=10, ignore_eos=False, stop_token_ids=[plain[2]])


@pytest.fixture(scope="module")
def reference(tiny_int8_server):
    """Non-speculative INT8 mode on SGLang's non-overlap scheduler (tests/server/conftest.py), batched like the
    speculative side."""
    srv = tiny_int8_server
    srv.flush_cache()
    plain = [_gen(srv, PROMPTS[i]) for i in IDX]
    out = {c: _gen_all(srv, IDX, lambda k, sp=sp: sp, _batched(c)) for c, sp in enumerate(CASES)}
    out["min_new"] = _gen_all(srv, IDX, lambda k: _min_new(plain[k]), True)
    return plain, out


@pytest.fixture(scope="module")
def spec_server(tiny_spec_server):
    tiny_spec_server.flush_cache()  # shared with test_quantspec_server.py (tests/server/conftest.py)
    return tiny_spec_server


@pytest.mark.parametrize("case", range(len(CASES)))
def test_penalized_output_equals_int8_mode(reference, spec_server, case):
    plain, ref = reference
    got = _gen_all(spec_server, IDX, lambda k: CASES[case], _batched(case))
    assert sum(r != p for r, p in zip(ref[case], plain)) >= len(IDX) // 2, "the penalty must change most outputs"
    bad = [i for i, g, r in zip(IDX, got, ref[case]) if g != r]
    assert not bad, f"{CASES[case]}: prompts whose output differs from the INT8 mode: {bad}"


def test_min_new_tokens_inside_a_window(reference, spec_server):
    plain, ref = reference
    got = _gen_all(spec_server, IDX, lambda k: _min_new(plain[k]), True)
    # without min_new_tokens each would stop at its third token (or earlier); with it none ends before 10 tokens
    assert all(len(r) >= 10 for r in ref["min_new"])
    assert got == ref["min_new"]


def test_concurrent_mixed_penalties_equal_int8_mode(reference, spec_server):
    """Penalized and unpenalized requests in one batch: each row uses its own request's penalties and state."""
    plain, ref = reference
    jobs = [(k, CASES[k % len(CASES)] if k % 4 else {}) for k in range(len(IDX))]
    with ThreadPoolExecutor(len(jobs)) as ex:
        got = list(ex.map(lambda job: _gen(spec_server, PROMPTS[IDX[job[0]]], **job[1]), jobs))
    want = [ref[k % len(CASES)][k] if k % 4 else plain[k] for k, _ in jobs]
    assert got == want
