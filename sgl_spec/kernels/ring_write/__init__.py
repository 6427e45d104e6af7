"""``ring_write``: contract in docs/CONTRACTS.md; the Triton engine in ``triton.py``, the pure-torch twin in ``ref.py``."""
from sgl_spec.kernels.engine import use_triton


def ring_write(hot_k, *args, **kw):
    if use_triton(hot_k):
        from sgl_spec.kernels.ring_write.triton import ring_write as impl
    else:
        from sgl_spec.kernels.ring_write.ref import ring_write as impl
    return impl(hot_k, *args, **kw)
