"""``window_meta``: contract in docs/CONTRACTS.md; the Triton engine in ``triton.py``, the pure-torch twin in ``ref.py``."""
from sgl_spec.kernels.engine import use_triton


def window_meta(positions, *args, **kw):
    if use_triton(positions):
        from sgl_spec.kernels.window_meta.triton import window_meta as impl
    else:
        from sgl_spec.kernels.window_meta.ref import window_meta as impl
    return impl(positions, *args, **kw)
