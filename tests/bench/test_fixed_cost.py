"""bench/fixed_cost.py (issue 2's targets as fixed-cost budgets) and bench/launch_floor.py's arguments, on the CPU."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import fixed_cost as fc  # noqa: E402


def _row(kernel, ctx, batch, us, nbytes, base_us=None, page=64):
    r = dict(kernel=kernel, ctx=ctx, batch=batch, page=page, us=us, bytes=nbytes, bw_frac=nbytes / us / 3e6)
    if base_us:
        r.update(baseline_ms=base_us / 1e3, speedup=base_us / us)
    return r


def _grid():
    """Draft and baseline times exactly f + bytes / R: f = 13 / 15 µs, R = 2.9 / 3.0 TB/s."""
    rows = []
    for ctx in (65536, 131072, 262144):
        draft_b, base_b = ctx * 8 * 140, ctx * 8 * 512
        base = 15 + base_b / 3.0e6
        rows.append(_row("bf16_fa3", ctx, 1, base, base_b))
        rows.append(_row("draft_dense", ctx, 1, 13 + draft_b / 2.9e6, draft_b, base))
    return dict(rows=rows, copy_gbps=3000.0, device="test")


def test_fit_recovers_the_fixed_cost_and_the_rate():
    f, rate = fc.fit([(1e8, 5 + 1e8 / 3e6), (3e8, 5 + 3e8 / 3e6), (7e8, 5 + 7e8 / 3e6)])
    assert f == pytest.approx(5.0) and rate == pytest.approx(3.0)


def test_budget_is_the_target_time_less_the_bytes():
    cells = fc.target_cells(_grid())
    dense = {(c["ctx"], c["target"]): c for c in cells if c["kernel"] == "draft_dense"}
    assert set(dense) == {(65536, "3.3x"), (131072, "3.3x"), (262144, "3.3x"), (131072, "80% of copy")}
    for (ctx, target), c in dense.items():
        stream = ctx * 8 * 140 / 2.9e6
        assert c["f_us"] == pytest.approx(13.0) and c["rate_tbs"] == pytest.approx(2.9)
        if target == "3.3x":
            assert c["need_us"] == pytest.approx((15 + ctx * 8 * 512 / 3e6) / 3.3)
        else:  # bytes at 80% of the 3000 GB/s copy
            assert c["need_us"] == pytest.approx(ctx * 8 * 140 / 2.4e6)
        assert c["f_need_us"] == pytest.approx(c["need_us"] - stream)
        assert c["met"] == (c["f_us"] <= c["f_need_us"])  # exact data: the measured ratio and the budget agree


def test_floor_of_the_launch_structure_is_attached_at_batch_1():
    floor = dict(rows=[dict(case="draft_b1", us=7.7), dict(case="verify_b1", us=7.4)])
    cells = fc.target_cells(_grid(), floor=floor)
    assert cells and all(c["floor_us"] == 7.7 for c in cells)


def test_committed_grid_has_every_target_cell(tmp_path):
    out = tmp_path / "fc.json"
    fc.main(["--out", str(out)])
    res = json.loads(out.read_text())
    copy_tbs = res["copy_gbps"] / 1e3  # the grid's own copy bandwidth, as fixed_cost.py reports it
    kinds = {}
    for c in res["cells"]:
        kinds[(c["kernel"], c["target"])] = kinds.get((c["kernel"], c["target"]), 0) + 1
        # a streaming rate near the grid machine's copy bandwidth (H100 3.0, H200 4.25 TB/s), not a bad fit
        assert 0.5 * copy_tbs < c["rate_tbs"] < 1.25 * copy_tbs, c
    # contexts x batches x page sizes of the targets
    assert kinds == {("draft_dense", "3.3x"): 12, ("verify_nq5_scores", "1.75x"): 18, ("draft_sparse", "12x"): 6,
                     ("draft_dense", "80% of copy"): 6}


def test_launch_floor_arguments():
    import launch_floor as lf

    assert lf.parse_args(["--out", "x"]).cases == list(lf.CASES)
    with pytest.raises(SystemExit):
        lf.parse_args(["--out", "x", "--cases", "draft_b1,nope"])
