"""power_clock.py's verify with verify_gluon_rules.KEY_FOLD set: python3 .work/pck.py KF OUT [power_clock args]"""
import sys
sys.path.insert(0, "bench")
import kernel_cases  # noqa: F401  (sgl_spec importable)
import sgl_spec.kernels.verify_gluon_rules as r
r.KEY_FOLD = int(sys.argv[1])
sys.argv = ["power_clock.py", "--out", sys.argv[2]] + sys.argv[3:]
import power_clock
power_clock.main()
