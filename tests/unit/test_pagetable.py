"""Draft page policies (sgl_spec/pages/policies.py) on the real attention backend, and the flag that picks them.

Unit tests drive ``QuantSpecAttnBackend`` the way SGLang does (tests/unit/test_backend.py's ``Sim``: real pool, real
ring, real quantized pages, fp32) and check which pages each policy hands to ``draft_mode``.
tests/server/test_policies_server.py proves the policies stay lossless: greedy output with each of them equals the
INT8-only mode's.
"""
import dataclasses
import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from harness import server_env
from sgl_spec.pages import policies as pagetable
from sgl_spec.kvcache.backend import QuantSpecAttnBackend
from sgl_spec.kernels.verify_attention.ref import verify_attention as verify_ref
from test_backend import LAYERS, Sim, make_data

P = 32
GAMMA = 4


def make_sim(policy, ratio=0.3, min_pages=2, sink_pages=1):
    """A speculative Sim whose backend is built with ``--quantspec-draft-pages policy`` (γ = 4, P = 32)."""
    sim = Sim(P=P, speculative=True)
    cfg = dataclasses.replace(sim.backend.cfg, draft_pages=policy, topk_ratio=ratio, min_pages=min_pages,
                              sink_pages=sink_pages)
    runner = SimpleNamespace(device="cpu", req_to_token_pool=SimpleNamespace(req_to_token=sim.rtt),
                             token_to_kv_pool=sim.pool)
    sim.backend = QuantSpecAttnBackend(runner, "torch_native", cfg)
    return sim


