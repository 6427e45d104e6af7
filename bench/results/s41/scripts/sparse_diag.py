"""Session 41 dev: the 7% draft at batch 1 by launch and split count (diagnosis: outputs wrong where a launch is
skipped). µs, graph replay, read flush, interleaved: ``full`` / ``nomerge`` at the rule's split count and fused_hot
choice, and the split count swept with fused hot programs on and off."""
import sys

sys.path[:0] = ["bench", ".work"]
import torch
import kernel_cases as kc
from kernel_cases import quant_pages, draft_args, SM_SCALE, DTYPE
from dev_timing import timer
from sgl_spec.kernels import draft_decode as ddm
from parts_diag import _Skip


def main():
    gen = torch.Generator().manual_seed(0)
    for cell in sys.argv[1].split(","):
        ctx, B, P = map(int, cell.split(":"))
        qb = quant_pages([ctx] * B, P, "cuda", copies=1, gen=gen)[0]
        ids, cnt, hs, hl = draft_args(qb, sparse=(0.07, 1, 1), gen=gen)
        q = torch.randn(B, kc.HQ, kc.D, device="cuda", dtype=DTYPE)
        orig_merge, orig_hot = ddm._draft_decode_merge_kernel, ddm._launch_hot
        rows = {}
        confs = [("rule", {}), ("rule/nomerge", {}), ("rule/nohot", {}), ("rule/pages", {})]
        for ns in (8, 16, 24, 36, 48, 72, 144):
            for fh in (True, False):
                confs.append((f"ns{ns}/fh{int(fh)}", dict(num_splits=ns, fused_hot=fh)))
        for rep in range(2):
            for name, kw in confs:
                if name.endswith("nomerge") or name.endswith("pages"):
                    ddm._draft_decode_merge_kernel = _Skip()
                if name.endswith("nohot") or name.endswith("pages"):
                    ddm._launch_hot = lambda *a, **k: None
                out = torch.empty_like(q)
                try:
                    ms = timer(lambda: ddm.draft_decode(q, qb.store, ids, cnt, qb.hot_k, qb.hot_v, qb.hot_slot, hs,
                                                        hl, SM_SCALE, out=out, engine="gluon", **kw))
                except Exception as e:  # a split count the launch rejects
                    ms = float("nan")
                    print(f"  {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                finally:
                    ddm._draft_decode_merge_kernel, ddm._launch_hot = orig_merge, orig_hot
                rows.setdefault(name, []).append(ms * 1e3)
        parts = [f"{k} {', '.join(f'{x:.1f}' for x in v)}" for k, v in rows.items()]
        print(f"sparse ctx={ctx} B={B} P={P} pages={cnt.tolist()[:1]} us | " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
