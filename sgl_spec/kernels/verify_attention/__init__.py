"""``verify_attention``: contract in docs/CONTRACTS.md; the Triton engine in ``triton.py``, the pure-torch twin in ``ref.py``."""
from sgl_spec.kernels.engine import use_triton


def verify_attention(q, *args, **kw):
    if use_triton(q):
        from sgl_spec.kernels.verify_attention.triton import verify_attention as impl
    else:
        from sgl_spec.kernels.verify_attention.ref import verify_attention as impl
    return impl(q, *args, **kw)
