"""``norm_pair_linear``: contract in docs/CONTRACTS.md; the Triton engine in ``triton.py``, the pure-torch twin in ``ref.py``."""
from sgl_spec.kernels.engine import use_triton


def norm_pair_linear(x, *args, **kw):
    if use_triton(x):
        from sgl_spec.kernels.norm_pair_linear.triton import norm_pair_linear as impl
    else:
        from sgl_spec.kernels.norm_pair_linear.ref import norm_pair_linear as impl
    return impl(x, *args, **kw)
