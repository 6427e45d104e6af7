"""power_clock.py's verify with verify_gluon_rules.LANE_SUMS set: python3 .work/pc.py LS OUT [power_clock args]"""
import sys
sys.path.insert(0, "bench")
import kernel_cases  # noqa: F401  (sgl_spec importable)
import sgl_spec.kernels.verify_gluon_rules as r
r.LANE_SUMS = bool(int(sys.argv[1]))
sys.argv = ["power_clock.py", "--out", sys.argv[2]] + sys.argv[3:]
import power_clock
power_clock.main()
