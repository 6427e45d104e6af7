#!/usr/bin/env python
"""What score emission + score-driven page selection cost inside a real speculative round (issue 4: <= 6%).

Two bench_e2e.py runs of the same cells with ``SGL_SPEC_TIMING=N`` (sgl_spec/speculative/phase_timer.py; bench_e2e records the
median phase times of each cell as ``round_phases``): the server default (score-driven pages, ``topk-head``) and the
score-free control (``--quantspec-draft-pages streaming``: same page budget, no page scores in the verify, tables
from positions only). Per cell:

  extra_ms = Σ over the phases pages, verify, accept of (GPU ms scored - GPU ms score-free)
  share    = extra_ms / round wall ms of the scored server

The pages phase holds the table refresh (select_topk_pages + table update), the verify phase the verify forwards
whose attention kernel also writes the page scores, the accept phase the scores -> per-slot pages hand-off; every
other phase (the γ drafts, the scheduler outside the worker) is the same work in both. The draft reads the same
number of pages in both, so the drafts are excluded rather than subtracted (their tables differ, their cost not).

  python bench/selection_cost.py --scored A/e2e.json --free B/e2e.json --out bench/results/selection_inserver.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PHASES = ("pages", "verify", "accept")


def cells(doc: dict) -> dict:
    return {(r["ctx"], r["batch"], r["gamma"]): r for r in doc.get("rows", [])
            if r.get("status") == "ok" and r.get("round_phases")}


def compare(scored: dict, free: dict) -> list[dict]:
    a, b = cells(scored), cells(free)
    rows = []
    for key in sorted(set(a) & set(b)):
        pa, pb = a[key]["round_phases"], b[key]["round_phases"]
        diff = {p: pa.get(f"gpu_{p}_ms", 0.0) - pb.get(f"gpu_{p}_ms", 0.0) for p in PHASES}
        extra = sum(diff.values())
        rows.append({"ctx": key[0], "batch": key[1], "gamma": key[2], "round_wall_ms": pa["round_wall_ms"],
                     "round_wall_ms_free": pb["round_wall_ms"], "extra_ms": extra,
                     "share": extra / pa["round_wall_ms"] if pa["round_wall_ms"] else None,
                     **{f"extra_{p}_ms": v for p, v in diff.items()},
                     "gpu_pages_ms": pa.get("gpu_pages_ms"), "host_pages_ms": pa.get("host_pages_ms"),
                     "tau": a[key].get("log_accept_len"), "tau_free": b[key].get("log_accept_len"),
                     "phases": pa, "phases_free": pb})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scored", type=Path, required=True, help="e2e.json of the score-driven (default) server")
    ap.add_argument("--free", type=Path, required=True, help="e2e.json of the streaming (score-free) server")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    scored, free = json.loads(a.scored.read_text()), json.loads(a.free.read_text())
    rows = compare(scored, free)
    for r in rows:
        print(f"ctx {r['ctx']:6d} batch {r['batch']:4d} γ={r['gamma']}  round {r['round_wall_ms']:.2f} ms "
              f"(score-free {r['round_wall_ms_free']:.2f})  scores+selection {r['extra_ms'] * 1e3:.0f} us = "
              f"{r['share']:.1%}  [pages {r['extra_pages_ms'] * 1e3:+.0f} verify {r['extra_verify_ms'] * 1e3:+.0f} "
              f"accept {r['extra_accept_ms'] * 1e3:+.0f} us]")
    meta = scored.get("meta", {})
    doc = {"device": meta.get("device") or next((r.get("device") for r in scored.get("rows", [])), None),
           "sglang": next((r.get("sglang") for r in scored.get("rows", [])), None),
           "command": " ".join([Path(sys.executable).name] + sys.argv),
           "runs": {"scored": scored.get("runs"), "free": free.get("runs")},
           "definition": __doc__.split("\n\n")[1].strip(), "criterion": "share <= 0.06", "rows": rows,
           "max_share": max((r["share"] for r in rows if r["share"] is not None), default=None)}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {a.out}: {len(rows)} cells, largest share {doc['max_share']}")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
