import sys, collections, re
sys.path[:0] = ["bench", ".work"]
from loopcmp import loop_ops
N, N2, sub = (int(x) for x in sys.argv[1:4])
o0, _ = loop_ops(N, N2, sub, 0)
o1, _ = loop_ops(N, N2, sub, 1)
c0, c1 = collections.Counter(o0), collections.Counter(o1)
for k in sorted(set(c0) | set(c1)):
    if c0[k] != c1[k]:
        print(f"{k:32s} {c0[k]:5d} {c1[k]:5d}")
