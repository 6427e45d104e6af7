"""``argmax_rows``: contract in docs/CONTRACTS.md; the Triton engine in ``triton.py``, the pure-torch twin in ``ref.py``."""
from sgl_spec.kernels.engine import use_triton


def argmax_rows(x, *args, **kw):
    if use_triton(x):
        from sgl_spec.kernels.argmax_rows.triton import argmax_rows as impl
    else:
        from sgl_spec.kernels.argmax_rows.ref import argmax_rows as impl
    return impl(x, *args, **kw)
