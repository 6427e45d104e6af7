"""Per-round GPU kernel time from a kineto trace that SGLang's /start_profile wrote: kernels grouped by the CUDA-graph
launch that ran them (draft / verify / plain decode graphs, told apart by their attention kernel) and eager kernels.

    python bench/trace_summary.py /tmp/trace_dir > summary.txt

bench/results/profile/README.md says how the committed summaries were taken."""
import collections
import glob
import gzip
import json
import sys

def load(d):
    ev = []
    for f in sorted(glob.glob(f"{d}/**/*.json*", recursive=True)):
        op = gzip.open if f.endswith(".gz") else open
        with op(f, "rt") as fh:
            try:
                ev += json.load(fh).get("traceEvents", [])
            except Exception as e:
                print("skip", f, e)
        print("file", f)
    return ev

def main(d, topn=45):
    ev = load(d)
    kern = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    rt = {e["args"].get("correlation"): e["name"] for e in ev
          if e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and "args" in e}
    print("kernels", len(kern), "runtime", len(rt))
    if not kern:
        return
    kern.sort(key=lambda e: e["ts"])
    t0, t1 = kern[0]["ts"], max(e["ts"] + e["dur"] for e in kern)
    busy, cur_s, cur_e = 0.0, None, None
    for e in kern:
        s, en = e["ts"], e["ts"] + e["dur"]
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, en
        else:
            cur_e = max(cur_e, en)
    busy += cur_e - cur_s
    print(f"window {(t1-t0)/1e3:.2f} ms, gpu busy {busy/1e3:.2f} ms ({busy/(t1-t0):.0%})")
    groups = collections.defaultdict(list)
    for e in kern:
        c = e.get("args", {}).get("correlation")
        groups[(rt.get(c, "?"), c)].append(e)
    launches = collections.defaultdict(list)  # kind -> [(sum of kernel times, span, kernel count)] per launch
    eager, eager_n = collections.Counter(), collections.Counter()
    per_kind_names = collections.defaultdict(collections.Counter)
    per_kind_cnt = collections.defaultdict(collections.Counter)
    for (api, c), es in groups.items():
        if api == "cudaGraphLaunch":
            names = " ".join(e["name"] for e in es)
            kind = "draft" if "draft" in names else ("verify" if "verify" in names else "graph")
            tot = sum(e["dur"] for e in es)
            span = max(e["ts"] + e["dur"] for e in es) - min(e["ts"] for e in es)
            launches[kind].append((tot, span, len(es)))
            for e in es:
                per_kind_names[kind][e["name"][:90]] += e["dur"]
                per_kind_cnt[kind][e["name"][:90]] += 1
        else:
            for e in es:
                eager[e["name"][:90]] += e["dur"]
                eager_n[e["name"][:90]] += 1
    rounds = max(1, len(launches.get("verify", [])) or len(launches.get("graph", [])))
    print(f"rounds (verify or decode graph launches): {rounds}")
    for kind, ls in launches.items():
        n = len(ls)
        print(f"[{kind}] launches {n} ({n/rounds:.2f}/round): kernels/launch {sum(x[2] for x in ls)/n:.0f}, "
              f"sum-of-kernel us/launch {sum(x[0] for x in ls)/n:.1f}, span us/launch {sum(x[1] for x in ls)/n:.1f}")
        for name, t in per_kind_names[kind].most_common(topn):
            k = per_kind_cnt[kind][name]
            print(f"   {t/n:8.1f} us/launch  {k/n:5.1f}x  {t/k:7.2f} us each  {name}")
    et = sum(eager.values())
    print(f"[eager] {et/rounds:.1f} us/round, kernels/round {sum(eager_n.values())/rounds:.1f}")
    for name, t in eager.most_common(topn):
        print(f"   {t/rounds:8.1f} us/round  {eager_n[name]/rounds:5.1f}x  {t/eager_n[name]:7.2f} us each  {name}")
    print(f"per round: window {(t1-t0)/rounds:.1f} us, busy {busy/rounds:.1f} us")

if __name__ == "__main__":
    main(sys.argv[1])
