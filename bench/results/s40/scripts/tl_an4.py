import torch, statistics as st_
t = torch.load("bench/results/s40/timeline/tl_131072_8_64.pt")
t0, t1, sm = t[:, 0].double(), t[:, 1].double(), t[:, 2]
base = t0.min(); st = ((t0 - base) / 1e3).tolist(); en = ((t1 - base) / 1e3).tolist()
NS = 49
by_b = {}
for i in range(len(st)):
    p = i // NS; by_b.setdefault(p // 8, []).append((st[i], en[i] - st[i]))
for b, v in sorted(by_b.items()):
    print(b, "start med", round(st_.median(x for x, _ in v), 1), "dur med", round(st_.median(d for _, d in v), 1), "dur p10/p90", round(sorted(d for _, d in v)[len(v)//10], 1), round(sorted(d for _, d in v)[9*len(v)//10], 1))
