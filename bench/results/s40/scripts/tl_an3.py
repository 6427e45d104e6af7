import torch, statistics as st_
t = torch.load("bench/results/s40/steal/first/tl_131072_8_64_steal4_num_splits24_stages2.pt")
t0, t1, sm = t[:, 0].double(), t[:, 1].double(), t[:, 2]
base = t0.min(); st = ((t0 - base) / 1e3).tolist(); en = ((t1 - base) / 1e3).tolist(); sm = sm.tolist()
NS = 24
pairs = {}
for i in range(len(st)):
    pairs.setdefault(i // NS, []).append((st[i], en[i], sm[i]))
rows = []
for p, v in pairs.items():
    ends = [e for _, e, _ in v]
    rows.append((max(ends), min(ends), p))
rows.sort()
print("pair end (max) quantiles:", [round(rows[int(f * (len(rows) - 1))][0], 1) for f in (0, .1, .5, .9, 1)])
print("within-pair end spread p50:", round(st_.median([a - b for a, b, _ in rows]), 1), "max", round(max(a - b for a, b, _ in rows), 1))
print("fastest pairs (b,h):", [(p // 8, p % 8, round(e, 0)) for e, _, p in rows[:10]])
print("slowest pairs (b,h):", [(p // 8, p % 8, round(e, 0)) for e, _, p in rows[-10:]])
by_h = {}
for e, _, p in rows: by_h.setdefault(p % 8, []).append(e)
print("mean end by head:", {h: round(st_.mean(v), 1) for h, v in sorted(by_h.items())})
by_b = {}
for e, _, p in rows: by_b.setdefault(p // 8, []).append(e)
print("mean end by request:", {b: round(st_.mean(v), 1) for b, v in sorted(by_b.items())})
