import torch
for name in ["65536_8_64", "131072_8_64", "262144_8_64", "65536_1_64", "131072_1_64"]:
    t = torch.load(f"bench/results/s40/timeline/tl_{name}.pt")
    t0, t1, sm = t[:, 0].double(), t[:, 1].double(), t[:, 2]
    base = t0.min()
    st, en = (t0 - base) / 1e3, (t1 - base) / 1e3
    T = en.max().item()
    # aggregate active programs and rate (each program's work = 1 unit spread evenly over its duration)
    dur = en - st
    grid = torch.linspace(0, T, 41)
    act, rate = [], []
    for i in range(40):
        a, b = grid[i], grid[i + 1]
        ov = (torch.minimum(en, b) - torch.maximum(st, a)).clamp(min=0)
        act.append((ov.sum() / (b - a)).item())
        rate.append((ov / dur).sum().item() / (b - a).item())
    tot = len(st)
    peak = sorted(rate)[len(rate) // 2]
    print(f"{name}: n={tot} span {T:.1f}us, ideal at median rate {tot / peak:.1f}us ({tot / peak / T:.0%})")
    print("  active:", " ".join(f"{x:.0f}" for x in act))
    print("  rate/med:", " ".join(f"{x / peak:.2f}" for x in rate))
    # first-wave starts
    s_sorted = st.sort().values
    print("  start quantiles:", [round(s_sorted[int(f * (tot - 1))].item(), 1) for f in (0, .1, .25, .4, .5)])