def logical(sim, slot, ids, count):
    """Physical page ids -> logical page indices of request ``slot`` (ascending, as select_topk_pages writes)."""
    table = [int(sim.rtt[slot, j * P]) // P for j in range(sim.rtt.shape[1] // P)]
    return [table.index(int(i)) for i in ids[: int(count)]]


def expected_topk(total, n, k, sinks, forced):
    """Sinks, then the k - sinks best of the others by score (ties -> lower page), forced page first."""
    cands = [j for j in range(sinks, n) if j != forced]
    best = sorted(cands, key=lambda j: (-total[j], j))[: k - sinks - (forced is not None)]
    return sorted(list(range(sinks)) + best + ([forced] if forced is not None else []))


def budget(n, ratio=0.3, min_pages=2, sinks=1):
    k = min(n, max(min_pages, int(torch.ceil(torch.tensor(ratio, dtype=torch.float32) * n))))
    return max(k, min(sinks, n))


# ---- policy objects ------------------------------------------------------------------------------------------------
def test_policy_factory_and_what_the_verify_computes():
    sim = make_sim("streaming")
    assert sim.backend.page_scores is None and not sim.backend.keep_verify_q  # streaming needs no scores
    assert isinstance(pagetable.draft_pages(sim.backend), pagetable.StreamingPages)
    last = make_sim("topk-last")
    assert last.backend.keep_verify_q and last.backend.page_scores is not None
    from sgl_spec.experimental.topk_last import TopkLastPages

    assert type(pagetable.draft_pages(last.backend)) is TopkLastPages
    topk = make_sim("topk")
    assert not topk.backend.keep_verify_q and type(pagetable.draft_pages(topk.backend)) is pagetable.TopkPages
    dense = make_sim("topk")
    dense.backend.cfg = dataclasses.replace(dense.backend.cfg, dense_draft=True)
    assert pagetable.draft_pages(dense.backend).dense
    assert pagetable.draft_pages(SimpleNamespace()).dense  # a stock backend: dense (its own target view)
    assert pagetable.draft_pages(SimpleNamespace()).for_round(None, None, None) == (None, None)


def test_streaming_takes_sinks_and_newest_pages_every_round():
    sim = make_sim("streaming")
    prompts = {1: 7 * P + 5, 2: 3 * P, 3: 20}  # slot -> committed length
    data = make_data(list(prompts.values()))
    sim.forward("EXTEND", [(s, i, 0, n) for i, (s, n) in enumerate(prompts.items())], data)
    pages = pagetable.draft_pages(sim.backend)
    rpi = torch.tensor([3, 1, 2])  # batch order differs from slot order
    ws = torch.tensor([prompts[3], prompts[1], prompts[2]])
    for has_pages in (torch.tensor([False] * 3), torch.tensor([True] * 3)):  # no memory: the same every round
        ids, count = pages.for_round(rpi, ws, has_pages)
        assert ids.shape == (LAYERS, 3, pages.kcap) and count.dtype == torch.int32
        for l in range(LAYERS):
            # 7 complete pages: k = max(2, ceil(2.1)) = 3 -> sink 0 + newest 5, 6; 3 pages: k = 2 -> 0, 2; none: 0
            assert logical(sim, 1, ids[l, 1], count[l, 1]) == [0, 5, 6]
            assert logical(sim, 2, ids[l, 2], count[l, 2]) == [0, 2]
            assert count[l, 0] == 0
            assert (ids[l, 1, 3:] == 0).all() and (ids[l, 0] == 0).all()
    pages.after_verify(rpi, ws, ws + 1)  # nothing to do, and no scores to read
    assert torch.equal(pages.for_round(rpi, ws, has_pages)[0], ids)


@pytest.mark.parametrize("policy", ["topk", "topk-last"])
def test_first_round_after_prefill_is_sinks_and_newest_pages(policy):
    sim = make_sim(policy)
    data = make_data([9 * P + 3])
    sim.forward("EXTEND", [(2, 0, 0, 9 * P + 3)], data)
    pages = pagetable.draft_pages(sim.backend)
    ids, count = pages.for_round(torch.tensor([2]), torch.tensor([9 * P + 3]), torch.tensor([False]))
    for l in range(LAYERS):
        assert logical(sim, 2, ids[l, 0], count[l, 0]) == [0, 7, 8]  # 9 pages: k = ceil(0.3 * 9) = 3


def _verify_round(policy, lens, accepted, seed=0):
    """Prefill two requests (slots 2 and 1), run one TARGET_VERIFY of γ+1 rows each, then ``after_verify`` with
    ``accepted[b]`` accepted drafts. Returns (sim, pages, data, scores the verify left)."""
    sim = make_sim(policy)
    data = make_data([n + GAMMA + 1 for n in lens], seed=seed)
    slots = [2, 1]
    sim.forward("EXTEND", [(s, b, 0, n) for b, (s, n) in enumerate(zip(slots, lens))], data)
    pages = pagetable.draft_pages(sim.backend)
    if sim.backend.page_scores is not None:
        sim.backend.page_scores.fill_(float("nan"))  # poison: only what a verify (or the rescoring) writes is read
    sim.forward("TARGET_VERIFY", [(s, b, n, GAMMA + 1) for b, (s, n) in enumerate(zip(slots, lens))], data)
    left = None if sim.backend.page_scores is None else sim.backend.page_scores.clone()
    rpi, ws = torch.tensor(slots), torch.tensor(lens)
    pages.after_verify(rpi, ws, ws + torch.tensor(accepted) + 1)
    return sim, pages, data, left


def _row_scores(sim, data, b, slot, start, rows):
    """Reference page scores (verify_attention_ref over the whole window, score_rows=rows) per layer [L, Hkv, MAXP]."""
    out = []
    for l in range(LAYERS):
        q = data[b][l][0][start:start + GAMMA + 1].unsqueeze(0)
        hot_k, hot_v = sim.pool.hot(l)
        sc = torch.full((1, 2, sim.backend.max_pages), float("nan"))
        verify_ref(q, sim.pool.page_store(l), sim.backend.page_table(torch.tensor([slot])), torch.tensor([start]),
                   hot_k, hot_v, torch.tensor([slot]), sim.layers[l].scaling, scores=sc, score_rows=rows)
        out.append(sc[0])
    return torch.stack(out)


# request 0: the window 8P+29 … 8P+33 completes page 8; request 1: 5P+2 … 5P+6 stays inside page 5
LENS = [8 * P + 29, 5 * P + 2]


@pytest.mark.parametrize("accepted", [(4, 0), (2, 3), (0, 4), (3, 1)])
def test_topk_last_selects_by_the_last_accepted_row(accepted):
    sim, pages, data, left = _verify_round("topk-last", LENS, accepted)
    assert torch.isnan(left).all(), "topk-last must not score inside the verify (its rows are not known yet)"
    assert sim.backend.verify_q.shape == (LAYERS, 6, GAMMA + 1, 4, 16)
    ids, count = pages.for_round(torch.tensor([1, 2]), torch.tensor(LENS[::-1]) + torch.tensor(accepted[::-1]) + 1,
                                 torch.tensor([True, True]))
    for b, (slot, row) in enumerate(zip([2, 1], [1, 0])):
        n_acc = accepted[b]
        ref = _row_scores(sim, data, b, slot, LENS[b], (n_acc, n_acc))  # one row: the last accepted token's
        n_old = LENS[b] // P  # pages the reference scores (< window start // P)
        got = sim.backend.page_scores[:, b, :, :n_old]
        torch.testing.assert_close(got, ref[:, :, :n_old], atol=1e-5, rtol=0)  # same fp32 math, other shapes
        n_next = (LENS[b] + n_acc + 1) // P
        forced = n_old if n_next > n_old else None  # the page the window completed: always taken
        for l in range(LAYERS):
            want = expected_topk(ref[l, :, :n_old].sum(0).tolist(), n_next, budget(n_next), 1, forced)
            assert logical(sim, slot, ids[l, row], count[l, row]) == want


def test_topk_uses_the_first_draft_row_and_the_bonus_row():
    """The same round under the default policy: the verify itself scores with rows (1, γ)."""
    accepted = (2, 3)
    sim, pages, data, left = _verify_round("topk", LENS, accepted)
    assert sim.backend.verify_q is None
    for b, slot in enumerate([2, 1]):
        ref = _row_scores(sim, data, b, slot, LENS[b], (1, GAMMA))
        n_old = LENS[b] // P
        torch.testing.assert_close(left[:, b, :, :n_old], ref[:, :, :n_old], atol=1e-5, rtol=0)
    ids, count = pages.for_round(torch.tensor([2]), torch.tensor([LENS[0] + 3]), torch.tensor([True]))
    ref = _row_scores(sim, data, 0, 2, LENS[0], (1, GAMMA))
    for l in range(LAYERS):
        n_next = (LENS[0] + 3) // P  # 9: page 8 was completed by the window -> forced
        want = expected_topk(ref[l, :, :8].sum(0).tolist(), n_next, budget(n_next), 1, 8)
        assert logical(sim, 2, ids[l, 0], count[l, 0]) == want


@pytest.mark.parametrize("policy", ["topk", "streaming", "topk-last"])
def test_memory_accounting_per_policy(policy):
    """plugin._available_bytes reserves what the backend will allocate: page scores unless streaming, and the kept
    verify queries (model dtype, [L, slots, γ+1, Hq, D]) for topk-last."""
    from configurator import kv_configurator
    from sgl_spec import plugin
    from sgl_spec.config import QuantSpecConfig
    from sgl_spec.kvcache.format import KVFormat
    from sgl_spec.kvcache.pool import ring_bytes, score_bytes

    cfg = QuantSpecConfig(speculative=True, page_size=64, num_draft_steps=4, topk_ratio=0.07, min_pages=8,
                          sink_pages=1, dense_draft=False, draft_pages=policy)
    mc = SimpleNamespace(get_num_kv_heads=lambda tp: 8 // tp, head_dim=128, context_len=4096, num_attention_heads=32)
    fmt = KVFormat(64, 4, 128)
    fixed = ring_bytes(fmt, 3, 16, torch.bfloat16)
    if policy != "streaming":
        fixed += score_bytes(fmt, 3, 16, 4096)
    if policy == "topk-last":
        fixed += 3 * 16 * 5 * 16 * 128 * 2  # 16 query heads per rank at tp 2
    with kv_configurator(attn_tp_size=2, attn_dp_size=1,
                         server_args=SimpleNamespace(_quantspec=cfg, max_running_requests=15), is_draft_worker=False,
                         model_config=mc, layer_info=SimpleNamespace(num_effective_layers=3),
                         model_dtype=torch.bfloat16) as kvc:
        assert plugin._available_bytes(10**9, kvc, 0) == 10**9 - fixed


# ---- the flag ------------------------------------------------------------------------------------------------------
@pytest.mark.server
def test_draft_pages_flag(tiny_llama_fp32, tmp_path):
    """Parsed the way launch_server parses it (plugin loaded), in one subprocess."""
    cases = {
        "default": ["--spec-algo", "quantspec"],
        "streaming": ["--spec-algo", "quantspec", "--quantspec-draft-pages", "streaming"],
        "last": ["--spec-algo", "quantspec", "--quantspec-draft-pages", "topk-last"],
        "with dense": ["--spec-algo", "quantspec", "--quantspec-dense-draft", "--quantspec-draft-pages", "topk"],
        "int8 only": ["--attention-backend", "quantspec", "--quantspec-draft-pages", "topk"],
        "bad choice": ["--spec-algo", "quantspec", "--quantspec-draft-pages", "lru"],
        "options": ["--spec-algo", "quantspec", "--quantspec-recent-share", "0.25", "--quantspec-score-smoothing",
                    "max"],
        "options with streaming": ["--spec-algo", "quantspec", "--quantspec-draft-pages", "streaming",
                                   "--quantspec-recent-share", "0.25"],
        "bad share": ["--spec-algo", "quantspec", "--quantspec-recent-share", "1.5"],
        "bad ema": ["--spec-algo", "quantspec", "--quantspec-score-smoothing", "ema", "--quantspec-score-ema", "1"],
        "per-request": ["--spec-algo", "quantspec", "--quantspec-draft-pages", "per-request"],
    }
    script = textwrap.dedent("""
        import json, sys
        import sglang.srt.entrypoints.engine as engine  # loaded first, as Engine(...) does: it builds its own record
        from sglang.srt.plugins import load_plugins
        from sglang.srt.plugins.hook_registry import HookRegistry
        load_plugins()
        HookRegistry.apply_hooks()
        from sglang.srt.server_args import prepare_server_args

        def resolve(sa):  # launch_server resolves the record here (0.5.17: already inside __post_init__)
            if hasattr(sa, "resolve_once"):
                sa.resolve_once()
            return sa

        res = {}
        for name, flags in json.loads(sys.argv[1]).items():
            try:
                sa = resolve(prepare_server_args(["--model-path", sys.argv[2], "--device", "cpu", *flags]))
                q = sa._quantspec
                res[name] = [q.draft_pages, q.needs_page_scores, q.recent_share, q.score_smoothing, q.score_ema]
            except SystemExit as e:
                res[name] = f"SystemExit {e.code}"
            except Exception as e:
                res[name] = f"{type(e).__name__}: {e}"
        try:  # Engine(**kwargs) skips argparse's choices: the flag arrives as a keyword of the record Engine builds
            resolve(engine.Engine.server_args_class(model_path=sys.argv[2], device="cpu",
                                                    speculative_algorithm="quantspec", quantspec_draft_pages="lru"))
        except ValueError as e:
            res["kwargs"] = str(e)
        # sgl_spec/experimental/ (topk-last, per-request) stays out of a server that does not name them
        import sgl_spec.kvcache.backend, sgl_spec.pages.policies as p, sgl_spec.speculative.worker
        res["experimental imported"] = sorted(m for m in sys.modules if m.startswith("sgl_spec.experimental"))
        res["study classes"] = [p.policy_class(n).__name__ for n in ("topk-last", "per-request")]
        print("RESULT " + json.dumps(res))
    """)
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(cases), str(tiny_llama_fp32)], env=server_env(),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, proc.stdout[-2000:] + proc.stderr[-3000:]
    res = json.loads(line[0][len("RESULT "):])
    assert res["default"] == ["topk-head", True, 0.0, "none", 0.5] and res["last"][:2] == ["topk-last", True]
    assert res["streaming"][:2] == ["streaming", False] and res["per-request"][:2] == ["per-request", True]
    assert res["options"] == ["topk-head", True, 0.25, "max", 0.5]
    assert res["options with streaming"].startswith("ValueError: --quantspec-recent-share tunes the score-driven")
    assert res["bad share"].startswith("ValueError: --quantspec-recent-share must be in [0, 1]")
    assert res["bad ema"].startswith("ValueError: --quantspec-score-ema must be in [0, 1)")
    assert res["with dense"].startswith("ValueError: --quantspec-draft-pages") and "dense-draft" in res["with dense"]
    assert res["int8 only"].startswith("ValueError: --quantspec-draft-pages only applies with")
    assert res["bad choice"] == "SystemExit 2"
    assert res["kwargs"].startswith("--quantspec-draft-pages must be one of topk, streaming, topk-last, per-request")
    assert res["experimental imported"] == [] and res["study classes"] == ["TopkLastPages", "PerRequestPages"]
