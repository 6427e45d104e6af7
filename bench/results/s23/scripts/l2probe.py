import sys, torch
sys.path.insert(0, 'bench')
from l2_timer import L2Flush, bench_ms
print(torch.cuda.get_device_name())
class NoFlush:
    def __call__(self): pass
fl = {"read": L2Flush("read"), "zero": L2Flush("zero"), "none": NoFlush()}
for mb in (8, 24, 40, 64, 128):
    x = torch.ones(mb << 18, dtype=torch.float32, device="cuda")
    o = torch.empty((), device="cuda")
    g = torch.cuda.CUDAGraph()
    torch.sum(x, dim=0, out=o); torch.cuda.synchronize()
    with torch.cuda.graph(g):
        torch.sum(x, dim=0, out=o)
    r = {k: bench_ms(g.replay, f) * 1e3 for k, f in fl.items()}
    print(f"sum {mb} MB: " + " ".join(f"{k} {v:.1f}us ({mb / v:.2f} TB/s)" for k, v in r.items()), flush=True)
