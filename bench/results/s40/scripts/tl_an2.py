import torch
t = torch.load("bench/results/s40/timeline/tl_131072_8_64.pt")
t0, t1, sm = t[:, 0].double(), t[:, 1].double(), t[:, 2]
st = (t0 - t0.min()) / 1e3; en = (t1 - t0.min()) / 1e3
n = len(st)
# program index = bh * 49 + s
idx = torch.arange(n)
first = st < 20
print("first-wave programs", int(first.sum()))
late = first & (st > 2)
print("late starters in wave 1:", int(late.sum()), "early:", int((first & (st <= 2)).sum()))
# by SM: how many early/late per SM
from collections import Counter
ce = Counter(sm[first & (st <= 2)].tolist()); cl = Counter(sm[late].tolist())
print("SMs with late starters:", len(cl), " early count dist:", Counter(ce.values()), " late count dist:", Counter(cl.values()))
# by program index
print("late idx range:", idx[late].min().item(), idx[late].max().item(), " early idx range", idx[first & (st <= 2)].min().item(), idx[first & (st <= 2)].max().item())
print("late start quantiles", [round(x, 2) for x in st[late].quantile(torch.tensor([0, .25, .5, .75, 1.0], dtype=torch.float64)).tolist()])
# wave1 durations by early/late
d = en - st
print("dur early p50", d[first & (st <= 2)].median().item(), "late p50", d[late].median().item())
w2 = ~first
print("wave2 dur p10/p50/p90", [round(x, 1) for x in d[w2].quantile(torch.tensor([.1, .5, .9], dtype=torch.float64)).tolist()])
print("wave1 dur p10/p50/p90", [round(x, 1) for x in d[first].quantile(torch.tensor([.1, .5, .9], dtype=torch.float64)).tolist()])
# per-SM program count in wave 1
c1 = Counter(sm[first].tolist()); print("wave1 programs per SM", Counter(c1.values()))
# ends of wave 1 spread; relation duration to SM
import statistics
smd = {}
for s_, dd in zip(sm[first].tolist(), d[first].tolist()): smd.setdefault(s_, []).append(dd)
means = sorted((statistics.mean(v), k) for k, v in smd.items())
print("per-SM mean wave1 duration: min", means[0], "max", means[-1], "p50", means[len(means)//2])
# within-SM spread
sp = sorted(max(v) - min(v) for v in smd.values()); print("within-SM spread p50", sp[len(sp)//2], "max", sp[-1])
print("SM ids of slowest 10:", [k for _, k in means[-10:]], "fastest 10:", [k for _, k in means[:10]])
